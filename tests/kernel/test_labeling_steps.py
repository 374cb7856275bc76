"""The human steps as Label Studio projects, without a server: declarations are checked when made, a
step's project files carry every field its config shows and the row each task came from, the export
reader keeps who answered and rejects what it cannot use, and the agreement measures are the standard
ones."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from csk.errors import ConfigError, CskError, InputError
from csk.label_studio import LabelingStep, project_files, tasks_of
from csk.pipeline import discover
from readers.label_studio import is_label_studio_export, read_label_studio_export
from tests.conftest import ROOT
from tests.label_studio_export import choices, textarea, write

EXAMPLE = ROOT / "docker/label-studio/example_export.json"  # a real export of the server (synthetic tasks)


def _stage(rows, *, x: int = 0):  # a stand-in stage function
    return rows


def test_a_step_whose_config_is_not_label_studio_xml_is_refused_when_declared():
    with pytest.raises(ConfigError, match="not XML"):
        LabelingStep("s", stage=_stage, config="<View><Text name='a' value='$a'>", data=dict, imports=(_stage, "x"))
    with pytest.raises(ConfigError, match="starts with <View>"):
        LabelingStep("s", stage=_stage, config="<Text name='a' value='$a'/>", data=dict, imports=(_stage, "x"))


def test_a_task_lacking_a_field_its_config_shows_is_an_error_naming_it():
    step = LabelingStep("s", stage=_stage, config="<View><Text name='a' value='$a'/><Text name='b' value='$b'/>"
                        "<TextArea name='t' toName='a'/></View>", data=lambda r: {"a": r["text"]}, imports=(_stage, "x"))
    assert step.variables() == {"a", "b"}
    with pytest.raises(CskError, match=r"lacks \['b'\]"):
        step.task({"id": "r1", "text": "hello"})


def test_every_declared_step_names_a_stage_and_a_real_setting_of_its_import_stage():
    for name, p in discover().items():
        for step in p.labeling:
            p.stage(step.stage)
            fn, setting = step.imports
            assert setting in p.stage(fn).params_model.model_fields, f"{name}.{step.name}"


def test_project_files_carry_each_rows_id_and_what_the_interface_shows():
    from tasks.cicero.labeling import STEPS

    answers = STEPS[0]
    rows = pd.DataFrame([{"id": "d1/u01/cause", "dialogue_id": "d1", "utterance_index": 1, "target": "I missed it .",
                          "inference_type": "cause", "question": "What is or could be the cause of target?",
                          "dialogue": ["A: Hi .", "B: I missed it .", "A: Oh no ."]}])
    files = project_files(answers, rows, "cicero")
    tasks = json.loads(files["tasks.json"])
    assert tasks[0]["data"]["row_id"] == "d1/u01/cause"
    html = tasks[0]["data"]["dialogue_html"]
    assert html.count("<p") == 3 and "<mark" in html and "I missed it ." in html.split("<mark")[1]
    assert json.loads(files["project.json"])["imports"] == "cicero.annotations.answers"
    assert files["config.xml"].decode() == answers.config


def test_the_dialogue_is_escaped_so_a_turn_cannot_inject_markup():
    from tasks.labeling_views import dialogue_html

    html = dialogue_html(["A: <script>alert(1)</script>", "B: fine & you?"], highlight=1)
    assert "<script>" not in html and "&lt;script&gt;" in html and "fine &amp; you?" in html


def test_the_reader_reads_a_real_export_with_annotator_ids_and_rejects_the_skipped_one():
    read = read_label_studio_export(EXAMPLE)
    assert is_label_studio_export(EXAMPLE)
    assert {r["annotator"] for r in read.rows} == {"1", "2", "3"}
    assert all(r["annotation_id"] and r["created_at"] and r["lead_time"] is not None for r in read.rows)
    assert [r["reason_code"] for r in read.rejected] == ["skipped"]
    assert read.rows[0]["values"]["answer"] and read.rows[0]["values"]["confidence"] == ["confident"]
    assert read.records == len(read.rows) + len(read.rejected)


def test_the_command_line_exports_annotator_object_is_read_too(tmp_path):
    data = json.loads(EXAMPLE.read_text())
    data[0]["annotations"][0]["completed_by"] = {"id": 7, "email": "a@example.com"}
    (tmp_path / "e.json").write_text(json.dumps(data))
    first = read_label_studio_export(tmp_path / "e.json").rows[0]
    assert (first["annotator"], first["annotator_email"]) == ("7", "a@example.com")


def test_an_export_in_another_format_or_a_malformed_task_is_named(tmp_path):
    (tmp_path / "min.json").write_text(json.dumps({"id": 1, "answer": "x"}))
    with pytest.raises(InputError, match="export the project as JSON"):
        read_label_studio_export(tmp_path / "min.json")
    (tmp_path / "bad.json").write_text(json.dumps([{"data": {"row_id": "r"}}]))
    with pytest.raises(InputError, match="task 0"):
        read_label_studio_export(tmp_path / "bad.json", lenient=False)
    assert read_label_studio_export(tmp_path / "bad.json").rejected[0]["reason_code"] == "malformed_record"


def test_export_rows_reject_an_annotation_of_a_row_this_run_does_not_have(tmp_path):
    from tasks.labeling import export_rows

    tasks = [{"data": {"row_id": "a", "x": 1}}, {"data": {"row_id": "zzz", "x": 2}}]
    path = write(tmp_path / "e.json", tasks, {0: [(1, [textarea("t", "yes")])], 1: [(2, [textarea("t", "no")])]})
    rows, rejected = export_rows(path, {"a"})
    assert [r["row_id"] for r in rows] == ["a"] and rows[0]["annotator"] == "1"
    assert [r["reason_code"] for r in rejected] == ["unknown_row"]


def test_agreement_measures_are_the_standard_ones():
    from sklearn.metrics import cohen_kappa_score

    from tasks.labeling import light_kappa, observed_agreement, pairwise_spearman

    a, b, c = [1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 0, 1], [1, 1, 1, 1, 0, 0]
    long = pd.DataFrame([{"row_id": i, "annotator": who, "label": v} for who, vals in zip("abc", (a, b, c))
                         for i, v in enumerate(vals)])
    expected = (cohen_kappa_score(a, b) + cohen_kappa_score(a, c) + cohen_kappa_score(b, c)) / 3
    assert light_kappa(long) == pytest.approx(expected)
    assert observed_agreement(long) == pytest.approx(3 / 6)  # items 0, 3 and 4 are unanimous
    ratings = long.assign(rating=long["label"] * 2 + long["row_id"] % 3)
    assert -1 <= pairwise_spearman(ratings) <= 1


def test_a_cicero_answer_written_in_label_studio_becomes_an_instance_with_its_annotator(tmp_path):
    from tasks.cicero.annotation import annotations
    from tasks.cicero.labeling import STEPS

    dialogues = pd.DataFrame([{"id": "d1", "source": "dailydialog", "turns": [
        {"speaker": "A", "text": "Hi ."}, {"speaker": "B", "text": "I missed the bus ."}]}])
    tasks_df = pd.DataFrame([{"id": "d1/u01/cause", "dialogue_id": "d1", "utterance_index": 1,
                              "target": "I missed the bus .", "inference_type": "cause",
                              "question": "What is or could be the cause of target?",
                              "dialogue": ["A: Hi .", "B: I missed the bus ."]}])
    tasks = tasks_of(STEPS[0], tasks_df)
    path = write(tmp_path / "answers.json", tasks, {0: [(4, [textarea("answer", "The alarm did not ring.")]),
                                                        (5, [textarea("answer", "  ")]), (6, [])]},
                 cancelled={(0, 6)})
    out = annotations(dialogues, tasks_df, answers=str(path))
    row = out.data.iloc[0]
    assert len(out.data) == 1 and row["answer"] == "The alarm did not ring." and row["annotator"] == "4"
    assert row["version"] == "label-studio" and row["task_id"] == "d1/u01/cause" and list(row["choices"]) == [row["answer"]]
    assert sorted(out.rejected["reason_code"]) == ["empty_answer", "skipped"]
    assert out.rows_in == len(out.data) + len(out.rejected)
    from data_contracts.cicero import Annotations

    Annotations.validate(out.data)


def test_three_checkers_decide_by_majority_and_their_agreement_is_reported(tmp_path):
    from tasks.cicero.labeling import STEPS
    from tasks.cicero.quality_check import quality_check

    answers = pd.DataFrame([{"id": f"i{k}", "dialogue": ["A: Hi .", "B: Bye ."], "target": "Bye .",
                             "question": "q", "answer": f"a{k}", "utterance_index": 1, "dialogue_id": "d"}
                            for k in range(4)])
    tasks = tasks_of(STEPS[1], answers)
    votes = {0: ["invalid", "invalid", "valid"], 1: ["valid"] * 3, 2: ["valid", "invalid", "valid"], 3: ["valid"] * 2}
    path = write(tmp_path / "votes.json", tasks, {k: [(j + 1, [choices("valid", v)]) for j, v in enumerate(vs)]
                                                  for k, vs in votes.items()})
    out = quality_check(answers, verdicts=str(path))
    assert list(out.rejected["id"]) == ["i0"] and "2 of 3" in out.rejected["reason"].iloc[0]
    kept = out.data.set_index("id")
    assert not kept.loc["i3", "checked"] and kept.loc["i2", "checked"]  # two votes decide nothing
    assert list(kept.loc["i2", "checkers"]) == ["1", "2", "3"]
    agreement = out.notes["agreement"]
    assert agreement["votes"] == 11 and agreement["checkers"] == 3
    assert agreement["unanimous_share"] == pytest.approx(2 / 4)


def test_a_distractor_most_of_its_annotators_tick_joins_the_correct_answers(tmp_path):
    from tasks.distractors.labeling import STEP, items
    from tasks.distractors.verification import sheet_rows, verification

    distractors = pd.DataFrame([{"id": "x1", "gold": "g", "distractors": ["d0", "d1", "d2"]},
                                {"id": "x2", "gold": "h", "distractors": ["e0", "e1", "e2"]}])
    sheet = pd.DataFrame(sheet_rows(distractors, None))
    tasks = [STEP.task(r) for r in items(sheet).to_dict(orient="records")]
    assert [o["value"] for o in tasks[0]["data"]["distractor_options"]] == ["d0", "d1", "d2"]
    path = write(tmp_path / "v.json", tasks, {0: [(1, [choices("speculatively_correct", ["d1"])]),
                                                  (2, [choices("speculatively_correct", ["d1", "d2"])]),
                                                  (3, [choices("speculatively_correct", [])])],
                                              1: [(1, [choices("speculatively_correct", ["not a choice"])])]})
    out = verification(distractors, verdicts=str(path))
    marked = out.data.set_index("id")["correct_distractors"]
    assert list(marked["x1"]) == [1] and list(marked["x2"]) == []  # d2: one of three; x2's verdict rejected
    assert out.notes["agreement"]["rejected_annotations"] == 1 and "verdicts.parquet" in out.files


def test_the_pulls_count_agrees_with_the_reader(tmp_path):
    """`csk label pull` counts the export in the kernel (it imports no reader): the same annotations,
    annotators and left-out ones the import stage's reader finds, skipped and empty ones included."""
    import json

    from csk.label_studio import export_summary
    from readers.label_studio import read_label_studio_export
    from tests.label_studio_export import choices, export

    tasks = [{"data": {"row_id": f"r{i}", "dialogue": "A: hi"}} for i in range(3)]
    answers = {0: [(1, [choices("ok", "yes")]), (2, [choices("ok", "no")])], 1: [(1, [])], 2: [(3, [choices("ok", "yes")])]}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export(tasks, answers, cancelled={(2, 3)})))
    got = export_summary(path.read_bytes())
    read = read_label_studio_export(path)
    assert got == {"annotations": len(read.rows), "annotators": len({r["annotator"] for r in read.rows}),
                   "left_out": len(read.rejected)} == {"annotations": 2, "annotators": 2, "left_out": 2}
    real = read_label_studio_export(EXAMPLE)  # a real server's export
    assert export_summary(EXAMPLE.read_bytes()) == {"annotations": len(real.rows), "left_out": len(real.rejected),
                                                    "annotators": len({r["annotator"] for r in real.rows})}
