"""A real Label Studio for the slow tests: started from its own venv (make label-studio-install) on a free
localhost port with a fresh data directory, annotators signed up through the organization's invite link as
people are, annotations submitted through the labeling page in headless Chromium (`annotate_in_browser`) or
through the API with each annotator's own token, screenshots of the labeling screen."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-label-studio"
ADMIN_EMAIL, ADMIN_PASSWORD, ADMIN_TOKEN = "admin@example.com", "csk-admin-pass-1", "csk-test-admin-token-0123456789"
ANNOTATOR_PASSWORD = "csk-annotator-pass-1"


def available() -> str | None:
    """Why a real server cannot run here (None: it can)."""
    if not (VENV / "bin" / "label-studio").exists():
        return f"no Label Studio venv at {VENV}: make label-studio-install"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    data_dir: Path
    process: subprocess.Popen
    tokens: dict[str, str] = field(default_factory=dict)  # email -> legacy API token
    ids: dict[str, int] = field(default_factory=dict)  # email -> user id

    def client(self, email: str = ADMIN_EMAIL) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Token {self.tokens[email]}"}, timeout=120)

    def sign_up(self, email: str) -> int:
        """An annotator joins through the invite link (the signup form, as a person would) and reads their token."""
        invite = self.client().get("/api/invite").raise_for_status().json()["token"]
        with httpx.Client(base_url=self.url, timeout=120, follow_redirects=False) as web:
            web.get(f"/user/signup/?token={invite}").raise_for_status()
            r = web.post(f"/user/signup/?token={invite}",
                         data={"email": email, "password": ANNOTATOR_PASSWORD,
                               "csrfmiddlewaretoken": web.cookies.get("csrftoken")},
                         headers={"Referer": f"{self.url}/user/signup/?token={invite}"})
            assert r.status_code == 302, f"signup of {email}: {r.status_code} {r.text[:300]}"
            self.tokens[email] = web.get("/api/current-user/token").raise_for_status().json()["token"]
            self.ids[email] = web.get("/api/current-user/whoami").raise_for_status().json()["id"]
        return self.ids[email]

    def annotate(self, email: str, task: int, result: list[dict], lead_time: float, cancelled: bool = False) -> dict:
        body = {"result": [] if cancelled else result, "lead_time": lead_time, "was_cancelled": cancelled}
        with self.client(email) as c:
            return c.post(f"/api/tasks/{task}/annotations/", json=body).raise_for_status().json()

    def annotate_in_browser(self, email: str, project: int, task: int, actions: list[dict], tmp: Path) -> dict:
        """One annotation submitted through Label Studio's labeling page in headless Chromium, as the annotator
        does it (docker/label-studio/annotate.py: fills the named controls, presses Submit); returns it as the
        API gives it back. A control renamed in a config fails here, where the API path would not notice."""
        password = ADMIN_PASSWORD if email == ADMIN_EMAIL else ANNOTATOR_PASSWORD
        path = tmp / f"actions-{task}.json"
        path.write_text(json.dumps(actions))
        subprocess.run([str(VENV / "bin" / "python"), str(ROOT / "docker/label-studio/annotate.py"), self.url, email,
                        password, str(project), str(task), str(path)], check=True, timeout=300)
        with self.client() as c:
            mine = [a for a in c.get(f"/api/tasks/{task}/annotations/").raise_for_status().json()
                    if a["completed_by"] == self.ids[email]]
        assert mine, f"no annotation of {email} on task {task} after the browser's Submit"
        return mine[-1]

    def tasks(self, project: int) -> list[dict]:
        with self.client() as c:
            out = c.get("/api/tasks", params={"project": project, "page_size": 1000, "fields": "all"})
            return out.raise_for_status().json()["tasks"]

    def screenshot(self, email: str, project: int, task: int | None, out: Path, wait_text: str | None = None) -> Path:
        """The labeling screen of `task`, (None) the label stream an annotator opens ("Label All Tasks"), or (-1)
        the data manager's table of the project's tasks."""
        password = ADMIN_PASSWORD if email == ADMIN_EMAIL else ANNOTATOR_PASSWORD
        subprocess.run([str(VENV / "bin" / "python"), str(ROOT / "docker/label-studio/screenshot.py"), self.url,
                        email, password, str(project), str(task or 0), str(out)] + ([wait_text] if wait_text else []),
                       check=True, timeout=300)
        return out

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start(data_dir: Path, log: Path) -> Server:
    port = _free_port()
    env = {**os.environ, "LS_PORT": str(port), "LS_DATA_DIR": str(data_dir), "LS_ADMIN_EMAIL": ADMIN_EMAIL,
           "LS_ADMIN_PASSWORD": ADMIN_PASSWORD, "LS_ADMIN_TOKEN": ADMIN_TOKEN}
    proc = subprocess.Popen([str(ROOT / "docker/label-studio/serve.sh")], env=env, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 240
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Label Studio exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                server = Server(url, data_dir, proc, tokens={ADMIN_EMAIL: ADMIN_TOKEN})
                server.ids[ADMIN_EMAIL] = server.client().get("/api/current-user/whoami").json()["id"]
                return server
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.terminate()
    raise RuntimeError(f"Label Studio did not answer on {url} within 240 s: {log.read_text()[-2000:]}")
