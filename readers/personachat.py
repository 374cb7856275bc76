"""PersonaChat in ParlAI's release layout (`train_self_original.txt`, `valid_none_original.txt`, ...).

Every line is `N text`; N restarts at 1 with each dialogue. Persona lines read `your persona: ...`
or `partner's persona: ...`; dialogue lines hold the partner's utterance, a tab, the persona
speaker's reply, and (after two tabs) the retrieval candidates, which are not part of the dialogue.
A partner opening of `__SILENCE__` means the persona speaker spoke first.
"""

from __future__ import annotations

import re
from pathlib import Path

from readers.base import ReadResult, RECORD_ERRORS, RecordError, dialogue_row, handle_bad, iter_lines, require_file

SILENCE = "__SILENCE__"
PERSONA = re.compile(r"^(your|partner's) persona:\s*")
NUMBERED = re.compile(r"^(\d+) (.*)$")


def _dialogues(path: Path, result: ReadResult, lenient: bool):
    """(first line number, [(line number, text)]) per dialogue; a line without its number is bad."""
    current: list[tuple[int, str]] = []
    start = None
    for n, text, err in iter_lines(path):
        if text is not None and not text.strip():
            continue
        m = NUMBERED.match(text or "")
        if err or not m:  # rejected alone; the dialogue around it goes on
            result.records += 1
            handle_bad(result, lenient, path, n, f"line {n}", "personachat",
                       err or "expected 'N text' (a ParlAI PersonaChat line)")
            continue
        if m.group(1) == "1" and current:
            yield start, current
            current = []
        if not current:
            start = n
        current.append((n, m.group(2)))
    if current:
        yield start, current


def parse_dialogue(lines: list[tuple[int, str]]) -> tuple[list[str], list[str], list[str]]:
    """(persona sentences, utterances, raw speakers) of one dialogue."""
    persona, texts, speakers = [], [], []
    for n, text in lines:
        if PERSONA.match(text):
            if texts:
                raise RecordError(f"persona line at line {n} after the dialogue began")
            persona.append(PERSONA.sub("", text).strip())
            continue
        fields = text.split("\t")
        if len(fields) < 2:
            raise RecordError(f"line {n}: expected the partner's utterance and the reply separated by a tab")
        partner, reply = fields[0].strip(), fields[1].strip()
        if partner and partner != SILENCE:
            texts.append(partner)
            speakers.append("partner")
        texts.append(reply)
        speakers.append("self")
    if not texts:
        raise RecordError("a persona without a dialogue")
    return persona, texts, speakers


def read_personachat(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for k, (start, lines) in enumerate(_dialogues(path, result, lenient)):
        result.records += 1
        locator = f"lines {start}-{lines[-1][0]}"
        try:
            persona, texts, speakers = parse_dialogue(lines)
            row = dialogue_row(f"personachat-{path.stem}-{k}", "personachat", None, texts, speakers, path, start,
                               locator)
            row["persona"] = persona
            result.rows.append(row)
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, start, locator, "personachat", exc)
    return result
