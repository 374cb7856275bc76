"""The files CICERO's experiments train on, in the authors' formats (declare-lab/CICERO,
`v1/experiments/nlg/prepare.py` and `v1/experiments/mcq/prepare.py`), from release-format rows.

Researchers fine-tune on these files, not on the release: they are written byte-compatible with
what the authors' two scripts write from the same release files, per split (`train`, `val`,
`test`; a run without splits writes its one split under the release file's own name):

* NLG, `nlg/{split}_{relation}.json` for relation in cause, prerequisite, reaction, motivation,
  subseq_event, subseq_event_clipped, chained_cause, chained_subseq_event: lines
  `{"input", "output"}`. `input` joins with the four characters ` \\n ` (space, backslash, n,
  space) the question, `target: <Target>`, for the chained tasks `subsequent event: <answer>` or
  `cause: <answer>`, then `context: ` + the `Dialogue` strings joined by ` <utt> ` (clipped: up
  to the target's utterance, found exactly or else by the best fuzzy token-set ratio, as the
  authors do). `output` is the human-written answer. The chained files pair a cause and a
  subsequent-event instance of the same dialogue and target; the authors' script orders them by
  iterating a Python set (hash order, different on every run), this one by first appearance.
* MCQ, `mcq/selection/{split}_single.json` (`ID`, `context`, `choice0`..`choice4`, `label`) and
  `mcq/generation/{split}_{single,multiple,all}.json` (`input` with the `(0) ... (4)` choice
  string, `output`), each also as the zero-shot `_zs_` variant (train/val: cause, prerequisite,
  reaction; test: motivation, subsequent event).

JSON is written as the scripts write it: `json.dumps` defaults (ASCII escapes), one object a line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from csk.runtime import StageOutput

SEP = " \\n "  # the literal four characters space, backslash, n, space
UTT = " <utt> "
QUESTIONS = {
    "cause": "What is or could be the cause of target?",
    "prerequisite": "What is or could be the prerequisite of target?",
    "reaction": "What is the possible emotional reaction of the listener in response to target?",
    "motivation": "What is or could be the motivation of target?",
    "subseq_event": "What subsequent event happens or could happen following the target?",
    "subseq_event_clipped": "What subsequent event happens or could happen following the target?",
}
# The zero-shot question sets of the MCQ experiments: train on q1, test on q2.
Q1 = [QUESTIONS["cause"], QUESTIONS["prerequisite"], QUESTIONS["reaction"]]
Q2 = [QUESTIONS["motivation"], QUESTIONS["subseq_event"]]
SPLIT_NAMES = {"train": "train", "validation": "val", "val": "val", "dev": "val", "test": "test"}


def nlg_input(question: str, target: str, dialogue: list[str], other: tuple[str, str] | None = None) -> str:
    """The authors' generation input: question, target, (the other event,) context."""
    fields = [question, "target: " + target] + ([f"{other[0]}: {other[1]}"] if other else [])
    return SEP.join(fields + ["context: " + UTT.join(dialogue)])


def _line(obj: dict) -> str:
    return json.dumps(obj) + "\n"


def target_index(target: str, dialogue: list[str]) -> int:
    """The utterance the target is: exactly, else the first best fuzzy token-set ratio."""
    from thefuzz import fuzz

    utterances = [u[3:] for u in dialogue]  # "A: " stripped, as the authors do
    if target in utterances:
        return utterances.index(target)
    return int(np.argmax([fuzz.token_set_ratio(u, target) for u in utterances]))


def nlg_files(rows: list[dict], split: str) -> dict[str, str]:
    out = {}
    for relation, question in QUESTIONS.items():
        lines = []
        for r in rows:
            if r["Question"] != question:
                continue
            dialogue = r["Dialogue"]
            if relation == "subseq_event_clipped":
                dialogue = dialogue[:target_index(r["Target"], dialogue) + 1]
            lines.append(_line({"input": nlg_input(r["Question"], r["Target"], dialogue),
                                "output": r["Choices"][r["Human Written Answer"][0]]}))
        out[f"nlg/{split}_{relation}.json"] = "".join(lines)
    cause, subseq = [], []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:  # the cause and subsequent-event instances of each (dialogue ID, target)
        if r["Question"] in (QUESTIONS["cause"], QUESTIONS["subseq_event"]):
            groups.setdefault((r["ID"], r["Target"]), []).append(r)
    for key, group in groups.items():
        if len(group) != 2:
            continue  # the authors chain a target that has exactly two such instances ...
        c, s = sorted(group, key=lambda r: r["Question"])  # ... sorted by question: the cause first
        c_answer = c["Choices"][c["Human Written Answer"][0]]
        s_answer = s["Choices"][s["Human Written Answer"][0]]
        dialogue = c["Dialogue"]
        cause.append(_line({"input": nlg_input(QUESTIONS["cause"], key[1], dialogue, ("subsequent event", s_answer)),
                            "output": c_answer}))
        subseq.append(_line({"input": nlg_input(QUESTIONS["subseq_event"], key[1], dialogue, ("cause", c_answer)),
                             "output": s_answer}))
    out[f"nlg/{split}_chained_cause.json"] = "".join(cause)
    out[f"nlg/{split}_chained_subseq_event.json"] = "".join(subseq)
    return out


def _choice_string(choices: list[str]) -> str:
    return " ".join(f"({k}) {choices[k]}" for k in range(5))


