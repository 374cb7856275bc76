"""Any multiple-choice file in, the same file with rebuilt distractors out.

`mcq_file` reads a JSON Lines, CSV/TSV or Parquet file whose columns a *layout* names (a preset
for the project's own releases and SWAG/HellaSwag, or `--map context=...,choices=...,answer=...`)
into the distractor engine's instances (`distractors.Instances`), each with its source file and
record. `rebuilt_file` writes the adversarially chosen distractors back into each record, in
the input's own format, key order and column layout: the correct choices stay where they were
(so the answer field, index or label or text, still holds), only the distractor slots change.

A layout maps the engine's fields to the file's columns:
* `choices`: one column holding a list (`choices=endings`), or one column per choice, given by
  name (`choices=ending0|ending1|ending2|ending3`) or by pattern (`choices=ending?`, `choices=(?)`:
  shell-style, in natural order);
* `answer`: the gold: an index (0-based), a choice column's name (`"(b)"`), a choice's text, a
  list whose first item is one of these (CORECODE's `["(a)", "text"]`) or a list of indices;
  `a|b` takes the first of the columns present (CICERO v1's `Human Written Answer`, else v2's
  `Correct Answers`);
* `correct`: every correct choice, where a file marks several (indices); default the answer;
* `context`: what a discriminator reads with each choice, `a+b` joins columns (a list is joined
  by spaces); `question`: the prompt kind (retrieval draws alternatives from instances with the
  same question; unset: the whole file); `passage`: the texts entity swaps take names from
  (default: the context's columns); `group`: the unit no split may cut (a dialogue, a video, a
  fact; a list or object is hashed; unset: each record is its own group); `id`: the record id
  (unset: the record number); `target`: what the question is about (CICERO's target utterance): the
  dialogue generator never offers an item an answer written about its own target.
"""

from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal

import pandas as pd

from csk.errors import ConfigError, InputError
from csk.params import InputFile
from csk.runtime import StageOutput
from readers.base import (RECORD_ERRORS, RecordError, ReadResult, csv_rows, handle_bad, json_line_records,
                          record_problem, require_file)
from tasks.distractors.verification import fill_slots
from tasks.sources import MAX_REJECTED_SHARE, Share, stop_unless_readable, unreadable

FIELDS = ("id", "group", "context", "question", "choices", "answer", "correct", "passage", "target")

# The project's releases and the documented third-party example. CICERO's ID names a dialogue, not an
# item (its records are numbered); its instances read as the CICERO slice reads them
# (tasks/cicero/instances.py): context = question + target + dialogue.
PRESETS: dict[str, dict[str, str]] = {
    "cicero": {"group": "Dialogue", "context": "Question+Target+Dialogue", "question": "Question",
               "choices": "Choices", "answer": "Human Written Answer|Correct Answers", "correct": "Correct Answers",
               "passage": "Dialogue", "target": "Target"},
    # PaCo P-MCQA as this project writes it (the release ships none): PaCo_mcqa_{train,eval,test}.jsonl.
    # The file names no fact: the context (statement + question, or answer + question) is the group.
    "paco": {"id": "id", "group": "context", "context": "context", "question": "question", "choices": "choices",
             "answer": "label"},
    # CORECODE's multiple-choice files (release README): options "(a)", "(b)", ...; answer ["(a)", text].
    # Knowledge filling's options are the phrase and its conflict phrases; domain and slot identification
    # offer the ontology's labels (no distractors to rebuild: refused, see `label_set`).
    "corecode": {"id": "id", "group": "dialogue", "context": "dialogue", "question": "question", "choices": "(?)",
                 "answer": "answer", "passage": "dialogue"},
    # SWAG (Zellers et al. 2018) CSV: sent1 + sent2 are the context, ending0..3 the choices, label the gold.
    "swag": {"id": "fold-ind", "group": "video-id", "context": "sent1+sent2", "choices": "ending?", "answer": "label",
             "passage": "sent1"},
    # HellaSwag JSON Lines: ctx, endings (a list), label; source_id names the video / article.
    "hellaswag": {"id": "ind", "group": "source_id", "context": "ctx", "choices": "endings", "answer": "label",
                  "passage": "ctx"},
}
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
Format = Literal["auto", "jsonl", "csv", "tsv", "parquet"]
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# A file whose records repeat a few choice sets drawn from so few texts offers labels, not distractors.
LABEL_SET_TEXTS = 64


