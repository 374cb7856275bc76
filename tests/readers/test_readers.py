"""Readers against the bundled sample, the real released formats, and malformed input."""

from __future__ import annotations

import json

import pytest

from csk.errors import InputError
from readers import read_cicero_release, read_dailydialog, read_dream, read_mutual
from readers.base import RecordError
from readers.mutual import parse_article, utterances
from tests.conftest import SAMPLE


def _check_dialogues(result, prefix, first_is_a=True):
    assert result.rows and not result.rejected
    assert result.records == len(result.rows)
    ids = [r["id"] for r in result.rows]
    assert len(set(ids)) == len(ids) and all(i.startswith(prefix) for i in ids)
    for r in result.rows:
        assert r["turns"] and all(t["text"].strip() and t["speaker"] in "ABCDEF" for t in r["turns"])
        assert r["turns"][0]["speaker"] == "A" or not first_is_a


def test_dailydialog_real(real):
    result = read_dailydialog(real / "dailydialog" / "dialogues_sample.txt")
    _check_dialogues(result, "dailydialog-")
    assert len(result.rows) == 300
    first = result.rows[0]
    assert first["source_record"] == 1 and first["source_locator"] == "line 1"
    assert [t["speaker"] for t in first["turns"][:4]] == ["A", "B", "A", "B"]
    assert not any("__eou__" in t["text"] for r in result.rows for t in r["turns"])


def test_mutual_real(real):
    result = read_mutual(real / "mutual" / "dev")
    _check_dialogues(result, "mutual-dev_", first_is_a=False)  # m -> A, f -> B, whoever speaks first
    assert len(result.rows) == 200
    assert result.rows[0]["id"] == "mutual-dev_1"  # natural order: dev_1, dev_2, ... dev_10
    assert result.rows[1]["id"] == "mutual-dev_2"
    raw = {t["raw_speaker"] for r in result.rows for t in r["turns"]}
    assert raw <= {"m", "f"}
    assert all(t["speaker"] == {"m": "A", "f": "B"}[t["raw_speaker"]] for r in result.rows for t in r["turns"])


def test_mutual_utterances_are_cicero_s(real):
    """The 40 MuTual train dialogues of the real CICERO sample: reading their source files gives the
    released `Dialogue`, utterance for utterance and letter for letter."""
    released = {}
    for line in open(real / "cicero" / "cicero_v2_val_mutual.jsonl"):
        obj = json.loads(line)
        released.setdefault(obj["ID"], obj["Dialogue"])
    rebuilt = [[f"{t['speaker']}: {t['text']}" for t in r["turns"]]
               for r in read_mutual(real / "mutual" / "for_cicero").rows]
    assert len(rebuilt) == 40 == len(released)
    assert sorted(map(tuple, rebuilt)) == sorted(map(tuple, released.values()))


def test_dream_real(real):
    result = read_dream(real / "dream" / "dev_sample.json")
    _check_dialogues(result, "dream-")
    assert len(result.rows) == 200
    assert all(r["source_locator"] == f"item {i}" for i, r in enumerate(result.rows))


def test_cicero_release_real(real):
    result = read_cicero_release(real / "cicero" / "cicero_v2_val_sample.jsonl")
    assert len(result.rows) == 300 and not result.rejected
    assert {r["version"] for r in result.rows} == {"v2"}
    for r in result.rows:
        assert 2 <= len(r["choices"]) <= 8
        assert r["correct_answers"] and r["human_written_answer"] is None
        assert {t["speaker"] for t in r["turns"]} <= {"A", "B"}


def test_cicero_release_v1(tmp_path):
    line = {"ID": "dream-0001", "Dialogue": ["A: Hello there , how are you doing ?", "B: I am fine , thanks ."],
            "Target": "I am fine , thanks .", "Question": "What is or could be the cause of target?",
            "Choices": ["a", "b", "c", "d", "e"], "Human Written Answer": [2], "Correct Answers": [2, 4]}
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(line) + "\n")
    row = read_cicero_release(p).rows[0]
    assert row["version"] == "v1" and row["human_written_answer"] == 2 and row["correct_answers"] == [2, 4]


def test_bundled_sample_readers():
    for reader, path, prefix in ((read_dailydialog, SAMPLE / "dailydialog" / "dialogues_text.txt", "dailydialog-"),
                                 (read_mutual, SAMPLE / "mutual", "mutual-"),
                                 (read_dream, SAMPLE / "dream" / "dev.json", "dream-")):
        _check_dialogues(reader(path), prefix, first_is_a=reader is not read_mutual)


def test_mutual_article_turns():
    raw, texts = parse_article("m : hello , how are you ? f : fine . m : good .")
    assert raw == ["m", "f", "m"] and texts == ["hello , how are you ?", "fine .", "good ."]


def test_mutual_sentences_and_letters():
    letters, texts, _ = utterances("f : good morning . come in ! m : i 'm in room 908. can you help ? thanks")
    assert letters == ["B", "B", "A", "A"]
    assert texts == ["good morning .", "come in !", "i 'm in room 908. can you help ?", "thanks"]
    with pytest.raises(RecordError, match="ambiguous speaker marker 'm ; f :'"):
        utterances("m ; f : amelia , what do you do ? m ; f : i plan weddings .")


