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

`--full` runs the whole stage's loop instead (`aflite_rounds`: every round until fewer than k qualify, the
paper's m = 64, k = 500, tau = 0.75) at growing sizes up to the published one, with each size's seconds,
rounds, peak memory and two floors beside it: the same rounds' matrix products at the machine's GEMM rate
(the L-BFGS evaluations counted: 4 m R d FLOPs each, 2 m R d for the held-out predictions), and the
scikit-learn loop (one LogisticRegression per probe per round) projected from `--baseline-probes` fits.
A share `--easy` of the synthetic instances has its gold choice nudged strongly toward its context (what
AF-Lite should remove), the rest not at all.

    python bench/bench_aflite.py --full --sizes 2500 10000 40000 [--easy 0.3]

`--real MCQA.parquet` runs the whole loop on real instances instead (a run's `mcqa_instances` artifact, e.g.
`csk run corequisite --release PaCo_nli_train_sample.csv --until mcqa_instances`, or `--release DIR` for a
directory of PaCo files, 31,627 instances from the real P-NLI sample and PaCo_Gen.csv; the features from the
stage's embedder), beside the synthetic loop at the same size, the same loop with the solvers before
(`--baseline-solver`: whitened but every round from zero, the diagonal scaling before it, no preconditioning),
and scikit-learn's LogisticRegression on the real features of the
first round (`--baseline-probes` fits, projected to m): seconds, rounds, L-BFGS iterations a round, kept.

    python bench/bench_aflite.py --real store/corequisite/mcqa_instances/KEY/data.parquet [--baseline-solver]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench import PeakMemory, machine_line  # noqa: E402
from bench.scale import gemm_rates  # noqa: E402
from tasks.distractors.aflite import aflite_rounds  # noqa: E402
from tasks.distractors.discriminators import LinearProbe, ProbeFamily, probe_features  # noqa: E402


def instances(n: int, choices: int, seed: int = 0, easy: float | None = None):
    """n instances of `choices` unit vectors; the gold one (0) nudged 0.6 toward its context, or with `easy`:
    that share of instances nudged 1.2 (predictable), the others not at all (no signal to learn)."""
    rng = np.random.default_rng(seed)
    vec = {}
    contexts, options = [], []
    for i in range(n):
        c = rng.normal(size=384).astype(np.float32)
        vec[f"c{i}"] = c / np.linalg.norm(c)
        nudge = 0.6 if easy is None else (1.2 if rng.random() < easy else 0.0)
        opts = []
        for j in range(choices):
            e = rng.normal(size=384).astype(np.float32) + (nudge * c if j == 0 else 0)
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
    ap.add_argument("--full", action="store_true", help="every round of the stage's loop, not one round")
    ap.add_argument("--easy", type=float, default=0.3, help="--full: share of predictable instances")
    ap.add_argument("--real", type=Path, default=None, help="an mcqa_instances data.parquet: the loop on real instances")
    ap.add_argument("--baseline-solver", action="store_true",
                    help="--real: also the loop with each round cold, with the diagonal scaling before, and with neither")
    args = ap.parse_args()
    print(machine_line())
    gemm = gemm_rates()["fp32"]  # the machine's best plain fp32 matmul (bench/scale.py's reading)
    print(f"fp32 GEMM (best of bench.scale's shapes): {gemm:.0f} GFLOP/s")
    if args.real:
        return real_runs(args)
    if args.full:
        return full_runs(args, gemm)
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


def _loop(label: str, contexts, options, vector, m: int, **kw) -> dict:
    with PeakMemory() as peak:
        t0 = time.perf_counter()
        removed, history = aflite_rounds(contexts, options, np.zeros(len(contexts), dtype=int), vector, m=m, **kw)
        took = time.perf_counter() - t0
    iters = [h["lbfgs_iterations"] for h in history]
    print(f"{label:<34} {len(contexts):>9} {len(history):>6} {len(contexts) - len(removed):>6} {took:>9.1f} "
          f"{took / max(1, len(history)):>8.1f} {min(iters):>4}-{max(iters):<4} {peak.mib:>8.0f}", flush=True)
    return {"seconds": took, "rounds": len(history), "removed": set(removed)}


def real_runs(args) -> None:
    """The whole loop on a run's real P-MCQA instances, beside synthetic ones of the same size (and the solver
    before), and scikit-learn's own fit of one probe on the same features."""
    import pandas as pd

    from tasks.embed import EmbedSpec, vector_lookup

    mcq = pd.read_parquet(args.real)
    contexts = mcq["context"].tolist()
    options = [[g] + list(d) for g, d in zip(mcq["gold"], mcq["distractors"])]
    t0 = time.perf_counter()
    vector = vector_lookup(contexts + [c for ch in options for c in ch], EmbedSpec(), None)
    print(f"{args.real}: {len(mcq)} instances, {sum(map(len, options))} (context, choice) rows; features "
          f"({EmbedSpec().model}) {time.perf_counter() - t0:.0f} s, not counted below")
    print(f"{'loop':<34} {'instances':>9} {'rounds':>6} {'kept':>6} {'seconds':>9} {'s/round':>8} {'iters':>9} "
          f"{'peak MiB':>8}")
    real = _loop("real, the stage's solver", contexts, options, vector, args.m)
    width = max(map(len, options))
    c, o, v = instances(len(mcq), width, easy=args.easy)
    synth = _loop(f"synthetic ({args.easy:.0%} easy), same size", c, o, v, args.m)
    print(f"# real / synthetic: {real['seconds'] / synth['seconds']:.2f}x the seconds, "
          f"{real['seconds'] / real['rounds'] / (synth['seconds'] / synth['rounds']):.2f}x a round")
    if args.baseline_solver:
        for label, kw in (("real, whitened, each round cold", {"warm_start": False}),
                          ("real, diagonal scaling (before)", {"precondition": "diagonal", "warm_start": False}),
                          ("real, no preconditioning", {"precondition": "none", "warm_start": False})):
            base = _loop(label, contexts, options, vector, args.m, **kw)
            same = len(base["removed"] & real["removed"])
            print(f"# the stage's solver / {label.removeprefix('real, ')}: {real['seconds'] / base['seconds']:.2f}x the "
                  f"seconds; removed {len(real['removed'])} vs {len(base['removed'])}, {same} the same instances")
    rng = np.random.default_rng(1)
    b = min(args.baseline_probes, args.m)
    LinearProbe(vector).fit(contexts[:50], options[:50], [0] * 50)  # scikit-learn's imports: not timed
    t0 = time.perf_counter()
    for _ in range(b):
        idx = rng.choice(len(mcq), len(mcq) // 2, replace=False)
        LinearProbe(vector).fit([contexts[i] for i in idx], [options[i] for i in idx], [0] * len(idx))
    per = (time.perf_counter() - t0) / b
    print(f"# scikit-learn LogisticRegression, one probe on the first round's real subset: {per:.1f} s; the round's "
          f"{args.m} probes {per * args.m:.0f} s against the stage's first round "
          f"(~{real['seconds'] / real['rounds']:.1f} s a round on average)")


def full_runs(args, gemm: float) -> None:
    """Every round of AF-Lite at each size, against its GEMM floor and the scikit-learn loop."""
    print(f"{'instances':>9} {'rounds':>6} {'kept':>6} {'AF-Lite s':>9} {'s/round':>8} {'peak MiB':>8} "
          f"{'GEMM floor s':>12} {'ratio':>6} {'sklearn s (projected)':>21} {'ratio':>7}")
    done = []
    c, o, v = instances(200, args.choices)
    LinearProbe(v).fit(c, o, [0] * len(c))  # scikit-learn's first fit pays its imports: not timed
    for n in args.sizes:
        contexts, options, vector = instances(n, args.choices, easy=args.easy)
        with PeakMemory() as peak:
            t0 = time.perf_counter()
            removed, history = aflite_rounds(contexts, options, np.zeros(n, dtype=int), vector, m=args.m)
            took = time.perf_counter() - t0
        d = 3 * 384
        flops = sum((4 * h["lbfgs_evaluations"] + 2) * args.m * h["instances"] * args.choices * d for h in history)
        floor = flops / gemm / 1e9
        # the scikit-learn loop: a fit per probe per round, timed on the first round's subsets
        rng = np.random.default_rng(1)
        b = min(args.baseline_probes, args.m)
        t0 = time.perf_counter()
        for _ in range(b):
            idx = rng.choice(n, n // 2, replace=False)
            LinearProbe(vector).fit([contexts[i] for i in idx], [options[i] for i in idx], [0] * len(idx))
        per = (time.perf_counter() - t0) / b  # at the first round's size; later rounds are smaller
        sizes = np.array([h["instances"] for h in history])
        sk = per * args.m * (sizes / n).sum()
        print(f"{n:>9} {len(history):>6} {n - len(removed):>6} {took:>9.1f} {took / len(history):>8.1f} "
              f"{peak.mib:>8.0f} {floor:>12.1f} {took / floor:>5.1f}x {sk:>21.0f} {sk / took:>6.1f}x", flush=True)
        done.append((n, took, len(history), floor, sk))
    after = gemm_rates()["fp32"]  # a neighbour may have been busy at the first reading: the floor is the best rate seen
    if after > gemm:
        print(f"# fp32 GEMM read {after:.0f} GFLOP/s after the sizes: against it the floors are "
              + ", ".join(f"{f * gemm / after:.1f} s ({t / (f * gemm / after):.1f}x)" for _, t, _, f, _ in done))
    if len(done) >= 2:
        (n0, t0_, r0, *_), (n1, t1, r1, *_) = done[0], done[-1]
        print(f"# growth {n0} -> {n1} instances: time ~ n^{np.log(t1 / t0_) / np.log(n1 / n0):.2f}, "
              f"rounds ~ n^{np.log(r1 / r0) / np.log(n1 / n0):.2f}, a round ~ n^"
              f"{np.log(t1 / r1 / (t0_ / r0)) / np.log(n1 / n0):.2f}")


if __name__ == "__main__":
    main()
