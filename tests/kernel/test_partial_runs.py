"""Partial runs: `--until STAGE` (that stage and what it needs), `--only STAGE...` (those stages on
the store's artifacts), and `csk status` saying what each would do."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from csk.cli import app

pytestmark = pytest.mark.flow
runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def _keys(store, stage: str) -> set[str]:
    d = store / "cicero" / stage
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def test_until_and_only(prefect_harness, tmp_path, config_copy):
    store = tmp_path / "store"
    base = ("--config", config_copy, "--store", store)
    plan = json.loads(_csk("status", "cicero", *base, "--until", "targets", "--json").output)
    assert [s["stage"] for s in plan if s["status"] == "recompute"] == ["sources"]
    assert {s["stage"] for s in plan if s["status"] == "depends"} == {"length_filter", "embed", "dedup", "targets"}
    assert all(s["status"] == "skipped" for s in plan if s["stage"] not in
               {"sources", "length_filter", "embed", "dedup", "targets"})
    out = _csk("run", "cicero", *base, "--until", "targets")
    assert out.exit_code == 0, out.output
    built = {p.name for p in (store / "cicero").iterdir() if not p.name.startswith("_")}
    assert built == {"sources", "length_filter", "embed", "dedup", "targets"}  # nothing after targets
    runs = json.loads(_csk("runs", "cicero", "--store", store, "--json").output)
    assert runs[-1]["covered"] == "--until targets" and runs[-1]["computed"] == 5
    assert not (store / "cicero" / "_runs" / "latest.json").exists()  # a partial run is not "the latest run"

    # --only dedup with another threshold: dedup alone, on the cached embeddings and dialogues
    before = {s: _keys(store, s) for s in ("embed", "dedup", "targets")}
    plan = json.loads(_csk("status", "cicero", *base, "--only", "dedup", "--set", "cicero.dedup.threshold=0.95",
                           "--json").output)
    by = {s["stage"]: s for s in plan}
    assert by["dedup"]["status"] == "recompute" and "threshold" in by["dedup"]["why"]
    assert by["embed"]["status"] == by["length_filter"]["status"] == "cached"
    out = _csk("run", "cicero", *base, "--only", "dedup", "--set", "cicero.dedup.threshold=0.95")
    assert out.exit_code == 0, out.output
    assert len(_keys(store, "dedup") - before["dedup"]) == 1
    assert _keys(store, "embed") == before["embed"] and _keys(store, "targets") == before["targets"]
    last = json.loads(_csk("runs", "cicero", "--store", store, "--json").output)[-1]
    assert last["covered"] == "--only dedup" and last["computed"] == 1
    assert {"length_filter", "embed"} <= set(last["rows_out"])  # its cached inputs, recorded as reused

    # --only on a store without its inputs: an error naming the missing input, nothing computed
    fresh = tmp_path / "fresh"
    out = _csk("run", "cicero", "--config", config_copy, "--store", fresh, "--only", "targets")
    assert out.exit_code == 1
    assert "needs its input dialogues (stage 'dedup')" in out.output and "--until dedup" in out.output
    assert not (fresh / "cicero" / "targets").exists()
    bad = _csk("status", "cicero", *base, "--until", "dedpu")
    assert bad.exit_code == 1 and "no stage ['dedpu']" in bad.output and "dedup" in bad.output
