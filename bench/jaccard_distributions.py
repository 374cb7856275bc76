"""How close a set's distractors sit to its correct answers and to each other, published beside rebuilt.

Word Jaccard (giveaways.words: lower-cased words, "n't" split off) of each distractor to its nearest correct
answer, of every pair of distractors of one item, and the count per item of distractors at or above the
near-copy threshold (giveaways.NEAR_COPY_JACCARD): the distributions the near-copy cap
(`adversarial_filter.max_rewrites`) is read from. Items are matched by (ID, Target, Question), as
bench/blind_reading.py matches them; an item whose every choice is correct has no distractor and counts in
no distribution.

    python bench/jaccard_distributions.py PUBLISHED.jsonl [REBUILT.jsonl ...]
"""

from __future__ import annotations

import json
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.distractors.giveaways import NEAR_COPY_JACCARD, words  # noqa: E402

BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)


def jaccard(a: str, b: str) -> float:
    x, y = set(words(a)), set(words(b))
    return len(x & y) / len(x | y) if x | y else 0.0


def distributions(path: str) -> dict:
    to_correct, between, near_per_item = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        choices, correct = rec.get("Choices") or [], {int(k) for k in rec.get("Correct Answers") or []}
        answers = [choices[k] for k in correct if 0 <= k < len(choices)]
        wrong = [c for k, c in enumerate(choices) if k not in correct]
        if not answers or not wrong:
            continue
        near = [max(jaccard(d, a) for a in answers) for d in wrong]
        to_correct += near
        between += [jaccard(a, b) for a, b in combinations(wrong, 2)]
        near_per_item.append(sum(j >= NEAR_COPY_JACCARD for j in near))
    return {"to_correct": np.asarray(to_correct), "between": np.asarray(between),
            "near_per_item": np.asarray(near_per_item)}


def _hist(values: np.ndarray) -> list[str]:
    counts, _ = np.histogram(values, bins=BINS)
    return [f"{100 * c / max(len(values), 1):5.1f}" for c in counts]


def report(paths: list[str]) -> str:
    found = {Path(p).name: distributions(p) for p in paths}
    names = list(found)
    width = max(len(n) for n in names) + 2
    out = []
    for what, title in (("to_correct", "distractor to its nearest correct answer"),
                        ("between", "distractor to distractor, same item")):
        out.append(f"word Jaccard, {title} (% of pairs per bin; mean, median, share >= {NEAR_COPY_JACCARD}):")
        out.append(" " * width + " ".join(f"{lo:>5.1f}" for lo in BINS[:-1]) + "   mean median  >=0.5      n")
        for n in names:
            v = found[n][what]
            out.append(f"{n:<{width}}" + " ".join(_hist(v)) +
                       f"  {v.mean():.3f}  {np.median(v):.3f} {100 * (v >= NEAR_COPY_JACCARD).mean():5.1f}% {len(v):6d}")
        out.append("")
    out.append(f"distractors per item at word Jaccard >= {NEAR_COPY_JACCARD} to a correct answer (% of items):")
    out.append(" " * width + "     0     1     2     3    4+   p95   p99  items")
    for n in names:
        v = found[n]["near_per_item"]
        shares = [(v == k).mean() for k in range(4)] + [(v >= 4).mean()]
        out.append(f"{n:<{width}}" + " ".join(f"{100 * s:5.1f}" for s in shares) +
                   f" {np.percentile(v, 95):5.0f} {np.percentile(v, 99):5.0f} {len(v):6d}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print(report(sys.argv[1:]))
