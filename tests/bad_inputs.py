"""A corpus of malformed inputs, generated from one valid file per reader.

Every variant is a file (or directory) a real download, an editor or a script could leave behind:
cut short, bad UTF-8, a byte order mark, CRLF line ends, empty, a 100 MB line, a garbage line, a
directory where a file belongs, a symbolic link that loops, and for JSON records every key of the
first record removed or given a value of another type.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterator

HUGE_LINE_BYTES = 100 * 2**20

# kind: what breaking it means. "record": one record is bad, the reader can go on without it;
# "file": the file as a whole is unusable; "accepted": a legal variant that must read as the original.
Variant = tuple[str, str, Callable[[Path], None]]


def _bytes(path: Path, fn: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(fn(path.read_bytes()))


def _insert_after_first_line(data: bytes, line: bytes) -> bytes:
    i = data.find(b"\n")
    return data + b"\n" + line if i < 0 else data[:i + 1] + line + b"\n" + data[i + 1:]


def _bad_utf8(data: bytes) -> bytes:
    i = data.find(b"\n")
    j = data.find(b"\n", i + 1) if i >= 0 else -1
    i = len(data) // 2 if j < 0 else (i + j) // 2  # inside the second line (after a header, a record)
    return data[:i] + b"\xff\xfe" + data[i:]


def _huge_line(p: Path, src: Path) -> None:
    data = src.read_bytes()
    i = data.find(b"\n")
    head, tail = (data, b"") if i < 0 else (data[:i + 1], data[i + 1:])
    with open(p, "wb") as f:
        f.write(head if head.endswith(b"\n") else head + b"\n")
        chunk = b"x" * 2**20
        for _ in range(HUGE_LINE_BYTES // len(chunk)):
            f.write(chunk)
        f.write(b"\n" + tail)


LINE_FORMATS = ("lines", "jsonl", "csv", "tsv")


def byte_variants(src: Path, fmt: str) -> list[Variant]:
    """Variants of a file's bytes (the same for every format)."""
    line_based = fmt in LINE_FORMATS and src.read_bytes().count(b"\n") > 1
    rec = "record" if line_based else "file"
    return [
        ("truncated", "file" if not line_based else "truncated", _bytes(src, lambda b: b[: max(1, len(b) // 2 - 7)])),
        ("bad_utf8", rec, _bytes(src, _bad_utf8)),
        ("bom", "accepted", _bytes(src, lambda b: b"\xef\xbb\xbf" + b)),
        ("crlf", "accepted", _bytes(src, lambda b: b.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))),
        ("empty", "file", _bytes(src, lambda b: b"")),
        ("garbage_line", rec, _bytes(src, lambda b: _insert_after_first_line(b, b"\x00}{ not a record ,,,\"\t"))),
        ("huge_line", rec, lambda p: _huge_line(p, src)),
        ("directory", "file", lambda p: p.mkdir()),
        ("symlink_loop", "file", lambda p: os.symlink(p.name, p)),
    ]


def _other_type(v):
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return "not a number"
    if isinstance(v, str):
        return 12345
    if isinstance(v, list):
        return {"not": "a list"}
    if isinstance(v, dict):
        return ["not", "an", "object"]
    return [1]


def _first_record(doc):
    """(container, key) of the first JSON object a file holds as a record."""
    if isinstance(doc, dict) and all(isinstance(v, dict) for v in doc.values()) and doc:
        return doc[next(iter(doc))]  # keyed by id (Topical-Chat)
    if isinstance(doc, list) and doc:
        return doc[0] if isinstance(doc[0], dict) else None
    return doc if isinstance(doc, dict) else None


def json_variants(src: Path, jsonl: bool) -> list[Variant]:
    """Every key of the first record removed, and given a value of another type."""
    data = src.read_bytes().decode("utf-8-sig")
    lines = data.splitlines(keepends=True)
    doc = json.loads(lines[0]) if jsonl else json.loads(data)
    first = _first_record(doc)
    if not isinstance(first, dict):
        return []
    out: list[Variant] = []

    def writer(mutate) -> Callable[[Path], None]:
        def write(p: Path) -> None:
            d = json.loads(lines[0]) if jsonl else json.loads(data)
            mutate(_first_record(d))
            text = json.dumps(d, ensure_ascii=False)
            p.write_text(text + "\n" + "".join(lines[1:]) if jsonl else text, encoding="utf-8")
        return write

    for key in list(first):
        out.append((f"missing_{key}", "record", writer(lambda r, k=key: r.pop(k))))
        out.append((f"wrong_type_{key}", "record", writer(lambda r, k=key: r.__setitem__(k, _other_type(r[k])))))
    return out


def csv_variants(src: Path) -> list[Variant]:
    """The header with its last column dropped, and a row with one field too many or too few."""
    text = src.read_bytes().decode("utf-8-sig")
    header, _, rest = text.partition("\n")
    cols = header.rstrip("\r").split(",")
    first, _, others = rest.partition("\n")
    return [
        ("missing_column", "file", lambda p: p.write_text(",".join(cols[:-1]) + "\n" + rest, encoding="utf-8")),
        ("extra_field", "record", lambda p: p.write_text(f"{header}\n{first},EXTRA\n{others}", encoding="utf-8")),
        ("short_row", "record", lambda p: p.write_text(f"{header}\n{first.split(',')[0]}\n{others}", encoding="utf-8")),
    ]


def variants(src: Path, fmt: str) -> Iterator[Variant]:
    """fmt: lines (plain text), jsonl, json (one document), csv (with a header), tsv (no header)."""
    yield from byte_variants(src, fmt)
    if fmt in ("json", "jsonl"):
        yield from json_variants(src, fmt == "jsonl")
    if fmt == "csv":
        yield from csv_variants(src)
