"""The distractor engine's human step as a Label Studio project (docs/method.md 1.6d): people read each item (the
dialogue with its target marked, the question, every correct answer) and tick every final distractor that
could be a correct answer ("speculatively correct"); read back by `verification.verdicts`, where a
distractor more than half of its annotators ticked joins the correct answers."""

from __future__ import annotations

import pandas as pd

from csk.label_studio import LabelingStep
from tasks.distractors.verification import verification
from tasks.labeling_views import DIALOGUE, box, dialogue_html

CONFIG = "\n".join([
    "<View>", DIALOGUE, box("Target", "target"), '  <Header value="$question"/>',
    box("Correct answer(s)", "correct", "background:#e6f4e6;padding:6px;margin:6px 0"),
    '  <Header value="Tick every wrong answer below that could in fact be a correct answer" size="5"/>',
    '  <Choices name="speculatively_correct" toName="dialogue" choice="multiple" value="$distractor_options"/>',
    "</View>"])


def items(sheet: pd.DataFrame) -> pd.DataFrame:
    """The verification sheet (one row per choice) as one row per item."""
    out = []
    for iid, g in sheet.groupby("id", sort=False):
        head = g.iloc[0]
        out.append({"id": iid, "dialogue": str(head["dialogue"]), "target": str(head["target"] or ""),
                    "question": str(head["question"]),
                    "correct": [t for t, r in zip(g["text"], g["role"]) if r != "distractor"],
                    "distractors": [t for t, r in zip(g["text"], g["role"]) if r == "distractor"]})
    return pd.DataFrame(out)


def _task(row: dict) -> dict:
    turns = [t for t in row["dialogue"].split("\n") if t.strip()]
    target = row["target"].strip()
    where = next((k for k, t in enumerate(turns) if target and target in t), None)
    return {"dialogue_html": dialogue_html(turns, where), "target": target or "(none)", "question": row["question"],
            "correct": " | ".join(row["correct"]), "distractor_options": [{"value": d} for d in row["distractors"]]}


STEP = LabelingStep("verification", stage=verification, config=CONFIG, data=_task,
                    imports=(verification, "verdicts"), annotators=1, rows=items, source="verification_sheet.jsonl",
                    instructions="For each item, tick every listed wrong answer that could be a correct answer to "
                                 "the question about the target. Leave the rest unticked.")
