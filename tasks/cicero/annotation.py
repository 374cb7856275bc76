"""The human-annotation round trip (docs/method.md 1.4): export tasks, import answers.

Export: one row per (dialogue, target, question) with the exact question string, also as
CSV and JSON Lines for an annotation tool.

Import: answers written in Label Studio (the `answers` labeling step, tasks/cicero/labeling.py: its JSON
export, each answer with its annotator, annotation and task), or answers in CICERO's released JSON
Lines (v1 or v2). CICERO's IDs are its own
numbering and its speaker letters are not always alternating, so dialogues are matched by
normalised text (case, whitespace and punctuation tokenisation folded) and targets by
utterance text. A dialogue not among the pipeline's is taken from the file and flagged; an
instance whose target cannot be located in its dialogue is rejected with the reason. A release file
whose name gives its split (`train.json`, `val.json`, `cicero_v2_test.jsonl`) marks its instances with it
(`release_split`): the `splits` stage keeps them there.
"""

from __future__ import annotations

import difflib
import io
import logging
import re

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.params import InputPath
from csk.runtime import StageOutput
from readers.cicero import read_cicero_release
from data_contracts.cicero import TYPE_OF_QUESTION
from tasks.splits import split_in_name
from tasks.labeling import export_rows

SOURCE_OF_PREFIX = {"daily-dialogue": "dailydialog", "dailydialog": "dailydialog", "mutual": "mutual",
                    "dream": "dream"}
FUZZY_TARGET = 0.9  # difflib ratio above which a non-exact target still locates its utterance


RELEASE_SPLITS = {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
                  "dev": "validation", "test": "test"}  # a release file's name word -> its split


def norm(text: str) -> str:
    """Fold case, whitespace and tokenisation of punctuation ("do n't" == "don't")."""
    return re.sub(r"[\W_]+", "", str(text).lower())


def dialogue_key(turns) -> str:
    return "|".join(norm(t["text"]) for t in turns)


def render_dialogue(turns) -> list[str]:
    return [f"{t['speaker']}: {t['text']}" for t in turns]


# ------------------------------------------------------------------ export
def annotation_tasks(targets: pd.DataFrame, dialogues: pd.DataFrame) -> StageOutput:
    """One annotation task per (dialogue, target, question), with the exact question string, for annotators."""
    turns = dict(zip(dialogues["id"], dialogues["turns"]))
    data = targets[["id", "dialogue_id", "utterance_index", "target", "inference_type", "question"]].copy()
    data["dialogue"] = [render_dialogue(turns[d]) for d in data["dialogue_id"]]
    data["answer"] = ""  # to be written by the annotator
    records = data.to_dict(orient="records")
    csv_buf = io.StringIO()
    data.assign(dialogue=["\n".join(d) for d in data["dialogue"]]).to_csv(csv_buf, index=False)
    return StageOutput(data=data, files={"annotation_tasks.jsonl": compute.jsonl_bytes(records),
                                         "annotation_tasks.csv": csv_buf.getvalue().encode()})


# ------------------------------------------------------------------ import
def locate_target(target: str, turns) -> tuple[int | None, str]:
    """Index of the utterance the target is, and how it was found ('exact', 'contained', 'fuzzy')."""
    key = norm(target)
    keys = [norm(t["text"]) for t in turns]
    for i, k in enumerate(keys):
        if k == key:
            return i, "exact"
    if key:
        hits = [i for i, k in enumerate(keys) if key in k or (k and k in key)]
        if len(hits) == 1:
            return hits[0], "contained"
    ratios = [difflib.SequenceMatcher(None, key, k).ratio() for k in keys]
    if ratios and max(ratios) >= FUZZY_TARGET:
        return int(max(range(len(ratios)), key=lambda i: (ratios[i], -i))), "fuzzy"
    return None, "not found"


