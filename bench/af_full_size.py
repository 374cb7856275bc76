"""AF with the fine-tuned (cached) discriminator at the full CICERO size: peak memory and seconds per
round for 53K instances on this machine.

    python bench/af_full_size.py --instances I.parquet --candidates C.parquet [--size 53000] [--rounds 1]
        [--model M] [--trainable-layers N] [--max-length N] [--epochs N] [--cache-dir DIR] [--out results.txt]

I / C: the `mcq_file` (or `instances`) and `candidate_filter` artifacts of a run, e.g.
`csk distractors rebuild --input cicero_v2_val_sample.jsonl --preset cicero`. Their instances are
repeated with new ids until there are --size of them; every copy's context is made distinct (a copy
number in front), so no (context, choice) pair is shared between copies: the activation cache holds as
many pairs as the real dataset would, and the memory figure is honest. The CPU model comes first.

Settings the command line leaves out are the stage's own (`csk distractors rebuild`'s
adversarial_filter: pipelines.toml, else the stage's signature), and each context is the reading window
the stage gives its discriminator (question, target, the nearest utterances that fit max_length).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench import machine_line, reporter, rss_gib  # noqa: E402
from csk import compute  # noqa: E402
from csk.models import resolve_model  # noqa: E402
from tasks.distractors.adversarial import af_loop  # noqa: E402
from tasks.distractors.discriminators import CachedTransformerMC, FrozenLower  # noqa: E402
from tasks.distractors.window import reading_windows  # noqa: E402


def repeat(inst: pd.DataFrame, cands: pd.DataFrame, size: int) -> tuple[pd.DataFrame, dict]:
    """`size` instances: the sample's, then copies with new ids, groups and a distinct context."""
    pools = {i: list(zip(g["id"], g["candidate"])) for i, g in cands.groupby("instance_id", sort=False)}
    base = inst[inst["id"].isin(pools)].reset_index(drop=True)
    parts, out_pools = [], {}
    copies = -(-size // len(base))
    for k in range(copies):
        part = base.copy()
        if k:
            part["id"] = [f"{i}~copy{k}" for i in base["id"]]
            part["group_id"] = [f"{g}~copy{k}" for g in base["group_id"]]
            part["context"] = [f"(copy {k}) {c}" for c in base["context"]]
        for old, new in zip(base["id"], part["id"]):
            out_pools[new] = [(f"{cid}~{k}", text) for cid, text in pools[old]]
        parts.append(part)
    view = pd.concat(parts, ignore_index=True).head(size)
    return view, {i: out_pools[i] for i in view["id"]}


PIPELINE = "distractors"  # a pipelines.toml table (`csk distractors rebuild`), not a model: its model is resolved offline


def stage_settings() -> dict:
    """The adversarial_filter settings `csk distractors rebuild` runs with (pipelines.toml over the stage's
    signature): what the bench measures unless the command line says otherwise."""
    from csk.config import load_config
    from csk.pipeline import get_pipeline

    pipeline = get_pipeline(PIPELINE)
    cfg = load_config(Path(__file__).resolve().parent.parent / "pipelines.toml", [])[PIPELINE]
    return pipeline.stage_params(pipeline.stage("adversarial_filter"), cfg)


def windows(inst: pd.DataFrame, cands: pd.DataFrame, model: str, max_length: int) -> pd.DataFrame:
    """The instances with the contexts the stage's discriminator reads (tasks/distractors/window.py)."""
    pools = cands.groupby("instance_id", sort=False)["candidate"].apply(list).to_dict()
    context, reads = reading_windows(inst, [[g] + pools.get(i, []) for i, g in zip(inst["id"], inst["gold"])],
                                     "cached-transformer", model=model, embed=None, max_length=max_length,
                                     setting="--model")
    print(f"reading windows ({max_length} tokens): {json.dumps(reads, default=str)[:400]}", flush=True)
    return inst.assign(context=context)


def forward_floor(model_dir: str, view: pd.DataFrame, pools: dict, n_pairs: int, precision: str, max_length: int,
                  sample: int = 2048, batch: int = 64) -> float:
    """Seconds for one plain full forward pass (transformers' AutoModel, the same precision and max_length) of
    `n_pairs` (context, choice) pairs, timed on the first `sample` pairs and projected: the round's floor, since a
    round computes every new pair's lower layers at least once."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    pairs = [(ctx, text) for i, ctx, ch in zip(view["id"], view["context"], view["choices"])
             for text in [t for _, t in pools[i]] + list(ch)][:sample]
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).eval()
    t0 = time.perf_counter()
    with torch.inference_mode(), compute.autocast(precision, "cpu"):
        for a in range(0, len(pairs), batch):
            enc = tok([c for c, _ in pairs[a:a + batch]], [t for _, t in pairs[a:a + batch]], truncation=True,
                      max_length=max_length, padding=True, return_tensors="pt")
            model(**enc)
    return (time.perf_counter() - t0) * n_pairs / len(pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--size", type=int, default=53000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--model", default=None)
    ap.add_argument("--trainable-layers", type=int, default=None)
    ap.add_argument("--max-length", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    stage = stage_settings()
    for name in ("model", "trainable_layers", "max_length", "epochs"):
        if getattr(args, name) is None:
            setattr(args, name, stage[name])
    say, lines = reporter()
    machine = compute.machine()
    say(machine_line())
    inst, cands = pd.read_parquet(args.instances), pd.read_parquet(args.candidates)
    inst = windows(inst, cands, args.model, args.max_length)
    view, pools = repeat(inst, cands, args.size)
    pairs = sum(len(pools[i]) + len(c) for i, c in zip(view["id"], view["choices"]))
    say(f"{len(view)} instances ({view['group_id'].nunique()} groups) from {inst['id'].nunique()} of the sample, "
        f"{pairs} (context, choice) pairs at most; encoder {args.model}, top {args.trainable_layers} layer(s) + head "
        f"trained, {args.epochs} epochs, max_length {args.max_length}")
    peak = {"rss": rss_gib(), "file": rss_gib("RssFile")}
    done = threading.Event()

    def watch():  # resident memory sampled every second: the peak the machine must hold
        while not done.wait(1.0):
            peak["rss"] = max(peak["rss"], rss_gib())
            peak["file"] = max(peak["file"], rss_gib("RssFile"))

    threading.Thread(target=watch, daemon=True).start()
    if args.cache_dir:
        Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    lower = FrozenLower(str(resolve_model(args.model, "encoder", "--model")), trainable_layers=args.trainable_layers,
                        max_length=args.max_length, cache_dir=args.cache_dir)
    say(f"precision: {lower.precision} (this machine's decision); activations on disk in {lower.cache.directory}")
    stamps = [time.perf_counter()]

    def log(msg):
        stamps.append(time.perf_counter())
        say(f"  {msg}  [{stamps[-1] - stamps[-2]:.0f} s; cache {lower.cache.nbytes / 2**30:.2f} GiB on disk, "
            f"{len(lower.cache)} pairs; peak memory held {peak['rss']:.2f} GiB, mapped file pages "
            f"{peak['file']:.2f} GiB]")

    _, history = af_loop(view, pools, lambda round_seed=args.seed: CachedTransformerMC(
        lower, epochs=args.epochs, seed=round_seed), max_iterations=args.rounds, window=args.rounds + 1,
        seed=args.seed, log=log)
    done.set()
    seconds = np.diff(stamps).tolist()
    peak_all = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    say(f"seconds per round {[round(s) for s in seconds]} (round 1 includes the lower layers of every pair it saw: "
        f"{lower.computed} pairs); activations on disk {lower.cache.nbytes / 2**30:.2f} GiB; peak memory held "
        f"(RssAnon) {peak['rss']:.2f} GiB; peak RSS with the page cache's mapped activations {peak_all:.2f} GiB")
    floor = forward_floor(str(resolve_model(args.model, "encoder", "--model")), view, pools, lower.computed,
                          lower.precision, args.max_length)
    say(f"floor: one plain forward pass of the full encoder for each of the {lower.computed} pairs ({lower.precision}, "
        f"max_length {args.max_length}, timed on 2048, projected): {floor:.0f} s; round 1 = {seconds[0] / floor:.1f}x it")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"machine": machine, "instances": len(view), "pairs": pairs, "round_s": seconds,
             "held_out_accuracy": [h["held_out_accuracy"] for h in history], "cache_gib": lower.cache.nbytes / 2**30,
             "pairs_computed": lower.computed, "peak_anon_gib": peak["rss"], "peak_rss_gib": peak_all, "settings": vars(args)}, indent=2))


if __name__ == "__main__":
    main()
