"""CORECODE's human step in Label Studio (tasks/corecode/labeling.py), without a server: the tasks the
`knowledge` step makes from screened dialogues, its interface, and its export read back by the
annotations stage (spans -> knowledge items through the release's rules, lineage, agreement)."""

from __future__ import annotations

import io
import json
from xml.etree import ElementTree

import pandas as pd
import pytest

from csk.errors import ConfigError, InputError
from csk.label_studio import project_files, tasks_of
from data_contracts import common
from data_contracts import corecode as contracts
from data_contracts.corecode import ONTOLOGY
from tasks.corecode import annotations as ann
from tests import label_studio_export as ls

DIALOGUES = {
    "naturalconv-1_1": ["外面一直在下雨，出门记得带伞。", "我的雨伞落在公司了。", "那就在楼下超市买一把吧。", "好的，下午顺便去买。"],
    "naturalconv-2_1": ["你周末去爬山了吗？", "去了，山顶风很大，我穿了厚外套。"],
}


def _screening() -> pd.DataFrame:
    """Screened dialogues, in the screening stage's columns (its contract checks them)."""
    rows = []
    for k, (did, turns) in enumerate(DIALOGUES.items()):
        rows.append({"id": did, "source": "naturalconv", "turns": [{"speaker": "AB"[i % 2], "text": t}
                                                                    for i, t in enumerate(turns)],
                     "empty_turns_dropped": 0, "source_file": "dialog_release.json", "source_record": k,
                     "source_locator": f"item {k}", "matches": 4,
                     "evidence": [{"text": "utterance 0 -> 1: 下雨 -[RelatedTo]-> 雨伞", "utterance": 0}],
                     "dump_sha256": "0" * 64})
    return contracts.Screening.validate(pd.DataFrame(rows))


def _step():
    from flows.corecode import PIPELINE

    return PIPELINE.labeling_step("knowledge")


def _tasks() -> list[dict]:
    return tasks_of(_step(), _screening())


def _at(task: dict, utterance: int, phrase: str) -> tuple[int, int]:
    """Character offsets of a phrase of one turn in the task's dialogue text, as Label Studio's Text gives them."""
    lines = task["data"]["dialogue"].split("\n")
    start = sum(len(line) + 1 for line in lines[:utterance]) + lines[utterance].index(phrase, 3)
    return start, start + len(phrase)


def _item(task, rid, utterance, phrase, label, dimension, role, instance, value, c1, c2, ids=True) -> list[dict]:
    """One knowledge item as the UI writes it: the labelled span, then its per-region results, each carrying
    the span's region id and offsets (ids=False: results made through the API, tied by offsets only)."""
    start, end = _at(task, utterance, phrase)
    tag = {"id": rid, "origin": "manual"} if ids else {}
    out = [{**ls.span("knowledge", start, end, phrase, [label]), **tag}]
    for name, chosen in (("dimension", dimension), ("role", role)):
        if chosen is not None:
            out.append({**ls.choices(name, chosen), **tag})
            out[-1]["value"] = {"start": start, "end": end, "text": phrase, "choices": [chosen]}
    for name, text in (("instance", instance), ("value", value), ("conflict_phrase_1", c1), ("conflict_phrase_2", c2)):
        if text is not None:
            out.append({**ls.textarea(name, text), **tag})
            out[-1]["value"] = {"start": start, "end": end, "text": [text]}
    return out


def _set(which: str) -> dict:
    return {**ls.choices("set", which), "id": f"set-{which}", "origin": "manual"}


