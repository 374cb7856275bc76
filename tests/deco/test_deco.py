"""DECO / ACCENT: a unit test per rule, the release formats, and the model stages on tiny random models."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from csk.errors import ConfigError, InputError
from readers import read_conture, read_dailydialog, read_deco, read_personachat, read_topicalchat
from readers.deco import RELATIONS, join_history
from tasks.deco.compatibility import NO_TUPLE_SCORE, compatibility, tuple_scores
from tasks.deco.correlation import correlation
from tasks.deco.extract import extract, extraction_tasks, train_extractor
from tasks.deco.extraction import NONE, OutputError, model_input, none_negatives, parse_output, prompt, target
from tasks.deco.response_filter import response_filter
from tasks.deco.sample import sample
from tasks.deco.sources import sources, windows
from tests import tiny_models
from tests.conftest import SAMPLE

DECO = SAMPLE / "deco"


def _release(real=None) -> pd.DataFrame:
    path = (real / "deco" / "deco_train.json") if real else DECO / "deco_train_sample.json"
    rows = read_deco(path, lenient=True).rows
    return pd.DataFrame(rows).assign(dev=lambda d: d["for_dev"])


# ------------------------------------------------------------------ readers
def test_personachat_reader_parlai_layout(tmp_path):
    r = read_personachat(DECO / "personachat" / "train_self_original.txt", lenient=True)
    assert len(r.rows) == 3 and len(r.rejected) == 1 and "expected 'N text'" in r.rejected[0]["reason"]
    first = r.rows[0]
    assert first["persona"] == ["i have two cats .", "i work at a bakery .", "i like hiking on weekends ."]
    assert [t["raw_speaker"] for t in first["turns"][:2]] == ["partner", "self"]
    assert first["turns"][1]["text"].startswith("pretty busy")  # candidates after the two tabs are not turns
    second = r.rows[1]
    assert second["turns"][0]["raw_speaker"] == "self"  # __SILENCE__: the persona speaker opened
    with pytest.raises(InputError, match="train_self_original.txt, record line"):
        read_personachat(DECO / "personachat" / "train_self_original.txt")


def test_topicalchat_reader_file_or_directory():
    by_dir = read_topicalchat(DECO / "topicalchat", lenient=True)
    by_file = read_topicalchat(DECO / "topicalchat" / "train.json", lenient=True)
    assert len(by_dir.rows) == len(by_file.rows) == 2 and len(by_dir.rejected) == 1
    assert by_dir.rows[0]["id"] == "topicalchat-train-t_sample_1"
    assert {t["speaker"] for t in by_dir.rows[0]["turns"]} == {"A", "B"}


def test_deco_release_round_trips_byte_exact(real):
    raw = json.loads((real / "deco" / "deco_train.json").read_text())
    r = read_deco(real / "deco" / "deco_train.json")
    assert len(r.rows) == len(raw) == 200 and not r.rejected
    assert all(join_history(x["history"]) == o["history"] and x["response"] == o["response"]
               for x, o in zip(r.rows, raw))
    assert {x["split"] for x in r.rows} == {"train"} and sum(x["for_dev"] for x in r.rows) == 40


def test_conture_reader_is_an_evaluation_set():
    r = read_conture(DECO / "conture_sample.json")
    assert len(r.rows) == 4 and {x["corpus"] for x in r.rows} == {"ConTurE"} and {x["split"] for x in r.rows} == {"test"}
    assert all(x["system"] is None and x["tuples_single"] == [] and x["overall_impression"] is not None
               for x in r.rows)


# ------------------------------------------------------------------ sources
def test_windows_hold_at_most_four_utterances_padded_in_front():
    d = read_dailydialog(SAMPLE / "dailydialog" / "dialogues_text.txt").rows[0]
    ws = windows(d)
    assert len(ws) == len(d["turns"]) - 1
    assert ws[0]["history"][:3] == ["", "", ""] and ws[0]["history"][3] == d["turns"][0]["text"]
    assert ws[-1]["history"] == [t["text"] for t in d["turns"][-5:-1]] and ws[-1]["next"] == d["turns"][-1]["text"]
    assert ws[2]["history_id"] == f"{d['id']}@3"


def test_sources_import_responses_and_reject_what_they_cannot_place(tmp_path):
    table = tmp_path / "responses.csv"
    with open(table, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["history_id", "response", "system"])
        w.writerows([("dailydialog-000001@2", "I will walk the dog every morning before work .", "PLATO-2"),
                     ("dailydialog-000001@2", "A second answer from the same system to the same history .", "PLATO-2"),
                     ("dailydialog-000001@2", "", "DialoGPT"), ("nowhere@1", "No such history here .", "DiSCoL")])
    out = sources(dailydialog=str(SAMPLE / "dailydialog" / "dialogues_text.txt"), responses=str(table),
                  human_responses=False)
    assert out.data["id"].tolist() == ["dailydialog-000001@2:PLATO-2"]
    assert sorted(out.rejected["reason_code"]) == ["duplicate_id", "empty_response", "unknown_history"]
    row = out.data.iloc[0]
    assert row["source_file"] == str(table) and row["source_locator"] == "line 2"
    assert row["evidence"][0]["source_file"].endswith("dialogues_text.txt")  # the history's dialogue record
    listed = [json.loads(x) for x in out.files["histories.jsonl"].decode().splitlines()]
    assert all(h["history"].count("</UTT>") == 4 for h in listed)
    with pytest.raises(ConfigError, match="no source configured"):
        sources()


# ------------------------------------------------------------------ response filter
def _frame(responses: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{i}" for i in range(len(responses))], "response": responses})


def test_response_filter_rules():
    out = response_filter(_frame([
        "Sounds good to me .",                                          # 4 words
        "Do you like cars ? What kind do you drive ?",                   # questions only
        "do you like cars",                                              # a question without "?"
        "I went to Japan last month , how about you ?",                  # a statement before a tag question
        "Thank you so much . It was nice talking to you !",              # courtesies (one by similarity)
        "Thanks . I bake bread every morning before work .",             # a courtesy and a statement
        "not bad at all , how about you ?",                              # an answer, then a bare tag question
        "cars and trucks , which ones do you like ?",                     # a fragment, then a real question
    ]))
    verdict = dict(zip(out.rejected["id"], out.rejected["reason_code"]))
    assert verdict == {"r0": "too_short", "r1": "only_questions", "r2": "too_short", "r4": "only_courtesy",
                       "r7": "only_questions"}
    assert out.data["id"].tolist() == ["r3", "r5", "r6"]
    only_list = response_filter(_frame(["Thank you so much . It was nice talking to you !"]), courtesy_similarity=2)
    assert len(only_list.data) == 1  # without the similarity check, "thank you so much" is not on the list


def test_response_filter_verdicts_on_the_release(real):
    """The release was filtered: every released response passes the rules as calibrated."""
    df = _release(real)
    out = response_filter(df)
    failed = out.rejected[["id", "reason_code", "response"]].to_dict("records")
    print("\nreleased responses the filter rejects:", *failed, sep="\n  ")
    assert len(out.data) == len(df)
    assert {f["reason_code"] for f in failed} <= {"too_short", "only_questions", "only_courtesy"}


# ------------------------------------------------------------------ sample
def _candidates(n: int) -> pd.DataFrame:
    """Built candidates as the response filter passes them on (no ratings, no tuples)."""
    return pd.DataFrame({"id": [f"s{i:03d}" for i in range(n)], "split": None, "for_dev": False,
                         "history": [["", "", "a question ?", "an answer ."]] * n, "response": "a response .",
                         "corpus": "DailyDialog", "system": "Human", "guid": None, "event_cs_raw": None,
                         "general_cs_raw": None, "event_cs": float("nan"), "general_cs": float("nan"),
                         "tuples_single": [[] for _ in range(n)], "tuples_pair": [[] for _ in range(n)],
                         "source_file": "responses.csv", "source_record": range(2, n + 2),
                         "source_locator": [f"line {i + 2}" for i in range(n)]})


def test_sample_is_seeded_and_splits_300_200_100_40():
    pool = _candidates(350)
    out = sample(pool, seed=3)
    counts = out.data.groupby(["split", "dev"]).size().to_dict()
    assert counts == {("test", False): 100, ("train", False): 160, ("train", True): 40}
    assert len(out.rejected) == 50 and set(out.rejected["reason_code"]) == {"not_sampled"}
    assert out.data.equals(sample(pool, seed=3).data) and not out.data.equals(sample(pool, seed=4).data)
    released = _candidates(2).assign(id=["a", "b"], split=["train", "test"], for_dev=[True, False])
    kept = sample(released).data
    assert kept["selection"].tolist() == ["released", "released"] and kept["dev"].tolist() == [True, False]


def test_sample_quotas_follow_a_make_up_per_system_and_corpus():
    systems = ["Human", "PLATO-2", "DiSCoL", "DialoGPT"] * 150
    corpora = ["DailyDialog", "PersonaChat", "TopicalChat"] * 200
    pool = _candidates(600).assign(system=systems, corpus=corpora)
    quota = {"system": {"Human": 45, "PLATO-2": 130}, "corpus": {"TopicalChat": 100}}
    out = sample(pool, quota=quota, seed=1)
    drawn = out.data[out.data["selection"] == "sampled"]
    assert len(drawn) == 300 and len(out.rejected) == 300
    bys = drawn["system"].value_counts()
    assert bys["Human"] == 45 and bys["PLATO-2"] == 130 and bys[["DiSCoL", "DialoGPT"]].sum() == 125
    assert (drawn["corpus"] == "TopicalChat").sum() == 100
    assert out.notes["drawn_by"]["system"]["Human"] == 45 and "short_of_quota" not in out.notes
    assert set(out.data["id"]) | set(out.rejected["id"]) == set(pool["id"])  # none lost
    # a quota the pool cannot fill is reported, not padded with other systems
    few = pool[(pool["system"] != "Human") | (pool.index < 40)]
    short = sample(few, quota={"system": {"Human": 45}}, seed=1)
    assert short.notes["short_of_quota"] == {"system=Human": 35}
    with pytest.raises(ConfigError, match="quota.system: 310 samples named but n = 300"):
        sample(pool, quota={"system": {"Human": 310}})
    with pytest.raises(ConfigError, match="no column 'model'"):
        sample(pool, quota={"model": {"Human": 1}})


# ------------------------------------------------------------------ extraction
def test_prompts_are_accents():
    assert len(RELATIONS) == 12
    assert prompt("xNeed") == ("Extract event1 and event2 from the text where event2 needs to be true for event1 "
                               "to take place. Utterance: ")
    assert prompt("isAfter").endswith("where event1 happens after event2. Utterance: ")
    assert model_input("xIntent", ["", "a", "b", "c"], "resp") == prompt("xIntent") + "</UTT>a</UTT>b</UTT>c</UTT>resp"


def test_output_parser_accepts_the_format_and_names_what_else_it_got():
    assert parse_output("event1: PersonX eats; event2: PersonX is full") == ("PersonX eats", "PersonX is full")
    assert parse_output(" None ") is None
    for text, code in [("PersonX eats", "missing_event1"), ("event1: PersonX eats", "missing_event2"),
                       ("event2: a; event1: b", "malformed"), ("event1: ; event2: x", "empty_event")]:
        with pytest.raises(OutputError) as exc:
            parse_output(text)
        assert exc.value.code == code


def test_every_released_tuple_is_a_target_the_parser_reads_back(real):
    df = _release(real)
    n = 0
    for _, row in df.iterrows():
        for head, _rel, tail in list(row["tuples_single"]) + list(row["tuples_pair"]):
            assert parse_output(target(head, tail)) == (head.strip(), tail.strip())
            n += 1
    assert n == 307  # docs/method.md 4.4: 307 train tuples


def test_none_negatives_three_single_two_pair_without_the_relation(real):
    df = _release(real)
    neg = none_negatives(df, single=3, pair=2, seed=0)
    has = {r.id: {t[1] for t in list(r.tuples_single) + list(r.tuples_pair)} for r in df.itertuples()}
    for rel, chosen in neg.items():
        assert [s for _, s in chosen] == ["single"] * 3 + ["pair"] * 2
        assert all(rel not in has[sid] for sid, _ in chosen)
    assert neg == none_negatives(df, single=3, pair=2, seed=0)


def test_extraction_tasks_twelve_per_sample_and_training_pairs():
    df = _release().assign(split="train", dev=lambda d: d["for_dev"])
    out = extraction_tasks(df, seed=0)
    assert len(out.data) == 12 * len(df) and out.data.groupby("sample_id")["relation"].nunique().eq(12).all()
    pairs = [json.loads(x) for x in out.files["extractor_train.jsonl"].decode().splitlines()]
    tuples = sum(len(a) + len(b) for a, b in zip(df["tuples_single"], df["tuples_pair"]))
    assert sum(p["target"] != NONE for p in pairs) == tuples
    assert all(p["source"].startswith("Extract event1 and event2") for p in pairs)
    assert all(out.data.loc[out.data["negative"].notna(), "gold_targets"].map(len) == 0)


# ------------------------------------------------------------------ models (tiny, random, built from configs)
def test_extract_gold_without_a_model_and_a_seq2seq_extractor(tmp_path):
    df = _release().assign(split="train", dev=lambda d: d["for_dev"])
    tasks = extraction_tasks(df).data
    gold = extract(tasks)
    assert set(gold.data["origin"]) == {"gold"} and "human (gold) tuples" in gold.notes["extractor"]
    assert len(gold.data) == sum(tasks["gold_targets"].map(len))
    model = extract(tasks.head(24), extractor=str(tiny_models.t5(tmp_path / "t5")), num_beams=2, max_length=8)
    out = len(model.data) + (0 if model.rejected is None else len(model.rejected))
    assert out == 24  # every task: a tuple, or rejected with why (None / not the target format)
    if model.rejected is not None:
        assert set(model.rejected["reason_code"]) <= {"no_tuple", "missing_event1", "missing_event2", "malformed", "empty_event"}


def test_train_extractor_on_the_release_with_accents_none_file(tmp_path, real):
    none = tmp_path / "none_sample.csv"
    with open(none, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["context", "response", "relation", "setting"])
        w.writerow(["</UTT></UTT>the dog is happy .</UTT>they go to the park .</UTT>", "i am going home now .",
                    "xNeed", "single"])
    base = tiny_models.t5(tmp_path / "t5")
    info = train_extractor(base, tmp_path / "extractor", [real / "deco" / "deco_train.json"], negatives=none,
                           max_steps=2, batch_size=4)
    assert info["tuples"] == 307 and info["none_examples"] == 1 and info["steps"] == 2
    assert (tmp_path / "extractor" / "config.json").exists()
    drawn = train_extractor(base, tmp_path / "extractor2", [real / "deco" / "deco_train.json"], max_steps=1)
    assert drawn["none_examples"] == 60  # 12 relations x (3 single + 2 pair)


def test_tuple_score_is_the_floored_max_cosine():
    vec = {"a": np.array([1.0, 0.0]), "b": np.array([0.6, 0.8]), "c": np.array([-1.0, 0.0])}.__getitem__
    assert tuple_scores(["a", "a", "a"], [["b", "c"], ["c"], []], vec) == [pytest.approx(0.6), 0.0, 0.0]


def test_compatibility_with_a_comet_model_off_and_refused(tmp_path):
    df = _release().assign(split="train", dev=lambda d: d["for_dev"])
    tuples = extract(extraction_tasks(df).data).data
    with pytest.raises(ConfigError, match="needs a COMET model"):
        compatibility(df, tuples)
    off = compatibility(df, tuples, comet="off")
    assert off.data["score"].isna().all() and set(off.data["scorer"]) == {"off"}
    comet = str(tiny_models.bart(tmp_path / "comet"))
    out = compatibility(df, tuples, comet=comet, num_beams=2, num_return=2, max_length=8)
    scored = out.data
    assert scored["score"].between(0, 1).all()
    assert (scored.loc[scored["n_tuples"] == 0, "score"] == NO_TUPLE_SCORE).all()
    with_tuples = scored[scored["n_tuples"] > 0].iloc[0]
    assert with_tuples["score"] == pytest.approx(np.mean([t["score"] for t in with_tuples["tuples"]]))
    assert all(len(t["generated"]) == 2 for t in with_tuples["tuples"])


def test_correlation_matches_scipy_with_an_interval():
    rng = np.random.default_rng(0)
    rating = rng.uniform(1, 5, 60)
    scores = pd.DataFrame({"id": [f"s{i}" for i in range(60)], "score": rating / 5 + rng.normal(0, 0.1, 60),
                           "event_cs": rating, "general_cs": np.nan, "split": ["train"] * 30 + ["test"] * 30})
    out = correlation(scores, n_resamples=200)
    row = out.data.set_index("id").loc["all:event_cs:pearson"]
    assert row["r"] == pytest.approx(stats.pearsonr(scores["score"], rating).statistic)
    assert row["ci_low"] <= row["ci_high"] and row["n"] == 60
    assert out.data.set_index("id").loc["test:event_cs:spearman", "n"] == 30
    assert "too few" in out.data.set_index("id").loc["all:general_cs:pearson", "note"]
    assert out.files["scatter.png"][:4] == b"\x89PNG"


def test_extraction_tasks_without_human_tuples_have_no_training_pairs():
    df = _release().assign(split="train", dev=False)
    bare = df.assign(tuples_single=[[] for _ in range(len(df))], tuples_pair=[[] for _ in range(len(df))])
    out = extraction_tasks(bare)
    assert len(out.data) == 12 * len(df) and not out.data["annotated"].any()
    assert out.notes["training_pairs"] == 0 and out.files["extractor_train.jsonl"] == b""


def test_train_extractor_command(tmp_path):
    from typer.testing import CliRunner

    from csk.cli import app

    base = tiny_models.t5(tmp_path / "t5")
    for cmd in (["train-extractor"], ["deco", "train-extractor"]):
        out = CliRunner().invoke(app, [*cmd, "--base", str(base), "--out", str(tmp_path / "x"), "--train",
                                       str(DECO / "deco_train_sample.json"), "--max-steps", "1"])
        assert out.exit_code == 0, out.output
        assert "fine-tuned on" in out.output and (tmp_path / "x" / "csk_training.json").exists()


@pytest.mark.parametrize("given", [
    {"dailydialog": SAMPLE / "dailydialog" / "dialogues_text.txt", "window": 3},   # built samples only, no ratings
    {"conture": DECO / "conture_sample.json"},                                     # rated turns only, no system
    {"dailydialog": SAMPLE / "dailydialog" / "dialogues_text.txt", "release": DECO / "deco_train_sample.json"},
])
def test_every_stage_meets_its_contract_whatever_the_sources(given):
    from csk.contracts import validate_contract

    out = sources(**{k: str(v) if k != "window" else v for k, v in given.items()}).data
    validate_contract("sources", "deco.Samples", out)
    kept = response_filter(out, courtesy_similarity=2).data
    validate_contract("response_filter", "deco.Filtered", kept)
    chosen = sample(kept).data
    validate_contract("sample", "deco.Sampled", chosen)
    tasks = extraction_tasks(chosen).data
    validate_contract("extraction_tasks", "deco.ExtractionTasks", tasks)
    tuples = extract(tasks).data
    validate_contract("extract", "deco.Tuples", tuples)
    scores = compatibility(chosen, tuples, comet="off").data
    validate_contract("compatibility", "deco.Scores", scores)
    validate_contract("correlation", "deco.Correlation", correlation(scores).data)


def test_correlation_interval_survives_degenerate_resamples():
    scores = pd.DataFrame({"id": list("abcde"), "score": [0.5, 0.5, 0.5, 0.5, 0.9],
                           "event_cs": [1.0, 2.0, 3.0, 4.0, 5.0], "general_cs": np.nan, "split": "test"})
    row = correlation(scores, n_resamples=200).data.set_index("id").loc["all:event_cs:pearson"]
    assert row["ci_low"] <= row["ci_high"] and "resamples whose correlation is defined" in row["note"]


def test_sample_writes_the_released_layout_read_deco_reads_back(tmp_path):
    df = _release()
    out = sample(df)
    path = tmp_path / "deco_train.json"
    path.write_bytes(out.files["deco_train.json"])
    back = pd.DataFrame(read_deco(path).rows).set_index("guid")
    mine = df.set_index("guid")
    assert set(back.index) == set(mine.index)
    for guid, row in back.iterrows():
        assert join_history(row["history"]) == join_history(mine.loc[guid, "history"])
        assert row["tuples_single"] == mine.loc[guid, "tuples_single"] and row["event_cs"] == mine.loc[guid, "event_cs"]
        assert row["for_dev"] == mine.loc[guid, "for_dev"]


def test_bad_tables_are_named_errors_not_tracebacks(tmp_path):
    from tasks.deco.extract import _read_negatives

    latin = tmp_path / "responses.csv"
    latin.write_bytes(b"history_id,response,system\ndailydialog-000001@2,caf\xe9 au lait is what I drink,X\n")
    with pytest.raises(InputError, match="responses.csv, record line 2: invalid UTF-8"):
        sources(dailydialog=str(SAMPLE / "dailydialog" / "dialogues_text.txt"), responses=str(latin), lenient=False)
    out = sources(dailydialog=str(SAMPLE / "dailydialog" / "dialogues_text.txt"), responses=str(latin),
                  human_responses=False)  # lenient: the row with the bad byte is rejected, the table read
    assert out.rejected["reason"].tolist() == ["invalid UTF-8"]
    listed = tmp_path / "responses.jsonl"
    listed.write_text('["not", "an", "object"]\n')
    out = sources(dailydialog=str(SAMPLE / "dailydialog" / "dialogues_text.txt"), responses=str(listed),
                  human_responses=False)
    assert out.rejected["reason_code"].tolist() == ["malformed_record"]
    none = tmp_path / "none.csv"
    none.write_text("context,response,relation,setting\nhi</UTT>,r,Likes,single\n")
    with pytest.raises(InputError, match="none.csv, record line 2: expected ACCENT's none-sample CSV"):
        _read_negatives(none)
    none.write_bytes(b"context,response,relation,setting\nhi</UTT>,caf\xe9,xNeed,single\n")
    with pytest.raises(InputError, match="none.csv"):
        _read_negatives(none)


def test_a_release_imported_and_exported_again_is_its_bytes(real):
    """deco_train.json through sources, response_filter and sample: all 200 samples (the two that share
    GUID 282 too), written back byte for byte (one line, integer ratings, the release's order)."""
    path = real / "deco" / "deco_train.json"
    imported = sources(release=str(path)).data
    assert len(imported) == 200 and imported["id"].is_unique
    assert sum(i.startswith("deco-282-item") for i in imported["id"]) == 2
    kept = response_filter(imported).data
    assert len(kept) == 200  # released samples keep their place whatever the filter says of built ones
    out = sample(kept)
    assert list(out.files) == ["deco_train.json"] and len(out.data) == 200
    assert out.files["deco_train.json"] == path.read_bytes()


def test_agreement_of_the_released_ratings_beside_the_paper(real):
    """From the raw ratings of deco_train.json: inter-annotator Spearman of event commonsense 0.548
    (the paper 0.578 on all 300) and event vs overall 0.853 (the paper 0.862)."""
    from tasks.deco.agreement import agreement, inter_annotator

    out = agreement(_release(real).assign(split="train"))
    m = out.data.set_index("id")
    assert round(m.loc["inter_annotator_spearman_event_cs/all", "value"], 3) == 0.548
    assert m.loc["inter_annotator_spearman_event_cs/all", "paper"] == 0.578
    assert round(m.loc["event_vs_overall_spearman/all", "value"], 3) == 0.853
    conture = pd.DataFrame(read_conture(DECO / "conture_sample.json").rows)
    both = agreement(pd.concat([_release(real).assign(split="train"), conture])).data.set_index("id")
    assert both.loc["inter_annotator_spearman_event_cs/all", "value"] == m.loc["inter_annotator_spearman_event_cs/all",
                                                                                  "value"]  # ConTurE apart
    assert both.loc["rated_samples/ConTurE:event_cs", "value"] == len(conture)
    assert inter_annotator([[1, 2, 3], [2, 3, 4], [3, 4, 5], [5, 5, 4]]) > 0.5
    assert inter_annotator([[1, 2]]) != inter_annotator([[1, 2]])  # NaN: too few ratings
