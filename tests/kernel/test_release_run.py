"""Which run `csk card` / `csk export` publish by default, and how lineage names a file a stage wrote
(issue 70, items 7 and 8)."""

from __future__ import annotations

import json

import pytest

from csk.artifacts import ArtifactRef
from csk.errors import CskError
from csk.lineage import stored_file_paths
from csk.release import release_run
from csk.store import Store


def _record(store: Store, run_id: str, finished: str, flow: str | None = None, covered: dict | None = None) -> None:
    d = store.runs_dir("cicero")
    d.mkdir(parents=True, exist_ok=True)
    record = {"pipeline": "cicero", "run_id": run_id, "flow": flow or "cicero", "finished": finished, "stages": []}
    if covered:
        record["covered"] = covered
    (d / f"{run_id}.json").write_text(json.dumps(record))
    if flow is None and covered is None:
        (d / "latest.json").write_text(json.dumps(record))


def test_a_release_is_the_latest_whole_run_of_any_flow(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(CskError, match="no finished run of 'cicero'"):
        release_run(store, "cicero")
    _record(store, "aaaa1111", "2026-01-01T00:00:00+00:00")  # csk run cicero
    assert release_run(store, "cicero")["run_id"] == "aaaa1111"
    _record(store, "bbbb2222", "2026-01-02T00:00:00+00:00", flow="rebuild_distractors")  # a rebuild after it
    assert release_run(store, "cicero")["run_id"] == "bbbb2222"
    _record(store, "cccc3333", "2026-01-03T00:00:00+00:00", covered={"until": "dedup", "stages": ["dedup"]})
    assert release_run(store, "cicero")["run_id"] == "bbbb2222"  # a partial run is no release
    assert release_run(store, "cicero", "-1")["run_id"] == "cccc3333"  # ... unless named
    assert release_run(store, "cicero", "aaaa")["run_id"] == "aaaa1111"
    assert store.latest_run("cicero")["run_id"] == "aaaa1111"  # the other reading commands: unchanged


def _artifact(root, stage: str, key: str, outputs: list[str], inputs: list[ArtifactRef]) -> ArtifactRef:
    path = root / stage / key
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({
        "outputs": outputs, "inputs": [{"stage": i.stage, "key": i.key, "path": i.path} for i in inputs]}))
    return ArtifactRef("distractors", stage, key, str(path))


def test_a_file_a_stage_wrote_is_named_by_its_path_in_the_store(tmp_path):
    pool = _artifact(tmp_path, "counterfactuals", "k1", ["pool_per_instance.parquet", "server_responses.parquet"], [])
    kept = _artifact(tmp_path, "candidate_filter", "k2", [], [pool])
    text = "written by m behind the server (request 1a2b: server_responses.parquet)"
    assert stored_file_paths(kept, text) == (f"written by m behind the server (request 1a2b: "
                                             f"{tmp_path}/counterfactuals/k1/server_responses.parquet)")
    # a name already a path, or part of a longer name, stays; text naming no stage's file is untouched
    for same in (f"{tmp_path}/x/server_responses.parquet", "old_server_responses.parquet", "no file here", None):
        assert stored_file_paths(kept, same) == same
