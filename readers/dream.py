"""DREAM: one JSON file per split, a list of `[turns, questions, id]`; turns are `"M: ..."`."""

from __future__ import annotations

import re
from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RECORD_ERRORS, RecordError, dialogue_row, handle_bad, load_json, require_file

TURN = re.compile(r"^\s*([A-Za-z][\w .'-]{0,30}?)\s*:\s*(.*)$", re.S)


def parse_turns(turns: list) -> tuple[list[str], list[str]]:
    raw, texts = [], []
    for i, t in enumerate(turns):
        if not isinstance(t, str):
            raise RecordError(f"turn {i + 1} is not a string")
        m = TURN.match(t)
        if not m:
            raise RecordError(f"turn {i + 1} has no speaker prefix like 'M:'")
        raw.append(m.group(1))
        texts.append(m.group(2).strip())
    return raw, texts


def read_dream(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    data = load_json(path)
    if not isinstance(data, list):
        raise InputError(str(path), None, "expected a JSON list of [turns, questions, id]")
    result = ReadResult()
    seen: set[str] = set()
    for i, item in enumerate(data):
        result.records += 1
        locator = f"item {i}"
        try:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], list)):
                raise RecordError("expected [turns, questions, id]")
            raw, texts = parse_turns(item[0])
            did = f"dream-{item[2]}"
            if did in seen:
                raise RecordError(f"duplicate id {item[2]!r}")
            seen.add(did)
            result.rows.append(dialogue_row(did, "dream", None, texts, raw, path, i, locator))
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, i, locator, "dream", exc)
    return result
