"""SEEDS 2.3, the crowd round trip. Export: per fact, "What makes this possible?" and "What makes this
impossible?", three answers each, with the option to say the fact does not make sense. Import: a
plain answers table (`task_id,worker_id,answer,does_not_make_sense`) and/or a PaCo release
(`PaCo_nli_*.csv`: context,question,label; `PaCo_Gen.csv`: prompt,refs_0..2).

Release statements are matched to the rebuilt facts by normalised text; a statement none of the
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
from readers import read_paco_gen, read_paco_nli
from readers.base import csv_rows, require_file

QUESTIONS = {"enabling": "What makes this possible?", "disabling": "What makes this impossible?"}
SKIP_OPTION = "This statement does not make sense."


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


def _release(path: Path, facts: pd.DataFrame, lenient: bool) -> tuple[list[dict], list[dict], dict]:
    header = ",".join(csv_rows(path)[0])
    if header.startswith("context,question,label"):
        result = read_paco_nli(path, lenient=lenient)
        items = [(r, r["statement"], r["polarity"], [r["precondition"]]) for r in result.rows]
        layout = "p-nli"
    elif header.startswith("prompt,refs_"):
        result = read_paco_gen(path, lenient=lenient)
        items = [(r, r["statement"], r["polarity"], r["references"]) for r in result.rows]
        layout = "p-g"
    else:
        raise InputError(str(path), "line 1", "not a PaCo release: expected the header context,question,label "
                         f"(P-NLI) or prompt,refs_0,... (P-G), got {header[:80]!r}")
    by_text = {norm(s): i for i, s in zip(facts["id"], facts["statement"])}
    rows = []
    counter: dict[tuple, int] = {}
    for rec, statement, polarity, answers in items:
        fid = by_text.get(norm(statement))
        own = fid or "release-" + hashlib.sha1(norm(statement).encode()).hexdigest()[:10]
        for a in answers:
            k = counter.get((own, polarity), 0)
            counter[(own, polarity)] = k + 1
            rows.append({"id": f"{own}/{polarity}/r{k}", "fact_id": own, "source_fact_id": fid,
                         "statement": statement, "polarity": polarity, "question": QUESTIONS[polarity],
                         "answer": a, "worker_id": None, "fact_from_release": fid is None,
                         "source_file": rec["source_file"], "source_record": rec["source_record"],
                         "source_locator": rec["source_locator"]})
    rejected = [{**r, "parent_id": None} for r in result.rejected]
    statements = {r[1] for r in items}
    matched = {s for s in statements if norm(s) in by_text}
    return rows, rejected, {"layout": layout, "records": result.records, "statements": len(statements),
                            "matched_facts": len(matched)}


def annotations(facts: pd.DataFrame, tasks: pd.DataFrame, *, answers: InputPath = None, release: InputPath = None,
                lenient: bool = True) -> StageOutput:
    """Crowd answers joined to the facts they answer.

    Args:
        answers: plain answers table (CSV: task_id, worker_id, answer, does_not_make_sense) for the exported tasks
        release: a released PaCo file (PaCo_nli_*.csv or PaCo_Gen.csv) whose answers are imported
        lenient: reject a malformed record with its reason and go on; false: stop at the first
    """
    if unused(answers) and unused(release):
        from csk.errors import ConfigError

        raise ConfigError("annotations: set `answers` (a crowd answers table) and/or `release` (a PaCo CSV)")
    rows, rejected, notes = [], [], {}
    if not unused(answers):
        r, j = _answers_table(require_file(answers), tasks, lenient)
        rows += r
        rejected += j
        notes["answers_table"] = {"answers": len(r), "rejected": len(j)}
    if not unused(release):
        r, j, info = _release(require_file(release), facts, lenient)
        rows += r
        rejected += j
        notes["release"] = info
    columns = ["id", "fact_id", "source_fact_id", "statement", "polarity", "question", "answer", "worker_id",
               "fact_from_release", "source_file", "source_record", "source_locator"]
    data = pd.DataFrame(rows, columns=columns)
    data["fact_id"] = data["fact_id"].astype(str)
    notes["facts_answered"] = int(data["fact_id"].nunique())
    notes["facts_from_release"] = int(data.loc[data["fact_from_release"].astype(bool), "fact_id"].nunique())
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None,
                       rows_in=len(data) + len(rejected), notes=notes)