@dataclass(frozen=True)
class Layout:
    """Which columns hold what (see the module doc); every value a column name, `a+b` or `a|b`."""

    choices: str
    answer: str
    context: str = ""
    question: str = ""
    id: str = ""
    group: str = ""
    correct: str = ""
    passage: str = ""
    target: str = ""

    @classmethod
    def of(cls, preset: str = "", mapping: dict[str, str] | None = None) -> "Layout":
        if preset and preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}, or map the columns "
                              "with --map context=...,choices=...,answer=...")
        values = {**PRESETS.get(preset, {}), **(mapping or {})}
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise ConfigError(f"--map: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(FIELDS)}")
        missing = [f for f in ("choices", "answer") if not values.get(f)]
        if missing:
            raise ConfigError(f"the layout names no {' and no '.join(missing)} column: pass --preset "
                              f"({', '.join(PRESETS)}) or --map choices=COLUMN(S),answer=COLUMN")
        return cls(**values)


PROBE_RECORDS = 200  # records read before a run starts, to check the layout's columns against the file


def check_layout(input: str | Path, format: str = "auto", preset: str = "", map: dict[str, str] | None = None) -> Layout:
    """Everything about a file and its layout that can be told before a run starts (a command checks it
    before Prefect does anything): a readable file, its format, the preset and map fields, and every column
    the layout needs (choices, answer, and the named context, question, id, group, correct, passage)
    present in at least one of the first PROBE_RECORDS records. One error naming the field, the column and
    the file, with the columns the file has."""
    layout = Layout.of(preset, map)
    path = require_file(input)
    fmt = file_format(str(path), format)
    result = ReadResult()
    columns, records = _records(path, fmt, result, True)
    seen: set[str] = set(columns or [])
    for k, (_, _, record) in enumerate(records):
        seen |= {c for c, v in record.items() if v is not None and v != ""}
        if k + 1 >= PROBE_RECORDS:
            break
    if not seen:
        return layout  # nothing readable: the stage rejects every record with its reason
    for field in ("choices", "answer", "context", "question", "id", "group", "correct", "passage"):
        spec = getattr(layout, field)
        if not spec or any(c in spec for c in "*?["):
            continue
        for part in spec.split("+"):
            names = part.split("|")
            if not any(n in seen for n in names):  # a|b: the first present (or the choice columns) is enough
                how = f"--map {field}={spec}" if map and field in map else f"preset {preset!r}"
                raise InputError(str(path), None, f"no record holds the column {' or '.join(repr(n) for n in names)} "
                                 f"({field}, from {how}); its first records have {', '.join(sorted(seen)[:20])}")
    return layout