def _export(tmp_path, tasks: list[dict]):
    """Dialogue 1: annotators 1 and 2 (three and five spans), annotator 3 skips it; dialogue 2: annotator 1
    (two spans, the second lacking conflict phrase 2), annotator 2 only chooses the set."""
    t0, t1 = tasks
    a1 = [_set("EASY"),
          *_item(t0, "r-k0", 0, "出门记得带伞", "consequence: subsequent event", "event", "value", "外面下雨",
                 "A提醒B出门带伞", "出门记得带墨镜", "可以放心地去晒太阳"),
          # the label and dimension as shown rather than their aliases
          *_item(t0, "r-k1", 2, "在楼下超市买一把", "空间：位于 (space: at-location)", "实体 entity", "instance",
                 "雨伞", "超市", "在楼下鱼塘买一把", "从天上摘一把"),
          *_item(t0, "r-k2", 1, "雨伞落在公司", "space: at-location", "event", "instance", "雨伞", "公司",
                 "雨衣落在公司", "雨伞飞上了月亮")]
    a2 = [*_item(t0, "r-j0", 0, "记得带伞", "consequence: subsequent event", "event", "value", "外面下雨", "B提醒A带伞",
                 "今天阳光明媚适合去海边晒太阳", "可以不带"),
          *_item(t0, "r-j1", 2, "楼下超市", "attribute: used-for", "entity", "instance", "超市", "买东西", "楼下鱼塘",
                 "天上"),
          *_item(t0, "r-j2", 3, "下午顺便去买", "time: time of occurrence", "event", "value", "B去买伞", "下午",
                 "半夜顺便去买", "十年后再去买"),
          *_item(t0, "r-j3", 1, "雨伞", "space: at-location", "entity", "instance", "雨伞", "公司", "雨衣", "飞机",
                 ids=False),
          _set("EASY")]
    # a span across two turns ("公司了。\nA: 那就")
    start = _at(t0, 1, "公司了。")[0]
    end = _at(t0, 2, "那就")[1]
    a2.append({**ls.span("knowledge", start, end, t0["data"]["dialogue"][start:end], ["space: at-location"]),
               "id": "r-j4"})
    a2 += [{**r, "id": "r-j4"} for r in (ls.choices("dimension", "entity"), ls.choices("role", "instance"))]
    b1 = [_set("EASY"),
          *_item(t1, "r-m0", 1, "山顶风很大", "cause: event cause", "event", "value", "B穿了厚外套", "山顶风很大",
                 "山顶风很小", "山下阳光灿烂"),
          *_item(t1, "r-m1", 1, "厚外套", "attribute: used-for", "entity", "instance", "厚外套", "保暖", "薄外套", None)]
    answers = {0: [(1, a1), (2, list(reversed(a2))), (3, [])], 1: [(1, b1), (2, [_set("HARD")])]}
    return ls.write(tmp_path / "knowledge.json", tasks, answers, cancelled={(0, 3)})


def _release(tmp_path) -> str:
    rec = {"id": "cc-000", "dialogue_id": "naturalconv-1_1", "set": "EASY", "dimension": "entity", "instance": "雨伞",
           "domain": "space", "slot": "at-location", "value": "超市",
           "phrases": [{"role": "instance", "utterance": 2, "start": 2, "text": "在楼下超市买一把"}], "conflict_of": 0,
           "conflict_phrase_1": "在楼下鱼塘买一把", "conflict_phrase_2": "从天上摘一把"}
    p = tmp_path / "annotations.jsonl"
    p.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    return str(p)


