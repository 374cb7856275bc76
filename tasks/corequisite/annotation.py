"""docs/method.md 2.3, the crowd round trip. Export: per fact, "What makes this possible?" and "What makes this
impossible?", three answers each, with the option to say the fact does not make sense. Import: a
plain answers table (`task_id,worker_id,answer,does_not_make_sense`) or Label Studio's JSON export of
the `preconditions` labeling step (tasks/corequisite/labeling.py), and/or a PaCo release
(`PaCo_nli_*.csv`: context,question,label; `PaCo_Gen.csv`: prompt,refs_0..2).

A Label Studio export gives the rows the plain table would: each answer text of an annotation (its
boxes `answer_1`..`answer_3` in order) is one answer, numbered per task in the export's order
(`<task>/<k>`), its worker the annotator; a tick of "This statement does not make sense." rejects the
annotation's answers as the table's `does_not_make_sense` does. Every row keeps its annotation
(`ANNOTATION_COLUMNS`: annotator, annotation and Label Studio task ids, times, lead time) and its
place in the export file (source_file, source_record = the task's index, source_locator = task,
annotation and answer box) and `task_id`, the annotation task it answers; skipped annotations and
those of tasks not among this run's are rejected with their reason.

A release file whose name gives a split (`PaCo_nli_train.csv`, `..._eval.csv` = dev) marks its rows with it
(`release_split`): the `splits` stage keeps them there. Release statements are matched to the rebuilt facts by normalised text; a statement none of the
rebuilt facts has is taken from the release as its own fact, flagged `fact_from_release`, with
lineage to its release record."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.params import InputPath, unused
from csk.runtime import StageOutput
from readers.paco import read_paco_gen, read_paco_nli
from readers.base import csv_rows, require_file
from tasks.labeling import ANNOTATION_COLUMNS, export_rows, is_export
from tasks.splits import split_in_name

QUESTIONS = {"enabling": "What makes this possible?", "disabling": "What makes this impossible?"}
RELEASE_SPLITS = {"train": "train", "eval": "dev", "dev": "dev", "test": "test"}  # file-name word -> split
SKIP_OPTION = "This statement does not make sense."
SKIP_CONTROL = "does_not_make_sense"  # the labeling step's Choices holding SKIP_OPTION
ANSWER_CONTROL = re.compile(r"^answer(?:_(\d+))?$")  # its TextAreas: answer_1..answer_3 (or one `answer`)


def norm(text: str) -> str:
    return re.sub(r"[\W_]+", " ", str(text).lower()).strip()


def annotation_tasks(facts: pd.DataFrame, *, answers_per_question: int = 3) -> StageOutput:
    """Two questions per fact, each asking for `answers_per_question` answers.

    Args:
        answers_per_question: answers asked of the crowd per question (the paper: 3)
    """
    rows = [{"id": f"{f.id}/{polarity}", "fact_id": f.id, "statement": f.statement, "polarity": polarity,
             "question": q, "answers_wanted": answers_per_question, "skip_option": SKIP_OPTION}
            for f in facts.itertuples(index=False) for polarity, q in QUESTIONS.items()]
    data = pd.DataFrame(rows)
    buf = io.StringIO()
    data.rename(columns={"id": "task_id"}).to_csv(buf, index=False, lineterminator="\n")
    return StageOutput(data=data, rows_in=len(data), files={
        "annotation_tasks.csv": buf.getvalue().encode(),
        "annotation_tasks.jsonl": compute.jsonl_bytes(data.to_dict(orient="records"))})


def _answers_table(path: Path, tasks: pd.DataFrame, lenient: bool) -> tuple[list[dict], list[dict]]:
    known = tasks.set_index("id")
    rows, rejected = [], []
    header, records = csv_rows(path)
    need = {"task_id", "answer"}
    if not need <= set(header):
        raise InputError(str(path), "line 1", f"the answers table needs columns {sorted(need)}, got {header}")
    seen: dict[str, int] = {}
    for line, rec, malformed in records:
        locator = f"line {line}"
        base = {"source_file": str(path), "source_record": line, "source_locator": locator}
        if malformed:
            if not lenient:
                raise InputError(str(path), locator, malformed)
            rejected.append({"id": f"answers-line-{line}", "parent_id": None, "reason_code": "malformed_record",
                             "reason": malformed, "answer": "", **base})
            continue
        task = (rec.get("task_id") or "").strip()
        k = seen.get(task, 0)
        seen[task] = k + 1
        rid = f"{task}/{k}"
        skip = str(rec.get("does_not_make_sense") or "0").strip().lower() in ("1", "true", "yes")
        problem = None
        if task not in known.index:
            problem = ("unknown_task", f"task {task!r} is not one of the exported annotation tasks")
        elif skip:
            problem = ("does_not_make_sense", "the worker marked the fact as not making sense")
        elif not (rec.get("answer") or "").strip():
            problem = ("empty_answer", "no answer text")
        if problem is not None:
            if problem[0] == "unknown_task" and not lenient:
                raise InputError(str(path), locator, problem[1])
            rejected.append({"id": rid, "parent_id": None, "reason_code": problem[0], "reason": problem[1],
                             "answer": rec.get("answer") or "", **base})
            continue
        t = known.loc[task]
        rows.append({"id": rid, "fact_id": t["fact_id"], "source_fact_id": t["fact_id"], "statement": t["statement"],
                     "polarity": t["polarity"], "question": t["question"], "answer": rec["answer"],
                     "worker_id": (rec.get("worker_id") or None), "fact_from_release": False, **base})
    return rows, rejected


def _answer_texts(values: dict) -> list[tuple[str, str]]:
    """(control, text) of every non-blank answer of one annotation, in the boxes' order."""
    controls = sorted((int(m.group(1) or 0), name) for name in values if (m := ANSWER_CONTROL.match(name)))
    return [(name, str(t).strip()) for _, name in controls for t in values[name] if str(t).strip()]