def parse_map(text: str) -> dict[str, str]:
    """`context=a+b,choices=x|y,answer=label` -> {field: columns}."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        field, sep, value = part.partition("=")
        if not sep or not field.strip():
            raise ConfigError(f"--map: {part!r} is not FIELD=COLUMN (e.g. --map choices=endings,answer=label)")
        out[field.strip()] = value.strip()
    return out


def file_format(path: str, format: str) -> str:
    if format != "auto":
        return format
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"{path}: cannot tell the format from the suffix {Path(path).suffix!r}; pass --format "
                          "jsonl, csv, tsv or parquet")
    return fmt


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def choice_columns(spec: str, columns: list[str]) -> list[str] | None:
    """The per-choice columns a spec names (None: one list column). A pattern matches in natural order."""
    names = spec.split("|")
    if len(names) == 1 and not any(c in spec for c in "*?["):
        return None
    out: list[str] = []
    for name in names:
        if any(c in name for c in "*?["):
            out += sorted((c for c in columns if fnmatch.fnmatchcase(c, name) and c not in out), key=_natural)
        else:
            out.append(name)
    return out


def _json_value(value: Any, fmt: str) -> Any:
    """CSV/TSV cells are text: a cell holding a JSON list or object (or a number) is read as one."""
    if fmt in ("csv", "tsv") and isinstance(value, str) and value[:1] in "[{-0123456789":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _get(record: dict, column: str, fmt: str) -> Any:
    """The first present of `a|b`; a missing column is a RecordError naming it."""
    for name in column.split("|"):
        if name in record and record[name] is not None and record[name] != "":
            return _json_value(record[name], fmt)
    raise RecordError(f"no {' or '.join(repr(n) for n in column.split('|'))} field")


def _optional(record: dict, column: str, fmt: str) -> str:
    """A field only some files have (`target`): "" where the record lacks it (the dialogue generator then
    takes the item's question for what it is about), never a rejected record."""
    if not column:
        return ""
    try:
        return _text(_get(record, column, fmt))
    except RecordError:
        return ""


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    if isinstance(value, (dict, type(None))):
        raise RecordError(f"expected text, found {type(value).__name__}")
    return str(value).strip()


def _key(value: Any) -> str:
    """A group id: a scalar as text; a list or object (a dialogue) by the hash of its JSON."""
    if isinstance(value, (list, tuple, dict)):
        return "h" + hashlib.sha1(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]
    return str(value)


def _index(value: Any, choices: list[str], names: list[str] | None) -> int:
    """One answer value -> a choice index (see the module doc)."""
    if isinstance(value, bool):
        raise RecordError(f"answer {value!r} is not an index, a choice column or a choice text")
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        i = int(value)
    elif isinstance(value, str) and names and value in names:
        i = names.index(value)
    elif isinstance(value, str) and value.strip() in choices:
        i = choices.index(value.strip())
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        i = int(value)
    else:
        raise RecordError(f"answer {value!r} is not an index, a choice column or a choice text")
    if not 0 <= i < len(choices):
        raise RecordError(f"answer index {i} is outside the {len(choices)} choices")
    return i


def answer_indices(value: Any, choices: list[str], names: list[str] | None) -> list[int]:
    if isinstance(value, (list, tuple)):
        if not value:
            raise RecordError("empty answer")
        if len(value) == 2 and isinstance(value[0], str) and names and value[0] in names:
            return [_index(value[0], choices, names)]  # CORECODE: [label, text]
        return [_index(v, choices, names) for v in value]
    return [_index(value, choices, names)]


def language(texts: list[str]) -> str:
    """"zh" when most letters are CJK ideographs, else "en" (the generators' rules are per language)."""
    joined = "".join(texts)
    letters = sum(ch.isalpha() for ch in joined)
    return "zh" if letters and len(CJK.findall(joined)) / letters > 0.5 else "en"


def instance(record: dict, layout: Layout, fmt: str, columns: list[str], number: int) -> dict:
    names = choice_columns(layout.choices, columns)
    if names is None:
        choices = _get(record, layout.choices, fmt)
        if not isinstance(choices, (list, tuple)):
            raise RecordError(f"{layout.choices!r} is not a list of choices ({type(choices).__name__})")
    else:
        if not names:
            raise RecordError(f"no column matches the choices pattern {layout.choices!r}")
        # an item with fewer choices than the file has columns leaves the last cells empty (CSV / TSV
        # write no null): its choices are the filled cells before them; a gap between filled cells is
        # an error, since an answer index could no longer be read
        filled = [n for n in names if n in record and record[n] is not None and record[n] != ""]
        if filled and filled != names[:len(filled)]:
            gap = next(n for n in names[:names.index(filled[-1])] if n not in filled)
            raise RecordError(f"choice column {gap!r} is empty between filled ones")
        names = filled or names
        choices = [_get(record, n, fmt) for n in names]
    choices = [_text(c) for c in choices]
    if any(not c for c in choices):
        raise RecordError(f"choice {[not c for c in choices].index(True)} is empty")
    if len(choices) < 2:
        raise RecordError(f"{len(choices)} choice(s): a multiple-choice item needs two or more")
    gold_at = answer_indices(_get(record, layout.answer, fmt), choices, names)[0]
    correct = sorted(set(answer_indices(_get(record, layout.correct, fmt), choices, names))) if layout.correct else []
    correct = sorted(set(correct) | {gold_at})
    # An item whose published choices are all correct has no distractor slot: it comes back as published
    # (n_distractors 0), never turned into an item with new distractors and fewer correct answers.
    slots = [k for k in range(len(choices)) if k not in correct]
    context_parts = [_get(record, c, fmt) for c in layout.context.split("+")] if layout.context else []
    passage_cols = layout.passage.split("+") if layout.passage else (layout.context.split("+") if layout.context else [])
    passage: list[str] = []
    for c in passage_cols:
        v = _get(record, c, fmt)
        passage += [_text(t) for t in v] if isinstance(v, (list, tuple)) else [_text(v)]
    rid = _text(_get(record, layout.id, fmt)) if layout.id else f"r{number}"
    question = _text(_get(record, layout.question, fmt)) if layout.question else ""
    return {"id": rid, "group_id": _key(_get(record, layout.group, fmt)) if layout.group else rid,
            "context": " ".join(_text(p) for p in context_parts), "question": question,
            "target": _optional(record, layout.target, fmt),
            "gold": choices[gold_at], "passage": passage, "choices": choices, "correct_answers": correct,
            "gold_index": gold_at, "n_distractors": len(slots), "language": language(choices),
            "choice_columns": names or []}


def _records(path: Path, fmt: str, result: ReadResult, lenient: bool) -> tuple[list[str], Iterator]:
    """(columns, iterator of (record number, locator, record dict))."""
    if fmt == "jsonl":
        def gen():
            for n, locator, obj in json_line_records(path, result, lenient, "mcq_file"):
                if not isinstance(obj, dict):
                    handle_bad(result, lenient, path, n, locator, "mcq_file", "expected a JSON object")
                    continue
                yield n, locator, obj
        return [], gen()
    if fmt in ("csv", "tsv"):
        header, rows = csv_rows(path, delimiter="," if fmt == "csv" else "\t")

        def gen():
            for n, row, problem in rows:
                result.records += 1
                if problem:
                    handle_bad(result, lenient, path, n, f"line {n}", "mcq_file", problem)
                    continue
                yield n, f"line {n}", row
        return header, gen()
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
        raise InputError(str(path), None, f"not a Parquet file ({exc})") from None

    def gen():
        for i, row in enumerate(table.to_pylist()):
            result.records += 1
            yield i, f"row {i}", row
    return table.column_names, gen()


def mcq_file(*, input: InputFile = None, format: Format = "auto", preset: str = "", map: dict[str, str] = {},
             lenient: bool = True, max_rejected_share: Share = MAX_REJECTED_SHARE) -> StageOutput:
    """A multiple-choice file as the distractor engine's instances, each with its source record.

    Args:
        input: the multiple-choice file (JSON Lines, CSV, TSV or Parquet) whose distractors to rebuild
        format: its format; auto: from the suffix
        preset: a known layout: cicero, paco, corecode, swag, hellaswag (see tasks/distractors/mcq_file.py)
        map: the layout's fields -> the file's columns, on top of the preset (e.g. {choices = "endings",
            answer = "label", context = "ctx", group = "source_id"})
        lenient: reject a record that does not read with its reason and go on; false: stop at the first
        max_rejected_share: a file more of whose records than this do not read stops the run (a wrong
            layout, not irregular records)
    """
    if not input:
        raise ConfigError("distractors.mcq_file.input is not set: `csk distractors rebuild --input FILE "
                          "--preset NAME` (or --map ...)")
    layout = check_layout(input, format, preset, map)
    path = require_file(input)
    fmt = file_format(str(path), format)
    result = ReadResult()
    columns, records = _records(path, fmt, result, lenient)
    rows, seen = [], set()
    for n, locator, record in records:
        try:
            row = instance(record, layout, fmt, columns or list(record), n)
            if row["id"] in seen:
                raise RecordError(f"id {row['id']!r} repeats an earlier record's")
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "mcq_file", record_problem(exc))
            continue
        seen.add(row["id"])
        rows.append({**row, "record": json.dumps(record, ensure_ascii=False, default=str),
                     "source_file": str(path), "source_record": n, "source_locator": locator})
    result.rows = rows
    notes = stop_unless_readable(list(filter(None, [unreadable("input", str(path), result, max_rejected_share)])),
                                 "distractors.mcq_file")
    data = pd.DataFrame(rows)
    if len(data) and not notes:
        texts = {c for ch in data["choices"] for c in ch}
        sets = {tuple(sorted(ch)) for ch in data["choices"]}
        if len(texts) <= LABEL_SET_TEXTS and len(data) >= 8 and len(sets) <= len(data) // 4:
            raise ConfigError(f"{path}: the {len(data)} records offer {len(sets)} choice set(s) of {len(texts)} texts "
                              "in all, a closed label set (such as CORECODE's domain or slot identification): there "
                              "are no distractors to "
                              "rebuild. Rebuild a file whose wrong choices are written per item (knowledge filling, "
                              "CICERO, P-MCQA, SWAG).")
    notes.update(layout_notes(layout, fmt, columns, path, data))
    schema = notes.pop("arrow_schema", None)
    if len(data):  # what the writer needs, on every row (Parquet stores the one value once per page)
        data["layout"] = json.dumps({"format": fmt, "choices": layout.choices, "columns": columns,
                                     "arrow_schema": schema})
    rejected = pd.DataFrame(result.rejected) if result.rejected else None
    if rejected is not None:
        rejected["reason_code"] = "unreadable_record"
    return StageOutput(data=data, rejected=rejected, rows_in=result.records, notes=notes)


