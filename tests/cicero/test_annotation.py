"""Annotation export/import, splits and NLG tasks."""

from __future__ import annotations

import json

import pandas as pd

from readers import read_cicero_release, read_dailydialog, read_dream, read_mutual
from tasks.cicero.annotation import annotations, locate_target, norm
from tasks.cicero.experiments import SEP
from tasks.cicero.nlg import nlg
from tasks.cicero.splits import splits


def test_norm_folds_tokenisation_and_case():
    assert norm("I do n't know , Dad !") == norm("i don't know, dad!")


def test_locate_target():
    turns = [{"text": "Hello there , how are you ?"}, {"text": "I am fine , thanks for asking ."}]
    assert locate_target("I am fine, thanks for asking.", turns) == (1, "exact")
    assert locate_target("I am fine", turns) == (1, "contained")
    assert locate_target("Something else entirely was said here", turns)[0] is None


def _release(tmp_path, rows):
    p = tmp_path / "rel.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def test_import_flags_unknown_dialogue_and_rejects_missing_target(tmp_path):
    turns = [{"speaker": "A", "text": "Nice to meet you , I am Ann ."}, {"speaker": "B", "text": "Nice to meet you too ."}]
    dialogues = pd.DataFrame({"id": ["dailydialog-000001"], "turns": [turns]})
    tasks = pd.DataFrame({"id": ["dailydialog-000001/u01/cause"]})
    base = {"Question": "What is or could be the cause of target?", "Choices": ["x", "y"], "Correct Answers": [0]}
    rel = _release(tmp_path, [
        {"ID": "daily-dialogue-0001", "Dialogue": ["A: nice to meet you, i am ann.", "B: Nice to meet you too."],
         "Target": "Nice to meet you too.", **base},
        {"ID": "daily-dialogue-0002", "Dialogue": ["A: Something else .", "A: Not in the pipeline ."],
         "Target": "Not in the pipeline .", **base},
        {"ID": "daily-dialogue-0003", "Dialogue": ["A: Nice to meet you , I am Ann .", "B: Nice to meet you too ."],
         "Target": "An utterance nobody said at all", **base}])
    out = annotations(dialogues, tasks, release=rel)
    d = out.data.set_index("cicero_id")
    assert d.loc["daily-dialogue-0001", "source_dialogue_id"] == "dailydialog-000001"
    assert d.loc["daily-dialogue-0001", "task_id"] == "dailydialog-000001/u01/cause"
    assert d.loc["daily-dialogue-0002", "dialogue_from_release"] and pd.isna(d.loc["daily-dialogue-0002", "source_dialogue_id"])
    assert out.rejected["reason"].str.contains("target not found").tolist() == [True]
    assert len(out.data) + len(out.rejected) == out.rows_in == 3


def test_real_cicero_import_locates_targets(real):
    """The release's Target is an exact utterance 99.86% of the time: locate >= 99%."""
    rel = real / "cicero" / "cicero_v2_val_sample.jsonl"
    sources = [read_dailydialog(real / "dailydialog" / "dialogues_sample.txt"), read_mutual(real / "mutual" / "dev"),
               read_dream(real / "dream" / "dev_sample.json")]
    dialogues = pd.DataFrame([r for s in sources for r in s.rows])
    # These source slices (DailyDialog test, MuTual dev, DREAM dev) are not the release's (CICERO val):
    out = annotations(dialogues, pd.DataFrame({"id": pd.Series([], dtype=str)}), release=str(rel),
                      allow_unmatched=True)
    n = read_cicero_release(rel).records
    assert len(out.data) / n >= 0.99
    assert out.data["dialogue_from_release"].all()


def test_real_mutual_dialogues_match_the_release(real):
    """Read as CICERO built them, the MuTual sources of the real sample match every released dialogue."""
    dialogues = pd.DataFrame(read_mutual(real / "mutual" / "for_cicero").rows)
    out = annotations(dialogues, pd.DataFrame({"id": pd.Series([], dtype=str)}),
                      release=str(real / "cicero" / "cicero_v2_val_mutual.jsonl"))
    assert out.notes["match_rates"]["mutual"] == {"dialogues": 40, "matched": 40, "rate": 1.0}
    assert not out.data["dialogue_from_release"].any()


def test_a_release_matching_no_rebuilt_dialogue_is_an_error(tmp_path):
    import pytest

    from csk.errors import InputError

    turns = [{"speaker": "A", "text": "Nothing like the release ."}, {"speaker": "B", "text": "Indeed not ."}]
    dialogues = pd.DataFrame({"id": ["dailydialog-000001"], "turns": [turns]})
    rel = _release(tmp_path, [{"ID": "dream-0001", "Dialogue": ["A: Other words .", "B: Other reply ."],
                               "Target": "Other reply .", "Question": "What is or could be the cause of target?",
                               "Choices": ["x", "y"], "Correct Answers": [0]}])
    no_tasks = pd.DataFrame({"id": pd.Series([], dtype=str)})
    with pytest.raises(InputError, match="none of its 1 dialogues matches one of the 1 rebuilt"):
        annotations(dialogues, no_tasks, release=rel)
    out = annotations(dialogues, no_tasks, release=rel, allow_unmatched=True)
    assert out.notes["match_rates"] == {"dream": {"dialogues": 1, "matched": 0, "rate": 0.0}}


