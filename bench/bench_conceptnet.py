"""ConceptNet database build: `csk.conceptnet.build_db` (stream the dump once keeping the configured
languages, checkpointed, then conceptnet-lite's loader) against the baseline, conceptnet-lite's loader
on the whole dump, side by side in one process, on synthetic dumps in the 5.7 format of growing size
(language mix about ConceptNet 5.7's: ~10% English-English, ~2% Chinese-Chinese).

    python bench/bench_conceptnet.py [--lines 50000 100000 200000] [--baseline-up-to 1000000]

Peak memory is the process's resident high-water mark after each size (sizes in growing order).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

from conceptnet_lite.db import load_dump_to_db

from csk import compute
from csk.conceptnet import build_db

LANGS = ["en"] * 10 + ["zh"] * 2 + ["fr", "de", "ja", "es", "it", "ru", "pt", "nl"] * 11
RELS = ["/r/UsedFor", "/r/IsA", "/r/RelatedTo", "/r/Synonym", "/r/Causes", "/r/Desires", "/r/PartOf"]


def synthetic_dump(path: Path, n: int, seed: int = 0) -> None:
    rnd = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _i in range(n):
            lang = rnd.choice(LANGS)
            rel = rnd.choice(RELS)
            a, b = f"/c/{lang}/w{rnd.randrange(n // 3 + 1)}", f"/c/{lang}/w{rnd.randrange(n // 3 + 1)}"
            info = json.dumps({"dataset": f"/d/wiktionary/{lang}", "weight": 1.0})
            f.write(f"/a/[{rel}/,{a}/,{b}/]\t{rel}\t{a}\t{b}\t{info}\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, nargs="+", default=[50_000, 100_000, 200_000])
    ap.add_argument("--baseline-up-to", type=int, default=10**9, help="skip the baseline above this many lines")
    args = ap.parse_args()
    print(f"CPU: {compute.cpu_model()}")
    print(f"{'lines':>9} {'baseline s':>11} {'build_db s':>11} {'ratio':>7} {'kept':>8} {'lines/s':>10} {'peak RSS MiB':>13}")
    for n in args.lines:
        with tempfile.TemporaryDirectory() as d:
            dump = Path(d) / "dump.csv"
            synthetic_dump(dump, n)
            base = None
            if n <= args.baseline_up_to:
                t0 = time.perf_counter()
                load_dump_to_db(dump_path=dump, db_path=Path(d) / "base.db", edge_count=n, delete_dump=False)
                base = time.perf_counter() - t0
            t0 = time.perf_counter()
            db = build_db(dump, Path(d) / "ours.db", ("en", "zh"), progress=False)
            ours = time.perf_counter() - t0
            kept = len(open(str(db) + ".lines", "rb").read()) // 8
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            shown = (f"{base:>11.2f}", f"{base / ours:>6.1f}x") if base else (f"{'-':>11}", f"{'-':>7}")
            print(f"{n:>9} {shown[0]} {ours:>11.2f} {shown[1]} {kept:>8} {n / ours:>10.0f} {peak:>13.0f}", flush=True)
    print("projected for the 34.07M-line 5.7 dump at the largest size's rate: "
          f"{34_074_917 / (n / ours) / 60:.0f} min (build_db)")


if __name__ == "__main__":
    main()
