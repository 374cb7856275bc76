"""CORECODE task files (JSON Lines): `id`, `dialogue` (list of "A: ..."), `question`, options
`"(a)"`, `"(b)"`, ... for the multiple-choice tasks, `answer` (`["(a)", "text"]` for MCQ, a
string otherwise)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from readers.base import (
    ReadResult,
    RECORD_ERRORS,
    RecordError,
    handle_bad,
    json_line_records,
    require_keys,
    require_file,
)

OPTION = re.compile(r"^\(([a-z]|\d+)\)$")


def _label_order(label: str) -> tuple:
    """(a) < (b) < ... and (1) < (2) < ... < (10): numbers compare as numbers, not strings."""
    inner = label[1:-1]
    return (0, int(inner), "") if inner.isdigit() else (1, 0, inner)


def _turn(utterance: str) -> dict:
    head, sep, text = utterance.partition(":")
    if not sep or head.strip() not in {"A", "B"}:
        head, sep, text = utterance.partition("：")  # full-width colon
    if not sep or head.strip() not in {"A", "B"}:
        raise RecordError(f"utterance without an A/B speaker: {utterance[:30]!r}")
    # text as released, trailing spaces too: a clipped dialogue ends where the clip fell
    return {"speaker": head.strip(), "text": text.removeprefix(" "), "raw_speaker": head.strip()}


def read_corecode(path: str | Path, lenient: bool = False) -> ReadResult:
    path = require_file(path)
    result = ReadResult()
    for n, locator, obj in json_line_records(path, result, lenient, "corecode"):
        try:
            require_keys(obj, ("id", "dialogue", "question", "answer"))
            if not isinstance(obj["dialogue"], list) or not obj["dialogue"]:
                raise RecordError("'dialogue' must be a non-empty list")
            options = {k: str(v) for k, v in obj.items() if OPTION.match(k)}
            labels = sorted(options, key=_label_order)
            answer = obj["answer"]
            if options:
                if not (isinstance(answer, list) and len(answer) == 2 and answer[0] in options):
                    raise RecordError("an MCQ answer must be [\"(x)\", text] naming one of the options")
                answer_label, answer_text = answer
            else:
                answer_label, answer_text = None, str(answer)
            result.rows.append({
                "id": f"corecode-{path.stem}-{n:06d}", "item_id": str(obj["id"]),
                "turns": [_turn(u) for u in obj["dialogue"]], "question": str(obj["question"]),
                "options": [options[k] for k in labels], "option_labels": labels,
                "answer_label": answer_label, "answer": answer_text,
                "source_file": str(path), "source_record": n, "source_locator": locator})
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "corecode", exc)
    return result


def read_corecode_dialogues(path: str | Path, lenient: bool = False) -> ReadResult:
    """The distinct dialogues of a CORECODE task file (many items share one), each once, with the
    record it was first read from; repeats are counted in `skipped`."""
    items = read_corecode(path, lenient=lenient)
    result = ReadResult(rejected=items.rejected, records=0)
    seen: set[tuple] = set()
    for item in items.rows:
        key = tuple((t["speaker"], t["text"]) for t in item["turns"])
        if key in seen:
            result.skipped["repeated_dialogue"] = result.skipped.get("repeated_dialogue", 0) + 1
            continue
        seen.add(key)
        result.records += 1
        digest = hashlib.sha256("\n".join(f"{s}: {t}" for s, t in key).encode()).hexdigest()[:12]
        result.rows.append({"id": f"corecode-{digest}", "source": "corecode", "turns": item["turns"],
                            "empty_turns_dropped": 0, "source_file": item["source_file"],
                            "source_record": item["source_record"], "source_locator": item["source_locator"]})
    result.records += len(items.rejected)
    return result


ANNOTATION_KEYS = {"dialogue_id": str, "set": str, "dimension": str, "instance": str, "domain": str, "slot": str,
                   "value": str, "phrases": list, "conflict_of": int, "conflict_phrase_1": str, "conflict_phrase_2": str}
PHRASE_KEYS = {"role": str, "utterance": int, "start": int, "text": str}


def read_corecode_annotations(path: str | Path, lenient: bool = False) -> ReadResult:
    """Knowledge annotations, JSON Lines, one knowledge item per line: `dialogue_id`, `set` (EASY / HARD),
    `dimension`, `instance`, `domain`, `slot`, `value`, `phrases` (the dialogue phrases it rests on:
    `role` instance / value, `utterance` index, character `start` in that utterance, `text`),
    `conflict_of` (index of the phrase the conflict phrases replace), `conflict_phrase_1` (minimal edit),
    `conflict_phrase_2` (maximal edit); optional `id`. Checks shapes and types; the ontology rules are
    the `annotations` stage's."""
    path = require_file(path)
    result = ReadResult()
    for n, locator, obj in json_line_records(path, result, lenient, "corecode_annotations"):
        try:
            require_keys(obj, ANNOTATION_KEYS)
            for k, t in ANNOTATION_KEYS.items():
                if not isinstance(obj[k], t) or (t is int and isinstance(obj[k], bool)):
                    raise RecordError(f"{k!r} must be {t.__name__}, got {type(obj[k]).__name__}")
            phrases = []
            for j, p in enumerate(obj["phrases"]):
                if not isinstance(p, dict) or any(not isinstance(p.get(k), t) for k, t in PHRASE_KEYS.items()):
                    raise RecordError(f"phrase {j} needs {', '.join(f'{k} ({t.__name__})' for k, t in PHRASE_KEYS.items())}")
                phrases.append({"role": p["role"], "utterance": p["utterance"], "start": p["start"],
                                "end": p["start"] + len(p["text"]), "text": p["text"]})
            if not phrases:
                raise RecordError("'phrases' is empty: a knowledge item rests on at least one dialogue phrase")
            if not 0 <= obj["conflict_of"] < len(phrases):
                raise RecordError(f"'conflict_of' {obj['conflict_of']} names no phrase (there are {len(phrases)})")
            row = {k: obj[k] for k in ANNOTATION_KEYS if k != "phrases"}
            row.update(id=str(obj.get("id") or f"{obj['dialogue_id']}/k{n}"), phrases=phrases,
                       source_file=str(path), source_record=n, source_locator=locator)
            result.rows.append(row)
        except RECORD_ERRORS as exc:
            handle_bad(result, lenient, path, n, locator, "corecode_annotations", exc)
    return result
