"""One place for what every stage repeats: device, precision, seeded generators, hashing, JSON Lines.

Precision is chosen by measurement on the machine at hand, never by assumption: the CPUs
this project runs on differ by two orders of magnitude in bf16 (an AMX Xeon ran bf16 matmul
2.9x faster than fp32; an AVX2-only EPYC ran it 175x slower). `precision("auto", ...)` picks
bf16 only where it is measured faster AND agrees with fp32 on the caller's probe; the
decision, the measured rates and the CPU go into the stage's manifest.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

# The speed-up bf16 must show before it is used: below this, rounding is not worth it.
MIN_BF16_SPEEDUP = 1.1


def device(requested: str = "auto") -> str:
    """"auto": CUDA when a GPU is visible, else CPU; anything else is taken as given."""
    if requested != "auto":
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
    """Measured GFLOP/s of an (m x k) @ (k x n) matmul in fp32 and bf16 on `dev` (once per process).

    The shape is that of a small transformer's projections; each precision runs for about
    `budget_s` after a warm-up, so a slow emulated bf16 costs a fraction of a second to find out."""
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
    rates = matmul_rates(dev)
    return rates["bf16"] >= MIN_BF16_SPEEDUP * rates["fp32"], rates


def precision(requested: str, dev: str, agreement: Callable[[], float] | None = None,
              min_agreement: float = 0.999) -> dict:
    """Decide fp32 or bf16. `requested` "fp32"/"bf16" is obeyed; "auto" measures: bf16 only when it
    is faster here and `agreement()` (the caller's probe: min cosine vs fp32) reaches `min_agreement`."""
    if requested in ("fp32", "bf16"):
        return {"precision": requested, "requested": requested, "why": "set in the configuration"}
    if requested != "auto":
        raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', got {requested!r}")
    faster, rates = bf16_faster(dev)
    decision: dict[str, Any] = {"requested": "auto", "matmul_gflops": rates, "device": dev, **machine()}
    if not faster:
        return {**decision, "precision": "fp32",
                "why": f"bf16 matmul is not faster here ({rates['bf16']} vs {rates['fp32']} GFLOP/s fp32)"}
    if agreement is None:
        return {**decision, "precision": "bf16", "why": "bf16 matmul is faster here"}
    agree = float(agreement())
    decision["bf16_min_cosine_vs_fp32"] = agree
    if agree < min_agreement:
        return {**decision, "precision": "fp32", "why": f"bf16 disagrees with fp32 (cosine {agree:.5f} < {min_agreement})"}
    return {**decision, "precision": "bf16",
            "why": f"bf16 is {rates['bf16'] / rates['fp32']:.1f}x faster and agrees (cosine {agree:.5f})"}


def autocast(precision_name: str, dev: str):
    """The autocast context of a precision decision (a no-op for fp32)."""
    import contextlib

    import torch

    if precision_name == "bf16":
        return torch.autocast(device_type=dev.split(":")[0], dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ------------------------------------------------------------------ seeded generators
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
