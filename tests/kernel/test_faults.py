"""A small seeded subset of bench/faults.py: each fault kind at one stage of DECO, run for real
(`csk run` in a child process, SIGKILL from outside, a failing disk write, a flipped bit), each
ending with a rerun that must give the uninterrupted run's keys and bytes. The full set: `make faults`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import faults

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.flow


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def _check(results, expected: int):
    lines = [f"{t.pipeline}/{t.stage} {t.fault}: {t.detail} {t.problems}" for t in results]
    assert len(results) == expected, lines
    assert all(t.survived for t in results), "\n".join(lines)
    assert sum(t.rows_lost for t in results) == 0


def test_a_killed_deco_run_resumes_without_losing_a_row(prefect_harness, tmp_path):
    """The default suite's fault trial: kill -9 mid-stage, rerun, nothing lost (the others: slow)."""
    results = faults.run(["deco"], ["kill"], trials=1, seed=0, stages=None, config=ROOT / "pipelines.toml",
                         work=tmp_path, extra=[], log=lambda *_: None, api_url=_api_url(), pairs=[("kill", "sample")])
    _check(results, 1)


@pytest.mark.slow  # three trials with reruns: about a minute and a half on 2 cores
def test_faults_survived_at_deco_stages(prefect_harness, tmp_path):
    pairs = [("corrupt", "response_filter"), ("kill", "sample"), ("write", "extract")]
    results = faults.run(["deco"], ["kill", "write", "corrupt"], trials=1, seed=0, stages=None,
                         config=ROOT / "pipelines.toml", work=tmp_path, extra=[], log=lambda *_: None,
                         api_url=_api_url(), pairs=pairs)
    _check(results, 3)
    by = {t.fault: t for t in results}
    assert "No space left on device" in by["write"].detail and "stage 'extract'" in by["write"].detail


@pytest.mark.slow  # a LocalCluster in a child process: about a minute
def test_a_dask_worker_killed_mid_shard(prefect_harness, tmp_path):
    results = faults.run(["corecode"], ["worker"], trials=1, seed=0, stages=["screening"],
                         config=ROOT / "pipelines.toml", work=tmp_path, extra=[], log=lambda *_: None,
                         api_url=_api_url())
    _check(results, 1)
    assert "worker killed" in results[0].detail


@pytest.mark.slow  # two whole DECO runs at once (45 s); the killed-run trial stays in the default suite
def test_two_runs_on_one_store_at_once(prefect_harness, tmp_path):
    """Two `csk run deco` on one store at the same moment: both finish, every stage is computed once
    (the other run waits on the key's lock and reuses it), and the store verifies clean."""
    import json
    import os
    import subprocess
    import sys

    from csk.store import Store
    from csk.verify import verify_store

    store = tmp_path / "store"
    env = {**os.environ, "PREFECT_API_URL": _api_url(), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench.fault_child", "{}", "run", "deco", "--store", str(store),
           "--config", str(ROOT / "pipelines.toml")]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n\n".join(o[-2000:] for o in outs)
    records = [json.loads(f.read_text()) for f in sorted((store / "deco" / "_runs").glob("*.json"))
               if f.name != "latest.json"]
    assert len(records) == 2
    stages = [{s["stage"]: s for s in r["stages"]} for r in records]
    assert stages[0].keys() == stages[1].keys()
    for name in stages[0]:
        a, b = stages[0][name], stages[1][name]
        assert a["key"] == b["key"], name
        assert sorted([a["reused"], b["reused"]]) == [False, True], f"{name} computed twice or never"
    assert verify_store(Store(store)).problems == []
