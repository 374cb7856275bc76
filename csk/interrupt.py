"""Ctrl-C stops a run in seconds, cleanly.

Left to itself, Prefect 3.8.8 handles SIGINT badly for a local run: the temporary API server is a
child in the terminal's process group, so Ctrl-C stops it too while the flow engine still talks to
it (connection-refused tracebacks), the process then waits minutes on its retries, and the flow run
stays "Running" in the database forever.

So `csk run` (1) starts the temporary server itself (`prefect server start`), in a session of its
own, where the terminal's Ctrl-C does not reach it, and (2) handles SIGINT/SIGTERM itself: it marks the flow run and its
running task runs Cancelled through the still-running API, removes this process's temporary
directories in the store (a finished artifact is never touched: artifacts appear by an atomic
rename), stops the server, says what happened in one line and exits with 130 (SIGTERM: 143). A
second Ctrl-C while that happens exits at once. The next `csk run` reuses every finished stage.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

# Set by the flow body when it starts (csk.orchestration.PipelineRun): what to cancel and clean.
ACTIVE: dict[str, object] = {"flow_run_id": None, "tmp": None}


@dataclass
class TemporaryServer:
    """A Prefect server this run started (`prefect server start`, the CLI's documented command) and the
    API URL it serves."""

    process: subprocess.Popen | None
    api_url: str


@contextmanager
def temporary_server(timeout: float = 120.0) -> Iterator[TemporaryServer | None]:
    """Within it, Prefect's client talks to a temporary server this run started in a session of its own
    (the terminal's Ctrl-C does not reach it) that dies with this process (`_die_with_parent`); None when
    a server is configured (PREFECT_API_URL), which the run then uses.

    Only Prefect's public interfaces: the server is `prefect server start` (API only: no UI, no
    services; the same database under PREFECT_HOME as Prefect's own temporary server), and the client
    is pointed at it by `temporary_settings(PREFECT_API_URL=...)`, so `get_client()` never starts a
    server of its own."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value():
        yield None
        return
    stopped = stop_stale_servers()
    if stopped:
        print(f"stopped {len(stopped)} temporary Prefect server(s) left by earlier runs that died: pid "
              f"{', '.join(map(str, stopped))}", file=sys.stderr)
    server = _start_server(timeout)
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield server
            finally:
                from prefect.logging.handlers import APILogHandler

                # the run's last log lines reach the server before it stops (else Prefect's log worker
                # prints "Error logging to API" at exit, sending them to a server that is gone)
                APILogHandler().flush()
    finally:
        _stop(server)


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(timeout: float) -> TemporaryServer:
    """`prefect server start` on a free local port, waited for until its health endpoint answers; a
    port taken in between (the server exits at once) is retried on another."""
    import tempfile
    import time

    import httpx
    from prefect.settings import get_current_settings

    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True)}
    for _ in range(3):
        err_file = tempfile.TemporaryFile()  # never a pipe: a long run's server must not block on a full one
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port),
             "--no-ui", "--no-services", "--log-level", "ERROR"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err_file,
            env=env, start_new_session=True, preexec_fn=_die_with_parent())
        _register(proc.pid, port)
        server = TemporaryServer(proc, f"http://127.0.0.1:{port}/api")
        end = time.monotonic() + timeout
        with httpx.Client() as client:
            while proc.poll() is None and time.monotonic() < end:
                try:
                    if client.get(f"{server.api_url}/health", timeout=2).status_code == 200:
                        return server  # its stderr file is dropped with this process
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        if proc.poll() is None:  # alive but never healthy: out of time
            _stop(server)
            raise RuntimeError(f"the temporary Prefect server did not answer within {timeout:.0f} s; start one "
                               "with `prefect server start` and set PREFECT_API_URL to use it")
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
        err_file.close()
        if "address already in use" not in err.lower():
            raise RuntimeError(f"the temporary Prefect server exited ({proc.returncode}): {err.strip()[-2000:]}")
    raise RuntimeError("the temporary Prefect server found no free port in 3 tries")


