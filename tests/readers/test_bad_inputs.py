"""Every reader against the bad-input corpus (tests/bad_inputs.py): a clear error naming the file
(and the record, where one record is at fault) in strict mode, a rejected row with its reason in
lenient mode; never a traceback of another kind; legal variants (BOM, CRLF) read as the original."""

from __future__ import annotations

import json
import shutil
import traceback
from pathlib import Path

import pandas as pd
import pytest

from csk.errors import InputError
from readers import (
    read_cicero_dialogues,
    read_cicero_release,
    read_conceptnet_assertions,
    read_conture,
    read_corecode,
    read_corecode_annotations,
    read_corecode_dialogues,
    read_dailydialog,
    read_deco,
    read_dream,
    read_dulemon,
    read_mutual,
    read_naturalconv,
    read_paco_gen,
    read_paco_nli,
    read_personachat,
    read_topicalchat,
)
from tests.bad_inputs import variants
from tests.conftest import SAMPLE

CICERO_V2 = [{"ID": f"dd-{i}", "Dialogue": ["A: Shall we walk the dog before dinner today ?",
                                            "B: Yes , it has been inside the whole afternoon ."],
              "Target": "B: Yes , it has been inside the whole afternoon .", "Question": "What is or could be the "
              "cause of target?", "Choices": ["The dog stayed in.", "It rained.", "The dog slept.", "They left.",
                                              "Dinner was late."], "Correct Answers": [0]} for i in range(3)]
CORECODE = [{"id": i, "dialogue": ["A: 今天下雨了。", "B: 记得带伞。"], "question": "下雨之后会发生什么？",
             "(a)": "带伞", "(b)": "晒太阳", "answer": ["(a)", "带伞"]} for i in range(3)]


def _seed(tmp: Path, name: str) -> Path:
    """Valid files of the formats no bundled sample holds (written here, in the release layout)."""
    p = tmp / "seed" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if name == "cicero_v2.jsonl":
        p.write_text("".join(json.dumps(r) + "\n" for r in CICERO_V2))
    elif name == "corecode.jsonl":
        p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in CORECODE), encoding="utf-8")
    elif name == "paco_nli.csv":
        p.write_text("context,question,label\nThe door is unlocked.,A person opens a door.,1\n"
                     "The door is welded shut.,A person opens a door.,0\nThere is water.,A fish swims.,1\n")
    elif name == "paco_gen.csv":
        p.write_text("prompt,refs_0,refs_1,refs_2\nA person opens a door. What makes this possible?,It is "
                     "unlocked.,The handle works.,\nA fish swims. What makes this impossible?,No water.,,\n"
                     "A bird flies. What makes this possible?,Its wings work.,It is awake.,\n")
    return p


def _lenient_kw(fn):
    return lambda p, lenient: fn(p, lenient=lenient)


# name: (reader(path, lenient), seed (under data/sample, or a _seed name), format, directory reader)
READERS = {
    "dailydialog": (read_dailydialog, "dailydialog/dialogues_text.txt", "lines", False),
    "mutual": (read_mutual, "mutual/dev/dev_1.txt", "json", True),
    "dream": (read_dream, "dream/dev.json", "json", False),
    "cicero_v1": (read_cicero_release, "cicero/annotations_v1.jsonl", "jsonl", False),
    "cicero_v2": (read_cicero_release, "@cicero_v2.jsonl", "jsonl", False),
    "cicero_dialogues": (read_cicero_dialogues, "@cicero_v2.jsonl", "jsonl", False),
    "paco_nli": (read_paco_nli, "@paco_nli.csv", "csv", False),
    "paco_gen": (read_paco_gen, "@paco_gen.csv", "csv", False),
    "corecode": (read_corecode, "@corecode.jsonl", "jsonl", False),
    "corecode_dialogues": (read_corecode_dialogues, "@corecode.jsonl", "jsonl", False),
    "corecode_annotations": (read_corecode_annotations, "corecode/annotations.jsonl", "jsonl", False),
    "deco": (read_deco, "deco/deco_train_sample.json", "json", False),
    "conture": (read_conture, "deco/conture_sample.json", "json", False),
    "conceptnet": (_lenient_kw(read_conceptnet_assertions), "corequisite/conceptnet-assertions-sample.csv", "tsv",
                   False),
    "naturalconv": (read_naturalconv, "corecode/naturalconv/dialog_release.json", "json", False),
    "dulemon": (read_dulemon, "corecode/dulemon/self/train.json", "jsonl", True),
    "personachat": (read_personachat, "deco/personachat/train_self_original.txt", "lines", False),
    "topicalchat": (read_topicalchat, "deco/topicalchat/train.json", "json", True),
}


