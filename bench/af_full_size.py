"""AF at the full CICERO size through the stage itself (`adversarial_filter` with the stage's defaults:
the cached discriminator, the ending-only adversary, the caps), resumable: seconds and peak memory per
round for 53K instances on this machine.

    python bench/af_full_size.py --instances I.parquet --candidates C.parquet --work DIR [--size 53000]
        [--rounds 2] [--model M] [--trainable-layers N] [--max-length N] [--epochs N] [--out results.txt]

I / C: the `mcq_file` (or `instances`) and `candidate_filter` artifacts of a run, e.g.
`csk distractors rebuild --input cicero_v2_val_sample.jsonl --preset cicero`. Their instances are
repeated with new ids until there are --size of them; every copy's context and question are made distinct
(a copy number in front: the stage reads its window from question, target and passage), so no (context,
choice) pair is shared between copies: the activation cache holds as
many pairs as the real dataset would, and the memory figure is honest. Each copy is its own split, so the
stage's reuse cap (one text in at most max_reuse items of a split) binds as it would on one real split.

DIR holds the stage's checkpoint (AF's state after every round, its activation store committed block by
block) and `rounds.jsonl` (a line per finished round: seconds, peak memory, the load beside it): the same
command again resumes where a killed or ended session stopped, so two whole rounds at 53K (hours on 2 cores)
are measured across sessions. A round counts as measured whole only when one process ran all of it
(`whole`); a round resumed mid-way says how many activations an earlier process had computed for it.

Settings the command line leaves out are the stage's own (`csk distractors rebuild`'s
adversarial_filter: pipelines.toml, else the stage's signature).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from bench import machine_line, reporter, rss_gib  # noqa: E402
from csk import compute  # noqa: E402


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
            if "question" in part.columns:  # the stage builds its reading window from question, target, passage
                part["question"] = [f"(copy {k}) {q}" for q in base["question"]]
        part["split"] = f"copy{k}"
        for old, new in zip(base["id"], part["id"]):
            out_pools[new] = [(f"{cid}~{k}", text) for cid, text in pools[old]]
        parts.append(part)
    view = pd.concat(parts, ignore_index=True).head(size)
    return view, {i: out_pools[i] for i in view["id"]}


def candidate_frame(cands: pd.DataFrame, pools: dict) -> pd.DataFrame:
    """The candidate_filter rows of every copy (its generator, rule and rationale), ids as in `pools`."""
    ids = pd.DataFrame([(cid, iid, cid.rsplit("~", 1)[0]) for iid, pool in pools.items() for cid, _ in pool],
                       columns=["id", "instance_id", "source_id"])
    rows = ids.merge(cands.drop(columns=["instance_id"]).rename(columns={"id": "source_id"}), on="source_id",
                     how="left", validate="many_to_one")
    return rows.drop(columns=["source_id"])


PIPELINE = "distractors"  # a pipelines.toml table (`csk distractors rebuild`), not a model: its model is resolved offline


def stage_settings() -> dict:
    """The adversarial_filter settings `csk distractors rebuild` runs with (pipelines.toml over the stage's
    signature): what the bench measures unless the command line says otherwise."""
    from csk.config import load_config
    from csk.pipeline import get_pipeline

    pipeline = get_pipeline(PIPELINE)
    cfg = load_config(Path(__file__).resolve().parent.parent / "pipelines.toml", [])[PIPELINE]
    return pipeline.stage_params(pipeline.stage("adversarial_filter"), cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--work", required=True, help="checkpoint and per-round records: run again to resume")
    ap.add_argument("--size", type=int, default=53000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", default=None)
    ap.add_argument("--trainable-layers", type=int, default=None)
    ap.add_argument("--max-length", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import tasks.distractors.adversarial as af
    from csk.runtime import StageContext
    from csk.store import Store

    settings = stage_settings()
    for name in ("model", "trainable_layers", "max_length", "epochs"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    settings["max_iterations"] = args.rounds
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    records = work / "rounds.jsonl"
    say, lines = reporter()
    say(machine_line())
    inst, cands = pd.read_parquet(args.instances), pd.read_parquet(args.candidates)
    view, pools = repeat(inst, cands, args.size)
    candidates = candidate_frame(cands, pools)
    say(f"{len(view)} instances ({view['group_id'].nunique()} groups) from {inst['id'].nunique()} of the sample, "
        f"{len(candidates)} candidates; the stage's settings: "
        + ", ".join(f"{k} {v}" for k, v in settings.items() if k not in ("embed",)))
    # one key per (size, rounds, settings): the checkpoint of another configuration is never read
    key = hashlib.sha256(json.dumps({"size": args.size, "settings": {k: str(v) for k, v in settings.items()},
                                     "instances": Path(args.instances).name, "candidates": Path(args.candidates).name},
                                    sort_keys=True).encode()).hexdigest()[:24]
    ctx = StageContext(Store(work / "store"), "bench", "adversarial_filter", key=key)
    kept = ctx.checkpoint("af").folder / "activations" / "activations.bf16"
    carried = kept.stat().st_size / 2**30 if kept.exists() else 0.0
    done_before = [json.loads(x) for x in records.read_text().splitlines()] if records.exists() else []
    say(f"work {work}: {len(done_before)} round(s) recorded before; activations carried over {carried:.2f} GiB")
    peak = {"anon": rss_gib(), "file": rss_gib("RssFile")}
    stop = threading.Event()

    def watch():  # resident memory sampled every second, reset at each round: the peak each round must hold
        while not stop.wait(1.0):
            peak["anon"] = max(peak["anon"], rss_gib())
            peak["file"] = max(peak["file"], rss_gib("RssFile"))

    threading.Thread(target=watch, daemon=True).start()
    clock = {"t": None, "first": True}
    real_loop = af.af_loop

    def timed_loop(*a, **kw):  # the rounds' clock starts when the loop does (after windows and vectors)
        clock["t"] = time.perf_counter()
        peak.update(anon=rss_gib(), file=rss_gib("RssFile"))
        return real_loop(*a, **kw)

    class Rounds(logging.Handler):
        def emit(self, record):
            msg = record.getMessage()
            if not msg.startswith("AF iteration") or clock["t"] is None:
                return
            now = time.perf_counter()
            rec = {"round": int(msg.split()[2]), "seconds": round(now - clock["t"], 1),
                   "whole": not (clock["first"] and carried > 0), "carried_activations_gib": round(carried, 2)
                   if clock["first"] else 0.0, "peak_anon_gib": round(peak["anon"], 2),
                   "peak_file_gib": round(peak["file"], 2), "load_1min": os.getloadavg()[0],
                   "cpu": compute.machine()["cpu"], "line": msg}
            with open(records, "a") as f:
                f.write(json.dumps(rec) + "\n")
            say(f"  round {rec['round']}: {rec['seconds']:.0f} s, peak held {rec['peak_anon_gib']:.2f} GiB "
                f"(+{rec['peak_file_gib']:.2f} GiB mapped), load {rec['load_1min']:.1f}")
            clock.update(t=now, first=False)
            peak.update(anon=rss_gib(), file=rss_gib("RssFile"))

    logging.getLogger("csk").addHandler(Rounds())
    logging.getLogger("csk").setLevel(logging.INFO)
    af.af_loop = timed_loop
    t0 = time.perf_counter()
    af.adversarial_filter(view, candidates, ctx=ctx, **settings)
    stop.set()
    say(f"stage done in {time.perf_counter() - t0:.0f} s in this process (resumed rounds: "
        f"{ctx.resumed.get('adversarial_filter_rounds', [])})")
    rounds = [json.loads(x) for x in records.read_text().splitlines()]
    for r in rounds:
        say(f"round {r['round']}: {r['seconds']:.0f} s{'' if r['whole'] else ' (resumed mid-round)'}, peak "
            f"{r['peak_anon_gib']:.2f} GiB held + {r['peak_file_gib']:.2f} GiB mapped, load {r['load_1min']:.1f}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps({"instances": len(view), "rounds": rounds,
                                                                   "settings": {k: str(v) for k, v in settings.items()}},
                                                                  indent=2))


if __name__ == "__main__":
    main()
