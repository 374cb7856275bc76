"""NaturalConv (Wang et al. 2021) `dialog_release.json`: a JSON list of {"dialog_id", "document_id",
"content": [utterance, ...]}. Two crowd workers talk in turns, so speakers alternate from A."""

from __future__ import annotations

from pathlib import Path

from readers.base import ReadResult, RECORD_ERRORS, RecordError, dialogue_row, handle_bad, json_list_records, require_file


def read_naturalconv(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for n, locator, obj in json_list_records(path, result, lenient, "naturalconv", ("dialog_id", "content"),
                                             "dialogues (NaturalConv dialog_release.json)"):
        try:
            content = obj["content"]
            if not isinstance(content, list) or not all(isinstance(u, str) for u in content):
                raise RecordError("'content' must be a list of utterance strings")
            speakers = ["AB"[i % 2] for i in range(len(content))]
            row = dialogue_row(f"naturalconv-{obj['dialog_id']}", "naturalconv", speakers, content, speakers,
                               path, n, locator)
            row["document_id"] = str(obj.get("document_id", ""))
            result.rows.append(row)
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "naturalconv", exc)
    return result