def test_irregular_records_are_handled_or_rejected(tmp_path):
    """An empty turn (DREAM test "O:") is dropped and counted; an ambiguous MuTual marker is a rejected
    record in the default (lenient) mode and an error naming file and record in strict mode."""
    dream = tmp_path / "dream.json"
    dream.write_text(json.dumps([[["M: What a beautiful necklace!", "W: My boyfriend bought it.", "O:"], [], "21-79"]]))
    row = read_dream(dream).rows[0]
    assert [t["speaker"] for t in row["turns"]] == ["A", "B"] and row["empty_turns_dropped"] == 1
    d = tmp_path / "mutual"
    d.mkdir()
    (d / "train_234.txt").write_text(json.dumps({"article": "m ; f : amelia , what do you do ?", "id": "train_234"}))
    (d / "train_1.txt").write_text(json.dumps({"article": "m : hi there . f : hello .", "id": "train_1"}))
    lenient = read_mutual(d, lenient=True)
    assert len(lenient.rows) == 1 and "ambiguous speaker marker" in lenient.rejected[0]["reason"]
    with pytest.raises(InputError, match="train_234.txt, record file: ambiguous"):
        read_mutual(d)


# ---------------------------------------------------------------- bad input
def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(InputError, match="nope.txt: file not found"):
        read_dailydialog(tmp_path / "nope.txt")


def test_malformed_dailydialog_line_names_line(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("One two three . __eou__ Four five . __eou__\nno end marker here\n")
    with pytest.raises(InputError, match=r"d.txt, record line 2: .*__eou__"):
        read_dailydialog(p)
    lenient = read_dailydialog(p, lenient=True)
    assert len(lenient.rows) == 1 and len(lenient.rejected) == 1
    assert lenient.rejected[0]["source_record"] == 2 and "__eou__" in lenient.rejected[0]["reason"]


def test_empty_dialogue_and_bad_utf8(tmp_path):
    p = tmp_path / "d.txt"
    p.write_bytes(b"Fine . __eou__\n __eou__\nBad \xff byte . __eou__\n")
    with pytest.raises(InputError, match="record line 2: (empty|every utterance)"):
        read_dailydialog(p)
    lenient = read_dailydialog(p, lenient=True)
    reasons = sorted(r["reason"] for r in lenient.rejected)
    assert len(lenient.rows) == 1 and any("UTF-8" in r for r in reasons) and any("empty" in r for r in reasons)


def test_malformed_json_records(tmp_path):
    d = tmp_path / "mutual"
    d.mkdir()
    (d / "dev_1.txt").write_text('{"article": "m : hi there . f : hello .", "id": "dev_1"}')
    (d / "dev_2.txt").write_text('{"article": "m : hi')
    with pytest.raises(InputError, match="dev_2.txt, record file: malformed JSON"):
        read_mutual(d)
    dream = tmp_path / "dream.json"
    dream.write_text(json.dumps([[["M: hi there"], [], "1-1"], [["no speaker"], [], "1-2"]]))
    with pytest.raises(InputError, match="record item 1: turn 1 has no speaker"):
        read_dream(dream)
    cic = tmp_path / "c.jsonl"
    cic.write_text('{"ID": "x"}\n')
    with pytest.raises(InputError, match="record line 1: missing keys"):
        read_cicero_release(cic)


@pytest.mark.parametrize("name, text, reader", [
    ("cut.jsonl", '{"a": 1}\n{"a": "a record cut o', "jsonl"),
    ("cut.json", '[{"a": "hello"}, {"a": "wor', "json"),
    ("cut.csv", 'a,b,c\n1,2,3\n4,"a quoted field cut', "csv"),
    ("cut.tsv", "a\tb\tc\n1\t2\t3\n4\t5", "tsv"),
])
def test_a_file_cut_mid_record_stops_naming_file_and_offset(tmp_path, name, text, reader):
    """A truncated download is not an irregular record: in every mode the read stops, naming the file,
    the record and the byte where the file ends; the reason is never clipped."""
    from readers.base import CUT_SHORT, ReadResult, csv_rows, json_line_records, load_json

    path = tmp_path / name
    path.write_text(text)
    read = {"jsonl": lambda: list(json_line_records(path, ReadResult(), True, "x")),
            "json": lambda: load_json(path),
            "csv": lambda: list(csv_rows(path)[1]),
            "tsv": lambda: list(csv_rows(path, delimiter="\t")[1])}[reader]
    with pytest.raises(InputError) as info:
        read()
    message = str(info.value)
    assert str(path) in message and CUT_SHORT in message
    assert f"file ends at byte {len(text.encode())}" in message
    # the same file complete reads, and a bad record in the middle is still a rejected row
    if reader == "jsonl":
        path.write_text('{"a": 1}\n{"a": "bad\n{"a": 2}\n')
        result = ReadResult()
        assert [o for _, _, o in json_line_records(path, result, True, "x")] == [{"a": 1}, {"a": 2}]
        assert result.rejected[0]["reason"].endswith("(char 6)")  # the whole message
