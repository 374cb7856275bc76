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


@pytest.mark.flow
def test_a_task_shows_its_progress_in_prefect(prefect_harness):
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
