"""CICERO's MCQ tasks (docs/method.md 1.7): 2.1 single answer (instances with one correct answer) and 2.2
all answers, per split, in the release's JSON Lines keys; the Parquet uses snake_case names.

An instance with published choices keeps every released correct answer where it was published and
gets its new distractors in the other slots (`fill_slots`, as `csk distractors rebuild` writes a file):
a v2 item with three correct answers stays a three-answer item of 2.2. An instance without published
distractor slots (an answer written in Label Studio) gets the gold and its distractors in a seeded order."""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.runtime import StageOutput
from tasks.distractors.verification import fill_slots, shuffle_choices

CICERO_KEYS = {"cicero_id": "ID", "dialogue": "Dialogue", "target": "Target", "question": "Question",
               "choices": "Choices", "human_written_answer": "Human Written Answer",
               "correct_answers": "Correct Answers"}


def mcq(verified: pd.DataFrame, annotations: pd.DataFrame, splits: pd.DataFrame | None = None, *, seed: int = 0) -> StageOutput:
    """Shuffled items with their release fields, and the 2.1 / 2.2 files per split.

    Args:
        seed: seed of each item's choice order
    """
    ann = annotations.set_index("id")
    # Every field but the choices as the release wrote it (as `instances` reads it, and as `csk distractors
    # rebuild --preset cicero` writes the same file back): the located utterance's text can differ from the
    # release's Target ("A: : Hey." is the utterance ": Hey."; its Target reads "Hey.")
    dialogue_col = "release_dialogue" if "release_dialogue" in ann.columns else "dialogue"
    target_col = "release_target" if "release_target" in ann.columns else "target"
    no_hwa = set(ann.index[ann["human_written_answer"].isna()]) if "human_written_answer" in ann.columns else set()
    split_of = dict(zip(splits["id"], splits["split"])) if splits is not None else {}
    rows, rejected, as_published = [], [], 0
    for r in verified.itertuples():
        a = ann.loc[r.id]
        published = [str(c) for c in a["choices"]]
        published_correct = sorted({int(k) for k in a["correct_answers"]})
        slots = [k for k in range(len(published)) if k not in published_correct]
        if slots or len(published) >= 2:  # a published choice set: its slots refilled (none: all correct, as published)
            if len(r.distractors) < len(slots):
                rejected.append({"id": r.id, "reason_code": "too_few_candidates",
                                 "reason": f"{len(r.distractors)} distractor(s) left after the filters, "
                                           f"{len(slots)} published slot(s) to fill"})
                continue
            choices = fill_slots(published, published_correct, list(r.distractors))
            gold_at = choices.index(r.gold) if r.gold in choices else published_correct[0]
            gold_at = int(gold_at)
            correct = sorted(set(published_correct) | {slots[int(j)] for j in r.correct_distractors})
            as_published += not slots
        else:
            choices, gold_at, correct = shuffle_choices(seed, r.id, r.gold, list(r.distractors),
                                                        list(r.correct_distractors))
        rows.append({"id": r.id, "group_id": r.group_id, "split": split_of.get(r.id, "all"),
                     "cicero_id": str(a["cicero_id"]), "dialogue": list(a[dialogue_col]), "target": str(a[target_col]),
                     "question": str(a["question"]), "choices": choices, "human_written_answer": [gold_at],
                     "correct_answers": correct})
    data = pd.DataFrame(rows)
    data["n_correct"] = data["correct_answers"].map(len) if len(data) else []
    files = {}
    for task, subset in (("2.1_single_answer", data[data["n_correct"] == 1] if len(data) else data),
                         ("2.2_all_answers", data)):
        for split, group in subset.groupby("split", sort=True) if len(subset) else []:
            # a release without `Human Written Answer` (v2) gets none back: its items name only correct answers
            records = ({key: r[col] for col, key in CICERO_KEYS.items()
                        if col != "human_written_answer" or r["id"] not in no_hwa}
                       for r in group.to_dict(orient="records"))
            files[f"mcq/{task}/{split}.jsonl"] = compute.jsonl_bytes(records)
    counts = data.groupby("split").agg(instances=("id", "size"), single_answer=("n_correct", lambda s: int((s == 1).sum()))) \
        .reset_index().to_dict(orient="records") if len(data) else []
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None, rows_in=len(verified),
                       files=files, tables={"mcq": counts},
                       notes={"items": len(data), "multi_answer_items": int((data["n_correct"] > 1).sum()) if len(data) else 0,
                              "rejected_too_few_candidates": len(rejected),
                              # every published choice correct: no slot to fill, released as published
                              "as_published": as_published})
