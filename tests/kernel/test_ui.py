"""Prefect's UI in a browser: headless Chromium loads the pages of a finished `csk run deco` from a real
`prefect server start` (UI on) and finds what a user looks for: the flow run with its stage graph, the
run-summary table (every stage, its rows and status) and a stage's plot. Skipped without Chromium
(Debian: apt-get install chromium)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT
from tests.kernel.test_server import STAGES, _get, _port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _page(url: str) -> str:
    """The page's DOM once its scripts have run (Chromium's virtual time lets the UI's fetches finish)."""
    out = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--virtual-time-budget=30000", "--dump-dom", url], capture_output=True, text=True,
                         timeout=180)
    return out.stdout


def _text(dom: str) -> str:
    dom = re.sub(r"<svg.*?</svg>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


@pytest.mark.slow  # a real server and a browser: about a minute
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium)")
def test_flow_run_page_shows_the_stage_graph_the_summary_and_a_plot(tmp_path, config_copy):
    port = _port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
           "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,  # the UI is told where its API is
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=env, stdout=open(tmp_path / "server.log", "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and not ((r := _get(f"{api}/health")) is not None and r.status_code == 200):
            time.sleep(1)
        run = subprocess.run([sys.executable, "-m", "csk.cli", "run", "deco", "--config", str(config_copy), "--store",
                              str(tmp_path / "artifacts")], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        flow_run = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=10).json()[0]
        artifacts = {a["key"]: a["id"] for a in httpx.post(f"{api}/artifacts/filter", json={}, timeout=10).json()}

        page = _page(f"http://127.0.0.1:{port}/runs/flow-run/{flow_run['id']}")
        text = _text(page)
        assert flow_run["name"] in text and "Completed" in text and f"{len(STAGES)} Task runs" in text, text[:800]
        assert "<canvas" in page  # the stage graph (drawn on a canvas from the graph API, which names every stage)
        graph = httpx.get(f"{api}/flow_runs/{flow_run['id']}/graph-v2", timeout=10).json()
        assert sorted(n["label"].rsplit("-", 1)[0] for _, n in graph["nodes"]) == sorted(STAGES)

        summary = _text(_page(f"http://127.0.0.1:{port}/artifacts/artifact/{artifacts['deco-run-summary']}"))
        assert "what this run did, stage by stage" in summary
        assert all(re.search(rf"\b{s} computed \d+ \d+ \w+", summary) for s in STAGES), summary[:1500]

        plot = _page(f"http://127.0.0.1:{port}/artifacts/artifact/{artifacts['deco-correlation-plots']}")
        assert 'src="data:image/png;base64,' in plot and "scatter.png" in _text(plot)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
