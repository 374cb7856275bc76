"""CORECODE task files (JSON Lines): `id`, `dialogue` (list of "A: ..."), `question`, options
`"(a)"`, `"(b)"`, ... for the multiple-choice tasks, `answer` (`["(a)", "text"]` for MCQ, a
string otherwise)."""

from __future__ import annotations

import re
from pathlib import Path

from readers.base import ReadResult, RecordError, handle_bad, json_line_records, require_file

OPTION = re.compile(r"^\(([a-z]|\d+)\)$")


def _label_order(label: str) -> tuple:
    """(a) < (b) < ... and (1) < (2) < ... < (10): numbers compare as numbers, not strings."""
    inner = label[1:-1]
    return (0, int(inner), "") if inner.isdigit() else (1, 0, inner)


def _turn(utterance: str) -> dict:
    head, sep, text = utterance.partition(":")
    if not sep or head.strip() not in {"A", "B"}:
        head, sep, text = utterance.partition("：")  # full-width colon
    if not sep or head.strip() not in {"A", "B"}:
        raise RecordError(f"utterance without an A/B speaker: {utterance[:30]!r}")
    return {"speaker": head.strip(), "text": text.strip(), "raw_speaker": head.strip()}


def read_corecode(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for n, locator, obj in json_line_records(path, result, lenient, "corecode"):
        try:
            if not isinstance(obj, dict):
                raise RecordError("expected a JSON object")
            missing = [k for k in ("id", "dialogue", "question", "answer") if k not in obj]
            if missing:
                raise RecordError(f"missing keys {missing}")
            if not isinstance(obj["dialogue"], list) or not obj["dialogue"]:
                raise RecordError("'dialogue' must be a non-empty list")
            options = {k: str(v) for k, v in obj.items() if OPTION.match(k)}
            labels = sorted(options, key=_label_order)
            answer = obj["answer"]
            if options:
                if not (isinstance(answer, list) and len(answer) == 2 and answer[0] in options):
                    raise RecordError("an MCQ answer must be [\"(x)\", text] naming one of the options")
                answer_label, answer_text = answer
            else:
                answer_label, answer_text = None, str(answer)
            result.rows.append({
                "id": f"corecode-{path.stem}-{n:06d}", "item_id": str(obj["id"]),
                "turns": [_turn(u) for u in obj["dialogue"]], "question": str(obj["question"]),
                "options": [options[k] for k in labels], "option_labels": labels,
                "answer_label": answer_label, "answer": answer_text,
                "source_file": str(path), "source_record": n, "source_locator": locator})
        except RecordError as exc:
            handle_bad(result, lenient, path, n, locator, "corecode", str(exc))
    return result
