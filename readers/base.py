from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from functools import lru_cache
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


# What parsing one record may raise when its values have unexpected types or shapes (a number where
# a list was expected, a list too short): the record is malformed, named with the cause, never a traceback.
RECORD_ERRORS = (RecordError, TypeError, AttributeError, KeyError, IndexError, ValueError)


def record_problem(exc: BaseException | str) -> str:
    if isinstance(exc, (RecordError, str)):
        return str(exc)
    return f"unexpected record structure ({type(exc).__name__}: {exc})"


# One record (a line, a file of a one-record-per-file corpus) larger than this is malformed: no release
# has one, and reading it whole would only move the failure to a later stage or out of memory.
MAX_RECORD_BYTES = 16 * 2**20
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark (Windows editors write one): skipped


def require_file(path: str | Path) -> Path:
    """The path, if it is a non-empty regular file; else an InputError saying what it is instead."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        if p.is_symlink():
            raise InputError(str(p), None, f"a broken or looping symbolic link ({exc.strerror})") from None
        raise InputError(str(p), None, "file not found") from None
    if p.is_dir():
        raise InputError(str(p), None, "expected a file, found a directory")
    if not p.is_file():
        raise InputError(str(p), None, "expected a regular file")
    if st.st_size == 0:
        raise InputError(str(p), None, "empty file (no records): was the download cut short?")
    return p


def check_member(path: Path) -> None:
    """A RecordError when one file of a corpus directory is not a non-empty regular file: that file is
    one bad record of the corpus (rejected when lenient), not a reason to stop reading the others."""
    try:
        require_file(path)
    except InputError as exc:
        raise RecordError(exc.message) from None


def iter_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """(1-based line number, text or None, problem or None), line by line, strict UTF-8; a leading
    byte order mark and CRLF line ends are accepted; a line over MAX_RECORD_BYTES is a problem, read
    past in chunks, never held whole."""
    with open(path, "rb") as f:
        n = 0
        while raw := f.readline(MAX_RECORD_BYTES + 1):
            n += 1
            if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                size = len(raw)
                while raw and not raw.endswith(b"\n"):
                    raw = f.readline(1 << 20)
                    size += len(raw)
                yield n, None, f"a line of {size} bytes, more than the {MAX_RECORD_BYTES >> 20} MiB a record may have"
                continue
            if n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                yield n, None, f"invalid UTF-8 at byte {exc.start}"


CUT_SHORT = "the file ends inside a record: was the download cut short?"


def cut_short(path: Path, locator: str) -> InputError:
    """The error of a file whose last record is cut off: it names the file, the record and the byte at
    which the file ends. Never a rejected row, in any mode: a truncated file is not an irregular record."""
    return InputError(str(path), f"{locator}, file ends at byte {Path(path).stat().st_size}", CUT_SHORT)


def _ends_without_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) not in (b"\n", b"\r")


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
                if _is_cut_last_line(path, n):
                    raise cut_short(path, locator) from None
                raise RecordError(f"malformed JSON: {exc}") from None  # the whole message, with its position
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, source, exc)
            continue
        yield n, locator, obj


def _is_cut_last_line(path: Path, n: int) -> bool:
    """Is line n (1-based) the last line of a file that ends without a line end? Asked only of a line that
    does not parse; the file's lines are counted once per file (a file of many bad lines is read twice, not
    once per bad line)."""
    st = Path(path).stat()
    return _ends_without_newline(path) and n == _line_count(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _line_count(path: str, size: int, mtime_ns: int) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


csv.field_size_limit(MAX_RECORD_BYTES)  # csv's own limit (128 KiB) is below a long but legal field


def csv_rows(path: str | Path, delimiter: str = ",", pad_short: bool = False
             ) -> tuple[list[str], Iterator[tuple[int, dict | None, str | None]]]:
    """(header, rows) of a CSV table with a header line: each row is (line number, {column: value}, None),
    or (line number, None, what is wrong) for a row with invalid UTF-8, a field over MAX_RECORD_BYTES, or
    another number of fields than the header (`pad_short`: a shorter row is read with its missing
    trailing fields empty, for tables whose last columns are optional). A leading byte order mark and
    CRLF are accepted; quoted fields may span lines. An empty file or one without a header is an InputError."""
    path = require_file(path)
    raw = path.read_bytes()
    try:
        text, clean = raw.decode("utf-8"), True
    except UnicodeDecodeError:  # surrogateescape: a bad byte spoils only the row it is in, found below
        text, clean = raw.decode("utf-8", errors="surrogateescape"), False
    text = text.removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise InputError(str(path), "line 1", f"no header row ({exc or 'empty'})") from None
    if not clean and any(_has_bad_bytes(h) for h in header):
        raise InputError(str(path), "line 1", "invalid UTF-8 in the header")

    cut = not text.endswith(("\n", "\r"))  # the last record has no line end: complete, or cut off
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)  # counted once: read per row, never recounted
    odd_quotes = cut and text.count('"') % 2 == 1
    if cut and reader.line_num >= lines:  # nothing after a header without its line end: cut inside it
        raise cut_short(path, "line 1")

    def at_end() -> bool:
        return reader.line_num >= lines

    def rows() -> Iterator[tuple[int, dict | None, str | None]]:
        start = reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                if cut and at_end():
                    raise cut_short(path, f"line {start}") from None
                yield start, None, f"not a CSV row: {exc}"
                start = reader.line_num + 1
                continue
            n, start = start, reader.line_num + 1
            if cut and at_end() and row and (len(row) < len(header) or (odd_quotes and '"' in "".join(row))):
                raise cut_short(path, f"line {n}")
            if not row:
                continue  # a blank line
            if pad_short and len(row) < len(header):
                row = row + [""] * (len(header) - len(row))
            if not clean and any(_has_bad_bytes(v) for v in row):
                yield n, None, "invalid UTF-8"
            elif len(row) != len(header):
                more = "more" if len(row) > len(header) else "fewer"
                yield n, None, f"{more} columns than the header ({len(row)}, the header has {len(header)})"
            else:
                yield n, dict(zip(header, row)), None

    return header, rows()


def _has_bad_bytes(value: str) -> bool:
    """A field holding bytes that were not UTF-8 (escaped as lone surrogates, which cannot be encoded)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def load_json(path: Path) -> Any:
    """A whole-file JSON document (a leading byte order mark accepted)."""
    path = require_file(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(str(path), None, f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # an error at the very end of the text, or a string that runs to it: the document was cut off
        if exc.pos >= len(text.rstrip()) or (exc.msg.startswith("Unterminated string") and
                                             text.rstrip()[-1:] not in ('"', "]", "}")):
            raise cut_short(path, f"line {exc.lineno}") from None
        raise InputError(str(path), f"line {exc.lineno}", f"malformed JSON: {exc}") from None


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
               message: str | BaseException) -> None:
    message = record_problem(message)
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


def require_keys(obj, keys) -> dict:
    """The record itself, when it is a JSON object holding every one of `keys`; else a RecordError saying which
    keys it lacks."""
    if not isinstance(obj, dict):
        raise RecordError("expected a JSON object")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise RecordError(f"missing keys {missing}")
    return obj


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
            require_keys(obj, required)
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, i, locator, source, exc)
            continue
        yield i, locator, obj
