"""One place for what every stage repeats: device, precision, seeded generators, hashing, JSON Lines.

Precision is chosen by measurement on the machine at hand, never by assumption: the CPUs
this project runs on differ by two orders of magnitude in bf16 (an AMX Xeon ran bf16 matmul
2.9x faster than fp32; an AVX2-only EPYC ran it 175x slower). `precision("auto", ...)` picks
bf16 only where this machine's one decision (`csk.precision`: measured once at real shapes,
cached) says it is clearly faster AND it agrees with fp32 on the caller's probe; the decision
and the CPU go into the stage's manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

# the machine facts precision decisions are taken on live in csk.precision (it imports nothing of this module)
from csk.precision import autocast, cpu_model  # noqa: F401  (re-exported: every stage asks here)



def device(requested: str = "auto") -> str:
    """"auto": CUDA when a GPU is visible, else CPU; anything else is taken as given."""
    if requested != "auto":
        return requested
    if _cpu_only_torch():  # a CPU build sees no GPU: no need to import torch (a second of start-up) to ask
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=None)
def _cpu_only_torch() -> bool:
    """The installed torch is a CPU build (its version's local label is `cpu`, e.g. 2.13.0+cpu)."""
    from importlib import metadata

    try:
        return metadata.version("torch").partition("+")[2] == "cpu"
    except metadata.PackageNotFoundError:
        return False


@lru_cache(maxsize=None)
def host() -> dict:
    """Where a stage ran, for every manifest (no torch import): CPU model, vector-ISA flags, usable
    cores, torch version, and this machine's precision decision when one was taken. Float results
    may differ in the last bits between CPUs; `csk verify --against` and `csk runs --diff` name it."""
    from csk.precision import cpu_flags

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    info: dict[str, Any] = {"cpu": cpu_model(), "flags": cpu_flags(), "cores": cores}
    try:
        info["torch"] = metadata.version("torch")
    except metadata.PackageNotFoundError:
        info["torch"] = None
    return info


def host_record() -> dict:
    """`host()` with the precision decisions this process took (device kind -> precision, decision id)."""
    from csk.precision import _DECISIONS

    out = dict(host())
    waits = {k: os.environ[k] for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if k in os.environ}
    if waits:  # how idle OpenMP threads wait (csk/__init__.py): time beside a busy neighbour, never bytes
        out["openmp_wait"] = waits
    if _DECISIONS:
        out["precision"] = {k: {"precision": d["precision"], "id": d["id"]} for k, d in sorted(_DECISIONS.items())}
    return out


@lru_cache(maxsize=None)
def machine() -> dict:
    """The CPU (or GPU) facts that decide kernels and precision, for manifests and benchmarks."""
    import torch

    info = {"cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


@lru_cache(maxsize=None)
def matmul_rates(dev: str = "cpu", m: int = 128, k: int = 384, n: int = 384, budget_s: float = 0.05) -> dict:
    """Measured GFLOP/s of an (m x k) @ (k x n) matmul in fp32 and bf16 on `dev` (once per process), for
    benchmarks' reports. Not a precision decision: at small shapes it measures call overhead, and two
    processes read it differently (`csk.precision` decides)."""
    import torch

    out = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(m, k, device=dev).to(dtype)
        b = torch.randn(k, n, device=dev).to(dtype)
        with torch.inference_mode():
            torch.matmul(a, b)  # warm-up (kernel selection)
            if dev.startswith("cuda"):
                torch.cuda.synchronize()
            reps, t0 = 0, time.perf_counter()
            while True:
                torch.matmul(a, b)
                reps += 1
                if dev.startswith("cuda"):
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - t0
                if elapsed >= budget_s:
                    break
        out[name] = round(2 * m * k * n * reps / elapsed / 1e9, 2)
    return out


def bf16_faster(dev: str = "cpu") -> tuple[bool, dict]:
    """(bf16 is clearly faster here, the measurement): this machine's one decision (`csk.precision`)."""
    from csk.precision import decision

    d = decision(dev)
    return d["precision"] == "bf16", d


def precision(requested: str, dev: str, agreement: Callable[[], float] | None = None,
              min_agreement: float = 0.999) -> dict:
    """Decide fp32 or bf16. `requested` "fp32"/"bf16" is obeyed; "auto" takes this machine's decision
    (`csk.precision.decision`: measured once at the embedder's shapes, cached), and bf16 only when
    `agreement()` (the caller's probe of its own texts: min cosine vs fp32) also reaches
    `min_agreement`. The probe is a function of the stage's inputs, which are in its key."""
    if requested in ("fp32", "bf16"):
        return {"precision": requested, "requested": requested, "why": "set in the configuration"}
    if requested != "auto":
        raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', got {requested!r}")
    from csk.precision import decision as machine_decision

    d = machine_decision(dev)
    decision: dict[str, Any] = {"requested": "auto", "device": dev, "machine_decision": d["id"],
                                "speedup": d.get("speedup", d.get("screen_speedup")), **machine()}
    if d["precision"] != "bf16":
        return {**decision, "precision": "fp32", "why": d["why"]}
    if agreement is None:
        return {**decision, "precision": "bf16", "why": d["why"]}
    agree = float(agreement())
    decision["bf16_min_cosine_vs_fp32"] = agree
    if agree < min_agreement:
        return {**decision, "precision": "fp32", "why": f"bf16 disagrees with fp32 (cosine {agree:.5f} < {min_agreement})"}
    return {**decision, "precision": "bf16", "why": f"{d['why']}; agrees with fp32 (cosine {agree:.5f})"}


# ------------------------------------------------------------------ seeded generators
_THREADS = {"fixed": 0}


def set_threads(n: int) -> None:
    """`[runtime] threads`: the count every stage computes with from now on (0: this machine's CPUs)."""
    if n < 0:
        raise ValueError(f"runtime.threads must be 0 (this machine's CPUs) or a count, got {n}")
    _THREADS["fixed"] = int(n)


def training_threads() -> int:
    """The intra-op thread count every stage runs with: `[runtime] threads` when set, else the CPUs this
    process may use, whatever OMP_NUM_THREADS, a Dask worker (one thread each) or an earlier stage set.
    Training sums gradients in an order the thread count decides, so another count is another model:
    fixed, the local, one-thread and Dask runs train the same one (and the count is in such a stage's
    key). The count, not the cores: 2 threads on 1 core sum in the order 2 threads on 2 cores do."""
    if _THREADS["fixed"]:
        return _THREADS["fixed"]
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextmanager
def fixed_threads(n: int):
    """Run the block with `n` torch intra-op threads, then restore the count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)


# Packages whose kernels run on the intra-op threads the runtime fixes (torch and what runs on it, faiss's
# OpenMP): a float reduction there is summed in an order the thread count decides (bf16 embeddings on 1 and
# 2 threads differed in the last bit on an AMD EPYC). A stage whose code (`csk.codehash.closure`) can run one
# of them, or that trains, has the thread count in its key; any other stage computes the same bytes on any
# count, so its artifact is reused on a machine with another core count (`Stage.threads_matter`).
THREADED = ("torch", "faiss", "sentence_transformers", "transformers")


def trains(fn):
    """Marks a stage function that trains a model (or solves one by iterative optimisation). Like every
    stage it runs with `training_threads()` threads, keyed by that count; the mark says why it matters most."""
    fn.trains = True
    return fn


def rng(seed: int, *key: Any) -> np.random.Generator:
    """The generator for one keyed random choice (a dialogue, an instance, an iteration): it depends on
    the seed and the key only, so a row's draws do not depend on which other rows are in the run."""
    digest = hashlib.sha256(":".join(str(k) for k in (seed, *key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


# ------------------------------------------------------------------ files
def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def jsonl_bytes(records: Iterable[dict]) -> bytes:
    """JSON Lines as released datasets write them: one object a line, UTF-8, no ASCII escaping."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