def _params(sources) -> list:
    """One test case per (input, variant): `sources` yields (name, valid file, format)."""
    return [pytest.param(name, vname, kind, id=f"{name}-{vname}")
            for name, src, fmt in sources for vname, kind, _ in variants(src, fmt)]


def _cases():
    tmp = Path(__import__("tempfile").mkdtemp(prefix="csk-bad-inputs-"))
    return _params((name, _seed(tmp, seed[1:]) if seed.startswith("@") else SAMPLE / seed, fmt)
                   for name, (_, seed, fmt, _) in READERS.items())


def _make(tmp_path: Path, name: str, vname: str) -> tuple[Path, Path, Path]:
    """(path to give the reader, the file the variant is, the valid original)."""
    reader, seed, fmt, in_dir = READERS[name]
    src = _seed(tmp_path, seed[1:]) if seed.startswith("@") else SAMPLE / seed
    make = next(m for v, _, m in variants(src, fmt) if v == vname)
    root = tmp_path / "input"
    if in_dir:  # the variant is one file of a directory the reader is given
        shutil.copytree(src.parent, root)
        target = root / src.name
        target.unlink()
        original = root.parent / "original"
        shutil.copytree(src.parent, original)
    else:
        root.mkdir()
        target = root / src.name
        original = src
    make(target)
    return (root if in_dir else target), target, original


def _texts(rows) -> str:
    return json.dumps(rows, ensure_ascii=False, default=str)


@pytest.mark.parametrize("name,vname,kind", _cases())
def test_reader_on_bad_input(tmp_path, name, vname, kind):
    reader = READERS[name][0]
    path, target, original = _make(tmp_path, name, vname)
    outcomes = {}
    for lenient in (False, True):
        try:
            outcomes[lenient] = reader(path, lenient)
        except InputError as exc:
            assert target.name in str(exc) or str(path) in str(exc), f"the error does not name the file: {exc}"
            outcomes[lenient] = exc
        except Exception:  # noqa: BLE001 - anything else is the bug this test looks for
            pytest.fail(f"{name} {vname} (lenient={lenient}): not an InputError:\n{traceback.format_exc()}")
    strict, lenient = outcomes[False], outcomes[True]
    if kind == "accepted":  # read as the original is (the bundled samples hold a few bad records on purpose)
        want = reader(original, True)
        assert not isinstance(lenient, Exception), f"a legal variant was refused: {lenient}"
        assert (len(lenient.rows), len(lenient.rejected)) == (len(want.rows), len(want.rejected))
        assert "\\r" not in _texts(lenient.rows) and "\ufeff" not in _texts(lenient.rows)
        assert isinstance(strict, Exception) == (len(want.rejected) > 0)
        return
    if kind == "truncated":  # cut mid-record: a stop naming the cut, in both modes; cut at a line end: records
        if isinstance(lenient, Exception):
            assert "cut short" in str(lenient) and "file ends at byte" in str(lenient), lenient
            assert isinstance(strict, InputError), strict  # (strict may stop at an earlier bad record)
            return
        kind = "record"
    if kind == "record":
        assert not isinstance(lenient, Exception), f"lenient mode stopped at one bad record: {lenient}"
        if isinstance(strict, InputError):
            assert strict.record is not None, f"the error does not name the record: {strict}"
            assert lenient.rejected, "strict mode refused a record that lenient mode kept"
    if isinstance(lenient, Exception):
        return
    for r in lenient.rejected:
        assert r["reason"] and r["reason_code"] and r["source_file"], r
    if kind == "file" and not isinstance(strict, Exception):
        pytest.fail(f"{name} {vname}: an unusable file was read as {len(strict.rows)} rows")