def test_splits_are_by_dialogue_and_near_proportions():
    ann = pd.DataFrame({"id": [f"i{k}" for k in range(1000)], "dialogue_id": [f"d{k // 5}" for k in range(1000)]})
    out = splits(ann, seed=0).data
    assert (out.groupby("dialogue_id")["split"].nunique() == 1).all()
    share = out["split"].value_counts(normalize=True)
    assert abs(share["train"] - 0.6) < 0.02 and abs(share["test"] - 0.2) < 0.02
    assert out.equals(splits(ann, seed=0).data) and not out.equals(splits(ann, seed=1).data)


def test_nlg_inputs_and_chaining():
    dialogue = ["A: one two three .", "B: four five six .", "A: seven eight nine ."]
    common = {"dialogue_id": "d", "utterance_index": 1, "target": "four five six .", "dialogue": dialogue,
              "choices": ["ans", "alt"], "correct_answers": [0]}
    ann = pd.DataFrame([
        {"id": "c", "inference_type": "cause", "question": "Qc", "answer": "the cause", **common},
        {"id": "s", "inference_type": "subsequent_event", "question": "Qs", "answer": "the next", **common}])
    out = nlg(pd.DataFrame({"id": ["c", "s"], "split": ["train", "train"]}), ann).data.set_index("task")
    context = "context: A: one two three . <utt> B: four five six . <utt> A: seven eight nine ."
    assert out.loc["1.1.1_cause", "input"] == SEP.join(["Qc", "target: four five six .", context])
    assert SEP == " \\n "  # the literal four characters of the authors' data preparation
    assert out.loc["1.1.3_subsequent_event_clipped", "input"].endswith("<utt> B: four five six .")
    # the chained tasks put the other event before the context
    assert out.loc["1.1.4_chained_cause", "input"] == SEP.join(["Qc", "target: four five six .",
                                                                "subsequent event: the next", context])
    assert out.loc["1.1.5_chained_subsequent_event", "input"] == SEP.join(["Qs", "target: four five six .",
                                                                           "cause: the cause", context])
    assert out.loc["1.1.5_chained_subsequent_event", "output"] == "the next"


def test_nlg_reaction_only_on_the_last_utterance_and_says_why():
    dialogue = ["A: one two three .", "B: four five six ."]
    ann = pd.DataFrame([{"id": f"r{u}", "inference_type": "reaction", "question": "Qr", "answer": "glad",
                         "dialogue_id": "d", "utterance_index": u, "target": dialogue[u][3:], "dialogue": dialogue,
                         "choices": ["glad"], "correct_answers": [0]} for u in (0, 1)])
    out = nlg(pd.DataFrame({"id": ["r0", "r1"], "split": ["test", "test"]}), ann)
    assert out.data["annotation_id"].tolist() == ["r1"]
    assert out.rejected["id"].tolist() == ["r0"] and "last utterance" in out.rejected["reason"].iloc[0]


def test_quality_check_majority_vote(tmp_path):
    import pytest

    from csk.errors import InputError
    from tasks.cicero.quality_check import quality_check

    ann = pd.DataFrame({"id": ["a", "b", "c", "d"], "dialogue": [["A: x ."]] * 4, "target": "x .", "question": "q",
                        "answer": "ans"})
    votes = tmp_path / "votes.jsonl"
    lines = [("a", 1, True), ("a", 2, True), ("a", 3, False), ("b", 1, False), ("b", 2, False), ("b", 3, True),
             ("c", 1, False)]
    votes.write_text("".join(json.dumps({"id": i, "checker": f"w{k}", "valid": v}) + "\n" for i, k, v in lines))
    out = quality_check(ann, verdicts=str(votes))
    assert out.data["id"].tolist() == ["a", "c", "d"]  # b: 2 of 3 said invalid; c: one vote is not a decision
    assert out.rejected["reason"].tolist() == ["2 of 3 checkers judged the answer invalid"]
    assert out.data.set_index("id")["checked"].to_dict() == {"a": True, "c": False, "d": False}
    assert out.notes["kept_share_of_decided"] == 0.5
    assert quality_check(ann).data["id"].tolist() == ["a", "b", "c", "d"]  # no verdicts: nothing removed
    votes.write_text('{"id": "a", "checker": "w1", "valid": true}\n{"id": "a", "checker": "w1", "valid": false}\n')
    with pytest.raises(InputError, match="line 2: checker 'w1' voted twice"):
        quality_check(ann, verdicts=str(votes))


def test_a_released_split_file_keeps_its_split(tmp_path):
    """Instances of CICERO's `test.json` come back in test, whatever the shares say; a file whose name gives
    no split is dealt by dialogue as before."""
    turns = [{"speaker": "A", "text": "Nice to meet you , I am Ann ."}, {"speaker": "B", "text": "Nice to meet you too ."}]
    dialogues = pd.DataFrame({"id": ["dailydialog-000001"], "turns": [turns]})
    tasks = pd.DataFrame({"id": ["dailydialog-000001/u01/cause"]})
    rows = [{"ID": f"daily-dialogue-{k:04d}", "Dialogue": [f"A: Line {k} of a talk about the weather .", "B: Fine ."],
             "Target": "Fine .", "Question": "What is or could be the cause of target?", "Choices": ["x", "y"],
             "Correct Answers": [0]} for k in range(10)]
    test_file = tmp_path / "test.json"
    test_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = annotations(dialogues, tasks, release=str(test_file), allow_unmatched=True)
    assert set(out.data["release_split"]) == {"test"}
    assert set(splits(out.data, seed=0).data["split"]) == {"test"}
    plain = annotations(dialogues, tasks, release=_release(tmp_path, rows), allow_unmatched=True)
    assert plain.data["release_split"].isna().all() and splits(plain.data, seed=0).data["split"].nunique() > 1
