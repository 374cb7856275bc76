"""The embedder's pass plan on utterances (issue 52): padding each text to a multiple of 8 tokens with a
shape's last pass filled with empty texts (the plan before) beside no padding with that last pass unfilled
(the CPU default where `packing_check` finds the kernels row-count free) and no padding filled (what no
padding costs where they are not), on the same texts in one process, at a few input sizes.

Texts: the utterances of the samples' DailyDialog (the real sample where CSK_REAL_SAMPLES is set, else the
bundled one), repeated with a word appended per repetition until each size is reached. Printed per size and
plan: passes, tokens computed against real tokens, and seconds (best of two; every pass on one intra-op
thread, the machine's threads over passes, as the stages run them).

    python bench/embed_padding.py [--sizes 300,3000,12000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(k, v)

from bench.scale import sample_dialogues  # noqa: E402
from csk.compute import host_record  # noqa: E402

PLANS = (("step 8, last pass filled (before)", 8, True), ("no padding, unfilled (CPU default)", 1, False),
         ("no padding, filled", 1, True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="300,3000,12000")
    args = ap.parse_args()
    from tasks import encoder
    from tasks.embed import Embedder

    print(f"# {host_record()}", flush=True)
    pool = [u for d in sample_dialogues()["dailydialog"] for u in d]
    e = Embedder({"model": encoder.DEFAULT_MODEL, "precision": "fp32"}, None, progress=False)
    print(f"# packing_check: {e.packing()['probe']}", flush=True)
    for n in map(int, args.sizes.split(",")):
        texts = [pool[i % len(pool)] + " x" * (i // len(pool)) for i in range(n)]
        lengths = encoder.token_lengths(e.model, texts)
        base = None
        for name, step, fill in PLANS:
            passes = encoder.plan_passes(lengths, e.batch_tokens, e.batch_size, step, True, fill=fill)
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                encoder.encode_passes(e.model, texts, passes, "fp32", "cpu")
                times.append(time.perf_counter() - t0)
            best = min(times)
            base = base or best
            print(f"{n:7d} utterances  {name:36s} passes {len(passes):5d}  tokens {sum(r * p for r, p, _ in passes):8d}"
                  f" (real {int(lengths.sum()):8d})  {best:7.2f} s  {base / best:5.2f}x the plan before", flush=True)


if __name__ == "__main__":
    main()
