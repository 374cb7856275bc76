"""DailyDialog `dialogues_text.txt`: one dialogue per line, utterances joined by ` __eou__ `."""

from __future__ import annotations

from pathlib import Path

from readers.base import ReadResult, RECORD_ERRORS, RecordError, dialogue_row, handle_bad, iter_lines, require_file

EOU = "__eou__"


def parse_line(line: str) -> list[str]:
    line = line.strip()
    if not line:
        raise RecordError("empty dialogue")
    if not line.endswith(EOU):
        raise RecordError(f"line does not end with {EOU!r} (not a DailyDialog dialogue line)")
    parts = [p.strip() for p in line.split(EOU)]
    if parts[-1] != "":
        raise RecordError("text after the last __eou__")
    return parts[:-1]


def read_dailydialog(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    lines = list(iter_lines(path))
    while lines and lines[-1][1] is not None and not lines[-1][1].strip():
        lines.pop()  # trailing blank lines are not records
    for n, text, err in lines:
        result.records += 1
        locator = f"line {n}"
        try:
            if err:
                raise RecordError(err)
            utterances = parse_line(text)
            # DailyDialog speakers strictly alternate, the first is A.
            speakers = ["A" if i % 2 == 0 else "B" for i in range(len(utterances))]
            result.rows.append(dialogue_row(f"dailydialog-{n:06d}", "dailydialog", speakers, utterances,
                                            speakers, path, n, locator))
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "dailydialog", exc)
    return result