def mcq_files(rows: list[dict], split: str) -> dict[str, str]:
    out = {}
    for zero_shot in (False, True):
        questions = (Q2 if split == "test" else Q1) if zero_shot else Q1 + Q2
        zs = "_zs" if zero_shot else ""
        selection, single, multiple, every = [], [], [], []
        for r in rows:
            if r["Question"] not in questions:
                continue
            ch, correct = r["Choices"], r["Correct Answers"]
            context = SEP.join([r["Question"], "target: " + r["Target"], "context: " + UTT.join(r["Dialogue"])])
            generation = SEP.join([r["Question"], "target: " + r["Target"], _choice_string(ch),
                                   "context: " + UTT.join(r["Dialogue"])])
            if len(correct) == 1:
                selection.append(_line({"ID": r["ID"], "context": context, **{f"choice{k}": ch[k] for k in range(5)},
                                        "label": correct[0]}))
                single.append(_line({"input": generation, "output": ch[correct[0]]}))
            if len(correct) > 1:
                multiple.append(_line({"input": generation, "output": SEP.join(ch[i] for i in correct)}))
            every.append(_line({"input": generation, "output": SEP.join(ch[i] for i in correct)}))
        out[f"mcq/selection/{split}{zs}_single.json"] = "".join(selection)
        out[f"mcq/generation/{split}{zs}_single.json"] = "".join(single)
        out[f"mcq/generation/{split}{zs}_multiple.json"] = "".join(multiple)
        out[f"mcq/generation/{split}{zs}_all.json"] = "".join(every)
    return out


def experiment_files(rows: pd.DataFrame, default_split: str = "all") -> tuple[dict[str, bytes], list[str]]:
    """Files from release-format rows (`ID`, `Dialogue`, `Target`, `Question`, `Choices`, `Human Written
    Answer`, `Correct Answers`, `split`), and what could not be written, with the reason."""
    files: dict[str, bytes] = {}
    skipped = []
    for split, group in rows.groupby("split", sort=False):
        name = SPLIT_NAMES.get(str(split), default_split if split == "all" else str(split))
        records = group.to_dict(orient="records")
        if all(r["Human Written Answer"] is not None and len(r["Human Written Answer"]) for r in records):
            files.update({k: v.encode() for k, v in nlg_files(records, name).items()})
        else:
            skipped.append(f"nlg/{name}: instances without a Human Written Answer (a v2 release): the NLG scripts "
                           "take the human-written answer")
        if all(len(r["Choices"]) >= 5 for r in records):
            files.update({k: v.encode() for k, v in mcq_files(records, name).items()})
        else:
            skipped.append(f"mcq/{name}: instances with fewer than 5 choices: the MCQ scripts read choice0..choice4")
    return files, skipped


def _ints(values) -> list[int]:
    return [int(v) for v in values]


def _published_rows(annotations: pd.DataFrame, split_of: dict[str, str]) -> pd.DataFrame:
    """The release's own fields (its Dialogue strings, Target, Choices) for each imported instance."""
    return pd.DataFrame({
        "ID": annotations["cicero_id"], "Dialogue": annotations["release_dialogue"].map(list),
        "Target": annotations["release_target"], "Question": annotations["question"],
        "Choices": annotations["choices"].map(list),
        "Human Written Answer": [None if pd.isna(h) else [int(h)] for h in annotations["human_written_answer"]],
        "Correct Answers": annotations["correct_answers"].map(_ints),
        "split": [split_of.get(i, "all") for i in annotations["id"]],
    })


def _rebuilt_rows(mcq: pd.DataFrame) -> pd.DataFrame:
    """The rebuilt MCQ items as the release files of the `mcq` stage write them."""
    return pd.DataFrame({
        "ID": mcq["cicero_id"], "Dialogue": mcq["dialogue"].map(list), "Target": mcq["target"],
        "Question": mcq["question"], "Choices": mcq["choices"].map(list),
        "Human Written Answer": mcq["human_written_answer"].map(_ints), "Correct Answers": mcq["correct_answers"].map(_ints),
        "split": mcq["split"],
    })


def experiments(mcq: pd.DataFrame, annotations: pd.DataFrame, splits: pd.DataFrame | None = None) -> StageOutput:
    """The authors' experiment files, from the rebuilt MCQ items (`rebuilt/`) and from the release's own
    instances (`published/`), per split. One row per file written, with its line count."""
    split_of = dict(zip(splits["id"], splits["split"])) if splits is not None else {}
    stems = {Path(f).stem for f in annotations["source_file"]} if len(annotations) else set()
    default = SPLIT_NAMES.get(next(iter(stems)), "all") if len(stems) == 1 else "all"
    files, rows, notes = {}, [], {}
    for variant, table in (("rebuilt", _rebuilt_rows(mcq)), ("published", _published_rows(annotations, split_of))):
        written, skipped = experiment_files(table, default)
        notes[variant] = {"files": len(written), "not_written": skipped}
        for path, payload in sorted(written.items()):
            files[f"experiments/{variant}/{path}"] = payload
            rows.append({"id": f"{variant}/{path}", "variant": variant, "task": path.split("/")[0],
                         "file": path, "lines": payload.count(b"\n")})
    data = pd.DataFrame(rows, columns=["id", "variant", "task", "file", "lines"])
    return StageOutput(data=data, rows_in=len(data), files=files, notes=notes,
                       tables={"experiment_files": data.to_dict(orient="records")})
