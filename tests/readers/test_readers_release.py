"""Readers of the CoreQuisite (PaCo), CORECODE, DECO and ConceptNet release formats."""

from __future__ import annotations

import json

import pytest

from csk.errors import InputError
from readers import read_conceptnet_assertions, read_corecode, read_deco, read_paco_gen, read_paco_nli


def test_paco_nli_real(real):
    r = read_paco_nli(real / "paco" / "PaCo_nli_train_sample.csv")
    assert len(r.rows) == 1200 and not r.rejected
    assert {x["label"] for x in r.rows} == {0, 1}
    assert all((x["label"] == 1) == (x["polarity"] == "enabling") for x in r.rows)
    assert r.rows[0]["source_locator"] == "line 2"  # line 1 is the header


def test_paco_gen_real(real):
    r = read_paco_gen(real / "paco" / "PaCo_Gen.csv")
    assert len(r.rows) == 999 and not r.rejected
    assert {x["polarity"] for x in r.rows} == {"enabling", "disabling"}
    assert all(1 <= len(x["references"]) <= 3 and x["statement"].endswith(".") for x in r.rows)


def test_corecode_real(real):
    r = read_corecode(real / "corecode" / "easy_dev_clipped_subsequent_event_sample.jsonl")
    assert len(r.rows) == 100 and not r.rejected
    assert all({t["speaker"] for t in x["turns"]} <= {"A", "B"} and x["answer"] for x in r.rows)


def test_deco_real(real):
    r = read_deco(real / "deco" / "deco_train.json")
    assert len(r.rows) == 200 and not r.rejected
    assert sum(x["for_dev"] for x in r.rows) == 40  # the released train marks 40 as dev
    # every history keeps its 4 slots, empty ones too (the window length is part of the sample)
    assert all(len(x["history"]) == 4 and 1 <= len(x["history_utterances"]) <= 4 for x in r.rows)
    assert any("" in x["history"] for x in r.rows)
    assert all(1 <= x["event_cs"] <= 5 and 1 <= x["general_cs"] <= 5 and len(x["general_cs_raw"]) == 3 for x in r.rows)
    assert any(x["tuples_single"] for x in r.rows)
    relations = {t[1] for x in r.rows for t in x["tuples_single"] + x["tuples_pair"]}
    assert "isAfter" in relations and "IsAfter" not in relations  # one spelling


def test_conceptnet_dump_selection(tmp_path):
    dump = tmp_path / "assertions.csv"
    dump.write_text(
        "/a/[/r/UsedFor/,/c/en/pillow/,/c/en/sleep/]\t/r/UsedFor\t/c/en/pillow/n\t/c/en/sleep\t{\"weight\": 2.0}\n"
        "/a/[/r/UsedFor/,/c/fr/oreiller/,/c/fr/dormir/]\t/r/UsedFor\t/c/fr/oreiller\t/c/fr/dormir\t{\"weight\": 1.0}\n"
        "/a/[/r/IsA/,/c/en/cat/,/c/en/pet/]\t/r/IsA\t/c/en/cat\t/c/en/pet\t{\"weight\": 1.0}\n"
        "/a/[/r/Causes/,/c/en/ice_cream/,/c/en/joy/]\t/r/Causes\t/c/en/ice_cream\t/c/en/joy\t{}\n")
    r = read_conceptnet_assertions(dump, relations=["UsedFor", "Desires", "Causes"])
    dbpedia = tmp_path / "dbpedia.csv"
    dbpedia.write_text("/a/x\t/r/dbpedia/genre\t/c/en/jazz_album\t/c/en/jazz\t{}\n")
    assert read_conceptnet_assertions(dbpedia).rows[0]["relation"] == "dbpedia/genre"  # the full name
    assert [(x["relation"], x["head"], x["tail"], x["weight"]) for x in r.rows] == [
        ("UsedFor", "pillow", "sleep", 2.0), ("Causes", "ice cream", "joy", 1.0)]
    assert r.skipped == {"other language": 1, "other relation": 1} and r.rows[1]["source_locator"] == "line 4"
    dump.write_text("/a/x\t/r/UsedFor\t/c/en/a\n")
    with pytest.raises(InputError, match="assertions.csv, record line 1: expected 5 tab-separated"):
        read_conceptnet_assertions(dump)


def test_malformed_release_records(tmp_path):
    nli = tmp_path / "nli.csv"
    nli.write_text("context,question,label\nA precondition.,A fact.,1\nA precondition.,A fact.,maybe\n")
    with pytest.raises(InputError, match="nli.csv, record line 3: label must be 0 or 1"):
        read_paco_nli(nli)
    assert len(read_paco_nli(nli, lenient=True).rejected) == 1
    bad_header = tmp_path / "h.csv"
    bad_header.write_text("premise,hypothesis,label\n")
    with pytest.raises(InputError, match="expected the header"):
        read_paco_nli(bad_header)
    cc = tmp_path / "cc.jsonl"
    cc.write_text(json.dumps({"id": 1, "dialogue": ["A: x"], "question": "q", "(a)": "o1", "(b)": "o2",
                              "answer": ["(c)", "o3"]}) + "\n")
    with pytest.raises(InputError, match="record line 1: an MCQ answer"):
        read_corecode(cc)
    deco = tmp_path / "deco.json"
    deco.write_text(json.dumps([{"history": "</UTT></UTT></UTT>hi</UTT>", "response": "r", "source": "s", "system": "x", "GUID": 1,
                                 "tuples_single": [["a", "Likes", "b"]]}]))
    with pytest.raises(InputError, match="record item 0: unknown relation 'Likes'"):
        read_deco(deco)
    gen = tmp_path / "gen.csv"
    gen.write_text("prompt,refs_0,refs_1,refs_2\nA fact. What makes this possible?,a,b,c,EXTRA\n")
    rejected = read_paco_gen(gen, lenient=True).rejected
    assert len(rejected) == 1 and "more columns than the header" in rejected[0]["reason"]
    with pytest.raises(InputError, match="gen.csv, record line 2: more columns"):
        read_paco_gen(gen)
    many = tmp_path / "many.jsonl"
    options = {f"({k})": f"o{k}" for k in range(1, 12)}
    many.write_text(json.dumps({"id": 1, "dialogue": ["A: x"], "question": "q", **options,
                                "answer": ["(10)", "o10"]}) + "\n")
    row = read_corecode(many).rows[0]
    assert row["option_labels"][:3] == ["(1)", "(2)", "(3)"] and row["option_labels"][9] == "(10)"
    assert row["options"][9] == "o10"


def test_paco_gen_row_without_its_empty_trailing_refs_is_read(tmp_path):
    gen = tmp_path / "gen.csv"
    gen.write_text("prompt,refs_0,refs_1,refs_2\nA fact. What makes this possible?,an answer\n")
    row = read_paco_gen(gen).rows[0]
    assert row["references"] == ["an answer"] and row["polarity"] == "enabling"
