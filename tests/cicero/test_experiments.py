"""CICERO's experiment files, against lines written by hand from the format of the authors' scripts."""

from __future__ import annotations

import json

import pandas as pd

from tasks.cicero.experiments import experiment_files, target_index

CAUSE = "What is or could be the cause of target?"
SUBSEQ = "What subsequent event happens or could happen following the target?"
REACTION = "What is the possible emotional reaction of the listener in response to target?"
DIALOGUE = ["A: Shall we eat out tonight ?", "B: Sure , I am starving .", "A: Great , the café opens at six ."]


def _row(question, target="Sure , I am starving .", hwa=1, correct=(1,), **kw):
    return {"ID": "daily-dialogue-0007", "Dialogue": DIALOGUE, "Target": target, "Question": question,
            "Choices": ["c0", "c1", "c2", "c3", "c4"], "Human Written Answer": [hwa], "Correct Answers": list(correct),
            "split": "validation", **kw}


def _files(rows):
    files, skipped = experiment_files(pd.DataFrame(rows))
    return {k: v.decode() for k, v in files.items()}, skipped


def test_nlg_generation_lines():
    files, _ = _files([_row(CAUSE), _row(SUBSEQ, hwa=2, correct=(2, 4))])
    context = "context: A: Shall we eat out tonight ? <utt> B: Sure , I am starving . <utt> A: Great , the caf\u00e9 opens at six ."
    assert files["nlg/val_cause.json"] == json.dumps(
        {"input": f"{CAUSE} \\n target: Sure , I am starving . \\n {context}", "output": "c1"}) + "\n"
    # the literal four characters " \n " join the fields, and non-ASCII is escaped as json.dumps does
    assert ' \\\\n target: ' in files["nlg/val_cause.json"] and "caf\\u00e9" in files["nlg/val_cause.json"]
    clipped = json.loads(files["nlg/val_subseq_event_clipped.json"])
    assert clipped["input"].endswith("context: A: Shall we eat out tonight ? <utt> B: Sure , I am starving .")
    assert clipped["output"] == "c2"
    assert files["nlg/val_prerequisite.json"] == ""  # every relation's file is written, empty or not
    cause = json.loads(files["nlg/val_chained_cause.json"])
    assert cause == {"input": f"{CAUSE} \\n target: Sure , I am starving . \\n subsequent event: c2 \\n {context}",
                     "output": "c1"}
    subseq = json.loads(files["nlg/val_chained_subseq_event.json"])
    assert subseq["input"] == f"{SUBSEQ} \\n target: Sure , I am starving . \\n cause: c1 \\n {context}"


def test_nlg_chains_only_targets_with_exactly_two_instances():
    files, _ = _files([_row(CAUSE), _row(SUBSEQ), _row(CAUSE, target="Great , the café opens at six .")])
    assert len(files["nlg/val_chained_cause.json"].splitlines()) == 1


def test_clipped_target_found_fuzzily_when_not_exact():
    assert target_index("Sure, I am starving", DIALOGUE) == 1
    assert target_index("Great , the café opens at six .", DIALOGUE) == 2


def test_mcq_lines_and_zero_shot_sets():
    rows = [_row(CAUSE), _row(SUBSEQ, correct=(1, 3)), _row(REACTION, split="test")]
    files, _ = _files(rows)
    sel = json.loads(files["mcq/selection/val_single.json"])
    assert list(sel) == ["ID", "context", "choice0", "choice1", "choice2", "choice3", "choice4", "label"]
    assert sel["label"] == 1 and sel["context"].startswith(f"{CAUSE} \\n target: ")
    gen = json.loads(files["mcq/generation/val_single.json"])
    assert " \\n (0) c0 (1) c1 (2) c2 (3) c3 (4) c4 \\n context: " in gen["input"] and gen["output"] == "c1"
    multiple = json.loads(files["mcq/generation/val_multiple.json"])
    assert multiple["output"] == "c1 \\n c3"
    assert len(files["mcq/generation/val_all.json"].splitlines()) == 2
    # zero-shot: train/val keep cause, prerequisite, reaction; test keeps motivation and subsequent event
    assert len(files["mcq/selection/val_zs_single.json"].splitlines()) == 1
    assert files["mcq/selection/test_zs_single.json"] == "" and files["mcq/selection/test_single.json"] != ""


def test_v2_rows_are_said_not_written():
    rows = [_row(CAUSE, **{"Human Written Answer": None}), _row(SUBSEQ, **{"Human Written Answer": None})]
    rows[0]["Choices"] = ["a", "b", "c"]
    files, skipped = _files(rows)
    assert files == {} and len(skipped) == 2 and "Human Written Answer" in skipped[0]
