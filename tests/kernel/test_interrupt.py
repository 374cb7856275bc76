"""Ctrl-C during `csk run`: a real SIGINT to the process group of a run in a pseudo-terminal, as a
terminal sends it. The run stops in seconds with exit 130, says so in one line (no traceback), marks
its flow run Cancelled in Prefect's database and leaves no temporary directory in the store."""

from __future__ import annotations

import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT


def _read(fd: int, until: str, timeout: float) -> str:
    out, end = "", time.monotonic() + timeout
    while until not in out and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                out += os.read(fd, 65536).decode(errors="replace")
            except OSError:  # the child closed the terminal
                break
    return out


@pytest.mark.slow  # a CICERO run started and stopped (35 s); the kill -9 trial stays in the default suite
def test_ctrl_c_stops_a_run_cancels_it_and_cleans_up(tmp_path, config_copy):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               CSK_MODEL_CACHE=os.environ.get("CSK_MODEL_CACHE", ""), COLUMNS="200")
    store = tmp_path / "artifacts"
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "csk.cli", "run", "corequisite", "--config", str(config_copy),
                             "--store", str(store)], cwd=ROOT, env=env, stdin=follower, stdout=follower,
                            stderr=follower, start_new_session=True)
    os.close(follower)
    try:
        before = _read(leader, "computed", timeout=240)  # a stage has finished: the run is under way
        assert "computed" in before, before
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        start = time.monotonic()
        after = ""
        while proc.poll() is None and time.monotonic() - start < 30:
            after += _read(leader, "\n\n\n", timeout=0.2)
        took = time.monotonic() - start
        after += _read(leader, "\n\n\n", timeout=0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(leader)
    print(f"\nCtrl-C to exit: {took:.2f} s")
    assert proc.returncode == 130, after
    assert took <= 2.0, f"took {took:.2f} s to stop"
    assert "interrupted (Ctrl-C)" in after and "marked Cancelled" in after, after
    assert "Traceback" not in after and "Crash detected" not in after, after
    assert not [d for d in (store / ".tmp").glob(f"{proc.pid}-*")]  # its unfinished stage's files removed
    with sqlite3.connect(tmp_path / "prefect" / "prefect.db") as db:
        states = db.execute("select state_type from flow_run").fetchall()
    assert states == [("CANCELLED",)], states


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc: Linux)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_kill_9_leaves_no_process_of_the_run(tmp_path, config_copy):
    """SIGKILL cannot be handled: the temporary Prefect server (a child in a session of its own) must still
    die with its run, by the parent-death signal it asked Linux for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "csk.cli", "run", "corequisite", "--config", str(config_copy),
                             "--store", str(tmp_path / "artifacts")], cwd=ROOT, env=env, stdin=follower,
                            stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    try:
        before = _read(leader, "computed", timeout=240)
        assert "computed" in before, before
        below = _descendants(proc.pid)
        assert below, "the run has started its temporary server"
        proc.kill()
        proc.wait()
        end = time.monotonic() + 10
        while any(_alive(p) for p in below) and time.monotonic() < end:
            time.sleep(0.2)
        left = [p for p in below if _alive(p)]
    finally:
        for p in _descendants(proc.pid) | (below if "below" in dir() else set()):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        os.close(leader)
    assert not left, f"still running after kill -9 of their run: {left}"


def test_a_run_stops_the_servers_left_by_runs_that_died(tmp_path, monkeypatch):
    """A server whose run is gone is stopped by the next run; one whose run still runs is left alone;
    an entry whose server is gone is forgotten."""
    import json

    from csk import interrupt

    monkeypatch.setenv("CSK_CACHE_DIR", str(tmp_path))
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    kept = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead_run = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_run.wait()
    try:
        interrupt._register(kept.pid, 1)  # started by this (live) process
        d = tmp_path / "servers"
        entry = {"pid": orphan.pid, "pid_start": interrupt._start_time(orphan.pid), "parent": dead_run.pid,
                 "parent_start": "1", "port": 2}
        (d / f"{orphan.pid}.json").write_text(json.dumps(entry))
        (d / "999999999.json").write_text(json.dumps({**entry, "pid": 999999999}))
        assert interrupt.stop_stale_servers() == [orphan.pid]
        assert orphan.wait(timeout=10) == -signal.SIGTERM
        assert kept.poll() is None
        assert sorted(p.name for p in d.iterdir()) == [f"{kept.pid}.json"]
    finally:
        for p in (orphan, kept):
            p.kill()
            p.wait()