def written_answers(dialogues: pd.DataFrame, tasks: pd.DataFrame, path: str, lenient: bool) -> StageOutput:
    """One instance per answer written in Label Studio (the `answers` step's export): the task's dialogue,
    target and question, the answer as its one choice (no distractor slot: the distractor engine gives
    it `n_distractors`), and who wrote it (annotator, annotation,
    Label Studio task, times) with the lineage to the export file."""
    rows, bad = export_rows(path, set(tasks["id"]), lenient=lenient)
    by_task = tasks.set_index("id")
    turns_of = dict(zip(dialogues["id"], dialogues["turns"]))
    source_of = dict(zip(dialogues["id"], dialogues["source"])) if "source" in dialogues.columns else {}
    out, rejected = [], []
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        text = " ".join(str(t).strip() for t in r["values"].get("answer", []) if str(t).strip())
        task = by_task.loc[r["row_id"]]
        if not text:
            rejected.append({**lineage, "reason_code": "empty_answer", "reason": f"annotator {r['annotator']} "
                             f"wrote no answer for task {r['row_id']}"})
            continue
        did = str(task["dialogue_id"])
        turns = turns_of.get(did)
        if turns is None:
            rejected.append({**lineage, "reason_code": "unknown_dialogue",
                             "reason": f"dialogue {did} of task {r['row_id']} is not among this run's dialogues"})
            continue
        rendered = render_dialogue(turns)
        out.append({**lineage, "id": f"{r['row_id']}/a{r['annotation_id']}", "cicero_id": did,
                    "version": "label-studio", "source_dialogue_id": did, "dialogue_id": did,
                    "dialogue_from_release": False, "corpus": str(source_of.get(did, "")), "task_id": r["row_id"],
                    "utterance_index": int(task["utterance_index"]), "target_match": "exact",
                    "target": task["target"], "dialogue": rendered, "inference_type": task["inference_type"],
                    "question": task["question"], "answer": text, "choices": [text], "correct_answers": [0],
                    "release_dialogue": rendered, "release_target": task["target"], "human_written_answer": 0})
    data = pd.DataFrame(out)
    if len(data):
        data["human_written_answer"] = data["human_written_answer"].astype("Int64")
        for c in ("annotation_id", "ls_task_id"):
            data[c] = data[c].astype("Int64")
    rejected = rejected + bad
    return StageOutput(data=data, rows_in=len(data) + len(rejected),
                       rejected=pd.DataFrame(rejected).astype({"reason": str}) if rejected else None,
                       notes={"answers": str(path), "annotations": len(rows) + len(bad),
                              "annotators": int(data["annotator"].nunique()) if len(data) else 0,
                              "tasks_answered": int(data["task_id"].nunique()) if len(data) else 0,
                              "tasks": len(tasks), "rejected": len(rejected),
                              "mean_lead_time_s": float(data["lead_time"].mean()) if len(data) else None})


