"""ACCENT's DECO JSON: a list of samples with `history` (4 `</UTT>`-terminated slots, empty
slots padded), `response`, `source`, `system`, `GUID`, ratings (`event_cs_raw`, `event_cs`,
...), `tuples_single`, `tuples_pair`, and in train `for_dev`."""

from __future__ import annotations

from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RecordError, handle_bad, load_json, require_file

UTT = "</UTT>"
RELATIONS = {"xIntent", "xWant", "oWant", "xReact", "oReact", "xNeed", "xAttr", "xEffect", "oEffect", "HinderedBy",
             "IsAfter", "HasSubEvent", "isAfter"}


def split_history(history: str) -> list[str]:
    if not history.endswith(UTT):
        raise RecordError(f"history does not end with {UTT}")
    return [u.strip() for u in history.split(UTT)[:-1] if u.strip()]


def _tuples(value, name: str) -> list[list[str]]:
    if not isinstance(value, list) or not all(isinstance(t, list) and len(t) == 3 for t in value):
        raise RecordError(f"'{name}' must be a list of [head, relation, tail]")
    for t in value:
        if t[1] not in RELATIONS:
            raise RecordError(f"unknown relation {t[1]!r} in '{name}'")
    return [[str(x) for x in t] for t in value]


def read_deco(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    data = load_json(path)
    if not isinstance(data, list):
        raise InputError(str(path), None, "expected a JSON list of DECO samples")
    result = ReadResult()
    for i, obj in enumerate(data):
        result.records += 1
        locator = f"item {i}"
        try:
            if not isinstance(obj, dict):
                raise RecordError("expected a JSON object")
            missing = [k for k in ("history", "response", "source", "system", "GUID") if k not in obj]
            if missing:
                raise RecordError(f"missing keys {missing}")
            raw = obj.get("event_cs_raw")
            result.rows.append({
                "id": f"deco-{obj['GUID']}", "guid": str(obj["GUID"]), "history": split_history(str(obj["history"])),
                "response": str(obj["response"]), "corpus": str(obj["source"]), "system": str(obj["system"]),
                "event_cs_raw": [float(x) for x in raw] if raw is not None else None,
                "event_cs": float(obj["event_cs"]) if obj.get("event_cs") is not None else None,
                "tuples_single": _tuples(obj.get("tuples_single", []), "tuples_single"),
                "tuples_pair": _tuples(obj.get("tuples_pair", []), "tuples_pair"),
                "for_dev": bool(obj.get("for_dev", False)),
                "source_file": str(path), "source_record": i, "source_locator": locator})
        except RecordError as exc:
            handle_bad(result, lenient, path, i, locator, "deco", str(exc))
    return result