# ---------------------------------------------------------------- annotation and verdict imports
def _imports(tmp: Path):
    from tasks.cicero.quality_check import read_votes
    from tasks.corequisite.answer_quality import _expert_labels
    from tasks.deco.extract import _read_negatives
    from tasks.deco.sources import _responses
    from tasks.distractors.counterfactuals import read_candidate_file
    from tasks.distractors.generator_training import read_pairs
    from tasks.corequisite.annotation import _answers_table

    def write(name, text):
        p = tmp / "seed" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        return p

    tasks = pd.DataFrame({"id": ["t1", "t2"], "fact_id": ["f1", "f2"], "statement": ["s1", "s2"],
                          "polarity": ["enabling", "disabling"], "question": ["q1", "q2"]})
    return {
        "verdicts": (lambda p: read_votes(str(p), {"a1", "a2"}), write(
            "votes.jsonl", '{"id": "a1", "checker": "c1", "valid": true}\n{"id": "a2", "checker": "c1", "valid": false}\n'
        ), "jsonl"),
        "distractor_verdicts": (lambda p: __import__("tasks.distractors.verification", fromlist=["x"]).read_verdicts(
            str(p), {"i1": ["d0", "d1"], "i2": ["d0", "d1"]}), write(
            "dv.jsonl", '{"id": "i1", "distractor": 1, "speculatively_correct": true}\n'
                        '{"id": "i2", "distractor": "d0", "speculatively_correct": false}\n'), "jsonl"),
        "candidates": (lambda p: read_candidate_file(str(p), {"i1", "i2"}), write(
            "cands.jsonl", '{"id": "i1", "candidates": ["a", "b"]}\n{"id": "i2", "candidates": ["c"]}\n'), "jsonl"),
        "expert_labels": (lambda p: _expert_labels(p, {"f1/enabling/0", "f2/enabling/0"}, {"f1"}), write(
            "labels.csv", "id,label\nf1/enabling/0,truism\nf2/enabling/0,informative\n"), "csv"),
        "deco_responses": (lambda p: _responses(str(p)), write(
            "responses.csv", "history_id,response,system\nh1,I would like that very much .,S1\nh2,Sure .,S2\n"), "csv"),
        "deco_none_sample": (lambda p: _read_negatives(p), write(
            "none.csv", "context,response,relation,setting\nhi</UTT>there,ok then,xNeed,single\n"
                        "a</UTT>b,c d,xWant,pair\n"), "csv"),
        "snli": (lambda p: read_pairs([p], []), write(
            "snli.jsonl", '{"sentence1": "A man sleeps.", "sentence2": "A man runs.", "gold_label": "contradiction"}\n'
                          '{"sentence1": "A dog.", "sentence2": "An animal.", "gold_label": "entailment"}\n'), "jsonl"),
        "timetravel": (lambda p: read_pairs([], [p]), write(
            "tt.jsonl", '{"original_ending": "He won.", "edited_ending": "He lost."}\n'
                        '{"original_ending": "It rained.", "edited_ending": "It was sunny."}\n'), "jsonl"),
        "paco_answers": (lambda p: _answers_table(p, tasks, False), write(
            "answers.csv", "task_id,worker_id,answer,does_not_make_sense\nt1,W1,It is raining.,0\nt2,W2,No rain.,0\n"),
            "csv"),
    }


def _import_cases():
    tmp = Path(__import__("tempfile").mkdtemp(prefix="csk-bad-imports-"))
    return _params((name, src, fmt) for name, (_, src, fmt) in _imports(tmp).items())


@pytest.mark.parametrize("name,vname,kind", _import_cases())
def test_import_on_bad_input(tmp_path, name, vname, kind):
    """Imports of people's work (verdicts, labels, answers) are strict: a bad line is an error naming it."""
    fn, src, fmt = _imports(tmp_path)[name]
    make = next(m for v, _, m in variants(src, fmt) if v == vname)
    target = tmp_path / "input" / src.name
    target.parent.mkdir()
    make(target)
    try:
        fn(target)
    except InputError as exc:
        assert target.name in str(exc), f"the error does not name the file: {exc}"
        if kind == "record":
            assert exc.record is not None, f"the error does not name the line: {exc}"
        return
    except Exception:  # noqa: BLE001
        pytest.fail(f"{name} {vname}: not an InputError:\n{traceback.format_exc()}")
    assert kind in ("accepted", "record"), f"{name} {vname}: an unusable file was accepted"


@pytest.fixture(autouse=True)
def _drop_inputs(tmp_path):
    """The 100 MB variants are not kept among pytest's temporary directories."""
    yield
    shutil.rmtree(tmp_path / "input", ignore_errors=True)
