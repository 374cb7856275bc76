"""Benchmark: the dask runner against the local runner, side by side in this one process.

The two sharded kernels that dominate a CICERO rebuild run twice on the same inputs: in this
process (the local runner) and on a LocalCluster through prefect-dask (the dask runner). The
outputs must be the same bytes; the bench prints both wall times and their ratio. On 2 cores two
workers share the cores, so expect about 1x: the point is correctness and the path to more
machines. From the shard times measured here (each shard alone, in this process) it fits a
scaling model for N workers:

    T(N) = LPT(shard times, N) + overhead_per_shard * ceil(shards / N)

(LPT: longest-processing-time scheduling of the shards onto N workers; the overhead per shard,
writing its Parquet input, the Prefect task run and reading the output back, is what the 2-worker
run took beyond LPT(., 2) with its cores shared.) The model assumes one core per worker.

    python bench/bench_dask.py [--texts 4096] [--rows 16384] [--shard-rows 1024] [--workers 2]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.bench_embed_dedup import bench_texts  # noqa: E402
from csk import compute  # noqa: E402
from csk.shards import bounds, cluster, sharding  # noqa: E402


def lpt(times: list[float], workers: int) -> float:
    loads = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heapreplace(loads, loads[0] + t)
    return max(loads)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def kernels(texts: list[str], x: np.ndarray):
    from tasks.dedup import exact_pairs
    from tasks.embed import Embedder

    emb = Embedder({"precision": "fp32"}, cache_dir=None, progress=False)
    t_encode, vectors = timed(lambda: emb.encode(texts))
    t_tiles, pairs = timed(lambda: exact_pairs(x, 0.87, block_size=1024, screen_bf16=False))
    return {"encode": t_encode, "tiles": t_tiles}, vectors, pairs


def shard_times(texts: list[str], x: np.ndarray, shard_rows: int) -> dict[str, list[float]]:
    """Each shard alone, in this process (what a worker computes)."""
    from tasks.dedup import screen_tiles
    from tasks.embed import Embedder, encode_shard

    emb = Embedder({"precision": "fp32"}, cache_dir=None, progress=False)
    passes = emb.plan(texts, "fp32")
    frame = pd.DataFrame({"text": [texts[i] for _, _, idx in passes for i in idx],
                          "pass": np.concatenate([np.full(len(idx), k) for k, (_, _, idx) in enumerate(passes)]),
                          "rows": np.concatenate([np.full(len(idx), r) for r, _, idx in passes]),
                          "padded": np.concatenate([np.full(len(idx), n) for _, n, idx in passes])})
    enc = [timed(lambda a=a, b=b: encode_shard(frame.iloc[a:b], model=str(emb.path), device="cpu",
                                               precision="fp32"))[0]
           for a, b in bounds(len(texts), shard_rows, align=512)]
    blocks = [(r0, min(r0 + 1024, len(x))) for r0 in range(0, len(x), 1024)]
    per = max(1, shard_rows // 1024)
    tiles = [timed(lambda k=k: screen_tiles(pd.DataFrame({"r0": [a for a, _ in blocks[k:k + per]],
                                                          "r1": [b for _, b in blocks[k:k + per]]}),
                                            x=x, threshold=0.87, col_block=8192, screen_bf16=False))[0]
             for k in range(0, len(blocks), per)]
    return {"encode": enc, "tiles": tiles}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--shard-rows", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    m = compute.machine()
    print(f"machine: {m.get('cpu')} ({m.get('cpu_capability')}), {os.cpu_count()} cores; "
          f"texts {args.texts}, vectors {args.rows} x 384, shard_rows {args.shard_rows}, workers {args.workers}")
    texts = bench_texts(args.texts)
    x = np.random.default_rng(0).normal(size=(args.rows, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as tmp, sharding(args.shard_rows, Path(tmp)):
        kernels(texts[:64], x[:2048])  # warm-up: model load, torch init
        local, v_local, p_local = kernels(texts, x)
        with cluster("dask", workers=args.workers, threads_per_worker=1):
            kernels(texts[:1100], x[:3000])  # cluster start and model load on the workers
            dask, v_dask, p_dask = kernels(texts, x)
        same = v_local.tobytes() == v_dask.tobytes() and all(a.tobytes() == b.tobytes() for a, b in zip(p_local, p_dask))
        per_shard = shard_times(texts, x, args.shard_rows)
    print(f"outputs identical (bytes): {same}")
    print(f"{'kernel':8} {'shards':>6} {'local s':>8} {'dask s':>8} {'speed-up':>8}")
    for k in local:
        print(f"{k:8} {len(per_shard[k]):>6} {local[k]:>8.2f} {dask[k]:>8.2f} {local[k] / dask[k]:>7.2f}x")
    print("\nscaling model (seconds; one core per worker):")
    ns = [1, 2, 4, 8, 16, 32]
    print(f"{'kernel':8} {'overhead/shard':>14} " + " ".join(f"{f'N={n}':>8}" for n in ns))
    for k, times in per_shard.items():
        # measured with 2 workers sharing 2 cores: each shard ran at ~cores/(workers*threads) speed
        share = max(1.0, args.workers * torch_threads() / (os.cpu_count() or 1))
        overhead = max(0.0, (dask[k] - lpt([t * share for t in times], args.workers))
                       / math.ceil(len(times) / args.workers))
        row = [lpt(times, n) + overhead * math.ceil(len(times) / n) for n in ns]
        print(f"{k:8} {overhead:>13.3f}s " + " ".join(f"{t:>8.2f}" for t in row))
    print("shard count bounds the speed-up: more input (or a smaller shard_rows) gives more shards to spread.")


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