def _label_studio_answers(path: Path, tasks: pd.DataFrame, lenient: bool) -> tuple[list[dict], list[dict], dict]:
    """The `preconditions` step's export as the plain table's rows (see the module): answers, rejected, counts."""
    known = tasks.set_index("id")
    annotations, bad = export_rows(path, set(known.index), lenient=lenient)
    if bad and not lenient:
        first = next((b for b in bad if b["reason_code"] == "unknown_row"), None)
        if first is not None:
            raise InputError(str(path), first["source_locator"], first["reason"])
    rejected = []
    for b in bad:  # the reader's rejects: Label Studio's task id under the name the rows use
        b = {**b, "parent_id": None, "answer": ""}
        if "task_id" in b:
            b["ls_task_id"] = b.pop("task_id")
        rejected.append(b)
    rows, seen = [], {}
    for a in annotations:
        task = a["row_id"]
        lineage = {**{k: a[k] for k in ANNOTATION_COLUMNS}, "source_file": a["source_file"],
                   "source_record": a["source_record"]}
        texts = _answer_texts(a["values"])
        skip = SKIP_OPTION in (a["values"].get(SKIP_CONTROL) or [])
        for control, text in texts or [(None, "")]:
            k = seen.get(task, 0)
            seen[task] = k + 1
            rid = f"{task}/{k}"
            where = a["source_locator"] + (f", {control}" if control else "")
            base = {**lineage, "source_locator": where}
            if skip or not text:
                code, why = (("does_not_make_sense", f"annotator {a['annotator']} marked the fact as not making "
                              "sense") if skip else ("empty_answer", f"annotator {a['annotator']} wrote no answer"))
                rejected.append({"id": rid, "parent_id": None, "reason_code": code, "reason": why, "answer": text,
                                 **base})
                continue
            t = known.loc[task]
            rows.append({"id": rid, "fact_id": t["fact_id"], "source_fact_id": t["fact_id"],
                         "statement": t["statement"], "polarity": t["polarity"], "question": t["question"],
                         "answer": text, "worker_id": a["annotator"], "fact_from_release": False,
                         "task_id": task, **base})
    counts = {"layout": "label-studio", "annotations": len(annotations) + len(bad),
              "annotators": len({a["annotator"] for a in annotations}),
              "tasks_answered": len({r["id"].rsplit("/", 1)[0] for r in rows}),
              "does_not_make_sense": sum(r["reason_code"] == "does_not_make_sense" for r in rejected),
              "rejected_annotations": len(bad),
              "mean_lead_time_s": float(pd.Series([a["lead_time"] for a in annotations], dtype=float).mean())
              if annotations else None}
    return rows, rejected, counts


