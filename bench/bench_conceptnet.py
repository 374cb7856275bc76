"""ConceptNet database build: `csk.conceptnet.build_db` (stream the dump once keeping the configured
languages, checkpointed, then conceptnet-lite's loader) against the baseline, conceptnet-lite's loader
on the whole dump, side by side in one process, on synthetic dumps in the 5.7 format of growing size
(language mix about ConceptNet 5.7's: ~10% English-English, ~2% Chinese-Chinese).

    python bench/bench_conceptnet.py [--lines 50000 100000 200000]
"""

from __future__ import annotations

import argparse
import json
import random
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
    args = ap.parse_args()
    print(f"CPU: {compute.cpu_model()}")
    print(f"{'lines':>9} {'baseline s':>11} {'build_db s':>11} {'ratio':>7} {'kept':>8} {'lines/s':>10}")
    for n in args.lines:
        with tempfile.TemporaryDirectory() as d:
            dump = Path(d) / "dump.csv"
            synthetic_dump(dump, n)
            t0 = time.perf_counter()
            load_dump_to_db(dump_path=dump, db_path=Path(d) / "base.db", edge_count=n, delete_dump=False)
            base = time.perf_counter() - t0
            t0 = time.perf_counter()
            db = build_db(dump, Path(d) / "ours.db", ("en", "zh"), progress=False)
            ours = time.perf_counter() - t0
            kept = len(open(str(db) + ".lines", "rb").read()) // 8
            print(f"{n:>9} {base:>11.2f} {ours:>11.2f} {base / ours:>6.1f}x {kept:>8} {n / ours:>10.0f}")
    print("projected for the 34.07M-line 5.7 dump at the largest size's rate: "
          f"{34_074_917 / (n / ours) / 60:.0f} min (build_db) vs {34_074_917 / (n / base) / 60:.0f} min (baseline)")


if __name__ == "__main__":
    main()
