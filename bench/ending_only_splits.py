"""The ending-only probe over many halvings of one released file, published beside rebuilt.

The probe (giveaways.EndingOnlyProbe: logistic regression on each choice's embedding, its mean and
highest cosine to its set, and whether it holds a negation; no dialogue) fits on one seeded half of the
dialogues and is tested on the other. One halving of 810 items moves the accuracy by a standard error of
about two points, the size of the differences it is asked to tell; this script repeats it over `--splits`
halvings (`giveaways.ending_only_halvings`, the halves the card's `distractor_quality` draws: the same for
every file, so the differences are paired) and prints the mean, the spread, and each rebuilt file's
difference from the published.

    python bench/ending_only_splits.py PUBLISHED.jsonl REBUILT.jsonl [REBUILT.jsonl ...] [--splits 12]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.distractors.giveaways import ending_only_halvings  # noqa: E402
from tasks.embed import EmbedSpec, open_embedder  # noqa: E402


def read_files(argv: list[str] | None, description: str):
    """The command line (PUBLISHED REBUILT... [--splits N]) and its files: (files, dialogue of each item,
    {file: (choices, correct)}, texts, splits). Every rebuilt file must hold the published file's items in
    its order."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("published")
    parser.add_argument("rebuilt", nargs="+")
    parser.add_argument("--splits", type=int, default=12)
    a = parser.parse_args(argv)
    files = [a.published] + a.rebuilt
    rows = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            rows[f] = [json.loads(line) for line in fh if line.strip()]
    ids = [r["ID"] for r in rows[a.published]]
    for f in a.rebuilt:
        if [r["ID"] for r in rows[f]] != ids:
            raise SystemExit(f"{f}: its items are not the published file's, in its order")
    sets = {f: ([r["Choices"] for r in rs], [set(r["Correct Answers"]) for r in rs]) for f, rs in rows.items()}
    texts = sorted({c for ch, _ in sets.values() for choice in ch for c in choice})
    return files, ids, sets, texts, a.splits


def main(argv: list[str] | None = None) -> None:
    files, ids, sets, texts, splits = read_files(argv, __doc__.split("\n\n")[0])
    with open_embedder(EmbedSpec(), None) as emb:
        vector = emb.lookup(texts)
        # a dialogue's items stay on one side; the halves the card's distractor_quality draws (seed 0)
        acc = ending_only_halvings(ids, sets, vector, splits, seed=0)
    base = np.asarray(acc[files[0]])
    print(f"ending-only probe over {splits} halvings of the dialogues (all-MiniLM-L6-v2 embeddings)")
    for f in files:
        v = np.asarray(acc[f])
        line = f"{Path(f).name:40s} accuracy mean {v.mean():.3f} sd {v.std():.3f}"
        if f != files[0]:
            d = v - base
            line += f"; minus published: mean {d.mean():+.3f} sd {d.std():.3f} min {d.min():+.3f} max {d.max():+.3f}"
        print(line)


if __name__ == "__main__":
    main()
