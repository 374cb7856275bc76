"""ACCENT's DECO JSON: a list of samples with `history` (4 `</UTT>`-terminated slots, empty
slots padded), `response`, `source`, `system`, `GUID`, ratings (`event_cs_raw`, `event_cs`,
...), `tuples_single`, `tuples_pair`, and in train `for_dev`."""

from __future__ import annotations

from pathlib import Path

from readers.base import ReadResult, RecordError, handle_bad, json_list_records, require_file

UTT = "</UTT>"
# ACCENT's released code spells IsAfter as `isAfter`; the data has both. One spelling on read.
RELATIONS = {"xIntent", "xWant", "oWant", "xReact", "oReact", "xNeed", "xAttr", "xEffect", "oEffect", "HinderedBy",
             "isAfter", "HasSubEvent"}
SPELLING = {"IsAfter": "isAfter"}


def split_history(history: str) -> list[str]:
    """The history's slots, empty ones kept: the window length (4) is part of the sample."""
    if not history.endswith(UTT):
        raise RecordError(f"history does not end with {UTT}")
    return [u.strip() for u in history.split(UTT)[:-1]]


def _scores(obj: dict, raw_key: str, key: str) -> tuple[list[float] | None, float | None]:
    raw = obj.get(raw_key)
    try:
        return ([float(x) for x in raw] if raw is not None else None,
                float(obj[key]) if obj.get(key) is not None else None)
    except (TypeError, ValueError):
        raise RecordError(f"'{raw_key}' / '{key}' must be numbers") from None


def _tuples(value, name: str) -> list[list[str]]:
    if not isinstance(value, list) or not all(isinstance(t, list) and len(t) == 3 for t in value):
        raise RecordError(f"'{name}' must be a list of [head, relation, tail]")
    out = []
    for t in value:
        rel = SPELLING.get(t[1], t[1])
        if rel not in RELATIONS:
            raise RecordError(f"unknown relation {t[1]!r} in '{name}'")
        out.append([str(t[0]), rel, str(t[2])])
    return out


def read_deco(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    required = ("history", "response", "source", "system", "GUID")
    for i, locator, obj in json_list_records(path, result, lenient, "deco", required, "DECO samples"):
        try:
            event_raw, event = _scores(obj, "event_cs_raw", "event_cs")
            general_raw, general = _scores(obj, "general_cs_raw", "general_cs")
            history = split_history(str(obj["history"]))
            result.rows.append({
                "id": f"deco-{obj['GUID']}", "guid": str(obj["GUID"]), "history": history,
                "history_utterances": [u for u in history if u],
                "response": str(obj["response"]), "corpus": str(obj["source"]), "system": str(obj["system"]),
                "event_cs_raw": event_raw, "event_cs": event, "general_cs_raw": general_raw, "general_cs": general,
                "tuples_single": _tuples(obj.get("tuples_single", []), "tuples_single"),
                "tuples_pair": _tuples(obj.get("tuples_pair", []), "tuples_pair"),
                "for_dev": bool(obj.get("for_dev", False)),
                "source_file": str(path), "source_record": i, "source_locator": locator})
        except RecordError as exc:
            handle_bad(result, lenient, path, i, locator, "deco", str(exc))
    return result
