from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from csk.errors import InputError


@dataclass
class ReadResult:
    rows: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    records: int = 0  # records seen (rows + rejected)
    skipped: dict[str, int] = field(default_factory=dict)  # records outside the selection, by reason

    def extend(self, other: "ReadResult") -> None:
        self.rows += other.rows
        self.rejected += other.rejected
        self.records += other.records


class RecordError(ValueError):
    """Raised inside a reader for one bad record; turned into InputError or a rejected row."""


def require_file(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), None, "file not found")
    if not p.is_file():
        raise InputError(str(p), None, "expected a file, found a directory")
    return p


def iter_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """(1-based line number, text or None, decode error or None), line by line, strict UTF-8."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                yield n, None, f"invalid UTF-8 at byte {exc.start}"


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line; a bad line is an InputError naming it."""
    for n, _, obj in json_line_records(require_file(path), ReadResult(), lenient=False, source="jsonl"):
        yield n, obj


def json_line_records(path: Path, result: ReadResult, lenient: bool, source: str) -> Iterator[tuple[int, str, Any]]:
    """(line number, locator, object) of each JSON Lines record; a line that is not JSON is raised
    as an InputError, or rejected into `result` when lenient. Counts every record seen."""
    for n, text, err in iter_lines(path):
        if text is not None and not text.strip():
            continue
        result.records += 1
        locator = f"line {n}"
        try:
            if err:
                raise RecordError(err)
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise RecordError(f"malformed JSON: {exc.msg}") from None
        except RecordError as exc:
            handle_bad(result, lenient, path, n, locator, source, str(exc))
            continue
        yield n, locator, obj


def load_json(path: Path) -> Any:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(str(path), None, f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None


def speaker_letters(raw_speakers: list[str]) -> list[str]:
    """Map raw speaker labels to A, B, C... in order of first appearance (CICERO writes A/B)."""
    letters: dict[str, str] = {}
    out = []
    for s in raw_speakers:
        if s not in letters:
            letters[s] = chr(ord("A") + len(letters))
        out.append(letters[s])
    return out


def dialogue_row(dialogue_id: str, source: str, speakers: list[str] | None, texts: list[str],
                 raw_speakers: list[str], path: Path, record: int, locator: str) -> dict:
    """A dialogue with its provenance. A turn with no text (DREAM test item "O:") says nothing: it is
    dropped, and counted in `empty_turns_dropped`."""
    keep = [i for i, t in enumerate(texts) if t.strip()]
    if not keep:
        raise RecordError("empty dialogue" if not texts else "every utterance is empty")
    if speakers is None:  # letters in order of first appearance among the turns kept
        speakers = [""] * len(texts)
        for i, letter in zip(keep, speaker_letters([raw_speakers[i] for i in keep])):
            speakers[i] = letter
    kept = [(speakers[i], texts[i].strip(), raw_speakers[i]) for i in keep]
    return {
        "id": dialogue_id,
        "source": source,
        "turns": [{"speaker": s, "text": t, "raw_speaker": r} for s, t, r in kept],
        "empty_turns_dropped": len(texts) - len(kept),
        "source_file": str(path),
        "source_record": record,
        "source_locator": locator,
    }


def handle_bad(result: ReadResult, lenient: bool, path: Path, record: int, locator: str, source: str,
               message: str) -> None:
    if not lenient:
        raise InputError(str(path), locator, message)
    result.rejected.append({
        "id": f"{source}-rejected-{Path(path).name}-{record}",
        "reason_code": "malformed_record",
        "reason": message,
        "source": source,
        "source_file": str(path),
        "source_record": record,
        "source_locator": locator,
    })


def json_list_records(path: Path, result: ReadResult, lenient: bool, source: str, required: tuple[str, ...],
                      what: str) -> Iterator[tuple[int, str, dict]]:
    """(index, locator, object) of each item of a JSON-list release whose items are objects with the
    `required` keys; other items are raised as InputError, or rejected into `result` when lenient."""
    data = load_json(path)
    if not isinstance(data, list):
        raise InputError(str(path), None, f"expected a JSON list of {what}")
    for i, obj in enumerate(data):
        result.records += 1
        locator = f"item {i}"
        try:
            if not isinstance(obj, dict):
                raise RecordError("expected a JSON object")
            missing = [k for k in required if k not in obj]
            if missing:
                raise RecordError(f"missing keys {missing}")
        except RecordError as exc:
            handle_bad(result, lenient, path, i, locator, source, str(exc))
            continue
        yield i, locator, obj
