"""Sharded work: the heavy inner loops of a stage (encoding texts, similarity tiles, per-dialogue
screening) as a map over shards, run in this process or on a Dask cluster.

A stage never learns which: it calls `map_shards(fn, frames, ...)` and gets the outputs back in
shard order. The shards are cut by the stage from its own independent units (512-text encode
chunks, row blocks of the similarity search, dialogues), so a shard's output does not depend on
which shards exist or where they run, and the merged result is the same bytes as the local
runner's; the key of an artifact never depends on the runner.

* local (the default): `fn` is called on each shard in turn, in this process;
* dask (`csk run PIPELINE --runner dask`, or `[runtime] runner = "dask"`): the flow run opens
  prefect-dask's `DaskTaskRunner` (on the scheduler at `address`, or a LocalCluster) and each
  shard becomes a Prefect task on the cluster. Only paths travel: the shard's rows are
  written to a Parquet file (shared arrays once, as `.npy`) in the store's `.tmp/<pid>-shards-*`
  directory (removed after, or by the next run when this process died), the worker reads them,
  writes its output beside them and returns the output's path.

`fn` is a module-level function `fn(frame, **arrays, **params) -> DataFrame` (the worker imports
it by name); `params` are plain JSON values, `arrays` numpy arrays every shard reads (e.g. the
embedding matrix a similarity tile needs).
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

log = logging.getLogger("csk")
DEFAULT_SHARD_ROWS = 4096
_SETTINGS: contextvars.ContextVar[dict] = contextvars.ContextVar(
    "csk_shards", default={"shard_rows": DEFAULT_SHARD_ROWS, "tmp": None})  # noqa: B039  (never mutated: copied on set)


@contextmanager
def sharding(shard_rows: int, tmp: Path | None) -> Iterator[None]:
    """Set by the runtime around a stage's compute: shard size, and where shard files go."""
    token = _SETTINGS.set({"shard_rows": int(shard_rows), "tmp": tmp})
    try:
        yield
    finally:
        _SETTINGS.reset(token)


def shard_rows() -> int:
    """Rows (or texts) per shard: the unit of distributed work (`[runtime] shard_rows`)."""
    return _SETTINGS.get()["shard_rows"]


def bounds(n: int, size: int, align: int = 1) -> list[tuple[int, int]]:
    """[start, end) ranges covering n items, each `size` rounded up to a multiple of `align`."""
    size = max(align, -(-max(1, size) // align) * align)
    return [(a, min(a + size, n)) for a in range(0, n, size)]


_RUNNER: contextvars.ContextVar[Any] = contextvars.ContextVar("csk_dask_runner", default=None)


@contextmanager
def cluster(runner: str = "local", address: str = "", workers: int = 2, threads_per_worker: int = 1) -> Iterator[Any]:
    """For the length of a flow run: prefect-dask's DaskTaskRunner on the scheduler at `address`, or
    on a LocalCluster of `workers` processes; nothing for the local runner. A shard computes with the
    stage's torch thread count, the one its key records (`_set_torch_threads`)."""
    if runner != "dask":
        yield None
        return
    from prefect_dask import DaskTaskRunner

    def make():
        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": threads_per_worker,
                                              "processes": True, "dashboard_address": ":0"})

    task_runner = start_cluster(make, 0 if address else workers)
    try:
        token = _RUNNER.set(task_runner)
        try:
            yield task_runner
        finally:
            _RUNNER.reset(token)
    finally:
        task_runner.__exit__(None, None, None)


START_TIMEOUT = 60.0  # seconds for a LocalCluster's workers to come up


def start_cluster(make: Callable[[], Any], workers: int, attempts: int = 2, timeout: float = START_TIMEOUT):
    """A started DaskTaskRunner from `make()`: its client connected and, for a LocalCluster, its
    `workers` workers up. A cluster that fails to start (a worker killed in its first second, a port
    taken) is torn down and started afresh once; a second failure is a StageError saying so."""
    from csk.errors import StageError

    for attempt in range(1, attempts + 1):
        runner = make()
        runner.__enter__()
        try:
            client = runner.client  # prefect-dask starts the cluster on first use: start it here
            if workers:
                client.wait_for_workers(workers, timeout=timeout)
            return runner
        except Exception as exc:  # noqa: BLE001 - whatever stopped it, a fresh cluster may not meet it
            try:
                runner.__exit__(type(exc), exc, exc.__traceback__)
            except Exception:  # noqa: BLE001 - tearing down a half-started cluster
                pass
            if attempt == attempts:
                raise StageError(f"the Dask cluster did not start ({attempts} attempts): {type(exc).__name__}: "
                                 f"{exc}. Try `--runner local`, or check the workers' log above") from exc
            log.warning("the Dask cluster did not start (%s: %s); starting a fresh one", type(exc).__name__, exc)