def _as_stored(out, screening: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stage's rows as the store checks and writes them: its contract, the rejected rows' shape, parquet."""
    from csk.contracts import validate_contract
    from csk.runtime import to_parquet_bytes
    from csk.store import Store
    from flows.corecode import PIPELINE

    stage = PIPELINE.stage(ann.annotations)
    data = validate_contract("annotations", contracts.Annotations, out.data)
    rejected = Store._rejected_shape(stage, out.rejected, screening)
    validate_contract("annotations (rejected rows)", common.Rejected, rejected)
    data = pd.read_parquet(io.BytesIO(to_parquet_bytes(data)))
    rejected = pd.read_parquet(io.BytesIO(to_parquet_bytes(rejected)))
    return data.set_index("id"), rejected.set_index("id")


# ------------------------------------------------------------------ the step and its interface
def test_knowledge_step_makes_one_task_per_screened_dialogue_with_its_turns_as_lines():
    from tasks.corecode.annotations import annotations
    from tasks.corecode.screening import screening

    step = _step()
    assert step.stage is screening and step.imports == (annotations, "label_studio") and step.annotators == 2
    tasks = _tasks()
    assert [t["data"]["row_id"] for t in tasks] == list(DIALOGUES)
    assert tasks[0]["data"]["dialogue"] == ("A: 外面一直在下雨，出门记得带伞。\nB: 我的雨伞落在公司了。\n"
                                            "A: 那就在楼下超市买一把吧。\nB: 好的，下午顺便去买。")
    assert step.variables() <= set(tasks[0]["data"]) and step.variables() == {"dialogue"}
    files = project_files(step, _screening(), "corecode")
    assert "外面一直在下雨".encode() in files["tasks.json"] and "领域：槽位".encode() in files["config.xml"]
    assert json.loads(files["project.json"])["imports"] == "corecode.annotations.label_studio"


def test_knowledge_config_labels_every_slot_and_ties_the_item_fields_to_the_span():
    root = ElementTree.fromstring(_step().config)
    objects = {el.get("name"): el.tag for el in root.iter() if el.tag in ("Text", "HyperText", "Paragraphs")}
    assert objects == {"dialogue": "Text"}  # plain text: spans have character offsets
    controls = [el for el in root.iter() if el.tag in ("Labels", "Choices", "TextArea")]
    assert all(el.get("toName") == "dialogue" for el in controls)
    [labels] = root.iter("Labels")
    assert labels.get("name") == "knowledge" and labels.get("choice") == "single"
    shown = list(labels.iter("Label"))
    expected = {f"{d}: {s}" for dims in ONTOLOGY.values() for d, slots in dims.items() for s in slots}
    assert len(shown) == 36 and {el.get("alias") for el in shown} == expected
    for el in shown:  # what the annotator reads parses to what the label saves
        assert ann.parse_span_label(el.get("value")) == ann.parse_span_label(el.get("alias"))
        assert el.get("value").endswith(f"({el.get('alias')})") and not el.get("value").isascii()
    assert len({el.get("background") for el in shown}) == 9  # one colour per domain
    per_region = {el.get("name"): el.tag for el in controls if el.get("perRegion") == "true"}
    assert per_region == {"dimension": "Choices", "role": "Choices", "instance": "TextArea", "value": "TextArea",
                          "conflict_phrase_1": "TextArea", "conflict_phrase_2": "TextArea"}
    assert all(el.get("required") == "true" for el in controls if el.get("name") in per_region)
    choices = {el.get("name"): [c.get("alias") for c in el.iter("Choice")] for el in root.iter("Choices")}
    assert choices == {"set": ["EASY", "HARD"], "dimension": ["entity", "event", "social interaction"],
                       "role": ["instance", "value"]}


def test_a_span_is_placed_in_its_turn_in_python_characters():
    turns = [{"speaker": "A", "text": "😀好天气"}, {"speaker": "B", "text": "是啊"}]
    text = ann.dialogue_text(turns)
    bounds = ann.turn_bounds(turns)
    assert text == "A: 😀好天气\nB: 是啊" and bounds == [(3, 7), (11, 13)]
    assert ann.locate_span(text, bounds, 4, 7, "好天气") == (0, 1, 4)
    assert ann.locate_span(text, bounds, 5, 8, "好天气") == (0, 1, 4)  # the browser's UTF-16 offsets
    assert ann.locate_span(text, bounds, 11, 13, None) == (1, 0, 2)
    assert ann.locate_span(text, bounds, 4, 8, "好天气\n") == (0, 1, 4)  # the line break a double click takes
    assert ann.locate_span(text, bounds, 0, 7, None)[0] == "span_not_in_one_turn"  # takes in "A: "
    assert ann.locate_span(text, bounds, 5, 13, None)[0] == "span_not_in_one_turn"
    assert ann.locate_span(text, bounds, 4, 7, "坏天气")[0] == "span_not_in_dialogue"


# ------------------------------------------------------------------ the export read back
def test_annotations_stage_reads_the_knowledge_export_through_the_release_rules(tmp_path):
    tasks = _tasks()
    export = _export(tmp_path, tasks)
    out = ann.annotations(_screening(), release=_release(tmp_path), label_studio=str(export))
    data, rejected = _as_stored(out, _screening())
    d1, d2 = DIALOGUES
    assert out.rows_in == 1 + 10 and len(data) + len(rejected) == out.rows_in
    assert sorted(data.index) == sorted(["cc-000", f"{d1}/a1/k0", f"{d1}/a1/k1", f"{d1}/a2/k1", f"{d1}/a2/k2",
                                         f"{d1}/a2/k3", f"{d2}/a4/k0"])  # spans counted in the export's order
    # the rules' verdicts (a2's result is in reverse order: its spans are j4, j3, j2, j1, j0)
    assert rejected["reason_code"].astype(str).to_dict() == {
        f"{d1}/a1/k2": "wrong_slot", f"{d1}/a2/k0": "span_not_in_one_turn", f"{d1}/a2/k4": "conflict_edit_too_large",
        f"{d2}/a4/k1": "incomplete_item"}
    assert "at-location' belongs to entity/space, not event/space" in rejected.loc[f"{d1}/a1/k2", "reason"]
    assert rejected.loc[f"{d2}/a4/k1", "reason"].endswith("lacks conflict_phrase_2")
    assert (rejected["parent_id"] == [i.split("/")[0] for i in rejected.index]).all()
    # one span -> one record of the release reader's shape, the shown label and dimension read as saved
    k1 = data.loc[f"{d1}/a1/k1"]
    assert (k1["dimension"], k1["domain"], k1["slot"], k1["instance"], k1["value"]) == (
        "entity", "space", "at-location", "雨伞", "超市")
    assert list(k1["phrases"]) == [{"role": "instance", "utterance": 2, "start": 2, "end": 10, "text": "在楼下超市买一把"}]
    assert (k1["conflict_of"], k1["conflict_phrase_1"], k1["set"]) == (0, "在楼下鱼塘买一把", "EASY")
    assert k1["phrases"][0]["text"] == data.loc["cc-000", "phrases"][0]["text"]  # as the release marks it
    # the span tied to its per-region results by offsets alone (no region ids)
    j3 = data.loc[f"{d1}/a2/k1"]
    assert (j3["value"], j3["conflict_phrase_2"], j3["phrases"][0]["utterance"]) == ("公司", "飞机", 1)
    # lineage: who annotated it, and where in the export
    assert pd.isna(data.loc["cc-000", "annotator"]) and pd.isna(data.loc["cc-000", "annotation_id"])
    assert (k1["annotator"], k1["annotation_id"], k1["ls_task_id"], k1["lead_time"]) == ("1", 1, 1, 11.0)
    assert k1["task_id"] == d1 and pd.isna(data.loc["cc-000", "task_id"])
    assert k1["created_at"].startswith("2026-11-25T10:") and k1["source_file"] == str(export)
    assert (k1["source_record"], k1["source_locator"]) == (0, "task 0, annotation 0, region r-k1")
    m0 = data.loc[f"{d2}/a4/k0"]
    assert (m0["annotator"], m0["ls_task_id"], m0["source_record"]) == ("1", 2, 1)
    assert m0["source_locator"] == "task 1, annotation 0, region r-m0"
    assert data.loc[f"{d1}/a2/k1", "source_locator"] == "task 0, annotation 1, region 1"
    assert str(data["annotation_id"].dtype) == "Int64" and str(rejected["annotation_id"].dtype) == "Int64"
    # annotations that made no item: a separate file, not the stage's rejected rows
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_annotations.parquet"]))
    assert sorted(zip(bad["annotation_id"], bad["reason_code"])) == [(3, "skipped"), (5, "no_knowledge_items")]
    notes = out.notes["label_studio"]
    assert (notes["annotations"], notes["rejected_annotations"], notes["items"], notes["kept"],
            notes["annotators"]) == (5, 2, 10, 6, 2)


def test_span_agreement_of_two_annotators_on_one_dialogue(tmp_path):
    out = ann.annotations(_screening(), label_studio=str(_export(tmp_path, _tasks())))
    agreement = out.notes["agreement"]
    # annotator 1 marked 2 of 3 spans as annotator 2 did (overlap, same domain: slot), annotator 2 2 of 4
    assert agreement["span_agreement"] == pytest.approx((2 / 3 + 2 / 4) / 2)
    assert (agreement["dialogues_compared"], agreement["annotator_pairs"], agreement["aligned_spans"]) == (1, 1, 3)
    # aligned domains: 1: consequence, space, space; 2: consequence, attribute, space -> kappa (2/3 - 1/3) / (2/3)
    assert agreement["domain_light_kappa"] == pytest.approx(0.5)
    assert agreement["domain_observed_agreement"] == pytest.approx(2 / 3)
    assert agreement["annotators"] == 2 and agreement["spans"] == 3 + 4 + 2  # the span across turns is not placed
    assert {r["measure"] for r in out.tables["agreement"]} >= {"span_agreement", "domain_light_kappa"}
    assert out.rows_in == 10 and len(out.data) == 6  # the export alone, without a release


def test_span_agreement_needs_the_same_slot_and_overlapping_characters():
    def span(annotator, start, end, label, utterance=0):
        dim, domain = ann.SLOT_PLACE[label.split(": ")[1]]
        return {"dialogue_id": "d", "annotator": annotator, "utterance": utterance, "start": start, "end": end,
                "label": label, "domain": f"{dim}/{domain}"}

    same = [span("1", 0, 4, "cause: event cause"), span("2", 3, 6, "cause: event cause")]
    assert ann.span_agreement(same)["span_agreement"] == 1.0
    touching = [span("1", 0, 3, "cause: event cause"), span("2", 3, 6, "cause: event cause")]
    assert ann.span_agreement(touching)["span_agreement"] == 0.0 and ann.span_agreement(touching)["aligned_spans"] == 0
    other_turn = [span("1", 0, 4, "cause: event cause"), span("2", 0, 4, "cause: event cause", utterance=1)]
    assert ann.span_agreement(other_turn)["span_agreement"] == 0.0
    alone = [span("1", 0, 4, "cause: event cause")]
    assert ann.span_agreement(alone)["span_agreement"] is None and ann.span_agreement([])["dialogues_compared"] == 0


def test_an_export_of_other_dialogues_or_texts_is_rejected_by_annotation(tmp_path):
    tasks = _tasks()
    tasks[0]["data"]["dialogue"] = tasks[0]["data"]["dialogue"].replace("下雨", "下雪")  # another run's text
    tasks[1]["data"]["row_id"] = "naturalconv-9_1"  # a dialogue this run did not screen
    export = _export(tmp_path, tasks)
    out = ann.annotations(_screening(), label_studio=str(export))
    assert len(out.data) == 0 and out.rows_in == 0
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_annotations.parquet"]))
    assert sorted(bad["reason_code"]) == ["dialogue_changed", "dialogue_changed", "skipped", "unknown_row",
                                          "unknown_row"]


def test_the_stage_needs_a_release_or_an_export(tmp_path):
    with pytest.raises(ConfigError, match="label_studio"):
        ann.annotations(_screening())
    with pytest.raises(InputError, match="Label Studio's JSON export"):
        ann.annotations(_screening(), label_studio=_release(tmp_path))


# The result of one annotation made in Label Studio 1.23.2's own UI (headless Chromium: label clicked, text
# selected, the region selected in the regions panel, its fields filled, the set chosen, submitted) on this
# step's interface and the first task above, as the project's JSON export holds it: per-region results
# repeat the span's region id and offsets, labels and choices are saved as their aliases.
UI_RESULT = [
    {"value": {"start": 11, "end": 17, "text": "出门记得带伞", "labels": ["consequence: subsequent event"]},
     "id": "wi3n9-8gu7", "from_name": "knowledge", "to_name": "dialogue", "type": "labels", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": "出门记得带伞", "choices": ["event"]}, "id": "wi3n9-8gu7",
     "from_name": "dimension", "to_name": "dialogue", "type": "choices", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": "出门记得带伞", "choices": ["value"]}, "id": "wi3n9-8gu7",
     "from_name": "role", "to_name": "dialogue", "type": "choices", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": ["外面下雨"]}, "id": "wi3n9-8gu7", "from_name": "instance",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": ["A提醒B出门带伞"]}, "id": "wi3n9-8gu7", "from_name": "value",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": ["出门记得带墨镜"]}, "id": "wi3n9-8gu7", "from_name": "conflict_phrase_1",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 11, "end": 17, "text": ["可以放心地去晒太阳"]}, "id": "wi3n9-8gu7",
     "from_name": "conflict_phrase_2", "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": "在楼下超市买一把", "labels": ["space: at-location"]}, "id": "JmXXiUmomY",
     "from_name": "knowledge", "to_name": "dialogue", "type": "labels", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": "在楼下超市买一把", "choices": ["entity"]}, "id": "JmXXiUmomY",
     "from_name": "dimension", "to_name": "dialogue", "type": "choices", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": "在楼下超市买一把", "choices": ["instance"]}, "id": "JmXXiUmomY",
     "from_name": "role", "to_name": "dialogue", "type": "choices", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": ["雨伞"]}, "id": "JmXXiUmomY", "from_name": "instance",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": ["超市"]}, "id": "JmXXiUmomY", "from_name": "value",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": ["在楼下鱼塘买一把"]}, "id": "JmXXiUmomY", "from_name": "conflict_phrase_1",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"start": 38, "end": 46, "text": ["从天上摘一把"]}, "id": "JmXXiUmomY", "from_name": "conflict_phrase_2",
     "to_name": "dialogue", "type": "textarea", "origin": "manual"},
    {"value": {"choices": ["EASY"]}, "id": "YobMGI7WIy", "from_name": "set", "to_name": "dialogue", "type": "choices",
     "origin": "manual"},
]


def test_an_annotation_made_in_label_studios_ui_reads_back(tmp_path):
    export = ls.write(tmp_path / "ui.json", _tasks(), {0: [(2, UI_RESULT)]})
    out = ann.annotations(_screening(), label_studio=str(export))
    assert out.rejected is None and out.rows_in == 2
    rows = out.data.set_index("id")
    first, second = rows.loc["naturalconv-1_1/a1/k0"], rows.loc["naturalconv-1_1/a1/k1"]
    assert (first["dimension"], first["domain"], first["slot"], first["set"]) == ("event", "consequence",
                                                                                 "subsequent event", "EASY")
    assert list(first["phrases"]) == [{"role": "value", "utterance": 0, "start": 8, "end": 14, "text": "出门记得带伞"}]
    assert (first["instance"], first["value"], first["conflict_phrase_2"]) == ("外面下雨", "A提醒B出门带伞", "可以放心地去晒太阳")
    assert list(second["phrases"]) == [{"role": "instance", "utterance": 2, "start": 2, "end": 10,
                                        "text": "在楼下超市买一把"}]
    assert second["source_locator"] == "task 0, annotation 0, region JmXXiUmomY" and second["annotator"] == "2"
