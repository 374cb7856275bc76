"""CORECODE: one test per rule (readers, concepts, one-hop matches, annotation checks, task builders,
perturbations, splits), and the real release's clipped subsequent-event items rebuilt exactly."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from csk import conceptnet as cn
from csk.errors import InputError
from data_contracts.corecode import ONTOLOGY
from readers import (read_corecode, read_corecode_annotations, read_corecode_dialogues, read_dulemon,
                     read_naturalconv)
from readers.dulemon import despace
from tasks.corecode import annotations as ann
from tasks.corecode import benchmark as bm
from tasks.corecode.concepts import STOP_WORDS, concepts, tag
from tasks.corecode.screening import dialogue_matches, screening
from tasks.corecode.splits import splits
from tests.conftest import SAMPLE

CC = SAMPLE / "corecode"


# ------------------------------------------------------------------ readers
def test_naturalconv_reader_alternates_speakers_and_rejects_a_malformed_record():
    r = read_naturalconv(CC / "naturalconv" / "dialog_release.json", lenient=True)
    assert len(r.rows) == 10 and r.records == 11
    assert [t["speaker"] for t in r.rows[0]["turns"][:3]] == ["A", "B", "A"]
    assert r.rows[0]["id"] == "naturalconv-1_1" and r.rows[0]["source_locator"] == "item 0"
    assert r.rejected[0]["source_locator"] == "item 8" and "list of utterance strings" in r.rejected[0]["reason"]
    with pytest.raises(InputError, match=r"dialog_release.json, record item 8: 'content' must be a list"):
        read_naturalconv(CC / "naturalconv" / "dialog_release.json")


def test_dulemon_reader_removes_segmenter_spaces_and_persona_ids(tmp_path):
    assert despace("我 的 大学 生活 真 是 太 轻松 了 。") == "我的大学生活真是太轻松了。"
    assert despace("我 喜欢 NBA 2K 游戏") == "我喜欢NBA 2K游戏"  # spaces between Latin words stay
    f = tmp_path / "both" / "dev.json"
    f.parent.mkdir()
    f.write_text(json.dumps({"bot_persona": [], "conversation": ["Usr: 你 好 。", "Bot: 你好 呀 ！\tU1",
                                                                 "Usr：我 去 游泳 了"]}, ensure_ascii=False) + "\n"
                 + "not json\n", encoding="utf-8")
    r = read_dulemon(tmp_path, lenient=True)
    turns = r.rows[0]["turns"]
    assert [(t["speaker"], t["text"]) for t in turns] == [("A", "你好。"), ("B", "你好呀！"), ("A", "我去游泳了")]
    assert r.rows[0]["id"] == "dulemon-both-dev-1" and r.rejected[0]["source_locator"] == "line 2"


def test_corecode_annotation_reader_checks_shapes(tmp_path):
    good = {"dialogue_id": "d", "set": "EASY", "dimension": "entity", "instance": "刀", "domain": "attribute",
            "slot": "is", "value": "锋利", "phrases": [{"role": "instance", "utterance": 0, "start": 0, "text": "刀"}],
            "conflict_of": 0, "conflict_phrase_1": "剑", "conflict_phrase_2": "棉花"}
    f = tmp_path / "a.jsonl"
    f.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in (
        good, {**good, "conflict_of": 3}, {**good, "phrases": [{"role": "instance", "utterance": "0"}]},
        {**good, "conflict_of": True})) + "\n", encoding="utf-8")
    r = read_corecode_annotations(f, lenient=True)
    assert len(r.rows) == 1 and r.rows[0]["phrases"][0]["end"] == 1 and r.rows[0]["id"] == "d/k1"
    reasons = [x["reason"] for x in r.rejected]
    assert "names no phrase" in reasons[0] and "phrase 0 needs role" in reasons[1] and "must be int" in reasons[2]
    with pytest.raises(InputError, match="a.jsonl, record line 2: 'conflict_of' 3 names no phrase"):
        read_corecode_annotations(f)


# ------------------------------------------------------------------ concepts and screening
def test_concepts_are_nouns_verbs_adjectives_without_stop_words():
    [(words, flags)] = tag(["外面一直在下雨，出门记得带伞。"], ("n", "v", "a"), frozenset(STOP_WORDS), False)
    assert "下雨" in words and "伞" in words and "在" not in words and "一直" not in words
    assert all(f[0] in "nva" for f in flags)
    dialogues = pd.DataFrame({"id": ["d"], "turns": [[{"speaker": "A", "text": "猫在睡觉"},
                                                      {"speaker": "B", "text": "是的"}]]})
    assert list(concepts(dialogues).data["concepts"][0]) == ["猫", "睡觉"]
    out = concepts(dialogues, stop_words=["睡觉"]).data  # a list of one's own replaces the built-in one
    assert list(out["id"]) == ["d/0", "d/1"] and list(out["concepts"][0]) == ["猫"]


def test_a_match_is_e1_in_utterance_i_and_e2_in_the_next():
    index = {"下雨": {"雨伞": [7], "下雨": [8]}, "雨伞": {"下雨": [9, 12]}}  # e1 -> e2 -> edge ids
    found = dialogue_matches([["下雨"], ["雨伞", "下雨"], ["天晴"]], index)
    # 下雨 (0) -> 雨伞 (1); not 下雨 -> 下雨 (the same concept), not 雨伞 (1) -> 下雨 (1, same utterance)
    assert found == [(0, 7)]
    assert dialogue_matches([["雨伞"], ["下雨"]], index) == [(0, 9), (0, 12)]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    db = cn.build_db(CC / "conceptnet-assertions-zh-sample.csv", tmp_path_factory.mktemp("cn") / "zh.db", ("zh",),
                     progress=False)
    cn.connect(db)
    rows = pd.DataFrame({"id": ["r"], "relation": ["RelatedTo"], "edges": [1], "database": [str(db)],
                         "dump_sha256": ["0" * 64], "source_file": [str(CC / "conceptnet-assertions-zh-sample.csv")],
                         "source_record": [0], "source_locator": ["the whole dump"]})
    return rows


def test_screening_keeps_dialogues_with_more_than_three_matches_and_keeps_the_evidence(sample_db):
    d = read_naturalconv(CC / "naturalconv" / "dialog_release.json", lenient=True).rows
    d += read_dulemon(CC / "dulemon", lenient=True).rows[:2]
    dialogues = pd.DataFrame(d)
    tagged = concepts(dialogues).data
    out = screening(dialogues, tagged, sample_db)
    rejected = out.rejected.set_index("id")
    assert rejected.loc["dulemon-self-train-2", "matches"] == 3  # three matches: not more than three
    assert rejected.loc["naturalconv-8_1", "reason_code"] == "too_few_matches"
    kept = out.data.set_index("id")
    assert kept.loc["naturalconv-10_1", "matches"] == 4
    lines = (CC / "conceptnet-assertions-zh-sample.csv").read_text(encoding="utf-8").splitlines()
    for e in kept.loc["naturalconv-1_1", "evidence"]:  # each piece of evidence: the dump line holding that edge
        assert lines[e["source_record"] - 1].startswith(e["edge_uri"] + "\t")
        i = e["utterance"]
        concepts_of = tagged.set_index("id")["concepts"]
        assert e["e1"] in concepts_of[f"naturalconv-1_1/{i}"] and e["e2"] in concepts_of[f"naturalconv-1_1/{i + 1}"]
    stricter = screening(dialogues, tagged, sample_db, min_matches=8)
    assert set(stricter.data["id"]) == {"naturalconv-2_1"}


# ------------------------------------------------------------------ annotation rules
TURNS = [{"speaker": "A", "text": "外面一直在下雨，出门记得带伞。"}, {"speaker": "B", "text": "我的雨伞落在公司了。"}]


def _record(**changes):
    r = {"id": "k", "dialogue_id": "d", "set": "EASY", "dimension": "event", "instance": "外面下雨",
         "domain": "consequence", "slot": "subsequent event", "value": "B提醒A带伞",
         "phrases": [{"role": "instance", "utterance": 0, "start": 2, "end": 7, "text": "一直在下雨"},
                     {"role": "value", "utterance": 0, "start": 8, "end": 14, "text": "出门记得带伞"}],
         "conflict_of": 1, "conflict_phrase_1": "出门记得带墨镜", "conflict_phrase_2": "可以放心地去晒太阳", "turns": TURNS}
    r.update(changes)
    return r


@pytest.mark.parametrize("changes, code", [
    ({}, None),
    ({"set": "MEDIUM"}, "unknown_set"),
    ({"dimension": "emotion"}, "unknown_dimension"),
    ({"domain": "mood"}, "unknown_domain"),
    ({"dimension": "entity", "domain": "cause"}, "wrong_domain"),
    ({"slot": "colour"}, "unknown_slot"),
    ({"slot": "duration"}, "wrong_slot"),
    ({"phrases": [{"role": "instance", "utterance": 0, "start": 3, "end": 8, "text": "一直在下雨"}], "conflict_of": 0},
     "phrase_not_in_dialogue"),
    ({"phrases": [{"role": "instance", "utterance": 5, "start": 0, "end": 1, "text": "外"}], "conflict_of": 0},
     "phrase_not_in_dialogue"),
    ({"conflict_phrase_2": "出门记得带伞"}, "conflict_equals_original"),
    ({"conflict_phrase_1": "今天阳光明媚适合去海边晒太阳"}, "conflict_edit_too_large"),
    ({"set": "HARD"}, "speaker_letter_in_hard"),
    ({"value": "x提醒y带伞"}, "xy_in_easy"),
])
def test_annotation_rules(changes, code):
    rec = _record(**changes)
    failure = None
    for rule in ann.RULES:
        failure = rule(rec)
        if failure:
            break
    assert (failure[0] if failure else None) == code


def test_words_edited_counts_jieba_words():
    assert ann.words_edited("刀很锋利", "刀很柔软") == 1
    assert ann.words_edited("锅里的油热了吗", "锅里的水凉了吗") == 2
    assert ann.words_edited("猫喜欢抓老鼠", "狗讨厌吃骨头和鸡蛋") > 2


def test_annotations_stage_writes_the_papers_domain_names(tmp_path):
    f = tmp_path / "a.jsonl"
    rec = {k: v for k, v in _record(domain="subsequent").items() if k not in ("turns", "id")}
    for p in rec["phrases"]:
        del p["end"]
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (
        rec, {**rec, "dialogue_id": "gone"}, {**rec, "id": "twice"}, {**rec, "id": "twice"})) + "\n", encoding="utf-8")
    out = ann.annotations(pd.DataFrame({"id": ["d"], "turns": [TURNS]}), release=str(f))
    assert list(out.data["domain"]) == ["consequence", "consequence"] and out.rows_in == 4
    assert list(out.rejected["reason_code"]) == ["dialogue_not_screened", "duplicate_id"]


# ------------------------------------------------------------------ tasks and perturbations
def _annotation(**changes):
    a = _record(**changes)
    a.update(split="dev")
    return a


def test_knowledge_filling_masks_the_phrase_and_offers_it_with_its_conflicts():
    [item] = bm.filling_items(_annotation(), seed=0)
    assert item["dialogue"][0] == "A: 外面一直在下雨，[MASK]。"
    assert sorted(item["options"]) == sorted(["出门记得带伞", "出门记得带墨镜", "可以放心地去晒太阳"])
    assert item["options"][item["option_labels"].index(item["answer_label"])] == "出门记得带伞"
    assert item["prompt"].endswith("答案：正确的选项是") and "(a) " in item["prompt"]


def test_conflict_phrase_detection_gives_the_span_offset_in_the_line():
    items = list(bm.conflict_items(_annotation(), seed=0))
    assert [i["variant"] for i in items] == ["minimal", "maximal"]
    for i in items:
        line = i["dialogue"][i["answer_utterance"]]
        assert line[i["answer_start"]:i["answer_start"] + len(i["answer"])] == i["answer"]


def test_domain_and_slot_identification_options():
    [dom] = bm.domain_items(_annotation(), seed=0)
    assert dom["options"] == ["前提", "原因", "后果", "时间", "空间"] and dom["answer"] == "后果"
    [slot] = bm.slot_items(_annotation(), seed=0)
    assert len(slot["options"]) == 15 and slot["answer"] == "后续事件"  # every slot of the event dimension
    social = _annotation(dimension="social interaction", domain="social norms", slot="x should", value="A应该带伞")
    assert list(bm.domain_items(social, seed=0)) == []  # one domain: nothing to identify
    assert len(next(bm.slot_items(social, seed=0))["options"]) == 7


def test_event_causal_inference_clips_where_the_subsequent_event_shows():
    items = {i["variant"]: i for i in bm.causal_items(_annotation(), seed=0)}
    assert set(items) == {"subsequent", "clipped_subsequent"}
    assert items["clipped_subsequent"]["dialogue"] == ["A: 外面一直在下雨，"]
    assert "根据对话上文可以推测出，事件“外面下雨”导致的后续事件是什么？" in items["clipped_subsequent"]["question"]
    [cause] = bm.causal_items(_annotation(domain="cause", slot="event cause"), seed=0)
    assert cause["variant"] == "cause" and cause["answer"] == "B提醒A带伞"
    backwards = _annotation(phrases=list(reversed(_record()["phrases"])))
    backwards["phrases"][0]["role"], backwards["phrases"][1]["role"] = "value", "instance"
    backwards["phrases"] = [dict(backwards["phrases"][0], role="value", start=2, end=7, text="一直在下雨"),
                            dict(backwards["phrases"][1], role="instance", start=8, end=14, text="出门记得带伞")]
    with pytest.raises(bm.Skip, match="comes before the event"):
        list(bm.causal_items(backwards, seed=0))


EMPTY_TASK = pd.DataFrame()


def test_perturbations_keep_every_answer_on_its_text():
    items = [bm.item(_annotation(), "slot_identification", "event", ["A: x"], "q", f"o{k}",
                     [f"o{j}" for j in range(n)]) | {"id": f"i{k}-{n}"}
             for n in (2, 3, 5, 15) for k in range(n)]
    out = bm.perturbations(pd.DataFrame(items), EMPTY_TASK, EMPTY_TASK, seed=3).data
    assert len(out) == 3 * len(items)
    for row in out.to_dict(orient="records"):
        labels = list(row["option_labels"])
        assert row["options"][labels.index(row["answer_label"])] == row["answer"]
        numbered = all(re.fullmatch(r"\(\d+\)", x) for x in labels)
        assert numbered == (row["perturbation"] != "shuffle")
        original = next(i for i in items if i["id"] == row["item_id"])
        moved = list(row["options"]) != original["options"]
        assert moved == (row["perturbation"] != "reindex")  # a shuffle always changes the order
    again = bm.perturbations(pd.DataFrame(items), EMPTY_TASK, EMPTY_TASK, seed=3).data
    assert again["options"].map(list).tolist() == out["options"].map(list).tolist()  # seeded


def test_splits_never_put_a_dialogue_in_two_splits():
    rows = pd.DataFrame({"id": [f"a{i}" for i in range(300)], "dialogue_id": [f"d{i % 37}" for i in range(300)]})
    out = splits(rows, seed=1).data
    assert out.groupby("dialogue_id")["split"].nunique().max() == 1
    shares = out["split"].value_counts(normalize=True)
    assert abs(shares["train"] - 0.6) < 0.08 and abs(shares["test"] - 0.2) < 0.08


def test_ontology_has_nine_domains_and_thirty_six_slots():
    assert sum(len(d) for d in ONTOLOGY.values()) == 9
    assert sum(len(s) for d in ONTOLOGY.values() for s in d.values()) == 36


# ------------------------------------------------------------------ the real release
def test_corecode_release_file_parses(real):
    path = real / "corecode" / "easy_dev_clipped_subsequent_event_sample.jsonl"
    r = read_corecode(path)
    assert r.records == 100 and len(r.rows) == 100 and not r.rejected
    # as a source: each distinct dialogue once, the line it was first read from as its provenance
    d = read_corecode_dialogues(path)
    distinct = {tuple(json.loads(x)["dialogue"]) for x in path.read_text(encoding="utf-8").splitlines()}
    assert len(d.rows) == len(distinct) and d.records == len(distinct)
    assert d.skipped.get("repeated_dialogue", 0) == 100 - len(distinct)
    assert all(row["id"].startswith("corecode-") and row["source_locator"].startswith("line ") for row in d.rows)


QUESTION = re.compile(r"事件“(.+)”导致的后续事件是什么？$")


def test_rebuilding_the_clipped_subsequent_items_reproduces_the_release(real):
    """Each released clipped item, unclipped: its last utterance goes on with the phrase showing the
    subsequent event (the answer) and one more turn follows; the annotation marks that phrase. The
    builder must cut the dialogue back to exactly the released lines and write the released question."""
    path = real / "corecode" / "easy_dev_clipped_subsequent_event_sample.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        released = json.loads(line)
        parsed = [{"speaker": u[0], "text": u[3:]} for u in released["dialogue"]]
        last = parsed[-1]
        cut = len(last["text"])
        full = parsed[:-1] + [dict(last, text=last["text"] + released["answer"] + "。"),
                              {"speaker": "B" if last["speaker"] == "A" else "A", "text": "嗯嗯。"}]
        event = QUESTION.search(released["question"]).group(1)
        a = {"id": str(released["id"]), "dialogue_id": "d", "set": "EASY", "split": "dev", "dimension": "event",
             "domain": "consequence", "slot": "subsequent event", "instance": event, "value": released["answer"],
             "phrases": [{"role": "value", "utterance": len(parsed) - 1, "start": cut,
                          "end": cut + len(released["answer"]), "text": released["answer"]}],
             "conflict_of": 0, "conflict_phrase_1": "x", "conflict_phrase_2": "y", "turns": full}
        clipped = next(i for i in bm.causal_items(a, seed=0) if i["variant"] == "clipped_subsequent")
        assert clipped["dialogue"] == released["dialogue"], released["id"]
        assert clipped["question"] == released["question"], released["id"]
        assert bm.released(clipped, released["id"]) == released


# ------------------------------------------------------------------ the release's layout and wording
LAYOUT = "corecode/release_layout"
CAUSAL = "Event_Causal_Inference--{}.jsonl"


def _turns(lines: list[str]) -> list[dict]:
    return [{"speaker": u[0], "text": u[3:]} for u in lines]


def _causal_annotation(n: int, set_: str, full: list[str], event: str, value: str, slot: str,
                       clip: list[str] | None = None) -> dict:
    phrases = []
    if clip is not None:  # the value phrase begins where the released clipped dialogue ends
        at = len(clip) - 1
        phrases = [{"role": "value", "utterance": at, "start": len(clip[-1]) - 3, "end": len(full[at]) - 3,
                    "text": full[at][len(clip[-1]):]}]
    return {"id": f"{set_}-{slot}-{n}", "dialogue_id": f"d{n}", "set": set_, "split": "dev", "dimension": "event",
            "domain": "cause" if slot == "event cause" else "consequence", "slot": slot, "instance": event,
            "value": value, "phrases": phrases, "conflict_of": 0, "conflict_phrase_1": "x", "conflict_phrase_2": "y",
            "turns": _turns(full)}


@pytest.mark.parametrize("set_", ["easy", "hard"])
def test_the_released_causal_inference_files_are_rebuilt_byte_for_byte(real, set_):
    """Each released dev line's fields (its dialogue, the event in its question, its answer; for the
    clipped file, where its dialogue stops) as an annotation: the builder and the writer give back the
    three released files, byte for byte, at the release's paths."""
    root = real / LAYOUT / set_ / "generation" / "dev"
    lines = {k: [json.loads(x) for x in (root / CAUSAL.format(k)).read_text(encoding="utf-8").splitlines()]
             for k in ("Event_Cause_Inference", "Subsequent_Event_Inference", "Clipped_Subsequent_Event_Inference")}
    event = lambda q: re.search(r"事件“(.+?)”", q).group(1)  # noqa: E731
    annotations = [_causal_annotation(r["id"], set_.upper(), r["dialogue"], event(r["question"]), r["answer"],
                                      "event cause") for r in lines["Event_Cause_Inference"]]
    annotations += [_causal_annotation(r["id"], set_.upper(), r["dialogue"], event(r["question"]), r["answer"],
                                       "subsequent event", clip["dialogue"])
                    for r, clip in zip(lines["Subsequent_Event_Inference"], lines["Clipped_Subsequent_Event_Inference"])]
    items = [i for a in annotations for i in bm.causal_items(a, seed=0)]
    files = bm.release_files(pd.DataFrame(items))
    assert sorted(files) == sorted(f"{set_}/generation/dev/{CAUSAL.format(k)}" for k in lines)
    for name, content in files.items():
        assert content == (real / LAYOUT / name).read_bytes(), name