def layout_notes(layout: Layout, fmt: str, columns: list[str], path: Path, data: pd.DataFrame) -> dict:
    """What the writer needs to give the file back in its own layout, and what the reader found."""
    notes: dict[str, Any] = {"layout": {k: v for k, v in layout.__dict__.items() if v}, "format": fmt,
                             "columns": columns}
    if fmt == "parquet":
        import pyarrow.parquet as pq

        notes["arrow_schema"] = base64.b64encode(pq.read_schema(path).serialize().to_pybytes()).decode()
    if len(data):
        notes["languages"] = data["language"].value_counts().to_dict()
        notes["choices_per_instance"] = {int(k): int(v) for k, v in data["choices"].map(len).value_counts().items()}
        notes["groups"] = int(data["group_id"].nunique())
        if not layout.group:
            notes["groups_note"] = "no group column: each record is its own group (AF may hold out a record whose " \
                                   "context another training record shares)"
    return notes


# ------------------------------------------------------------------ the rebuilt file
def rebuilt_record(record: dict, row, meta: dict, distractors: list[str]) -> dict:
    """The record with its distractor slots (the choices not marked correct, in order) refilled."""
    out = dict(record)
    slots = [k for k in range(len(row["choices"])) if k not in set(row["correct_answers"])]
    names = list(row["choice_columns"])
    if not names:  # one list column
        column = next(c for c in meta["choices"].split("|") if c in out)
        listed = _json_value(out[column], meta["format"])
        new = list(listed)
        for k, d in zip(slots, distractors):
            new[k] = d
        out[column] = json.dumps(new, ensure_ascii=False) if isinstance(out[column], str) else new
    else:
        for k, d in zip(slots, distractors):
            out[names[k]] = d
    return out


