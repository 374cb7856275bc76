"""AF-Lite's probes: the stage's `ProbeFamily` (features once, the m logistic regressions solved
together by torch's L-BFGS, held-out predictions from one matrix product) against the loop it
replaces (one scikit-learn LogisticRegression per probe on its subset, features rebuilt per probe),
side by side in one process, one AF-Lite round each, at growing numbers of instances.

Instances are synthetic: 384-d vectors (all-MiniLM-L6-v2's width) for a context and `--choices`
choices, the gold one nudged toward its context so the probes learn something. Cost depends on the
shapes, not on the texts. The baseline fits `--baseline-probes` probes and is projected to m (its
probes are independent and alike); the agreement of the two on those probes' held-out argmax
predictions is printed beside the times. Prints the CPU and the machine's fp32 GEMM rate.

    python bench/bench_aflite.py [--sizes 300 3000 26000] [--m 64] [--baseline-probes 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from csk import compute
from tasks.distractors.discriminators import LinearProbe, ProbeFamily, probe_features


def instances(n: int, choices: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    vec = {}
    contexts, options = [], []
    for i in range(n):
        c = rng.normal(size=384).astype(np.float32)
        vec[f"c{i}"] = c / np.linalg.norm(c)
        opts = []
        for j in range(choices):
            e = rng.normal(size=384).astype(np.float32) + (0.6 * c if j == 0 else 0)
            vec[f"c{i}/{j}"] = e / np.linalg.norm(e)
            opts.append(f"c{i}/{j}")
        contexts.append(f"c{i}")
        options.append(opts)
    return contexts, options, vec.__getitem__


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 3000, 26000])
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--choices", type=int, default=4)
    ap.add_argument("--baseline-probes", type=int, default=4)
    args = ap.parse_args()
    import torch

    print(f"CPU: {compute.cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    a = torch.randn(2048, 2048)
    t0 = time.perf_counter()
    for _ in range(5):
        a @ a
    gemm = 5 * 2 * 2048 ** 3 / (time.perf_counter() - t0) / 1e9
    print(f"fp32 GEMM 2048^3: {gemm:.0f} GFLOP/s")
    print(f"{'instances':>9} {'family s':>9} {'iters':>6} {'sklearn s/probe':>15} {'sklearn s (m)':>13} "
          f"{'ratio':>7} {'agree':>6}")
    for n in args.sizes:
        contexts, options, vector = instances(n, args.choices)
        gold = np.zeros(n, dtype=int)
        rng = np.random.default_rng(1)
        train = np.zeros((args.m, n), dtype=bool)
        for k in range(args.m):
            train[k, rng.choice(n, n // 2, replace=False)] = True
        t0 = time.perf_counter()
        family = ProbeFamily(*probe_features(vector, contexts, options))
        predicted = family.fit_predict(train, gold)
        fam = time.perf_counter() - t0
        b = min(args.baseline_probes, args.m)
        t0 = time.perf_counter()
        agree = []
        for k in range(b):  # the loop AF-Lite ran before: one scikit-learn fit per probe
            idx = np.flatnonzero(train[k])
            held = np.flatnonzero(~train[k])
            probe = LinearProbe(vector).fit([contexts[i] for i in idx], [options[i] for i in idx], [0] * len(idx))
            scores = probe.score([contexts[i] for i in held], [options[i] for i in held])
            agree.append(np.mean([int(np.argmax(s)) == predicted[k, i] for i, s in zip(held, scores)]))
        per = (time.perf_counter() - t0) / b
        print(f"{n:>9} {fam:>9.2f} {family.iterations:>6} {per:>15.2f} {per * args.m:>13.1f} "
              f"{per * args.m / fam:>6.1f}x {np.mean(agree):>6.3f}", flush=True)


if __name__ == "__main__":
    main()
