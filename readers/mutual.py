"""MuTual: one JSON object per file (`article` with inline `m :` / `f :` turns, `options`, `answers`, `id`).

As CICERO built its dialogues (checked on the v2 release: 40 of 40 real-sample dialogues equal
utterance for utterance): each turn is split into its sentences, one utterance per sentence,
a sentence ending at a whitespace-separated ".", "?" or "!" token (so "908. can" stays whole);
the speaker letter comes from the prefix, `m` -> A and `f` -> B, not from order of appearance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RECORD_ERRORS, RecordError, check_member, dialogue_row, handle_bad

TURN = re.compile(r"(?:^|(?<=\s))([mf]) : ")
AMBIGUOUS = re.compile(r"(?:^|\s)([mf]\s*;\s*[mf])\s*:")  # e.g. train_234: "m ; f : ..." names two speakers
SENTENCE_END = {".", "?", "!"}
LETTER = {"m": "A", "f": "B"}


def parse_article(article: str) -> tuple[list[str], list[str]]:
    """(raw speaker, text) of each turn, as the article writes them."""
    ambiguous = AMBIGUOUS.search(article)
    if ambiguous:
        raise RecordError(f"ambiguous speaker marker '{ambiguous.group(1)} :' (two speakers in one marker)")
    pieces = TURN.split(article.strip())
    if not pieces or pieces[0].strip():
        raise RecordError("article does not start with a speaker marker ('m :' or 'f :')")
    raw, texts = [], []
    for speaker, text in zip(pieces[1::2], pieces[2::2]):
        raw.append(speaker)
        texts.append(text.strip())
    return raw, texts


def sentences(text: str) -> list[str]:
    """A turn's sentences: each ends at a token that is exactly ".", "?" or "!"."""
    out, current = [], []
    for token in text.split():
        current.append(token)
        if token in SENTENCE_END:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return out


def utterances(article: str) -> tuple[list[str], list[str], list[str]]:
    """(letters, texts, raw speakers), one per sentence."""
    letters, texts, raws = [], [], []
    for raw, turn in zip(*parse_article(article)):
        for sentence in sentences(turn):
            letters.append(LETTER[raw])
            texts.append(sentence)
            raws.append(raw)
    return letters, texts, raws


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
            check_member(f)
            try:
                obj = json.loads(f.read_bytes().decode("utf-8-sig"))
            except UnicodeDecodeError as exc:
                raise RecordError(f"invalid UTF-8 at byte {exc.start}") from None
            except json.JSONDecodeError as exc:
                raise RecordError(f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
            if not isinstance(obj, dict) or "article" not in obj or "id" not in obj:
                raise RecordError("expected a JSON object with 'article' and 'id'")
            letters, texts, raw = utterances(str(obj["article"]))
            did = f"mutual-{obj['id']}"
            if did in seen:
                raise RecordError(f"duplicate id {obj['id']!r} (also in {seen[did]})")
            seen[did] = f
            result.rows.append(dialogue_row(did, "mutual", letters, texts, raw, f, 1, locator))
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, f, 1, locator, "mutual", exc)
    return result
