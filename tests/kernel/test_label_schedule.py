"""`csk label schedule`: a scheduled pull is a Prefect deployment on a real `prefect server start`, with the
step's cron and parameters; a run of it (triggered through the server, as the cron's are created) writes the
step's export where `--out` says and prints the setting that reads it back. Label Studio's side is its two API
calls (the project list, the JSON export), answered with a real export of the server
(docker/label-studio/example_export.json); the whole round trip against a real Label Studio is
tests/kernel/test_label_studio.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT
from tests.kernel.test_server import _get, _port, _wait

CSK = Path(sys.executable).with_name("csk")
EXAMPLE = ROOT / "docker/label-studio/example_export.json"
TOKEN = "csk-schedule-test-token"


class _LabelStudioApi(BaseHTTPRequestHandler):
    calls: list[tuple[str, str]] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).calls.append((self.path, self.headers.get("Authorization", "")))
        if self.headers.get("Authorization") != f"Token {TOKEN}":
            self.send_response(401)
            self.end_headers()
            return
        if self.path.startswith("/api/projects/?"):
            body = json.dumps({"results": [{"id": 3, "title": "cicero.answers"}, {"id": 4, "title": "other"}]}).encode()
        elif self.path.startswith("/api/projects/3/export?"):
            body = EXAMPLE.read_bytes()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def scheduled_pull(tmp_path: Path, label_studio_url: str, token: str, pipeline: str = "cicero",
                   step: str = "answers") -> tuple[Path, str]:
    """`csk label schedule PIPELINE STEP` served on a real `prefect server start`, its deployment checked, one
    run of it created through the server (as the cron creates them) and waited for: (the export it wrote,
    what the run printed into its logs)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    port = _port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "LABEL_STUDIO_URL": label_studio_url,
           "LABEL_STUDIO_API_KEY": token}
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    out = tmp_path / "pulled" / f"{step}.json"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                       "--port", str(port)], env=env, stdout=open(server_log, "w"),
                                      stderr=subprocess.STDOUT))
        logs = [server_log, worker_log]
        _wait("the server", lambda: (r := _get(f"{api}/health")) is not None and r.status_code == 200, 180, procs, logs)
        procs.append(subprocess.Popen([str(CSK), "label", "schedule", pipeline, step, "--out", str(out),
                                       "--cron", "0 * * * *"], env=env, cwd=tmp_path, stdout=open(worker_log, "w"),
                                      stderr=subprocess.STDOUT))

        def deployment():
            try:
                r = httpx.post(f"{api}/deployments/filter", json={}, timeout=30)
            except httpx.HTTPError:  # a busy 2-core machine: ask again
                return None
            return r.json() if r.status_code == 200 and r.json() else None

        (dep,) = _wait("the deployment", deployment, 180, procs, logs)
        assert dep["name"] == f"{pipeline}-{step}-pull"
        assert dep["schedules"][0]["schedule"]["cron"] == "0 * * * *"
        assert dep["parameters"] == {"pipeline": pipeline, "step": step, "out": str(out)}
        r = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={"name": "pull-now"}, timeout=60)
        assert r.status_code in (200, 201), r.text
        run_id = r.json()["id"]

        def finished():
            got = _get(f"{api}/flow_runs/{run_id}")
            state = got.json().get("state_type") if got is not None and got.status_code == 200 else None
            if state in ("FAILED", "CRASHED"):
                pytest.fail(f"the pull ended {state}\n" + "".join(p.read_text()[-3000:] for p in logs))
            return state == "COMPLETED"

        _wait("the pull to complete", finished, 180, procs, logs)
        assert not out.with_name(out.name + ".part").exists()
        def printed():  # the run's logs reach the server in batches, after the run may have completed
            got = httpx.post(f"{api}/logs/filter", json={"logs": {"flow_run_id": {"any_": [run_id]}}}, timeout=60)
            text = " ".join(entry["message"] for entry in got.json()) if got.status_code == 200 else ""
            return text if "--set " in text else None

        return out, _wait("the run's logs", printed, 120, procs, logs)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.mark.slow
@pytest.mark.server  # a real Prefect server and a served deployment: about a minute on 2 cores
def test_label_schedule_serves_a_pull_on_its_cron_and_a_run_writes_the_export(tmp_path):
    ls = ThreadingHTTPServer(("127.0.0.1", 0), _LabelStudioApi)
    threading.Thread(target=ls.serve_forever, daemon=True).start()
    try:
        out, printed = scheduled_pull(tmp_path, f"http://127.0.0.1:{ls.server_port}", TOKEN)
    finally:
        ls.shutdown()
    assert out.read_bytes() == EXAMPLE.read_bytes()
    assert [p.split("?")[0] for p, _ in _LabelStudioApi.calls] == ["/api/projects/", "/api/projects/3/export"]
    assert f"--set cicero.annotations.answers={out}" in printed  # log_prints: the setting, in the run's logs
