"""Keys hold what a stage's bytes depend on, nothing more (issue 51), checked through `csk status` on a
real CICERO store (the bundled sample, built up to `splits`):

* the thread count is in the key only of stages that train or can run a threaded float kernel
  (`Stage.threads_matter`; a module that runs its kernels on one thread says so: `THREAD_COUNT_FREE`):
  under `taskset -c 0` (one CPU) the store built with this machine's count reuses every stage up to
  splits, the embedder's included, and the embedding stages recomputed there give the same bytes;
* an edit to the distractor engine (a helper appended to tasks/distractors/adversarial.py) changes no
  key of DECO or CoreQuisite and none of CICERO's stages before the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from csk import codehash
from csk.cli import app
from csk.pipeline import discover

pytestmark = [pytest.mark.flow, pytest.mark.slow]  # builds CICERO up to splits: about 5 minutes on 2 busy cores
ROOT = Path(__file__).resolve().parent.parent.parent
runner = CliRunner()
UNTIL = "splits"


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def built(prefect_harness, tmp_path_factory):
    """A CICERO store up to `splits`, built with this machine's thread count."""
    from tests.conftest import SAMPLE

    tmp = tmp_path_factory.mktemp("portable")
    config = tmp / "pipelines.toml"
    config.write_text((ROOT / "pipelines.toml").read_text().replace('"data/sample/', f'"{SAMPLE.as_posix()}/'))
    store = tmp / "store"
    out = _csk("run", "cicero", "--config", config, "--store", store, "--until", UNTIL)
    assert out.exit_code == 0, out.output
    return config, store


def _status_on_one_cpu(config, store, *extra) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "csk.cli", "status", "cicero", "--config",
                           str(config), "--store", str(store), "--until", UNTIL, "--json", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    plan, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("["):])
    return {s["stage"]: s for s in plan}


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and at least 2 CPUs (the store is built with 2 or more threads)")
def test_a_store_built_with_more_threads_is_reused_on_one_cpu(built):
    config, store = built
    pipeline = discover()["cicero"]
    plan = _status_on_one_cpu(config, store)
    ran = [s.name for s in pipeline.stages if s.name in plan and plan[s.name]["status"] != "skipped"]
    assert ran[:2] == ["sources", "length_filter"] and UNTIL in ran
    # no stage up to splits has the count in its key: the embedder runs each pass on one thread
    # (tasks/encoder.py), dedup's screen keeps a rounding margin, TextRank is numpy's
    assert not [n for n in ran if pipeline.stage(n).threads_matter]
    assert {"sources", "length_filter", "embed", "dedup", "targets", "annotation_tasks", "annotations",
            "quality_check", "splits"} <= set(ran)
    assert all(plan[n]["status"] == "reused" for n in ran), {n: (plan[n]["status"], plan[n].get("why")) for n in ran}
    built_with = json.loads(next((store / "cicero" / "embed").glob("*/manifest.json")).read_text())["threads"]
    assert built_with["in_key"] is False and built_with["count"] >= 2
    # and the claim holds for the bytes: the embedding stages recomputed on one CPU (their artifacts removed
    # from a copy of the store) give the sha256 the store's 2-thread run gave, so every later stage is reused
    copy = store.parent / "one_cpu"
    shutil.copytree(store, copy)
    floats = ("embed", "dedup", "targets")
    for n in floats:
        shutil.rmtree(copy / "cicero" / n)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "csk.cli", "run", "cicero", "--config",
                           str(config), "--store", str(copy), "--until", UNTIL], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = max((copy / "cicero" / "_runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
    stages = {s["stage"]: s for s in json.loads(record.read_text())["stages"]}
    assert {n for n, s in stages.items() if not s["reused"]} == set(floats)
    for n in floats:
        one = json.loads((Path(stages[n]["path"]) / "manifest.json").read_text())
        two = json.loads(next((store / "cicero" / n).glob("*/manifest.json")).read_text())
        assert one["data_sha256"] == two["data_sha256"] and one["threads"]["count"] == 1, n
    # the manifests say why the count is not in the key
    lf = json.loads(next((store / "cicero" / "length_filter").glob("*/manifest.json")).read_text())["threads"]
    assert lf["in_key"] is False and "any thread count" in lf["why"]


def test_an_edit_to_the_distractor_engine_recomputes_no_other_dataset(built, tmp_path, monkeypatch):
    """A helper appended to tasks/distractors/adversarial.py: `csk status` on the CICERO store still reuses
    every stage before the engine, and no stage key of DECO or CoreQuisite (nor CICERO's before the
    engine) hashes the edited module."""
    config, store = built
    before = {f"{p.name}/{s.name}": s.code_hash() for p in discover().values() for s in p.stages}
    edited = tmp_path / "adversarial.py"
    real = codehash.module_file
    edited.write_text(real("tasks.distractors.adversarial").read_text() + "\n\ndef _a_new_helper():\n    return 1\n")
    codehash.forget()
    monkeypatch.setattr(codehash, "module_file", lambda name: edited if name == "tasks.distractors.adversarial"
                        else real(name))
    try:
        after = {f"{p.name}/{s.name}": s.code_hash() for p in discover().values() for s in p.stages}
        changed = sorted(k for k in before if after[k] != before[k])
        assert changed and not [k for k in changed if k.split("/")[0] in ("deco", "corequisite", "corecode")], changed
        engine = {"instances", "counterfactuals", "candidate_filter", "adversarial_filter", "aflite", "verification",
                  "mcq", "experiments", "distractor_quality"}
        assert not [k for k in changed if k.startswith("cicero/") and k.split("/")[1] not in engine], changed
        out = _csk("status", "cicero", "--config", config, "--store", store, "--until", UNTIL, "--json")
        assert out.exit_code == 0, out.output
        plan = [s for s in json.loads(out.output) if s["status"] != "skipped"]
        assert plan and all(s["status"] == "reused" for s in plan), plan
    finally:
        codehash.forget()
