"""A real Prefect server (not the test harness): `csk schedule` registers the pipeline's deployment
with its cron, and the server's scheduler itself creates a run from the cron, which the served
worker runs to completion with every stage's artifact written.

Prefect 3.8.8's scheduler fails every loop with SQLAlchemy 2.1 ("Can't evaluate bulk DML
statement"); constraints.txt pins SQLAlchemy 2.0.44, with which this test passes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.server
CSK = Path(sys.executable).with_name("csk")
STAGES = ["sources", "response_filter", "sample", "extraction_tasks", "extract", "compatibility", "correlation"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check, timeout: float, procs: list, logs: list[Path]):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        for p in procs:
            if p.poll() is not None:
                break
        time.sleep(2)
    tails = "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs)
    pytest.fail(f"timed out waiting for {what}\n{tails}")


def _get(url: str):
    try:
        return httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None


def test_schedule_fires_from_cron_and_runs_to_completion(tmp_path, config_copy):
    port = _port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    procs = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                       "--port", str(port)], env=env, stdout=open(server_log, "w"),
                                      stderr=subprocess.STDOUT))
        _wait("the server", lambda: (r := _get(f"{api}/health")) is not None and r.status_code == 200, 120,
              procs, [server_log])
        store = tmp_path / "artifacts"
        procs.append(subprocess.Popen([str(CSK), "schedule", "deco", "--config", str(config_copy), "--store",
                                       str(store), "--set", "deco.schedule=* * * * *"], env=env, cwd=ROOT,
                                      stdout=open(worker_log, "w"), stderr=subprocess.STDOUT))

        def deployment():
            r = httpx.post(f"{api}/deployments/filter", json={}, timeout=5)
            return r.json() if r.status_code == 200 and r.json() else None

        deps = _wait("the deployment", deployment, 120, procs, [server_log, worker_log])
        assert [d["name"] for d in deps] == ["deco-scheduled"]
        assert deps[0]["schedules"][0]["schedule"]["cron"] == "* * * * *"

        def finished():
            r = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=5)
            runs = [x for x in r.json() if x["auto_scheduled"]] if r.status_code == 200 else []
            return next((x for x in runs if x["state_type"] == "COMPLETED"), None)

        run = _wait("a run created by the scheduler to complete", finished, 200, procs, [server_log, worker_log])
        assert run["deployment_id"] == deps[0]["id"]
        latest = json.loads((store / "deco" / "_runs" / "latest.json").read_text())
        assert [s["stage"] for s in latest["stages"]] == STAGES
        assert "Can't evaluate bulk DML" not in server_log.read_text()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
