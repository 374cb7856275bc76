"""Topical-Chat's `conversations/*.json`: one JSON object keyed by conversation id, each
{"article_url", "config", "content": [{"message", "agent", "sentiment", "knowledge_source",
"turn_rating"}, ...], "conversation_rating"}. A path may name one file or the `conversations`
directory (train, valid_freq, valid_rare, test_freq, test_rare)."""

from __future__ import annotations

from pathlib import Path

from csk.errors import InputError
from readers.base import ReadResult, RECORD_ERRORS, RecordError, dialogue_row, handle_bad, load_json


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise InputError(str(path), None, "no Topical-Chat *.json file in this directory")
        return files
    if not path.exists():
        raise InputError(str(path), None, "file not found")
    return [path]


def _message(turn) -> tuple[str, str]:
    if not isinstance(turn, dict) or "message" not in turn or "agent" not in turn:
        raise RecordError("a turn without 'message' and 'agent'")
    msg = turn["message"]
    # Some Topical-Chat builds split a message into sentences.
    text = " ".join(str(m).strip() for m in msg) if isinstance(msg, list) else str(msg)
    return text, str(turn["agent"])


def read_topicalchat(path: str | Path, lenient: bool = False) -> ReadResult:
    result = ReadResult()
    directory = Path(path).is_dir()
    for file in _files(Path(path)):
        try:
            data = load_json(file)
            if not isinstance(data, dict):
                raise InputError(str(file), None, "expected a JSON object keyed by conversation id (Topical-Chat)")
        except InputError as exc:
            if not (lenient and directory):
                raise
            result.records += 1  # one file of the directory is unusable: rejected, the others read
            handle_bad(result, lenient, file, 0, "file", "topicalchat", exc.message)
            continue
        for i, (conv_id, conv) in enumerate(data.items()):
            result.records += 1
            locator = f"conversation {conv_id}"
            try:
                if not isinstance(conv, dict) or not isinstance(conv.get("content"), list):
                    raise RecordError("expected an object with a 'content' list")
                texts, agents = zip(*(_message(t) for t in conv["content"])) if conv["content"] else ((), ())
                result.rows.append(dialogue_row(f"topicalchat-{file.stem}-{conv_id}", "topicalchat", None,
                                                list(texts), list(agents), file, i, locator))
            except RECORD_ERRORS as exc:
                handle_bad(result, lenient, file, i, locator, "topicalchat", exc)
    return result