def spans(n: int, align: int = 1) -> list[tuple[int, int]]:
    """The shards of n items: one for the local runner (no split costs nothing), `shard_rows` each
    (rounded up to a multiple of `align`, the stage's own independent unit) on a cluster."""
    if dask_runner() is None or n <= shard_rows():
        return [(0, n)] if n else []
    return bounds(n, shard_rows(), align)


def dask_runner():
    """The run's DaskTaskRunner, or None (the local runner)."""
    return _RUNNER.get()


def map_shards(fn: Callable[..., pd.DataFrame], frames: list[pd.DataFrame], *,
               arrays: dict[str, np.ndarray] | None = None, **params: Any) -> list[pd.DataFrame]:
    """`[fn(frame, **arrays, **params) for frame in frames]`, on the flow's cluster when it has one."""
    arrays = arrays or {}
    runner = dask_runner()
    if len(frames) > 1 and runner is not None:
        return _map_dask(runner, fn, frames, arrays, params)
    return [fn(f, **arrays, **params) for f in frames]


def _ref(fn: Callable) -> str:
    if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
        raise TypeError(f"{fn.__qualname__}: a shard function must be a module-level function (workers import it)")
    return f"{fn.__module__}:{fn.__qualname__}"


def _map_dask(runner, fn, frames, arrays, params) -> list[pd.DataFrame]:
    from prefect import task
    from prefect.cache_policies import NONE

    from csk.artifacts import read_parquet, to_parquet_bytes

    root = _SETTINGS.get()["tmp"]
    if root is None:
        raise RuntimeError("map_shards on a cluster needs the store's temporary directory (set by the runtime)")
    work = Path(root) / f"{os.getpid()}-shards-{uuid.uuid4().hex[:12]}"
    work.mkdir(parents=True)
    try:
        shared = {}
        for name, arr in arrays.items():
            shared[name] = str(work / f"{name}.npy")
            np.save(shared[name], np.ascontiguousarray(arr), allow_pickle=False)
        shard = task(name=f"shard:{fn.__name__}", cache_policy=NONE, persist_result=False)(run_shard)
        log.info("%s: %d shards of %s on the Dask cluster", _stage(), len(frames), fn.__name__)
        threads = _torch_threads()  # the stage's count (`Store.compute` fixed it), which its key records
        futures = []
        for i, frame in enumerate(frames):
            src = work / f"in-{i:05d}.parquet"
            src.write_bytes(to_parquet_bytes(frame))
            futures.append(runner.submit(shard, {"fn_ref": _ref(fn), "src": str(src), "shared": shared,
                                                 "out": str(work / f"out-{i:05d}.parquet"), "params": params,
                                                 "threads": threads}))
        out = []
        for i, f in enumerate(futures):
            try:
                out.append(read_parquet(f.result()))
            except Exception as exc:  # named, not a worker's bare traceback
                from csk.errors import CskError

                raise CskError(f"{_stage()}: shard {i + 1} of {len(futures)} ({fn.__name__}) failed on the Dask "
                               f"cluster: {type(exc).__name__}: {exc}") from exc
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stage() -> str:
    from csk.progress import _STAGE

    return _STAGE.get() or "stage"


def run_shard(fn_ref: str, src: str, out: str, shared: dict[str, str], params: dict, threads: int) -> str:
    """One shard, on a worker: read its rows and the shared arrays, run `fn`, write the output."""
    from csk.artifacts import read_parquet, to_parquet_bytes

    _set_torch_threads(threads)
    module, name = fn_ref.split(":")
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    arrays = {k: np.load(p, mmap_mode="r", allow_pickle=False) for k, p in shared.items()}
    result = fn(read_parquet(src), **arrays, **params)
    tmp = f"{out}.part"
    Path(tmp).write_bytes(to_parquet_bytes(result))
    os.replace(tmp, out)
    return out


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _set_torch_threads(n: int) -> None:
    """Workers compute with the stage's intra-op thread count (the flow process's, the one the stage's
    key records): on some CPUs (seen on an AMD EPYC) 1 and 2 threads give float results differing in
    the last bit, and the dask runner must give the local runner's bytes. The price on a small machine:
    two workers of two threads on two cores oversubscribe them (measured 0.36x of local on encode, 0.72x
    with one thread each: bench/bench_dask.py). Another count per worker would need its own key (the
    `[runtime] worker_threads` that allowed it is gone: its shards wrote bytes their key did not name)."""
    import torch

    if n > 0 and torch.get_num_threads() != n:
        torch.set_num_threads(n)
