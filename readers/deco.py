"""ACCENT's DECO JSON (and its ConTurE subset, the same layout without `source`, `system` and tuples):
a list of samples with `history` (4 `</UTT>`-terminated slots, empty slots padded), `response`,
`source`, `system`, `GUID`, ratings (`event_cs_raw`, `event_cs`, `general_cs_raw`, `general_cs`,
ConTurE's `overall_impression`), `tuples_single`, `tuples_pair`, and in train `for_dev`.

Slots are kept exactly as released (ACCENT feeds the history string to its extractor as is), so
`join_history(row["history"])` gives back the released string byte for byte; tuples keep the
relation's released spelling (`relation()` normalises it where it is used). Two samples that share
a GUID (the released train has one such pair) are both kept: their ids add the record's position
(`deco-282-item134`)."""

from __future__ import annotations

from pathlib import Path

from data_contracts.deco import RELATIONS  # noqa: F401  (the 12 relations: the format is the contract's)
from readers.base import ReadResult, RECORD_ERRORS, RecordError, handle_bad, json_list_records, require_file

UTT = "</UTT>"
WINDOW = 4  # utterances of history in a DECO sample
SPELLING = {"IsAfter": "isAfter"}  # the paper's spelling; the data has both


def relation(name: str) -> str:
    """A relation as ACCENT's code spells it."""
    return SPELLING.get(name, name)


def split_history(history: str) -> list[str]:
    """The history's slots as released (empty ones kept: the window length is part of the sample)."""
    if not history.endswith(UTT):
        raise RecordError(f"history does not end with {UTT}")
    return history.split(UTT)[:-1]


def join_history(slots: list[str]) -> str:
    return "".join(s + UTT for s in slots)


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
        if relation(t[1]) not in RELATIONS:
            raise RecordError(f"unknown relation {t[1]!r} in '{name}'")
        out.append([str(t[0]), str(t[1]), str(t[2])])  # as released (a re-export gives its bytes)
    return out


def _split(path: Path) -> str | None:
    """The released split a file holds, from its name (deco_train.json, deco_test.json)."""
    stem = path.stem.lower()
    return next((s for s in ("train", "test") if s in stem), None)


def read_deco(path: str | Path, lenient: bool = False, corpus: str | None = None) -> ReadResult:
    """`corpus`: the value for samples without `source` (ConTurE's subset); None: `source` is required."""
    path = require_file(path)
    result = ReadResult()
    required = ("history", "response", "GUID") + (() if corpus else ("source", "system"))
    prefix = (corpus or "deco").lower()
    split = _split(path)
    for i, locator, obj in json_list_records(path, result, lenient, prefix, required, "DECO samples"):
        try:
            event_raw, event = _scores(obj, "event_cs_raw", "event_cs")
            general_raw, general = _scores(obj, "general_cs_raw", "general_cs")
            if not isinstance(obj["history"], str) or not isinstance(obj["response"], str):
                raise RecordError("'history' and 'response' must be strings")
            history = split_history(obj["history"])
            if len(history) != WINDOW:
                raise RecordError(f"history has {len(history)} slots, not {WINDOW}")
            result.rows.append({
                "id": f"{prefix}-{obj['GUID']}", "guid": str(obj["GUID"]), "history": history,
                "history_utterances": [u.strip() for u in history if u.strip()],
                "response": obj["response"], "corpus": str(obj.get("source", corpus)),
                "system": str(obj["system"]) if obj.get("system") is not None else None,
                "event_cs_raw": event_raw, "event_cs": event, "general_cs_raw": general_raw, "general_cs": general,
                "overall_impression": float(obj["overall_impression"]) if obj.get("overall_impression") is not None
                else None,
                "tuples_single": _tuples(obj.get("tuples_single", []), "tuples_single"),
                "tuples_pair": _tuples(obj.get("tuples_pair", []), "tuples_pair"),
                "for_dev": bool(obj.get("for_dev", False)), "split": split,
                "source_file": str(path), "source_record": i, "source_locator": locator})
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, i, locator, prefix, exc)
    seen: dict[str, int] = {}
    for row in result.rows:
        seen[row["id"]] = seen.get(row["id"], 0) + 1
    for row in result.rows:  # a GUID given twice: both samples kept, each id with its position
        if seen[row["id"]] > 1:
            row["id"] = f"{row['id']}-item{row['source_record']}"
    return result


def read_conture(path: str | Path, lenient: bool = False) -> ReadResult:
    """ACCENT's ConTurE subset (`conture_subset.json`): rated turns in the DECO layout, no tuples."""
    result = read_deco(path, lenient, corpus="ConTurE")
    for row in result.rows:  # an evaluation set: ACCENT scores it, never trains on it
        row["split"] = "test"
    return result
