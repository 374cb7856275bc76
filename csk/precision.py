"""The machine's precision decision: is bf16 clearly faster than fp32 here, at the shapes we run?

One decision per machine and library version, so that one key has one content. It was once
taken by every process from a 0.05 s matmul at a tiny shape (call overhead, not throughput): on
an AVX-512 Xeon two processes read "bf16 4.72 vs fp32 4.81" and "bf16 6.7 vs fp32 5.42" GFLOP/s,
chose differently and wrote different bytes under the same key. Now:

* measured at the shapes the sentence embedder runs on CPU: its passes hold about
  `PLAN_TOKENS` padded tokens (`tasks.embed.BATCH_TOKENS`), through the projections
  and feed-forward layers of the project's 384- and 768-wide encoders (all-MiniLM-L6-v2,
  all-mpnet-base-v2), in fp32 and under bf16 autocast as the stages run them (weights cast
  on the fly, so the cast is paid too);
* long enough to be stable: `ROUNDS` alternating fp32/bf16 trials of about `TRIAL_S` each (the
  order flips each round, so a drift in the machine's speed cancels), on one intra-op thread timed
  by its own CPU time, so that other processes on the machine do not move the answer (wall time
  with two threads under load read AMX's 4x as 1.1-1.2x); the median of the per-round speed-ups decides, and bf16 is taken only when it is at least `MIN_SPEEDUP` x fp32 (a machine
  near parity keeps fp32: rounding is not worth a few percent);
* a quick screen first: where bf16 is emulated (an AVX2-only EPYC ran it 175x slower), a small
  matmul shows it in a fraction of a second and the full measurement is skipped;
* once: cached in `<cache>/precision/<fingerprint>.json`, the fingerprint being the CPU model, its
  vector-ISA flags, torch's CPU capability, the intra-op thread count, the torch version, the GPU and
  the code that measures (`measuring_code`). Every later process on the machine reads the same answer (`csk precision` shows it,
  `csk precision --refresh` measures again); within a process the first answer is kept.

The runtime resolves `precision = "auto"` settings to this decision before it computes a stage's
key (`csk.store.Store.plan`), so a different decision can only give a different key; shards of
a Dask run receive the flow's resolved precision as a parameter and never decide for themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

METHOD = 2  # how the decision is measured; a new method measures again (2: one thread, its CPU time)
MIN_SPEEDUP = 1.2  # bf16 only when clearly faster
EMULATED_BELOW = 0.25  # quick screen: bf16 this much slower is emulated; no need to measure further
ROUNDS = 7
TRIAL_S = 0.08
PLAN_TOKENS = 1024  # tasks.embed.BATCH_TOKENS["cpu"]
WIDTHS = (384, 768)  # all-MiniLM-L6-v2, all-mpnet-base-v2
ISA_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4", "asimd", "sve", "neon")

_DECISIONS: dict[str, dict] = {}  # device kind -> the decision this process uses


def shapes(tokens: int = PLAN_TOKENS, widths: tuple[int, ...] = WIDTHS) -> tuple[tuple[int, int, int], ...]:
    """(m, k, n) of one encoder layer's linear maps a forward pass of the batch plan runs: the four
    h x h projections share a shape, then the 4h feed-forward in and out."""
    out = []
    for h in widths:
        out += [(tokens, h, h), (tokens, h, 4 * h), (tokens, 4 * h, h)]
    return tuple(out)


@lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def autocast(precision_name: str, dev: str):
    """The autocast context of a precision decision (a no-op for fp32)."""
    import contextlib

    import torch

    if precision_name == "bf16":
        return torch.autocast(device_type=dev.split(":")[0], dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_flags() -> list[str]:
    """The CPU's vector-ISA flags (what decides bf16 kernels), from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return sorted({f for f in line.split(":", 1)[1].split() if f.startswith(ISA_PREFIXES)})
    except OSError:
        pass
    return []


def kind(dev: str) -> str:
    return dev.split(":")[0]


