"""Each filter of the distractor engine read on the PUBLISHED distractors of real released files.

A published distractor is a human-verified wrong answer written for its item: a filter that rejects more
than a few percent of them would reject a good generator's candidates too (issue 70). For every filter a
candidate written for its item meets (the two paraphrase judges, the writers' checks, the server's checks,
AF's near-copy cap) and the retrieval guard (which such a candidate does not meet), this prints how many
published distractors it would reject, with a few of them.

    python -m bench.filters_on_published [FILE ...]   # default: the real CICERO v2 sample and MuTual file

Files are read with the `cicero` preset of `csk distractors rebuild` (tasks/distractors/mcq_file.py).
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import date
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parents[1]


def published(instances: pd.DataFrame) -> pd.DataFrame:
    """One row per published distractor: its item, its text, the item's correct answers."""
    rows = []
    for r in instances.itertuples():
        correct = [r.choices[k] for k in r.correct_answers]
        for k, text in enumerate(r.choices):
            if k not in set(r.correct_answers):
                rows.append({"id": f"{r.id}/pub{k}", "instance_id": r.id, "gold": r.gold, "candidate": text,
                             "correct": correct, "generator": "file", "rule": "published"})
    return pd.DataFrame(rows)


def verdicts(instances: pd.DataFrame, cands: pd.DataFrame) -> dict[str, pd.Series]:
    """Each filter's verdict (True: rejected) on every published distractor."""
    from tasks.distractors import fluency as fl
    from tasks.distractors.candidate_filter import PAPER_EMBEDDER, correct_texts, likely_correct_here, similarities
    from tasks.distractors.counterfactuals import dialogue_names, dialogue_words
    from tasks.distractors.giveaways import rewrites
    from tasks.distractors.served import why_not
    from tasks.embed import EmbedSpec

    correct = correct_texts(instances, cands)
    mpnet, _ = similarities(cands, correct, PAPER_EMBEDDER, None)
    minilm, _ = similarities(cands, correct, EmbedSpec(), None)
    known, names = dialogue_words(instances), dialogue_names(instances)
    parsed = fl.parse(cands["candidate"].tolist())
    writer = [fl.writer_check(t, parsed[t], known[i], names[i]) for i, t in zip(cands["instance_id"], cands["candidate"])]
    near = pd.Series([any(rewrites(t, a) for a in c) for t, c in zip(cands["candidate"], cands["correct"])],
                     index=cands.index)
    # AF's cap of one near-copy per item: the second and later near-copies of an item could not be held
    capped = near & (near.groupby(cands["instance_id"]).cumsum() > 1)
    guard = likely_correct_here(cands.assign(generator="retrieval"), instances, EmbedSpec(), 0, None)
    out = {
        "paraphrase (all-mpnet-base-v2 cosine >= 0.9)": pd.Series(mpnet, index=cands.index) >= 0.9,
        "paraphrase (all-MiniLM-L6-v2 cosine >= 0.91)": pd.Series(minilm, index=cands.index) >= 0.91,
        "writers' checks (misspelt, number agreement, construction)": pd.Series([w is not None for w in writer],
                                                                                index=cands.index),
        "server's checks (refusal, copy of a correct answer, language)": pd.Series(
            [why_not(t, c, False) is not None for t, c in zip(cands["candidate"], cands["correct"])], index=cands.index),
        "near-copy cap (a 2nd near-copy of a correct answer in an item)": capped,
        "retrieval guard (if it applied: scored >= the item's gold)": guard >= 0,
    }
    from tasks.distractors.counterfactuals import Echoes

    echoes = Echoes(instances)
    echo = pd.Series([echoes.of(i, t) for i, t in zip(cands["instance_id"], cands["candidate"])], index=cands.index,
                     dtype=object)
    kind = echo.map(lambda e: e[0] if e else "")
    why = echo.map(lambda e: e[1] if e else "")
    out["another dialogue's correct answer copied (rejected)"] = kind == "another_dialogue"
    out["echo (kept behind the item's others): another item's answer"] = why.str.startswith("a copy of item")
    out["echo (kept behind the item's others): a bare negation"] = why.str.startswith("the correct answer")
    for check in ("misspelt", "number_agreement", "construction"):
        out[f"  writers' check {check}"] = pd.Series([w is not None and w[0] == check for w in writer], index=cands.index)
    return out


def main(paths: list[str]) -> None:
    from tasks.distractors.mcq_file import mcq_file

    print(f"# The filters on published distractors ({date.today()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores); command: python -m bench.filters_on_published {' '.join(paths)}")
    for path in paths:
        instances = mcq_file(input=path, preset="cicero").data
        cands = published(instances)
        print(f"\n## {Path(path).name}: {len(instances)} items, {len(cands)} published distractors")
        for name, rejected in verdicts(instances, cands).items():
            n = int(rejected.sum())
            print(f"{name:<66} {n:>4} of {len(cands)} ({100 * n / max(len(cands), 1):.1f}%)")
            if n and not name.startswith("  "):
                for t in cands.loc[rejected, "candidate"].head(3):
                    print(f"      e.g. {t[:100]!r}")


if __name__ == "__main__":
    real = Path(os.environ.get("CSK_REAL_SAMPLES", HERE.parent / "shared" / "real-samples")) / "cicero"
    main(sys.argv[1:] or [str(real / "cicero_v2_val_sample.jsonl"), str(real / "cicero_v2_val_mutual.jsonl")])
