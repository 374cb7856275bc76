"""ConceptNet 5.7 assertions dump: tab-separated `assertion URI, relation URI, start URI, end URI,
JSON info` (optionally gzipped). Only edges of the asked relations and language are returned;
the others are counted by reason in `ReadResult.skipped` (the dump has 34M lines)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from readers.base import ReadResult, RECORD_ERRORS, RecordError, handle_bad, require_file


def concept_text(uri: str) -> tuple[str, str]:
    """('/c/en/ice_cream/n') -> ('en', 'ice cream')."""
    parts = uri.split("/")
    if len(parts) < 4 or parts[1] != "c":
        raise RecordError(f"not a concept URI: {uri!r}")
    return parts[2], parts[3].replace("_", " ")


def read_conceptnet_assertions(path: str | Path, relations: list[str] | None = None, language: str = "en",
                               lenient: bool = False) -> ReadResult:
    path = require_file(path)
    wanted = {f"/r/{r}" for r in relations} if relations else None
    result = ReadResult()
    skipped: Counter = Counter()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            locator = f"line {n}"
            try:
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise RecordError(f"invalid UTF-8 at byte {exc.start}") from None
                if not line.strip():
                    continue
                cols = line.split("\t")
                if len(cols) != 5:
                    raise RecordError(f"expected 5 tab-separated columns, got {len(cols)}")
                _, rel, start, end, info = cols
                if wanted is not None and rel not in wanted:
                    skipped["other relation"] += 1
                    continue
                (l1, head), (l2, tail) = concept_text(start), concept_text(end)
                if l1 != language or l2 != language:
                    skipped["other language"] += 1
                    continue
                try:
                    meta = json.loads(info)
                except json.JSONDecodeError as exc:
                    raise RecordError(f"malformed JSON info: {exc.msg}") from None
                result.records += 1
                result.rows.append({"id": f"cn-{n}", "relation": rel[len("/r/"):], "head": head, "tail": tail,
                                    "start_uri": start, "end_uri": end, "weight": float(meta.get("weight", 1.0)),
                                    "dataset": str(meta.get("dataset", "")), "source_file": str(path),
                                    "source_record": n, "source_locator": locator})
            except RECORD_ERRORS as exc:
                result.records += 1
                handle_bad(result, lenient, path, n, locator, "conceptnet", exc)
    result.skipped = dict(skipped)
    return result