def _servers_dir() -> Path:
    from csk.precision import cache_dir

    return cache_dir() / "servers"


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): a pid with another
    start time is another process. None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()[19]


def _register(pid: int, port: int | None) -> None:
    """Note which run started which temporary server, so a later run can stop it if the run died and
    the server did not (no parent-death signal: not Linux, or a server of an older csk)."""
    import json

    d = _servers_dir()
    d.mkdir(parents=True, exist_ok=True)
    entry = {"pid": pid, "pid_start": _start_time(pid), "parent": os.getpid(), "parent_start": _start_time(os.getpid()),
             "port": port}
    (d / f"{pid}.json").write_text(json.dumps(entry))


def stop_stale_servers() -> list[int]:
    """Stop the temporary servers whose run is gone (SIGTERM), forget every entry whose server is gone;
    a server whose run still runs is left alone. Returns the pids stopped."""
    import json

    d = _servers_dir()
    stopped = []
    for f in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            e = json.loads(f.read_text())
        except (OSError, ValueError):
            f.unlink(missing_ok=True)
            continue
        server_alive = e.get("pid_start") is not None and _start_time(e["pid"]) == e["pid_start"]
        run_alive = e.get("parent_start") is not None and _start_time(e["parent"]) == e["parent_start"]
        if server_alive and run_alive:
            continue
        if server_alive:
            try:
                os.kill(e["pid"], signal.SIGTERM)
                stopped.append(e["pid"])
            except OSError:
                pass
        f.unlink(missing_ok=True)
    return stopped


def _die_with_parent():
    """A function for the server's child process (run between fork and exec) that asks Linux to send it
    SIGTERM when this process dies, however it dies (kill -9 included), so the temporary server never
    outlives its run. None where there is no prctl (not Linux): Ctrl-C and SIGTERM still stop it."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    PR_SET_PDEATHSIG = 1

    def child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the run died before the request took hold
            os._exit(1)

    return child


def _cancel_in_prefect(flow_run_id) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, TaskRunFilter,
                                                TaskRunFilterState, TaskRunFilterStateType)
    from prefect.client.schemas.objects import StateType
    from prefect.states import Cancelled

    with get_client(sync_client=True) as client:
        running = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            task_run_filter=TaskRunFilter(state=TaskRunFilterState(
                type=TaskRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING, StateType.SCHEDULED]))))
        for task_run in running:
            client.set_task_run_state(task_run.id, Cancelled(message="interrupted (Ctrl-C)"), force=True)
        client.set_flow_run_state(flow_run_id, Cancelled(message="interrupted (Ctrl-C); rerun to resume: "
                                                         "finished stages are reused"), force=True)


def _remove_own_tmp() -> None:
    tmp = ACTIVE.get("tmp")
    if tmp and Path(str(tmp)).is_dir():
        for d in Path(str(tmp)).glob(f"{os.getpid()}-*"):
            shutil.rmtree(d, ignore_errors=True)


def _stop(server: TemporaryServer | None, wait: float = 1.0) -> None:
    proc = server.process if server is not None else None
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
    server.process = None


@contextmanager
def interruptible(what: str, server=None) -> Iterator[None]:
    """Within it, SIGINT / SIGTERM cancel the run as the module says, then exit 130 / 143."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    stopping = {"on": False}

    def handler(signum, frame):  # noqa: ARG001
        code = 128 + signum
        if stopping["on"]:  # a second Ctrl-C: out now
            os._exit(code)
        stopping["on"] = True
        said = []
        try:
            if ACTIVE.get("flow_run_id") is not None:
                _cancel_in_prefect(ACTIVE["flow_run_id"])
                said.append(f"flow run {ACTIVE['flow_run_id']} marked Cancelled")
        except Exception as exc:  # noqa: BLE001 - the exit must happen whatever the API says
            said.append(f"could not mark the flow run Cancelled ({type(exc).__name__})")
        _remove_own_tmp()
        _stop(server)
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        sys.stderr.write(f"\ninterrupted ({name}): {what} stopped; " + "; ".join(said + [
            "its unfinished stage's temporary files removed; rerun to resume (finished stages are reused)"]) + "\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