def _layout(path: Path) -> str:
    """"p-nli" or "p-g" by the file's header; anything else is an InputError naming the file."""
    header = ",".join(csv_rows(path)[0])
    if header.startswith("context,question,label"):
        return "p-nli"
    if header.startswith("prompt,refs_"):
        return "p-g"
    raise InputError(str(path), "line 1", "not a PaCo release: expected the header context,question,label "
                     f"(P-NLI) or prompt,refs_0,... (P-G), got {header[:80]!r}")


def release_files(path: str | Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """(file, layout) of a release file, or of a release directory's CSV files: the P-NLI files first (their
    names give their splits, which their answers keep), then P-G, each by name; and the directory's other
    entries, not read (a README, a licence: named in the manifest)."""
    p = Path(path)
    if not p.is_dir():
        return [(require_file(p), _layout(require_file(p)))], []
    entries = sorted(p.iterdir())
    found = [f for f in entries if f.suffix.lower() == ".csv" and f.is_file()]
    if not found:
        raise InputError(str(p), None, "no CSV file in this directory: a PaCo release is PaCo_nli_*.csv and/or "
                         "PaCo_Gen.csv")
    layouts = sorted(((f, _layout(require_file(f))) for f in found), key=lambda fl: (fl[1] != "p-nli", fl[0].name))
    return layouts, [f.name for f in entries if f not in found]


def _release(path: Path, layout: str, facts: pd.DataFrame, lenient: bool, counter: dict[tuple, int],
             seen: dict[tuple, list[tuple[str, str]]]) -> tuple[list[dict], list[dict], dict]:
    """One release file's answers. `counter` numbers each (fact, polarity)'s answers across the files of a
    release; `seen`: (fact, polarity, answer) -> the (file, line) of each copy read (a directory's files overlap: P-G
    holds answers of the P-NLI files): a copy a later file repeats is rejected as `duplicate_answer`."""
    if layout == "p-nli":
        result = read_paco_nli(path, lenient=lenient)
        items = [(r, r["statement"], r["polarity"], [r["precondition"]]) for r in result.rows]
    else:
        result = read_paco_gen(path, lenient=lenient)
        items = [(r, r["statement"], r["polarity"], r["references"]) for r in result.rows]
    by_text = {norm(s): i for i, s in zip(facts["id"], facts["statement"])}
    split = split_in_name(path, RELEASE_SPLITS)  # PaCo_nli_train.csv: its rows stay in train
    rows, duplicates = [], []
    # Answers are a multiset: the n-th copy of an answer in this file repeats an earlier file's only if that
    # file held at least n + 1 copies (a P-G row may hold one answer twice where P-NLI held it once)
    earlier = {k: len(v) for k, v in seen.items()}
    here: dict[tuple, int] = {}
    for i, (rec, statement, polarity, answers) in enumerate(items):
        fid = by_text.get(norm(statement))
        own = fid or "release-" + hashlib.sha1(norm(statement).encode()).hexdigest()[:10]
        for j, a in enumerate(answers):
            row = {"fact_id": own, "source_fact_id": fid, "statement": statement, "polarity": polarity,
                   "question": QUESTIONS[polarity], "answer": a, "worker_id": None, "fact_from_release": fid is None,
                   "source_file": rec["source_file"], "source_record": rec["source_record"],
                   "source_locator": rec["source_locator"], "release_split": split}
            key = (own, polarity, norm(a))
            n = here.get(key, 0)
            here[key] = n + 1
            if n < earlier.get(key, 0):  # within one file every answer stays, as released
                first = seen[key][n]
                if layout == "p-g":  # the row read first stands for this copy: its place in P-G
                    first[2].update(release_gen_row=i, release_gen_ref=j)
                duplicates.append({"id": f"{rec['id']}/answer{j}", **row, "parent_id": None,
                                   "reason_code": "duplicate_answer",
                                   "reason": f"the same {polarity} answer to this statement was read from "
                                             f"{first[0]} {first[1]}"})
                continue
            k = counter.get((own, polarity), 0)
            counter[(own, polarity)] = k + 1
            rows.append({"id": f"{own}/{polarity}/r{k}", **row, "release_gen_row": i if layout == "p-g" else None,
                         "release_gen_ref": j if layout == "p-g" else None})
            seen.setdefault(key, []).append((path.name, rec["source_locator"], rows[-1]))
    rejected = [{**r, "parent_id": None} for r in result.rejected] + duplicates
    statements = {r[1] for r in items}
    matched = {s for s in statements if norm(s) in by_text}
    return rows, rejected, {"layout": layout, "records": result.records, "statements": len(statements),
                            "matched_facts": len(matched), "split": split,
                            **({"duplicate_answers": len(duplicates)} if duplicates else {})}


def annotations(facts: pd.DataFrame, tasks: pd.DataFrame, *, answers: InputPath = None, release: InputPath = None,
                lenient: bool = True) -> StageOutput:
    """Crowd answers joined to the facts they answer.

    Args:
        answers: plain answers table (CSV: task_id, worker_id, answer, does_not_make_sense) for the exported tasks,
            or Label Studio's JSON export of the `preconditions` labeling step (`csk label pull corequisite
            preconditions`): each answer written there is a row, its worker the annotator
        release: a released PaCo file (PaCo_nli_*.csv or PaCo_Gen.csv) whose answers are imported, or a
            directory of them (the whole release: P-NLI files first, each keeping the split its name gives,
            then P-G; an answer already read from an earlier file is rejected as `duplicate_answer`)
        lenient: reject a malformed record with its reason and go on; false: stop at the first
    """
    if unused(answers) and unused(release):
        from csk.errors import ConfigError

        raise ConfigError("annotations: set `answers` (a crowd answers table) and/or `release` (a PaCo CSV)")
    rows, rejected, notes = [], [], {}
    annotated = False
    if not unused(answers) and is_export(answers):
        r, j, counts = _label_studio_answers(require_file(answers), tasks, lenient)
        rows += r
        rejected += j
        annotated = True
        notes["answers_table"] = {"answers": len(r), "rejected": len(j), **counts}
    elif not unused(answers):
        r, j = _answers_table(require_file(answers), tasks, lenient)
        rows += r
        rejected += j
        notes["answers_table"] = {"answers": len(r), "rejected": len(j)}
    if not unused(release):
        (files, not_read), counter, seen = release_files(release), {}, {}
        infos = []
        for f, layout in files:
            r, j, info = _release(f, layout, facts, lenient, counter, seen)
            rows += r
            rejected += j
            infos.append({"file": f.name, **info})
        notes["release"] = ({k: v for k, v in infos[0].items() if k != "file"} if not Path(str(release)).is_dir()
                            else {"directory": str(release), "files": infos, "not_read": not_read})
    columns = ["id", "fact_id", "source_fact_id", "statement", "polarity", "question", "answer", "worker_id",
               "fact_from_release", "source_file", "source_record", "source_locator"]
    if annotated:  # who wrote each answer in Label Studio, for which task (null on a release's rows)
        columns += ["task_id", *ANNOTATION_COLUMNS]
    if not unused(release):  # the split its file name gives (null: none, or a crowd answer): `splits` keeps it;
        # the P-G row and reference each answer is in (null: not in P-G), so P-G is written in the release's order
        columns += ["release_split", "release_gen_row", "release_gen_ref"]
    data = pd.DataFrame(rows, columns=columns)
    for c in ("release_gen_row", "release_gen_ref"):
        if c in data.columns:
            data[c] = pd.array([None if pd.isna(v) else int(v) for v in data[c]], dtype="Int64")
    data["fact_id"] = data["fact_id"].astype(str)
    if annotated:
        data = _annotation_dtypes(data)
    notes["facts_answered"] = int(data["fact_id"].nunique())
    notes["facts_from_release"] = int(data.loc[data["fact_from_release"].astype(bool), "fact_id"].nunique())
    rejected_df = _annotation_dtypes(pd.DataFrame(rejected)) if rejected else None
    return StageOutput(data=data, rejected=rejected_df, rows_in=len(data) + len(rejected), notes=notes)


def _annotation_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    """The annotation columns' types of data_contracts.common.Annotated, nulls allowed (a release's rows)."""
    df = df.copy()
    for c in ("annotation_id", "ls_task_id"):
        if c in df.columns:
            df[c] = pd.array([None if pd.isna(v) else int(v) for v in df[c]], dtype="Int64")
    if "lead_time" in df.columns:
        df["lead_time"] = df["lead_time"].astype(float)
    for c in ("annotator", "created_at", "updated_at"):
        if c in df.columns:
            df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)) \
                .astype(object)
    return df
