"""NaturalConv (Wang et al. 2021) `dialog_release.json`: a JSON list of {"dialog_id", "document_id",
"content": [utterance, ...]}. Two crowd workers talk in turns, so speakers alternate from A."""

from __future__ import annotations

from pathlib import Path

from readers.base import (
    ReadResult,
    RecordError,
    dialogue_row,
    handle_bad,
    load_json,
    require_file,
)


def read_naturalconv(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    data = load_json(path)
    if not isinstance(data, list):
        from csk.errors import InputError

        raise InputError(str(path), None, "expected a JSON list of dialogues (NaturalConv dialog_release.json)")
    result = ReadResult()
    for n, obj in enumerate(data):
        result.records += 1
        locator = f"item {n}"
        try:
            if not isinstance(obj, dict):
                raise RecordError("expected a JSON object")
            missing = [k for k in ("dialog_id", "content") if k not in obj]
            if missing:
                raise RecordError(f"missing keys {missing}")
            content = obj["content"]
            if not isinstance(content, list) or not all(isinstance(u, str) for u in content):
                raise RecordError("'content' must be a list of utterance strings")
            speakers = ["AB"[i % 2] for i in range(len(content))]
            row = dialogue_row(f"naturalconv-{obj['dialog_id']}", "naturalconv", speakers, content, speakers,
                               path, n, locator)
            row["document_id"] = str(obj.get("document_id", ""))
            result.rows.append(row)
        except RecordError as exc:
            handle_bad(result, lenient, path, n, locator, "naturalconv", str(exc))
    return result
