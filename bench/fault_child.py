"""`csk` with one injected fault, for bench/faults.py: python -m bench.fault_child SPEC CSK-ARGS...

SPEC is JSON: {} (no fault), {"kind": "exception", "stage": S} (stage S's function runs, then an
exception is raised inside the stage before anything is written), or {"kind": "write", "stage": S}
(writing S's artifact fails part-way with ENOSPC, as on a full disk), or {"kind": "kill-after-checkpoint",
"stage": S, "after": N} (SIGKILL right after S commits the checkpoint of its N-th round: a kill at a known
moment). Other kills need no hook: the bench sends SIGKILL from outside.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class InjectedFault(RuntimeError):
    pass


def install(spec: dict) -> None:
    import csk.store as rt

    kind, stage = spec.get("kind"), spec.get("stage")
    if kind == "exception":
        real = rt.Store.compute

        def compute(self, plan):
            out = real(self, plan)
            if plan.stage.name == stage:
                raise InjectedFault(f"injected fault: an exception inside stage {stage!r} after it computed")
            return out

        rt.Store.compute = compute
    elif kind == "write":
        real_commit, real_write = rt.Store._commit, rt._write_file

        def commit(self, pipeline, name, key, files):
            if name != stage:
                return real_commit(self, pipeline, name, key, files)
            written = []

            def failing(path, payload):
                if len(written) == len(files) // 2:  # part of the artifact is on disk when the disk fills
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                written.append(path)
                real_write(path, payload)

            rt._write_file = failing
            try:
                return real_commit(self, pipeline, name, key, files)
            finally:
                rt._write_file = real_write

        rt.Store._commit = commit
    elif kind == "kill-after-checkpoint":
        # SIGKILL to this process (and its group: nothing cleans up) right after a stage commits a checkpoint
        # whose state has `after` rounds: a kill at a known moment, not a handled exception
        import signal

        from csk.runtime import Checkpoint

        real_save, after = Checkpoint.save, int(spec["after"])

        def save(self, state):
            real_save(self, state)
            if self.ctx.stage == stage and len(state.get("history", [])) == after:
                os.kill(os.getpid(), signal.SIGKILL)

        Checkpoint.save = save
    elif kind:
        raise SystemExit(f"unknown fault kind {kind!r}")


if __name__ == "__main__":
    install(json.loads(sys.argv[1]))
    from csk.cli import app

    app(sys.argv[2:], prog_name="csk")
