"""CICERO release JSON Lines (v1 and v2).

Keys: `ID`, `Dialogue` (list of "A: ..."), `Target`, `Question`, `Choices`, `Correct Answers`,
and in v1 `Human Written Answer` (a one-element list holding an index into Choices).
"""

from __future__ import annotations

from pathlib import Path

from readers.base import (ReadResult, RECORD_ERRORS, RecordError, handle_bad, json_line_records, require_file,
                          require_keys)

REQUIRED = ("ID", "Dialogue", "Target", "Question", "Choices", "Correct Answers")


def _speaker_split(utterance: str) -> tuple[str, str]:
    head, sep, text = utterance.partition(":")
    if not sep or not head.strip() or len(head.strip()) > 3:
        raise RecordError(f"dialogue utterance without a speaker letter: {utterance[:40]!r}")
    return head.strip(), text.strip()


def parse_instance(obj: dict) -> dict:
    require_keys(obj, REQUIRED)
    dialogue = obj["Dialogue"]
    choices = obj["Choices"]
    correct = obj["Correct Answers"]
    if not isinstance(dialogue, list) or not dialogue:
        raise RecordError("'Dialogue' must be a non-empty list")
    if not isinstance(choices, list) or not choices:
        raise RecordError("'Choices' must be a non-empty list")
    if not isinstance(correct, list) or not all(isinstance(c, int) and 0 <= c < len(choices) for c in correct):
        raise RecordError("'Correct Answers' must be indices into 'Choices'")
    human = obj.get("Human Written Answer")
    if human is not None:
        human = human[0] if isinstance(human, list) and human else human
        if not isinstance(human, int) or not 0 <= human < len(choices):
            raise RecordError("'Human Written Answer' must be an index into 'Choices'")
    turns = [_speaker_split(u) for u in dialogue]
    return {
        "cicero_id": str(obj["ID"]),
        "version": "v1" if "Human Written Answer" in obj else "v2",
        "turns": [{"speaker": s, "text": t, "raw_speaker": s} for s, t in turns],
        "dialogue": [str(u) for u in dialogue],  # the release's own strings, for byte-compatible exports
        "target": str(obj["Target"]),
        "question": str(obj["Question"]),
        "choices": [str(c) for c in choices],
        "correct_answers": [int(c) for c in correct],
        "human_written_answer": human,
    }


def read_cicero_release(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for n, locator, obj in json_line_records(path, result, lenient, "cicero"):
        try:
            row = parse_instance(obj)
            row.update({"id": f"cicero-{path.stem}-{n:06d}", "source_file": str(path), "source_record": n,
                        "source_locator": locator})
            result.rows.append(row)
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "cicero", exc)
    return result


def read_cicero_dialogues(path: str | Path, lenient: bool = False) -> ReadResult:
    """The distinct dialogues of a CICERO release (first line of each `ID`), as a source corpus: to
    rebuild targets on exactly the released dialogues and compare with the released targets."""
    from readers.base import dialogue_row

    instances = read_cicero_release(path, lenient=lenient)
    result = ReadResult(rejected=list(instances.rejected), records=0)
    seen: set[str] = set()
    for row in instances.rows:
        if row["cicero_id"] in seen:
            continue
        seen.add(row["cicero_id"])
        result.records += 1
        turns = row["turns"]
        result.rows.append(dialogue_row(f"cicero-{row['cicero_id']}", "cicero", [t["speaker"] for t in turns],
                                        [t["text"] for t in turns], [t["raw_speaker"] for t in turns],
                                        Path(row["source_file"]), row["source_record"], row["source_locator"]))
    result.records += len(instances.rejected)
    return result
