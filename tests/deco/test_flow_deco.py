"""End to end: the DECO / ACCENT flow through `csk` on the bundled sample, then with an extractor and
a COMET model (tiny random models built from configs) configured."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests import tiny_models
from tests.release_checks import check_release
from tests.conftest import SAMPLE

pytestmark = pytest.mark.flow
runner = CliRunner()
STAGES = ["sources", "response_filter", "sample", "agreement", "extraction_tasks", "extract", "compatibility",
          "correlation"]


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def _artifacts(store) -> dict:
    return {s["stage"]: s for s in json.loads(_csk("artifacts", "deco", "--store", store, "--json").output)}


def test_deco_flow_bundled_sample(prefect_harness, tmp_path, config_copy):
    store = tmp_path / "artifacts"
    first = _csk("run", "deco", "--config", config_copy, "--store", store)
    assert first.exit_code == 0, first.output
    # the console says it, not only the manifest
    assert "correlation: every correlation is NaN: not scored: no COMET model configured" in " ".join(first.output.split())
    by = _artifacts(store)
    assert list(by) == STAGES
    for s in by.values():
        contract = json.load(open(f"{s['path']}/manifest.json"))["contract"]
        assert _csk("validate", f"{s['path']}/data.parquet", "--contract", contract).exit_code == 0
    rejected = pd.read_parquet(f"{by['response_filter']['path']}/rejected.parquet")
    assert {"too_short", "only_questions", "only_courtesy"} <= set(rejected["reason_code"].astype(str))
    scores = pd.read_parquet(f"{by['compatibility']['path']}/data.parquet")
    assert set(scores["scorer"]) == {"off"}  # comet = "off" in the bundled config: no scores, said so
    table = pd.read_parquet(f"{by['correlation']['path']}/data.parquet")
    assert set(table["note"]) == {"not scored: no COMET model configured (deco.compatibility.comet)"}
    card = _csk("card", "deco", "--store", store).output
    assert "Not scored: no COMET model configured (deco.compatibility.comet)" in card and "is NaN" in card

    # with a COMET model configured, the stages before compatibility are reused (the extractor runs on
    # tiny models in tests/deco/test_deco.py: a random one answers no tuple, which would leave COMET idle)
    comet = tiny_models.bart(tmp_path / "comet")
    sets = ["--set", f"deco.compatibility.comet={comet}", "--set", "deco.compatibility.num_beams=2",
            "--set", "deco.compatibility.num_return=2", "--set", "deco.compatibility.max_length=8"]
    second = _csk("run", "deco", "--config", config_copy, "--store", store, *sets)
    assert second.exit_code == 0, second.output
    by = _artifacts(store)
    assert [by[s]["reused"] for s in STAGES] == [True] * 6 + [False] * 2
    scores = pd.read_parquet(f"{by['compatibility']['path']}/data.parquet")
    assert scores["score"].between(0, 1).all() and scores["scorer"].str.startswith("accent:comet@").all()
    scored = scores[scores["n_tuples"] > 0]
    assert len(scored) == 9 and all(len(t["generated"]) == 2 for ts in scored["tuples"] for t in ts)
    assert (scores.loc[scores["n_tuples"] == 0, "score"] == 0.5).all()
    table = pd.read_parquet(f"{by['correlation']['path']}/data.parquet").set_index("id")
    assert table.loc["all:event_cs:pearson", "n"] == 13  # the 9 released train samples + 4 ConTurE turns
    manifest = json.load(open(f"{by['compatibility']['path']}/manifest.json"))
    assert {m["name"] for m in manifest["models"]} >= {"comet", "sentence-embedder"}

    # a system's response traces to the responses table and the dialogue its history was cut from
    row = "personachat-train_self_original-0@3:PLATO-2"
    steps = json.loads(_csk("lineage", "deco", "compatibility", "--row", row, "--store", store, "--json").output)
    assert [s["stage"] for s in steps[:4]] == ["compatibility", "sample", "response_filter", "sources"]
    assert steps[-1]["source"]["file"] == str(SAMPLE / "deco" / "responses.csv")
    evidence = next(s["evidence"] for s in steps if s.get("evidence"))
    assert evidence[0]["file"].endswith("train_self_original.txt") and evidence[0]["text"].count("</UTT>") == 4
    splits = check_release("deco", store, tmp_path / "release")
    assert splits
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:  # the run summary, and reused stages shown as Cached
        summary = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["deco-run-summary"])),
                                        limit=1, sort="CREATED_DESC")[0]
        runs = client.read_flow_runs(limit=1, sort="START_TIME_DESC")
        # this flow run's task runs, whatever else the session's server holds (read_task_runs' first 50
        # are the oldest: under `make test-all` the Dask runs came first and this run's were not among them)
        from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterFlowRunId

        states = [t.state_name for t in sorted(client.read_task_runs(
            task_run_filter=TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[runs[0].id])), limit=50),
            key=lambda t: t.start_time or t.created)]
    table = json.loads(summary.data) if isinstance(summary.data, str) else summary.data
    assert [r["status"] for r in table] == ["cached"] * 6 + ["computed"] * 2
    assert table[0]["rows_out"].endswith(" samples")
    assert states == ["Cached"] * 6 + ["Completed"] * 2

    # nothing left to compute: recorded as a run without starting Prefect
    again = _csk("run", "deco", "--config", config_copy, "--store", store, *sets)
    assert again.exit_code == 0 and all(s["reused"] for s in _artifacts(store).values())
    assert "nothing to compute, so Prefect was not started" in again.output

    # every stage run emitted START then COMPLETE; each event rebuilds through the client's typed classes
    _check_openlineage(store)

    # csk runs lists the three runs and says what changed between two; csk show prints rows
    listed = json.loads(_csk("runs", "deco", "--store", store, "--json").output)
    assert [r["computed"] for r in listed] == [8, 2, 0]
    changed = json.loads(_csk("runs", "deco", "--store", store, "--diff", "-3", "--diff", "-2", "--json").output)
    by_stage = {s["stage"]: s for s in changed["stages"]}
    assert by_stage["sample"]["same_key"] and not by_stage["compatibility"]["same_key"]
    assert by_stage["compatibility"]["params"]["comet"] == ["off", str(comet)]
    assert by_stage["compatibility"]["why"] == ["params", "input files or models"] and by_stage["correlation"]["why"] == ["input data"]
    text = _csk("runs", "deco", "--store", store, "--diff", "-3", "--diff", "-2").output
    assert "compatibility          changed (params, input files or models)" in text and "comet: 'off' ->" in text
    shown = _csk("show", "deco", "response_filter", "--store", store, "--rejected", "--json").output.splitlines()
    assert len(shown) == 10 and all(json.loads(x)["reason_code"] for x in shown)
    one = _csk("show", "deco", "compatibility", "--store", store, "--id", row).output
    assert row in one and "accent:comet@" in one
    assert _csk("show", "deco", "nothing", "--store", store).exit_code != 0


def _check_openlineage(store):
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    events = [json.loads(x) for x in (store / "_lineage" / "events.jsonl").read_text().splitlines()]
    assert len(events) == 2 * 8 * 3  # three runs of eight stages
    for e in events:
        assert e["schemaURL"].startswith("https://openlineage.io/spec/") and e["producer"]
        RunEvent(eventType=RunState(e["eventType"]), eventTime=e["eventTime"], producer=e["producer"],
                 run=Run(runId=e["run"]["runId"]), job=Job(namespace=e["job"]["namespace"], name=e["job"]["name"]),
                 inputs=[InputDataset(namespace=i["namespace"], name=i["name"]) for i in e["inputs"]],
                 outputs=[OutputDataset(namespace=o["namespace"], name=o["name"]) for o in e["outputs"]])
    by_run = {}
    for e in events:
        by_run.setdefault(e["run"]["runId"], []).append(e["eventType"])
    assert all(types == ["START", "COMPLETE"] for types in by_run.values())
    latest = {s["stage"]: s for s in _artifacts(store).values()}
    done = [e for e in events if e["eventType"] == "COMPLETE"][-8:]
    for e in done:
        stage = e["job"]["name"].split(".", 1)[1]
        out = e["outputs"][0]
        manifest = json.load(open(f"{latest[stage]['path']}/manifest.json"))
        assert out["name"] == f"deco/{stage}/{manifest['key']}"
        assert out["outputFacets"]["outputStatistics"]["rowCount"] == manifest["rows"]["out"]
        assert out["facets"]["version"]["datasetVersion"] == manifest["data_sha256"]
        columns = pd.read_parquet(f"{latest[stage]['path']}/data.parquet").columns
        assert [f["name"] for f in out["facets"]["schema"]["fields"]] == list(columns)
    assert {t["value"] for e in done for t in e["run"]["facets"]["tags"]["tags"] if t["key"] == "csk.status"} \
        == {"reused"}  # the third run recomputed nothing, and its events say so
    sources = next(e for e in done if e["job"]["name"] == "deco.sources")
    assert any(i["namespace"] == "file" and i["name"].endswith("responses.csv") for i in sources["inputs"])