def _readme_examples(real) -> dict[str, dict]:
    """The release README's example of each task: its question, option keys and values, answer (the
    dialogue lines are elided with "..." there, so only the lines that are JSON fields are read)."""
    text = (real / LAYOUT / "README.release.md").read_text(encoding="utf-8")
    out = {}
    for title, block in re.findall(r"#+ (?:Subtask \d: )?([A-Z][A-Za-z ]+)\n+```\n(.*?)```", text, re.S):
        fields = dict(re.findall(r'^  "(question|\(\w\))": (".*"),?$', block, re.M))
        if "question" not in fields:  # the documentation tree, the citation
            continue
        answer = re.search(r'"answer": (\[[^\]]*\]|".*")', block, re.S)
        out[title.strip()] = {"question": json.loads(fields.pop("question")),
                              "options": {k: json.loads(v) for k, v in fields.items()},
                              "answer": json.loads(answer.group(1)) if answer else None,
                              "keys": re.findall(r'^  "([^"]+)":', block, re.M)}
    return out


def _released_line(item: dict) -> dict:
    return bm.released(item, 0)


def test_the_release_readme_examples_are_what_the_builders_write(real):
    """Question wording, option labels and values, answer form and keys of each task as the release's
    README documents them: the builders, given the example's fields, write the same."""
    ex = _readme_examples(real)
    base = _annotation()

    filling = _released_line(next(bm.filling_items(base, seed=0)))
    assert filling["question"] == ex["Commonsense Knowledge Filling"]["question"]
    assert list(filling) == ex["Commonsense Knowledge Filling"]["keys"]

    gen = ex["Commonsense Knowledge Generation"]
    event = re.search(r"事件“(.+?)”", gen["question"]).group(1)
    line = _released_line(next(bm.generation_items(dict(base, instance=event, domain="consequence",
                                                        slot="subsequent event", value=gen["answer"]), seed=0)))
    assert line["question"] == gen["question"] and list(line) == gen["keys"]

    conflict = ex["Commonsense Conflict Phrase Detection"]
    line = _released_line(next(bm.conflict_items(base, seed=0)))
    assert line["question"] == conflict["question"] and list(line) == conflict["keys"]  # no offsets in the line

    dom = ex["Domain Identification"]
    one, two = re.search(r"短语1: (.+)  短语2: (.+)$", dom["question"]).groups()
    line = _released_line(next(bm.domain_items(dict(base, dimension="entity", domain="attribute", slot="is-a",
                                                    instance=one, value=two), seed=0)))
    assert line["question"] == dom["question"] and list(line) == dom["keys"]
    assert {k: v for k, v in line.items() if k.startswith("(")} == dom["options"] and line["answer"] == dom["answer"]

    slot = ex["Slot Identification"]
    one, two = re.search(r"短语1：(.+)  短语2：(.+)$", slot["question"]).groups()
    line = _released_line(next(bm.slot_items(dict(base, domain="cause", slot="event cause", instance=one, value=two),
                                             seed=0)))
    assert line["question"] == slot["question"] and list(line) == slot["keys"]
    assert {k: v for k, v in line.items() if k.startswith("(")} == slot["options"] and line["answer"] == slot["answer"]

    for title, slot_name, variant in (("Event Cause Inference", "event cause", "cause"),
                                      ("Subsequent Event Inference", "subsequent event", "subsequent")):
        q = ex[title]["question"]
        a = dict(base, instance=re.search(r"事件“(.+?)”", q).group(1), slot=slot_name,
                 domain="cause" if variant == "cause" else "consequence")
        line = _released_line(next(i for i in bm.causal_items(a, seed=0) if i["variant"] == variant))
        assert line["question"] == q and list(line) == ex[title]["keys"]


