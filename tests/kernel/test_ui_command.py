"""`csk ui`: Prefect's server and UI on the project's Prefect home, its address printed first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.kernel.test_server import _port

CSK = Path(sys.executable).with_name("csk")


@pytest.mark.slow
@pytest.mark.server  # a real `prefect server start`: 15-40 s on 2 cores
def test_csk_ui_serves_the_project_prefect_home_and_prints_its_address(tmp_path):
    port = _port()
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_HOME", None)
    env.pop("PREFECT_API_URL", None)
    log = (tmp_path / "ui.log").open("w+")
    proc = subprocess.Popen([str(CSK), "ui", "--port", str(port)], cwd=tmp_path, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end, health = time.monotonic() + 240, None
        while time.monotonic() < end and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
                if health.status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        assert health is not None and health.status_code == 200, (tmp_path / "ui.log").read_text()
        first = (tmp_path / "ui.log").read_text().splitlines()[0]
        assert first.startswith(f"Prefect UI: http://127.0.0.1:{port} (the runs in {tmp_path / '.prefect'})")
        assert (tmp_path / ".prefect").is_dir()  # the server's database is the project's (where csk runs)
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200  # the UI's page
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
