"""DuLeMon (Xu et al. 2022) JSON Lines, one conversation per line (SELF: `p1_persona`, `p2_persona`;
BOTH: `bot_persona`, `user_said_persona`, `user_no_said_persona`; both: `conversation`, a list of
"Speaker: words", a bot turn optionally followed by a tab and the persona ids it rests on).

The release is word-segmented ("我 的 大学 生活"); the spaces a segmenter put between Chinese
characters are removed (spaces between two Latin words or numbers are kept), so utterances read as
NaturalConv's and CORECODE's do. Speakers are lettered in order of appearance (Usr -> A, Bot -> B)."""

from __future__ import annotations

import re
from pathlib import Path

from csk.errors import InputError
from readers.base import (
    ReadResult,
    RECORD_ERRORS,
    RecordError,
    check_member,
    dialogue_row,
    handle_bad,
    json_line_records,
)

TURN = re.compile(r"^\s*([^:：\s]{1,16})\s*[:：]\s?(.*)$", re.DOTALL)
# a space with a non-Latin (CJK, full-width punctuation) character on either side was put there by the segmenter
SEGMENTER_SPACE = re.compile(r"(?<=[^\x00-\x7f]) +| +(?=[^\x00-\x7f])")


def despace(text: str) -> str:
    return SEGMENTER_SPACE.sub("", text).strip()


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"} and (p.is_file() or p.is_symlink()))
        if files:
            return files
        raise InputError(str(path), None, "no .json / .jsonl files in this DuLeMon directory")
    raise InputError(str(path), None, "file not found")


def read_dulemon(path: str | Path, lenient: bool = False) -> ReadResult:
    """A DuLeMon file, or a directory of them (e.g. the release's self/ and both/ folders)."""
    result = ReadResult()
    for file in _files(Path(path)):
        tag = f"{file.parent.name}-{file.stem}"
        try:
            check_member(file)
        except RecordError as exc:
            result.records += 1
            handle_bad(result, lenient, file, 0, "file", "dulemon", exc)
            continue
        for n, locator, obj in json_line_records(file, result, lenient, "dulemon"):
            try:
                if not isinstance(obj, dict) or not isinstance(obj.get("conversation"), list):
                    raise RecordError("expected a JSON object with a 'conversation' list")
                raw, texts = [], []
                for k, turn in enumerate(obj["conversation"]):
                    m = TURN.match(turn) if isinstance(turn, str) else None
                    if m is None:
                        raise RecordError(f"turn {k} is not 'Speaker: text': {str(turn)[:30]!r}")
                    raw.append(m.group(1))
                    texts.append(despace(m.group(2).split("\t")[0]))  # after a tab: persona ids (U1, B2)
                result.rows.append(dialogue_row(f"dulemon-{tag}-{n}", "dulemon", None, texts, raw, file, n, locator))
            except RECORD_ERRORS as exc:
                handle_bad(result, lenient, file, n, locator, "dulemon", exc)
    return result
