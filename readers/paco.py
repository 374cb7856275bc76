"""PaCo (CoreQuisite) release CSVs.

* P-NLI: `context,question,label` — premise = a precondition, hypothesis = the fact;
  label 1 = enabling (entailment), 0 = disabling (contradiction).
* P-G: `prompt,refs_0,refs_1,refs_2` — prompt = the fact + " What makes this possible?" /
  " What makes this impossible?"; the human answers are the references (some empty).
"""

from __future__ import annotations

from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RECORD_ERRORS, RecordError, csv_rows, handle_bad, require_file

QUESTIONS = {"What makes this possible?": "enabling", "What makes this impossible?": "disabling"}


def _csv_rows(path: Path, columns: tuple[str, ...], pad_short: bool = False):
    """(line number, row dict or None, problem or None) with the header checked."""
    header, rows = csv_rows(path, pad_short=pad_short)
    if tuple(header[: len(columns)]) != columns:
        raise InputError(str(path), "line 1", f"expected the header {','.join(columns)}, got {header}")
    return rows


def read_paco_nli(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for n, row, problem in _csv_rows(path, ("context", "question", "label")):
        result.records += 1
        locator = f"line {n}"
        try:
            if problem:
                raise RecordError(problem)
            if row["label"].strip() not in {"0", "1"}:
                raise RecordError(f"label must be 0 or 1, got {row['label']!r}")
            if not row["context"].strip() or not row["question"].strip():
                raise RecordError("empty context or question")
            label = int(row["label"])
            # texts kept exactly as released, so a re-export gives the same rows back
            result.rows.append({"id": f"paco-nli-{path.stem}-{n:06d}", "precondition": row["context"],
                                "statement": row["question"], "label": label,
                                "polarity": "enabling" if label == 1 else "disabling",
                                "source_file": str(path), "source_record": n, "source_locator": locator})
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "paco", exc)
    return result


def read_paco_gen(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    # refs_1, refs_2 may be empty: a row that stops after its last answer is read as released
    for n, row, problem in _csv_rows(path, ("prompt", "refs_0"), pad_short=True):
        result.records += 1
        locator = f"line {n}"
        try:
            if problem:
                raise RecordError(problem)
            prompt = row.get("prompt") or ""  # as released: "<fact> What makes this possible? "
            question = next((q for q in QUESTIONS if prompt.rstrip().endswith(q)), None)
            if question is None:
                raise RecordError(f"prompt does not end with one of {list(QUESTIONS)}")
            refs = [v for k, v in sorted(row.items()) if k and k.startswith("refs_") and v and v.strip()]
            if not refs:
                raise RecordError("no reference answer")
            result.rows.append({"id": f"paco-gen-{path.stem}-{n:06d}", "prompt": prompt,
                                "statement": prompt.rstrip()[: -len(question)].strip(), "question": question,
                                "polarity": QUESTIONS[question], "references": refs,
                                "source_file": str(path), "source_record": n, "source_locator": locator})
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "paco", exc)
    return result