def write_records(records: list[dict], fmt: str, columns: list[str], schema_b64: str | None) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if fmt in ("csv", "tsv"):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        w.writeheader()
        w.writerows(records)
        return buf.getvalue().encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema_b64))) if schema_b64 else None
    table = pa.Table.from_pylist(records, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def rebuilt_file(distractors: pd.DataFrame, instances: pd.DataFrame) -> StageOutput:
    """The input file with every instance's distractors rebuilt, in its own format and layout, and the
    rebuilt choices per instance. An instance whose pool could not fill all its distractor slots is
    rejected (too_few_candidates): every written record has its full number of choices."""
    meta = json.loads(instances["layout"].iloc[0]) if len(instances) else {"format": "jsonl"}
    fmt, columns = meta["format"], meta.get("columns") or []
    inst = instances.set_index("id")
    rows, rejected, records = [], [], []
    for r in distractors.itertuples(index=False):
        src = inst.loc[r.id]
        need = int(src["n_distractors"])
        if len(r.distractors) < need:
            rejected.append({"id": r.id, "reason_code": "too_few_candidates",
                             "reason": f"{len(r.distractors)} distractor(s) left after the filters, "
                                       f"{need} slot(s) to fill"})
            continue
        given = getattr(r, "correct_distractors", None)
        marked = [int(j) for j in given] if given is not None else []
        if marked:  # the file's answer field names the correct choices: a reviewer's extra one cannot be added
            rejected.append({"id": r.id, "reason_code": "marked_correct",
                             "reason": "a reviewer marked distractor(s) " + "; ".join(
                                 repr(r.distractors[j]) for j in marked) + " as a correct answer"})
            continue
        record = rebuilt_record(json.loads(src["record"]), src, meta, list(r.distractors))
        records.append(record)
        choices = fill_slots(list(src["choices"]), list(src["correct_answers"]), list(r.distractors))
        rows.append({"id": r.id, "group_id": src["group_id"], "choices": choices,
                     "published_choices": list(src["choices"]), "correct_answers": list(src["correct_answers"]),
                     "distractor_ids": list(r.distractor_ids), "distractor_rules": list(r.distractor_rules),
                     "source_file": src["source_file"], "source_record": int(src["source_record"]),
                     "source_locator": src["source_locator"]})
    if fmt in ("csv", "tsv") and not columns:
        columns = list(records[0]) if records else []
    name = Path(str(instances["source_file"].iloc[0])).name if len(instances) else "rebuilt.jsonl"
    stem, dot, suffix = name.partition(".")
    data = pd.DataFrame(rows, columns=["id", "group_id", "choices", "published_choices", "correct_answers",
                                       "distractor_ids", "distractor_rules", "source_file", "source_record",
                                       "source_locator"])
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None,
                       files={f"{stem}.rebuilt{dot}{suffix}": write_records(records, fmt, columns,
                                                                           meta.get("arrow_schema"))},
                       notes={"file": f"{stem}.rebuilt{dot}{suffix}", "format": fmt, "written": len(records),
                              # every published choice correct: no slot to fill, written as published
                              "as_published": int((inst.loc[[r["id"] for r in rows], "n_distractors"] == 0).sum())
                              if rows else 0,
                              "rejected_too_few_candidates": sum(r["reason_code"] == "too_few_candidates"
                                                                 for r in rejected),
                              "rejected_marked_correct": sum(r["reason_code"] == "marked_correct" for r in rejected)})
