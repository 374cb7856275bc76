"""Progress is labelled with the stage that runs, and shows in Prefect as a progress artifact."""

from __future__ import annotations

import pytest

from csk.progress import label, progress, stage_label, track


def test_bars_are_labelled_with_the_running_stage():
    assert label("encode") == "encode"
    with stage_label("embed"):
        assert label("encode") == "embed: encode" and label("embed: encode") == "embed: encode"
        with progress(3, "encode", unit="texts", disable=True) as bar:
            bar.update(3)
        assert bar.desc == "embed: encode" and bar.n == 3
    assert list(track(range(0, 10, 4), 10, "batches", step=4, disable=True)) == [0, 4, 8]


def test_a_bar_in_a_log_file_writes_whole_lines(capsys, monkeypatch):
    """Not a terminal (a log file, a pipe): one line per redraw, no carriage returns, at most one every
    LOG_EVERY seconds; nothing to count (a total of 0) draws no bar at all."""
    import csk.progress as p

    monkeypatch.setattr(p, "LOG_EVERY", 0.0)  # every update a line here
    monkeypatch.setattr(p, "DELAY", 0.0)  # shown at once (else only work past 5 s shows)
    with progress(3, "score", unit="pairs") as bar:
        for _ in range(3):
            bar.update(1)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and len(lines) >= 2 and all(line.startswith("score:") for line in lines)
    assert "3/3" in lines[-1] and "pairs" in lines[-1]
    with progress(0, "nothing", unit="lines") as bar:
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.flow
def test_a_task_shows_its_progress_in_prefect(prefect_harness, monkeypatch):
    import csk.progress as p

    monkeypatch.setattr(p, "DELAY", 0.0)  # long work's artifact, made at once here
    from prefect import flow, task
    from prefect.client.orchestration import get_client

    @task
    def work():
        with stage_label("targets"):
            with progress(8, "TextRank", unit="dialogues") as bar:
                for _ in range(8):
                    bar.update(1)
        return bar.desc

    @flow
    def steps():
        return work()

    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    state = steps(return_state=True)
    assert state.result() == "targets: TextRank"
    with get_client(sync_client=True) as client:
        mine = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]))
        arts = [a for a in client.read_artifacts(artifact_filter=mine) if a.type == "progress"]
    assert len(arts) == 1 and arts[0].description == "targets: TextRank" and float(arts[0].data) == 100.0
