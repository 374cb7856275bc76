"""CoreQuisite's human steps in Label Studio (tasks/corequisite/labeling.py), without a server: the tasks each
step makes from a stage's rows, and its export read back by the import stage."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from csk.errors import InputError
from csk.label_studio import tasks_of
from tests import label_studio_export as ls
from tests.label_studio_export import check_config

STATEMENTS = {"fact-00000000a1": "Umbrella is typically used for staying dry.",
              "fact-00000000b2": "Pen is typically used for writing letters."}


def _facts() -> pd.DataFrame:
    return pd.DataFrame({"id": list(STATEMENTS), "statement": list(STATEMENTS.values())})


def _tasks() -> pd.DataFrame:
    from tasks.corequisite.annotation import annotation_tasks

    return annotation_tasks(_facts()).data


def _step(name: str):
    from flows.corequisite import PIPELINE

    return PIPELINE.labeling_step(name)


def _answer(texts: list[str], skip: bool = False) -> list[dict]:
    from tasks.corequisite.annotation import SKIP_OPTION

    regions = [ls.textarea(f"answer_{k}", t, to="statement") for k, t in enumerate(texts, start=1) if t is not None]
    return regions + ([ls.choices("does_not_make_sense", SKIP_OPTION, to="statement")] if skip else [])


def _label(label: str | None, invalid: bool = False) -> list[dict]:
    out = [ls.choices("label", label, to="answer")] if label else []
    return out + [ls.choices("fact_invalid", ["The fact is invalid."] if invalid else [], to="statement")]


# ------------------------------------------------------------------ preconditions (crowd)
def test_preconditions_step_makes_one_task_per_question_with_three_boxes_and_the_skip_tick():
    from tasks.corequisite.annotation import SKIP_OPTION, annotation_tasks

    step = _step("preconditions")
    assert step.stage is annotation_tasks and step.imports[1] == "answers"
    rows = _tasks()
    tasks = tasks_of(step, rows)
    assert [t["data"]["row_id"] for t in tasks] == rows["id"].tolist() and len(tasks) == 4
    assert tasks[1]["data"]["question"] == "What makes this impossible?"
    assert tasks[1]["data"]["statement"] == STATEMENTS["fact-00000000a1"]
    root = check_config(step, tasks)
    assert [el.get("name") for el in root.iter("TextArea")] == ["answer_1", "answer_2", "answer_3"]
    assert [el.get("value") for el in root.iter("Choice")] == [SKIP_OPTION]
    assert [el.get("value") for el in root.iter("Header")].count("$question") == 1


def _preconditions_export(tmp_path, tasks):
    """Task 0: annotator 7 writes three answers, annotator 8 two; task 1: 7 ticks "does not make sense", 9 writes
    an answer and ticks it too; task 2: 8 skips it; task 3 (fact b2, disabling): 9 writes one answer."""
    return ls.write(tmp_path / "preconditions.json", tasks, {
        0: [(7, _answer(["It is raining.", "The umbrella opens.", "You hold the umbrella up."])),
            (8, _answer(["The canopy is waterproof.", None, "The rain falls from above."]))],
        1: [(7, _answer([], skip=True)), (9, _answer(["The sky is blue."], skip=True))],
        2: [(8, _answer(["never read"]))],
        3: [(9, _answer(["You have no ink in the pen."]))]}, cancelled={(2, 8)})


def test_preconditions_export_gives_the_plain_tables_rows(tmp_path):
    from tasks.corequisite.annotation import annotations

    tasks = _tasks()
    export = _preconditions_export(tmp_path, tasks_of(_step("preconditions"), tasks))
    got = annotations(_facts(), tasks, answers=str(export))
    plain = tmp_path / "answers.csv"
    plain.write_text("task_id,worker_id,answer,does_not_make_sense\n"
                     "fact-00000000a1/enabling,7,It is raining.,0\n"
                     "fact-00000000a1/enabling,7,The umbrella opens.,0\n"
                     "fact-00000000a1/enabling,7,You hold the umbrella up.,0\n"
                     "fact-00000000a1/enabling,8,The canopy is waterproof.,0\n"
                     "fact-00000000a1/enabling,8,The rain falls from above.,0\n"
                     "fact-00000000a1/disabling,7,,1\n"
                     "fact-00000000a1/disabling,9,The sky is blue.,1\n"
                     "fact-00000000b2/disabling,9,You have no ink in the pen.,0\n")
    want = annotations(_facts(), tasks, answers=str(plain))
    same = ["id", "fact_id", "source_fact_id", "statement", "polarity", "question", "answer", "worker_id",
            "fact_from_release"]
    pd.testing.assert_frame_equal(got.data[same], want.data[same])
    assert got.data["id"].tolist()[:5] == [f"fact-00000000a1/enabling/{k}" for k in range(5)]
    assert got.data["worker_id"].tolist() == ["7", "7", "7", "8", "8", "9"]


def test_preconditions_rows_keep_their_annotation_and_the_export_file(tmp_path):
    from data_contracts.corequisite import Answers
    from tasks.corequisite.annotation import annotations
    from tasks.labeling import ANNOTATION_COLUMNS

    tasks = _tasks()
    export = _preconditions_export(tmp_path, tasks_of(_step("preconditions"), tasks))
    data = annotations(_facts(), tasks, answers=str(export)).data
    assert set(ANNOTATION_COLUMNS) <= set(data.columns)
    Answers.validate(data)  # the Annotated mixin: annotation ids Int64, times str, lead time >= 0
    assert data["annotator"].tolist() == data["worker_id"].tolist()
    assert data["task_id"].tolist() == ["fact-00000000a1/enabling"] * 5 + ["fact-00000000b2/disabling"]
    assert data["annotation_id"].tolist() == [1, 1, 1, 2, 2, 6]  # annotation ids count from 1 in task order
    assert data["ls_task_id"].tolist() == [1, 1, 1, 1, 1, 4]
    assert data["lead_time"].tolist() == [11.0, 11.0, 11.0, 12.0, 12.0, 16.0]
    assert data["created_at"].iloc[0] == "2026-11-25T10:00:01.000000Z"
    assert (data["source_file"] == str(export)).all()
    assert data["source_record"].tolist() == [0, 0, 0, 0, 0, 3]  # the task's index in the export
    assert data["source_locator"].tolist() == [
        "task 0, annotation 0, answer_1", "task 0, annotation 0, answer_2", "task 0, annotation 0, answer_3",
        "task 0, annotation 1, answer_1", "task 0, annotation 1, answer_3", "task 3, annotation 0, answer_1"]


def test_preconditions_skips_and_does_not_make_sense_are_rejected_with_their_reason(tmp_path):
    from tasks.corequisite.annotation import annotations

    tasks = _tasks()
    export = _preconditions_export(tmp_path, tasks_of(_step("preconditions"), tasks))
    out = annotations(_facts(), tasks, answers=str(export))
    rejected = out.rejected
    assert rejected["reason_code"].tolist() == ["skipped", "does_not_make_sense", "does_not_make_sense"]
    ticked = rejected[rejected["reason_code"] == "does_not_make_sense"]
    assert ticked["id"].tolist() == ["fact-00000000a1/disabling/0", "fact-00000000a1/disabling/1"]
    assert ticked["annotator"].tolist() == ["7", "9"] and ticked["answer"].tolist() == ["", "The sky is blue."]
    skipped = rejected.iloc[0]
    assert skipped["annotator"] == "8" and skipped["ls_task_id"] == 3 and skipped["source_locator"] == "task 2, annotation 0"
    assert rejected["parent_id"].isna().all()
    assert out.rows_in == len(out.data) + len(out.rejected) == 9
    assert not {"never read", "The sky is blue."} & set(out.data["answer"])
    notes = out.notes["answers_table"]
    assert notes["layout"] == "label-studio" and notes["annotators"] == 3 and notes["does_not_make_sense"] == 2
    assert notes["annotations"] == 6 and notes["rejected_annotations"] == 1


def test_preconditions_annotation_of_another_runs_task_is_rejected_or_stops_a_strict_run(tmp_path):
    from tasks.corequisite.annotation import annotations

    tasks = _tasks()
    made = tasks_of(_step("preconditions"), tasks)
    other = [*made, {"data": {**made[0]["data"], "row_id": "fact-ffffffffff/enabling"}}]
    export = ls.write(tmp_path / "p.json", other, {0: [(7, _answer(["It is raining."]))],
                                                   4: [(7, _answer(["The sun is out."]))]})
    out = annotations(_facts(), tasks, answers=str(export))
    assert out.data["answer"].tolist() == ["It is raining."]
    assert out.rejected["reason_code"].tolist() == ["unknown_row"]
    with pytest.raises(InputError, match="fact-ffffffffff"):
        annotations(_facts(), tasks, answers=str(export), lenient=False)


# ------------------------------------------------------------------ answer quality (experts)
def _answers(tmp_path) -> pd.DataFrame:
    """Six crowd answers from the plain table: four of fact a1, two of fact b2."""
    from tasks.corequisite.annotation import annotations

    plain = tmp_path / "answers.csv"
    plain.write_text("task_id,worker_id,answer,does_not_make_sense\n"
                     "fact-00000000a1/enabling,W1,It is raining.,0\n"
                     "fact-00000000a1/enabling,W1,The umbrella exists.,0\n"
                     "fact-00000000a1/disabling,W2,The wind is too strong.,0\n"
                     "fact-00000000a1/disabling,W2,The dog is hungry.,0\n"
                     "fact-00000000b2/enabling,W3,You have ink in the pen.,0\n"
                     "fact-00000000b2/enabling,W3,You have a sheet of paper.,0\n")
    return annotations(_facts(), _tasks(), answers=str(plain)).data


def test_answer_quality_step_labels_the_crowd_answers_and_is_read_by_the_expert_labels_setting():
    from tasks.corequisite.annotation import annotations
    from tasks.corequisite.answer_quality import answer_rules

    step = _step("answer_quality")
    assert step.stage is annotations and step.imports == (answer_rules, "expert_labels") and step.annotators >= 2


def test_answer_quality_tasks_show_the_statement_question_and_answer(tmp_path):
    from tasks.corequisite.answer_quality import ANSWER_LABELS

    step = _step("answer_quality")
    answers = _answers(tmp_path)
    tasks = tasks_of(step, answers)
    assert [t["data"]["row_id"] for t in tasks] == answers["id"].tolist()
    assert tasks[2]["data"] == {"statement": STATEMENTS["fact-00000000a1"], "question": "What makes this impossible?",
                                "answer": "The wind is too strong.", "polarity": "disabling",
                                "fact_id": "fact-00000000a1", "row_id": "fact-00000000a1/disabling/0"}
    root = check_config(step, tasks)
    label = next(el for el in root.iter("Choices") if el.get("name") == "label")
    assert label.get("choice") == "single-radio" and [c.get("value") for c in label] == list(ANSWER_LABELS)
    assert [c.get("value") for el in root.iter("Choices") if el.get("name") == "fact_invalid" for c in el] == [
        "The fact is invalid."]


def _expert_export(tmp_path, answers: pd.DataFrame, invalid_b2: tuple[int, ...] = (11,)):
    """Experts 11 and 12 label the answers 0..3 (agreeing on 0 and 1, not on 2 and 3), 13 adds a label to 3;
    answer 4 (fact b2): 11 labels it twice, 12 skips it; answer 5 (fact b2): 12 and 11 agree, 13 submits no
    label; the experts in `invalid_b2` mark fact b2 invalid."""
    tasks = tasks_of(_step("answer_quality"), answers)
    return ls.write(tmp_path / "experts.json", tasks, {
        0: [(11, _label("truism")), (12, _label("truism"))],
        1: [(11, _label("informative")), (12, _label("informative"))],
        2: [(11, _label("irrelevant")), (12, _label("informative"))],
        3: [(11, _label("informative")), (12, _label("irrelevant")), (13, _label("irrelevant"))],
        4: [(11, _label("informative", invalid=11 in invalid_b2)), (11, _label("irrelevant")),
            (12, _label("informative"))],
        5: [(12, _label("informative", invalid=12 in invalid_b2)), (11, _label("informative")), (13, _label(None))]},
        cancelled={(4, 12)})


def test_expert_labels_take_the_majority_and_a_tie_leaves_the_answer_unlabelled(tmp_path):
    from tasks.corequisite.answer_quality import answer_quality, answer_rules

    answers = _answers(tmp_path)
    out = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers)))
    assert out.data["expert_label"].tolist() == ["truism", "informative", None, "irrelevant", "informative",
                                                 "informative"]
    assert len(out.data) == len(answers) and out.rejected is None  # every answer kept here
    kept = answer_quality(out.data, rules=[])
    assert kept.rejected["id"].tolist() == ["fact-00000000a1/disabling/1"]  # the majority's irrelevant
    assert set(kept.rejected["reason_code"]) == {"irrelevant"}


def test_expert_labels_keep_who_labelled_each_answer(tmp_path):
    from data_contracts.corequisite import CheckedAnswers
    from tasks.corequisite.answer_quality import answer_rules

    answers = _answers(tmp_path)
    data = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers))).data
    CheckedAnswers.validate(data)
    assert data["labellers"].tolist() == [["11", "12"], ["11", "12"], ["11", "12"], ["11", "12", "13"],
                                                  ["11"], ["12", "11"]]
    assert data["label_annotation_ids"].tolist() == [[1, 2], [3, 4], [5, 6], [7, 8, 9], [10], [13, 14]]
    assert data.loc[3, "expert_votes"] == ["informative", "irrelevant", "irrelevant"]


def test_expert_agreement_is_lights_kappa_and_the_unanimous_share(tmp_path):
    from tasks.corequisite.answer_quality import answer_rules

    answers = _answers(tmp_path)
    out = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers)))
    agreement = out.notes["agreement"]
    # 11 vs 12 on answers 0, 1, 2, 3, 5 (12 skipped 4): 3 of 5 agree, chance (1 + 9 + 1) / 25: kappa
    # (0.6 - 0.44) / 0.56 = 2/7; the pairs with 13 share one answer only, so they do not count. Labelled
    # twice or more: answers 0-3 and 5, unanimous on 0, 1 and 5.
    assert agreement["light_kappa"] == pytest.approx(2 / 7)
    assert agreement["observed_agreement"] == pytest.approx(3 / 5)
    assert agreement["experts"] == 3 and agreement["ties"] == 1 and agreement["answers_labelled_twice_or_more"] == 5
    assert {r["measure"]: r["value"] for r in out.tables["agreement"]}["light_kappa"] == pytest.approx(2 / 7)


def test_expert_rejected_annotations_go_to_their_own_file(tmp_path):
    from tasks.corequisite.answer_quality import answer_rules

    answers = _answers(tmp_path)
    out = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers)))
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_annotations.parquet"]))
    assert sorted(zip(bad["reason_code"], bad["annotator"], bad["row_id"])) == [
        ("no_label", "13", "fact-00000000b2/enabling/1"), ("second_label", "11", "fact-00000000b2/enabling/0"),
        ("skipped", "12", "fact-00000000b2/enabling/0")]
    assert bad["annotation_id"].tolist() and (bad["source_file"] == str(tmp_path / "experts.json")).all()
    assert out.notes["agreement"]["rejected_annotations"] == 3


def test_fact_is_invalid_only_when_most_of_its_experts_say_so(tmp_path):
    from tasks.corequisite.answer_quality import answer_quality, answer_rules

    answers = _answers(tmp_path)
    b2 = answers["fact_id"] == "fact-00000000b2"
    one = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers, invalid_b2=(11,)))).data
    assert not one["fact_invalid"].any()  # 1 of the fact's 2 experts (11, 12)
    both = answer_rules(answers, expert_labels=str(_expert_export(tmp_path, answers, invalid_b2=(11, 12)))).data
    assert both["fact_invalid"].tolist() == b2.tolist()
    kept = answer_quality(both, rules=[])
    assert set(kept.rejected.loc[kept.rejected["reason_code"] == "invalid_fact", "id"]) == set(answers.loc[b2, "id"])


def test_plain_expert_labels_still_read_as_before(tmp_path):
    from tasks.corequisite.answer_quality import answer_rules

    answers = _answers(tmp_path)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\nfact-00000000a1/enabling/1,truism\nfact-00000000b2,invalid\n")
    out = answer_rules(answers, expert_labels=str(labels))
    assert out.data["expert_label"].tolist() == [None, "truism", None, None, None, None]
    assert "agreement" not in out.notes and "labellers" not in out.data.columns and not out.files
    assert out.data["fact_invalid"].tolist() == [False, False, False, False, True, True]