def fingerprint(dev: str = "cpu") -> dict:
    """What the decision depends on; a change of any of these measures again."""
    import torch

    fp: dict[str, Any] = {"method": METHOD, "device": kind(dev), "cpu": cpu_model(), "flags": cpu_flags(),
                          "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "threads": torch.get_num_threads(), "torch": torch.__version__,
                          "shapes": [list(s) for s in shapes()], "code": measuring_code()}
    if kind(dev) == "cuda":
        fp["gpu"] = torch.cuda.get_device_name(torch.device(dev))
        fp["cuda"] = torch.version.cuda
    return fp


def measuring_code() -> str:
    """The code that measures and decides (this module and the project modules it imports, without their
    docstrings and comments: `csk.codehash`): an edit of a trial, a threshold or the rule measures again."""
    from csk import codehash

    return codehash.code_hash((__name__,))


def fingerprint_id(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """$CSK_CACHE_DIR, else $XDG_CACHE_HOME/csk, else ~/.cache/csk."""
    if os.environ.get("CSK_CACHE_DIR"):
        return Path(os.environ["CSK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "csk"


def cache_path(fp: dict) -> Path:
    return cache_dir() / "precision" / f"{fingerprint_id(fp)}.json"


def _sync(dev: str) -> None:
    if kind(dev) == "cuda":
        import torch

        torch.cuda.synchronize()


def _runner(dev: str, dims: tuple[tuple[int, int, int], ...]):
    """trial(precision, reps) -> seconds of `reps` passes over every shape, as the stages run them."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(m, k, generator=g).to(dev), torch.randn(n, k, generator=g).to(dev)) for m, k, n in dims]

    # On CPU: one intra-op thread, timed by that thread's own CPU time. bf16's advantage is a property of
    # each core's kernels; wall time on a loaded machine measures the scheduler instead (measured under two
    # busy processes on 2 cores: AMX's 4x read as 1.1-1.2x with 2 threads and wall time, flipping the choice).
    clock = time.perf_counter if kind(dev) == "cuda" else time.thread_time

    def trial(prec: str, reps: int = 1) -> float:
        _sync(dev)
        t0 = clock()
        with torch.inference_mode(), autocast(prec, dev):
            for _ in range(reps):
                for x, w in pairs:
                    F.linear(x, w)
        _sync(dev)
        return clock() - t0

    return trial


def measure(dev: str = "cpu", rounds: int = ROUNDS, trial_s: float = TRIAL_S) -> dict:
    """Measure bf16 against fp32 here (no cache): the quick screen, then alternating trials at the plan's shapes
    (on CPU with one intra-op thread and its CPU time, so other processes on the machine do not move it)."""
    if kind(dev) == "cuda":
        return _measure(dev, rounds, trial_s)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {**_measure(dev, rounds, trial_s), "timed": "one thread, its CPU time"}
    finally:
        torch.set_num_threads(threads)


def _measure(dev: str, rounds: int, trial_s: float) -> dict:
    screen_trial = _runner(dev, ((512, 384, 384),))
    screen_trial("fp32"), screen_trial("bf16")  # warm-up: kernel selection, autocast caches
    t32, t16 = screen_trial("fp32", 8), screen_trial("bf16", 8)
    screen = round(t32 / t16, 4)
    out: dict[str, Any] = {"screen_speedup": screen, "min_speedup": MIN_SPEEDUP, "rounds": rounds}
    if screen < EMULATED_BELOW:
        return {**out, "precision": "fp32",
                "why": f"bf16 is emulated here (a small matmul ran {1 / screen:.0f}x slower than fp32)"}
    dims = shapes()
    trial = _runner(dev, dims)
    trial("fp32"), trial("bf16")  # warm-up at the real shapes
    once = min(trial("fp32"), trial("bf16"))
    reps = max(1, round(trial_s / max(once, 1e-6)))
    ratios, times = [], {"fp32": [], "bf16": []}
    for r in range(rounds):
        order = ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32")
        got = {p: trial(p, reps) for p in order}
        for p, t in got.items():
            times[p].append(t)
        ratios.append(got["fp32"] / got["bf16"])
    flops = 2 * reps * sum(m * k * n for m, k, n in dims)
    speedup = statistics.median(ratios)
    out.update({"speedups": [round(x, 3) for x in ratios], "speedup": round(speedup, 3),
                "gflops": {p: round(flops / statistics.median(ts) / 1e9, 1) for p, ts in times.items()},
                "trial_seconds": round(statistics.median(times["fp32"]), 3)})
    if speedup >= MIN_SPEEDUP:
        return {**out, "precision": "bf16",
                "why": f"bf16 is {speedup:.2f}x fp32 at the embedder's shapes (median of {rounds} trials; needs {MIN_SPEEDUP}x)"}
    return {**out, "precision": "fp32",
            "why": f"bf16 is {speedup:.2f}x fp32 at the embedder's shapes (median of {rounds} trials), below {MIN_SPEEDUP}x"}


def decision(dev: str = "cpu", refresh: bool = False) -> dict:
    """This machine's decision for `dev` ("cpu" or "cuda[:i]"): from this process's memory, else the
    machine's cache, else measured (one process at a time: the others wait and read its answer).
    `refresh` measures again and replaces the cached answer."""
    k = kind(dev)
    if k in _DECISIONS and not refresh:
        return _DECISIONS[k]
    if not refresh:
        known = _known_without_torch(dev)
        if known is not None:
            _DECISIONS[k] = known
            return known
    from filelock import FileLock

    fp = fingerprint(dev)
    path = cache_path(fp)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        found = None if refresh else _read(path, fp)
        if found is None:
            import logging

            logging.getLogger("csk").info("measuring bf16 against fp32 on this machine (once; cached in %s)", path)
            found = {"fingerprint": fp, "id": fingerprint_id(fp),
                     "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "csk": _version(), **measure(dev)}
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, path)
    _remember_without_torch(dev, path.name)
    _DECISIONS[k] = found
    return found


def machine_material(dev: str) -> dict | None:
    """What determines torch's part of the CPU fingerprint, known without importing torch (a second of
    start-up): the CPU, its flags, torch's installed version, the CPUs this process may use and the
    thread / kernel environment variables torch reads. None on a GPU."""
    if kind(dev) != "cpu":
        return None
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    env = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY")}
    return {"method": METHOD, "cpu": cpu_model(), "flags": cpu_flags(), "torch": torch_version, "env": env,
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "shapes": [list(x) for x in shapes()], "code": measuring_code()}


def _machine_key(dev: str) -> Path | None:
    """Where the CPU decision's id is filed under `machine_material`. None on a GPU."""
    key = machine_material(dev)
    if key is None:
        return None
    return cache_dir() / "precision" / "machines" / f"{fingerprint_id(key)}.json"


def _known_without_torch(dev: str) -> dict | None:
    """The decision filed for this machine key, if one was measured: read without importing torch."""
    where = _machine_key(dev)
    try:
        name = json.loads(where.read_text())["file"] if where is not None else None
        found = json.loads((cache_dir() / "precision" / Path(name).name).read_text()) if name else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(found, dict) or found.get("precision") not in ("fp32", "bf16"):
        return None
    return found


def _remember_without_torch(dev: str, decision_file: str) -> None:
    where = _machine_key(dev)
    if where is None:
        return
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = where.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"file": decision_file}) + "\n")
    os.replace(tmp, where)


def _read(path: Path, fp: dict) -> dict | None:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("fingerprint") != fp or found.get("precision") not in ("fp32", "bf16"):
        return None
    return found


def _version() -> str | None:
    try:
        return metadata.version("csk")
    except metadata.PackageNotFoundError:
        return None


def forget() -> None:
    """Drop this process's remembered decisions (tests; `csk precision --refresh`)."""
    _DECISIONS.clear()
