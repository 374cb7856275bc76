"""TextRank's PageRank: the `targets` stage's batched power iteration (`textrank_batch`) against
networkx.pagerank per dialogue (the plain library call it replaces), side by side in one process,
at growing numbers of dialogues of 5-15 utterances (CICERO's bounds), 384-d unit vectors.
Prints the CPU, seconds, the ratio, and the largest score difference.

    python bench/bench_textrank.py [--dialogues 1000 4000 16000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from csk.compute import cpu_model
from tasks.textrank import textrank, textrank_batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues", type=int, nargs="+", default=[1000, 4000, 16000])
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}")
    print(f"{'dialogues':>9} {'networkx s':>10} {'ms/dialogue':>11} {'batched s':>9} {'ratio':>7} {'max |diff|':>10}")
    rng = np.random.default_rng(0)
    for n in args.dialogues:
        blocks = []
        for k in rng.integers(5, 16, n):
            v = rng.normal(size=(k, 384)).astype(np.float32)
            blocks.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        t0 = time.perf_counter()
        ref = [textrank(v) for v in blocks]
        nx_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = textrank_batch(blocks)
        b_s = time.perf_counter() - t0
        diff = max(float(np.abs(a - b).max()) for a, b in zip(ref, got))
        print(f"{n:>9} {nx_s:>10.2f} {1000 * nx_s / n:>11.2f} {b_s:>9.3f} {nx_s / b_s:>6.0f}x {diff:>10.1e}", flush=True)


if __name__ == "__main__":
    main()
