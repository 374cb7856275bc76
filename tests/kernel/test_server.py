"""A real Prefect server (not the test harness): `csk schedule` registers the pipeline's deployment
with its cron, and the server's scheduler itself creates a run from the cron, which the served
worker runs to completion with every stage's artifact written. Then the same on PostgreSQL (the
database of the compose stack), started by the test: a run triggered through the server.

Prefect 3.8.8's scheduler fails every loop with SQLAlchemy 2.1 ("Can't evaluate bulk DML
statement"); constraints.txt pins SQLAlchemy 2.0.44, with which this test passes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.server
CSK = Path(sys.executable).with_name("csk")
STAGES = ["sources", "response_filter", "sample", "agreement", "extraction_tasks", "extract", "compatibility",
          "correlation"]


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


@contextmanager
def _served(tmp_path: Path, config_copy: Path, database: str | None = None):
    """A `prefect server start` on loopback (SQLite, or the database URL given) and `csk schedule deco`
    serving the DECO flow every minute; yields (api url, store, the server log, processes, logs)."""
    port = _port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
    if database:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    procs: list[subprocess.Popen] = []
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
        yield api, store, server_log, procs, [server_log, worker_log]
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _deployment(api: str, procs, logs) -> dict:
    def deployment():
        r = httpx.post(f"{api}/deployments/filter", json={}, timeout=5)
        return r.json() if r.status_code == 200 and r.json() else None

    deps = _wait("the deployment", deployment, 120, procs, logs)
    assert [d["name"] for d in deps] == ["deco-scheduled"]
    assert deps[0]["schedules"][0]["schedule"]["cron"] == "* * * * *"
    return deps[0]


def _all_stages_written(store: Path) -> None:
    latest = json.loads((store / "deco" / "_runs" / "latest.json").read_text())
    assert [s["stage"] for s in latest["stages"]] == STAGES
    for s in latest["stages"]:
        assert (store / "deco" / s["stage"] / s["key"] / "data.parquet").is_file()


@pytest.mark.slow  # over a minute on 2 cores: `make test-all`
def test_schedule_fires_from_cron_and_runs_to_completion(tmp_path, config_copy):
    with _served(tmp_path, config_copy) as (api, store, server_log, procs, logs):
        dep = _deployment(api, procs, logs)

        def finished():
            r = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=5)
            runs = [x for x in r.json() if x["auto_scheduled"]] if r.status_code == 200 else []
            return next((x for x in runs if x["state_type"] == "COMPLETED"), None)

        run = _wait("a run created by the scheduler to complete", finished, 200, procs, logs)
        assert run["deployment_id"] == dep["id"]
        _all_stages_written(store)
        assert "Can't evaluate bulk DML" not in server_log.read_text()


def _postgres_bin() -> Path | None:
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / "initdb").is_file():
            return d
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@pytest.fixture
def postgres():
    """A PostgreSQL server of its own on loopback (Debian's package), trust auth, database `prefect`."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed: the Prefect-server-on-PostgreSQL test is skipped "
                    "(Debian: `sudo apt-get install postgresql`, or `make postgres`)")
    base = Path(tempfile.mkdtemp(prefix="csk-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(base, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _port()
    data = base / "data"

    def pg(*cmd):
        done = subprocess.run([*as_postgres, *map(str, cmd)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{cmd[0]}: {done.stdout}{done.stderr}"

    pg(bin_dir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
    pg(bin_dir / "pg_ctl", "-D", data, "-l", base / "server.log", "-w", "-o",
       f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "start")
    try:
        pg(bin_dir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "prefect")
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/prefect"
    finally:
        subprocess.run([*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow  # a real PostgreSQL and Prefect server: `make test-all`
def test_server_on_postgresql_runs_a_triggered_deployment(tmp_path, config_copy, postgres):
    with _served(tmp_path, config_copy, postgres) as (api, store, server_log, procs, logs):
        dep = _deployment(api, procs, logs)
        r = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={"name": "triggered"}, timeout=10)
        assert r.status_code in (200, 201), r.text
        run_id = r.json()["id"]

        def finished():
            got = _get(f"{api}/flow_runs/{run_id}")
            state = got.json().get("state_type") if got is not None and got.status_code == 200 else None
            if state in ("FAILED", "CRASHED"):
                pytest.fail(f"the triggered run ended {state}\n" + "".join(log.read_text()[-3000:] for log in logs))
            return state == "COMPLETED"

        _wait("the triggered run to complete", finished, 200, procs, logs)
        _all_stages_written(store)
        assert _stored_in_postgres(postgres, run_id) == "COMPLETED"  # the server's database is this PostgreSQL


def _stored_in_postgres(url: str, run_id: str) -> str | None:
    import asyncio
    import uuid

    import asyncpg

    async def state():
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return await conn.fetchval("SELECT state_type FROM flow_run WHERE id = $1", uuid.UUID(run_id))
        finally:
            await conn.close()

    return asyncio.run(state())