def test_event_causal_inference_reads_only_the_two_slots_the_paper_names():
    for domain, slot in (("cause", "emotion cause"), ("cause", "time cause"), ("cause", "location cause"),
                         ("consequence", "subsequent emotional reaction"), ("consequence", "subsequent time change"),
                         ("consequence", "subsequent location change")):
        assert list(bm.causal_items(_annotation(domain=domain, slot=slot), seed=0)) == []
    assert [i["variant"] for i in bm.causal_items(_annotation(domain="cause", slot="event cause"), seed=0)] == ["cause"]


def test_statistics_give_turns_characters_and_words_with_the_paper_beside():
    from tasks.corecode.statistics import PAPER_TOKENS_EASY, statistics, tokens_unit

    turns = {"d1": [{"speaker": "A", "text": "外面一直在下雨。"}, {"speaker": "B", "text": "出门记得带伞。"}],
             "d2": [{"speaker": "A", "text": "你好。"}, {"speaker": "B", "text": "你好啊。"}, {"speaker": "A", "text": "再见。"}]}
    screening = pd.DataFrame({"id": list(turns), "turns": list(turns.values()), "matches": [4, 5]})
    ann = pd.DataFrame({"id": ["a1", "a2", "a3"], "dialogue_id": ["d1", "d2", "d2"], "set": ["EASY", "EASY", "HARD"],
                        "dimension": ["event"] * 3, "domain": ["cause"] * 3})
    out = statistics(pd.DataFrame({"id": list(turns)}), screening, ann,
                     pd.DataFrame({"dialogue_id": ["d1", "d2"], "split": ["train", "dev"]}))
    m = out.data.set_index("id")["value"]
    assert m["turns_per_dialogue/EASY"] == 2.5 and m["turns_per_dialogue_min/EASY"] == 2
    assert m["turns_per_dialogue_max/EASY"] == 3 and m["characters_per_dialogue/EASY"] == (15 + 10) / 2
    assert m["characters_per_dialogue/HARD"] == 10
    assert out.data.set_index("id")["paper"]["characters_per_dialogue/EASY"] == PAPER_TOKENS_EASY
    assert out.notes["tokens_unit"].startswith("characters (12.5 per EASY dialogue")
    assert tokens_unit({"characters": 465.0, "jieba_words": 322.0}).startswith("characters (465.0 per EASY dialogue, 0.86x")
    assert any("by dialogue" in d for d in out.notes["differs_from_release"])
