"""MuTual: one JSON object per file (`article` with inline `m :` / `f :` turns, `options`, `answers`, `id`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RecordError, dialogue_row, handle_bad, speaker_letters

TURN = re.compile(r"(?:^|(?<=\s))([mf]) : ")


def parse_article(article: str) -> tuple[list[str], list[str]]:
    pieces = TURN.split(article.strip())
    if not pieces or pieces[0].strip():
        raise RecordError("article does not start with a speaker marker ('m :' or 'f :')")
    raw, texts = [], []
    for speaker, text in zip(pieces[1::2], pieces[2::2]):
        raw.append(speaker)
        texts.append(text.strip())
    return raw, texts


def _natural_key(p: Path) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p)))


def read_mutual(path: str | Path, lenient: bool = False) -> ReadResult:
    """Read a MuTual directory (searched recursively for *.txt) or a single file."""
    root = Path(path)
    if not root.exists():
        raise InputError(str(root), None, "file or directory not found")
    files = sorted(root.rglob("*.txt"), key=_natural_key) if root.is_dir() else [root]
    if not files:
        raise InputError(str(root), None, "no MuTual *.txt files in this directory")
    result = ReadResult()
    seen: dict[str, Path] = {}
    for f in files:
        result.records += 1
        locator = "file"
        try:
            try:
                obj = json.loads(f.read_bytes().decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise RecordError(f"invalid UTF-8 at byte {exc.start}") from None
            except json.JSONDecodeError as exc:
                raise RecordError(f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
            if not isinstance(obj, dict) or "article" not in obj or "id" not in obj:
                raise RecordError("expected a JSON object with 'article' and 'id'")
            raw, texts = parse_article(str(obj["article"]))
            did = f"mutual-{obj['id']}"
            if did in seen:
                raise RecordError(f"duplicate id {obj['id']!r} (also in {seen[did]})")
            seen[did] = f
            result.rows.append(dialogue_row(did, "mutual", speaker_letters(raw), texts, raw, f, 1, locator))
        except RecordError as exc:
            handle_bad(result, lenient, f, 1, locator, "mutual", str(exc))
    return result
