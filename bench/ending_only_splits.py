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


def _items(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("published")
    parser.add_argument("rebuilt", nargs="+")
    parser.add_argument("--splits", type=int, default=12)
    a = parser.parse_args(argv)
    files = [a.published] + a.rebuilt
    sets = {f: _items(f) for f in files}
    ids = [r["ID"] for r in sets[a.published]]
    for f in a.rebuilt:
        if [r["ID"] for r in sets[f]] != ids:
            raise SystemExit(f"{f}: its items are not the published file's, in its order")
    texts = sorted({c for rows in sets.values() for r in rows for c in r["Choices"]})
    with open_embedder(EmbedSpec(), None) as emb:
        vector = emb.lookup(texts)
        # a dialogue's items stay on one side; the halves the card's distractor_quality draws (seed 0)
        acc = ending_only_halvings(ids, {f: ([r["Choices"] for r in rows], [set(r["Correct Answers"]) for r in rows])
                                         for f, rows in sets.items()}, vector, a.splits, seed=0)
    base = np.asarray(acc[a.published])
    print(f"ending-only probe over {a.splits} halvings of the dialogues (all-MiniLM-L6-v2 embeddings)")
    for f in files:
        v = np.asarray(acc[f])
        line = f"{Path(f).name:40s} accuracy mean {v.mean():.3f} sd {v.std():.3f}"
        if f != a.published:
            d = v - base
            line += f"; minus published: mean {d.mean():+.3f} sd {d.std():.3f} min {d.min():+.3f} max {d.max():+.3f}"
        print(line)


if __name__ == "__main__":
    main()