def annotations(dialogues: pd.DataFrame, tasks: pd.DataFrame, *, release: InputPath = None, answers: InputPath = None,
                lenient: bool = True, allow_unmatched: bool = False) -> StageOutput:
    """One row per released instance, joined to the pipeline's dialogue, target and task; or one row per
    answer written in Label Studio.

    Args:
        answers: Label Studio's JSON export of the `answers` labeling step (`csk label pull cicero answers`):
            the answers people wrote for this run's annotation tasks (instead of a release)
        release: CICERO release JSON Lines (v1 or v2) holding the human answers; unset: the flow stops
            after the annotation task export
        lenient: reject malformed release lines with a reason instead of failing
        allow_unmatched: accept a release none of whose dialogues is among the rebuilt ones (every
            dialogue is then taken from the file); by default that is an error, since it means the
            release and the sources do not belong together
    """
    if answers and release:
        raise InputError("cicero.annotations.answers", None, "both answers (a Label Studio export) and release "
                         "are set: the instances come from one of them; unset the other")
    if answers:
        return written_answers(dialogues, tasks, answers, lenient)
    if not release:
        raise InputError("cicero.annotations.release", None, "no annotation file configured")
    read = read_cicero_release(release, lenient=lenient)
    split = split_in_name(release, RELEASE_SPLITS)  # val.json: its instances stay in validation (`splits`)
    by_key: dict[str, str] = {}
    for did, turns in zip(dialogues["id"], dialogues["turns"]):
        by_key.setdefault(dialogue_key(turns), did)
    turns_of = dict(zip(dialogues["id"], dialogues["turns"]))
    task_ids = set(tasks["id"])
    rows, rejected = [], [dict(r) for r in read.rejected]
    from_file: dict[str, str] = {}
    for inst in read.rows:
        did = by_key.get(dialogue_key(inst["turns"]))
        from_release = did is None
        turns = inst["turns"] if from_release else turns_of[did]
        idx, how = locate_target(inst["target"], turns)
        prov = {k: inst[k] for k in ("source_file", "source_record", "source_locator")}
        if idx is None:
            rejected.append({"id": inst["id"], "reason_code": "target_not_found", "reason": f"target not found in its dialogue: {inst['target'][:60]!r}",
                             "cicero_id": inst["cicero_id"], **prov})
            continue
        itype = TYPE_OF_QUESTION.get(inst["question"])
        if itype is None:
            rejected.append({"id": inst["id"], "reason_code": "unknown_question", "reason": f"unknown question {inst['question']!r}",
                             "cicero_id": inst["cicero_id"], **prov})
            continue
        choices = list(inst["choices"])
        human = inst["human_written_answer"]
        answer = choices[human] if human is not None else choices[inst["correct_answers"][0]]
        # a dialogue taken from the release is one dialogue however many IDs its records carry (AF and the
        # splits never cut it): named after the first record that has it
        dialogue_id = did or from_file.setdefault(dialogue_key(inst["turns"]), f"cicero-{inst['cicero_id']}")
        task_id = f"{dialogue_id}/u{idx:02d}/{itype}"
        prefix = inst["cicero_id"].rsplit("-", 1)[0]
        rows.append({
            "id": inst["id"], "cicero_id": inst["cicero_id"], "version": inst["version"],
            "source_dialogue_id": did, "dialogue_id": dialogue_id, "dialogue_from_release": from_release,
            "corpus": SOURCE_OF_PREFIX.get(prefix, prefix),
            "task_id": task_id if task_id in task_ids else None,
            "utterance_index": idx, "target_match": how, "target": turns[idx]["text"],
            "dialogue": render_dialogue(turns), "inference_type": itype, "question": inst["question"],
            "answer": answer, "choices": choices, "correct_answers": list(inst["correct_answers"]),
            "release_dialogue": list(inst["dialogue"]), "release_target": inst["target"],
            "human_written_answer": human, "release_split": split, **prov})
    data = pd.DataFrame(rows)
    if len(data):  # an index, absent in v2 releases: integer with nulls, never Arrow's null type
        data["human_written_answer"] = data["human_written_answer"].astype("Int64")
    match = match_rates(data)
    log = logging.getLogger("csk")
    if not len(dialogues):  # a release alone (rebuild-distractors --release): nothing to match against
        log.info("annotations: %d released instances of %d dialogues, every dialogue taken from the release "
                 "(no rebuilt sources in this run)", len(data), sum(m["dialogues"] for m in match.values()))
    for corpus, m in match.items() if len(dialogues) else ():
        log.info("annotations: %s: %d of %d released dialogues matched rebuilt ones (%.1f%%)", corpus,
                 m["matched"], m["dialogues"], 100 * m["rate"])
    matched_any = any(m["matched"] for m in match.values())
    if len(dialogues) and len(data) and not matched_any and not allow_unmatched:
        raise InputError(str(release), None, f"none of its {sum(m['dialogues'] for m in match.values())} dialogues "
                         f"matches one of the {len(dialogues)} rebuilt dialogues: the release does not belong to "
                         "these sources. Point cicero.annotations.release at the release of these sources, or set "
                         "cicero.annotations.allow_unmatched = true to take every dialogue from the file")
    counts = {
        "instances": read.records,
        "matched_dialogues": int((~data["dialogue_from_release"]).sum()) if len(data) else 0,
        "dialogues_from_release": int(data["dialogue_from_release"].sum()) if len(data) else 0,
        "targets_located": len(data),
        "matched_pipeline_tasks": int(data["task_id"].notna().sum()) if len(data) else 0,
        "rejected": len(rejected),
    }
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None, rows_in=read.records,
                       notes={"release": str(release), "counts": counts, "match_rates": match},
                       tables={"matching": [{"measure": k, "count": v} for k, v in counts.items()],
                               "match_rates": [{"corpus": c, **m} for c, m in match.items()]})


def match_rates(data: pd.DataFrame) -> dict[str, dict]:
    """Per source corpus: released dialogues, how many matched a rebuilt dialogue, and the share."""
    if not len(data):
        return {}
    per = data.drop_duplicates("cicero_id").groupby("corpus")["dialogue_from_release"]
    return {str(c): {"dialogues": int(len(s)), "matched": int((~s).sum()), "rate": float((~s).mean())}
            for c, s in per}


def release_instances(*, release: InputPath = None, lenient: bool = True) -> StageOutput:
    """A released CICERO file alone as the instance table (no source corpora): every dialogue is
    taken from the file; the gold answer is `Human Written Answer` (v1) or the first of the
    `Correct Answers` (v2).

    Args:
        release: CICERO release JSON Lines (v1 or v2) holding the human answers; unset: the flow stops
            after the annotation task export
        lenient: reject malformed release lines with a reason instead of failing
    """
    empty = pd.DataFrame({"id": pd.Series([], dtype=str), "turns": pd.Series([], dtype=object)})
    return annotations(empty, pd.DataFrame({"id": pd.Series([], dtype=str)}), release=release, lenient=lenient)
