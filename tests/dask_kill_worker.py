"""A Dask worker preload (`distributed.worker.preload`) for tests: the worker process dies in its first
second (os._exit), once (`CSK_TEST_KILL_MARK` names a marker file the first victim creates) or every
time (no marker named)."""

from __future__ import annotations

import os


def dask_setup(worker) -> None:  # noqa: ARG001 - dask's preload hook
    mark = os.environ.get("CSK_TEST_KILL_MARK")
    if mark:
        try:
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    os._exit(1)
