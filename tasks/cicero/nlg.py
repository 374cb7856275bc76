"""CICERO's generative tasks (docs/method.md 1.7), per split, with inputs as the authors' data preparation
writes them (`tasks.cicero.experiments.nlg_input`): the question, `target: ...`, for the chained
tasks the other event (`subsequent event: ...` / `cause: ...`) before the context, then
`context: ` + the utterances joined by ` <utt> `, the fields joined by the literal ` \n `. The
clipped variant keeps the dialogue up to and including the target. The reaction task takes the
last utterance only (the paper's 1.2.3); the authors' files (`experiments` stage) take every one.
"""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.runtime import StageOutput
from tasks.cicero.experiments import nlg_input
NLG_TASKS = {
    "1.1.1_cause": "cause",
    "1.1.2_subsequent_event": "subsequent_event",
    "1.1.3_subsequent_event_clipped": "subsequent_event",
    "1.1.4_chained_cause": "cause",
    "1.1.5_chained_subsequent_event": "subsequent_event",
    "1.2.1_prerequisite": "prerequisite",
    "1.2.2_motivation": "motivation",
    "1.2.3_reaction": "reaction",
}


def nlg(split_rows: pd.DataFrame, annotations: pd.DataFrame) -> StageOutput:
    """CICERO's generative tasks (1.1.1-1.2.3) per split, inputs as the authors' data preparation writes them."""
    ann = annotations.merge(split_rows[["id", "split"]], on="id", how="inner")
    by_target = {(r.dialogue_id, r.utterance_index, r.inference_type): r for r in ann.itertuples()}
    rows = []

    def add(task: str, r, dialogue: list[str], other: tuple[str, str] | None = None):
        refs = [r.choices[i] for i in r.correct_answers]
        rows.append({"id": f"{task}/{r.id}", "annotation_id": r.id, "task": task, "split": r.split,
                     "dialogue_id": r.dialogue_id, "input": nlg_input(r.question, r.target, dialogue, other),
                     "output": r.answer, "references": refs})

    for r in ann.itertuples():
        full = list(r.dialogue)
        t = r.inference_type
        if t == "cause":
            add("1.1.1_cause", r, full)
            sub = by_target.get((r.dialogue_id, r.utterance_index, "subsequent_event"))
            if sub is not None:
                add("1.1.4_chained_cause", r, full, ("subsequent event", sub.answer))
        elif t == "subsequent_event":
            add("1.1.2_subsequent_event", r, full)
            add("1.1.3_subsequent_event_clipped", r, full[:r.utterance_index + 1])
            cause = by_target.get((r.dialogue_id, r.utterance_index, "cause"))
            if cause is not None:
                add("1.1.5_chained_subsequent_event", r, full, ("cause", cause.answer))
        elif t == "prerequisite":
            add("1.2.1_prerequisite", r, full)
        elif t == "motivation":
            add("1.2.2_motivation", r, full)
        elif t == "reaction" and r.utterance_index == len(r.dialogue) - 1:
            add("1.2.3_reaction", r, full)  # the paper's reaction task: target = last utterance
    data = pd.DataFrame(rows, columns=["id", "annotation_id", "task", "split", "dialogue_id", "input", "output",
                                       "references"]).sort_values("id", kind="stable")
    files = {}
    for (task, split), group in data.groupby(["task", "split"], sort=True):
        files[f"nlg/{task}/{split}.jsonl"] = compute.jsonl_bytes(
            {"id": r["id"], "input": r["input"], "output": r["output"], "references": list(r["references"])}
            for r in group.to_dict(orient="records"))
    counts = data.groupby(["task", "split"]).size().reset_index(name="instances").to_dict(orient="records")
    unused = ann[~ann["id"].isin(set(data["annotation_id"]))]
    rejected = pd.DataFrame({"id": unused["id"], "reason_code": "reaction_not_last_utterance",
                             "reason": "reaction on a target that is not the last utterance: "
                             "task 1.2.3 takes the last utterance only"}) if len(unused) else None
    return StageOutput(data=data, rejected=rejected, files=files, tables={"instances": counts},
                       notes={"tasks": list(NLG_TASKS), "annotations_used": int(len(ann) - len(unused))})
