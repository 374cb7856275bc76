"""DECO's human steps in Label Studio (tasks/deco/labeling.py), without a server: the tasks each step makes
from its stage's rows, and its export (three raters or validators, one annotation skipped) read back by the
import stage: the ratings become the samples' raw ratings and means, the tuples are kept by a majority of
their validators, with who answered and the agreement figures."""

from __future__ import annotations

import io
import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from csk.contracts import validate_contract
from csk.errors import ContractError, InputError
from csk.label_studio import project_files, tasks_of
from readers import read_conture, read_deco
from tests import label_studio_export as ls
from tests.label_studio_export import check_config
from tests.conftest import SAMPLE

RELEASE = SAMPLE / "deco" / "deco_train_sample.json"
# rater -> the event_cs / general_cs each gives the samples, in the artifact's order (9 samples)
EVENT = {11: [5, 4, 1, 4, 5, 4, 5, 4, 3], 12: [4, 4, 2, 3, 5, 3, 4, 5, 3], 13: [5, 3, 1, 4, 4, 4, 2, 3, 4]}
GENERAL = {11: [5, 4, 2, 4, 5, 4, 5, 4, 2], 12: [5, 5, 1, 3, 4, 4, 5, 4, 3], 13: [4, 4, 1, 5, 4, 3, 4, 4, 3]}


def _step(name: str):
    from flows.deco import PIPELINE

    return PIPELINE.labeling_step(name)


def _samples() -> pd.DataFrame:
    """The sample stage's artifact on the bundled release: sources -> response_filter -> sample."""
    from tasks.deco.response_filter import response_filter
    from tasks.deco.sample import sample
    from tasks.deco.sources import sources

    kept = response_filter(sources(release=str(RELEASE)).data, courtesy_similarity=2).data
    return kept, sample(kept).data


def _tuples(samples: pd.DataFrame):
    """(extraction tasks, the extract stage's output, its validation sheet as rows)."""
    from tasks.deco.extract import extract, extraction_tasks

    tasks = extraction_tasks(samples).data
    out = extract(tasks)
    sheet = pd.read_json(io.BytesIO(out.files["validation_sheet.jsonl"]), lines=True, dtype=False)
    return tasks, out, sheet


def _ratings(k: int, rater: int) -> list[dict]:
    return [ls.rating("event_cs", EVENT[rater][k]), ls.rating("general_cs", GENERAL[rater][k])]


# ------------------------------------------------------------------ ratings
def test_ratings_step_makes_one_task_per_sample_with_the_dialogue_and_two_ratings():
    from tasks.deco.sample import sample

    step = _step("ratings")
    assert step.stage is sample and step.imports == (sample, "ratings") and step.annotators == 3
    assert step.instructions and step.source == "data.parquet"
    _, rows = _samples()
    tasks = tasks_of(step, rows)
    assert [t["data"]["row_id"] for t in tasks] == rows["id"].tolist() and len(tasks) == 9
    root = check_config(step, tasks)
    ratings = {el.get("name"): el for el in root.iter("Rating")}
    assert set(ratings) == {"event_cs", "general_cs"}
    assert all(el.get("maxRating") == "5" and el.get("required") == "true" for el in ratings.values())
    # deco-2: two padding slots left out, the turns alternate and the response (B's, marked) comes last
    two = next(t["data"] for t in tasks if t["data"]["row_id"] == "deco-2")
    html = two["dialogue_html"]
    assert html.count("<p ") == 3 and "<b>B:</b> Could you help me carry" in html and "<b>A:</b> Sure" in html
    assert html.endswith("<b>B:</b> <mark style=\"background:#ffe08a;padding:0 2px\"><b>To the third floor . The "
                         "elevator is broken so we have to take the stairs .</b></mark></p></div>")
    assert html.count("<mark") == 1
    conture = pd.DataFrame(read_conture(SAMPLE / "deco" / "conture_sample.json").rows)
    assert len(tasks_of(step, pd.concat([rows, conture], ignore_index=True))) == 9  # another dataset's turns
    files = project_files(step, rows, "deco")
    project = json.loads(files["project.json"])
    assert project["imports"] == "deco.sample.ratings" and project["annotators_per_task"] == 3
    assert json.loads(files["tasks.json"]) == tasks


def _ratings_export(tmp_path, tasks):
    """Raters 11, 12, 13 rate samples 0-7; 12 skips sample 0; sample 8 is rated by nobody; a fourth rater
    (14) rates sample 1 without its general rating."""
    answers = {k: [(r, _ratings(k, r)) for r in (11, 12, 13)] for k in range(8)}
    answers[1].append((14, [ls.rating("event_cs", 2)]))
    return ls.write(tmp_path / "ratings.json", tasks, answers, cancelled={(0, 12)})


def test_ratings_come_back_as_the_samples_raw_ratings_their_means_and_their_raters(tmp_path):
    from tasks.deco.agreement import agreement, inter_annotator
    from tasks.deco.sample import sample

    kept, rows = _samples()
    path = _ratings_export(tmp_path, tasks_of(_step("ratings"), rows))
    out = sample(kept, ratings=str(path))
    validate_contract("sample", "deco.Sampled", out.data)
    assert len(out.data) == len(rows) and out.data["id"].tolist() == rows["id"].tolist()  # rows kept, none lost
    by = out.data.set_index("id")
    ids = rows["id"].tolist()
    # sample 1: three raters in the order they rated, the means as scores
    one = by.loc[ids[1]]
    assert list(one["event_cs_raw"]) == [EVENT[r][1] for r in (11, 12, 13)] == [4, 4, 3]
    assert list(one["general_cs_raw"]) == [GENERAL[r][1] for r in (11, 12, 13)]
    assert one["event_cs"] == pytest.approx(11 / 3) and one["general_cs"] == pytest.approx(13 / 3)
    assert list(one["raters"]) == ["11", "12", "13"]  # 14's rating lacked general_cs: rejected
    # sample 0: rater 12 skipped it
    zero = by.loc[ids[0]]
    assert list(zero["raters"]) == ["11", "13"] and list(zero["event_cs_raw"]) == [5, 5]
    assert list(zero["rating_annotation_ids"]) == [1, 3] and zero["event_cs"] == 5.0
    # sample 8: rated by nobody, it keeps its released ratings
    released = rows.set_index("id").loc[ids[8]]
    assert list(by.loc[ids[8], "event_cs_raw"]) == list(released["event_cs_raw"]) and list(by.loc[ids[8], "raters"]) == []
    assert by.loc[ids[8], "event_cs"] == released["event_cs"]
    # every annotation with its lineage; the skipped and the incomplete one rejected with why
    table = pd.read_parquet(io.BytesIO(out.files["ratings.parquet"]))
    assert len(table) == 23 and set(table["annotator"]) == {"11", "12", "13"}
    first = table[(table["row_id"] == ids[1]) & (table["annotator"] == "13")].iloc[0]
    assert first["annotation_id"] == 6 and first["ls_task_id"] == 2 and first["source_file"] == str(path)
    assert first["source_locator"] == "task 1, annotation 2" and first["created_at"].startswith("2026-11-25T10")
    assert first["lead_time"] == 16.0 and first["event_cs"] == 3
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_annotations.parquet"]))
    assert sorted(bad["reason_code"]) == ["missing_rating", "skipped"]
    assert "general_cs" in bad.set_index("reason_code").loc["missing_rating", "reason"]
    # the released layout carries the new ratings
    again = tmp_path / "deco_train.json"
    again.write_bytes(out.files["deco_train.json"])
    back = {r["id"]: r for r in read_deco(again).rows}
    assert back[ids[1]]["event_cs_raw"] == [4.0, 4.0, 3.0] and back[ids[1]]["event_cs"] == pytest.approx(11 / 3)

    # agreement: the mean Spearman over the three pairs of raters, on the samples both rated
    def pairwise(ratings: dict, both: range) -> float:
        return float(np.mean([stats.spearmanr([ratings[a][k] for k in both if (k, a) != (0, 12) and (k, b) != (0, 12)],
                                              [ratings[b][k] for k in both if (k, a) != (0, 12) and (k, b) != (0, 12)]
                                              ).statistic for a, b in combinations((11, 12, 13), 2)]))

    agreed = out.notes["agreement"]
    assert agreed["raters"] == 3 and agreed["annotations"] == 23 and agreed["rejected_annotations"] == 2
    assert agreed["rated_samples"] == 8 and agreed["unrated_samples"] == 1
    assert agreed["pairwise_spearman_event_cs"] == pytest.approx(pairwise(EVENT, range(8)))
    assert agreed["pairwise_spearman_general_cs"] == pytest.approx(pairwise(GENERAL, range(8)))
    three = [[EVENT[r][k] for r in (11, 12, 13)] for k in range(1, 8)]  # sample 0 has two ratings: left out
    assert agreed["inter_annotator_spearman_event_cs"] == pytest.approx(inter_annotator(three))
    assert 0 < agreed["pairwise_spearman_event_cs"] < 1
    assert {r["measure"] for r in out.tables["agreement"]} >= {"pairwise_spearman_event_cs", "raters"}
    # the agreement stage reads the imported ratings unchanged, and names the raters' pairwise figure
    m = agreement(out.data).data.set_index("id")["value"]
    assert m["inter_annotator_spearman_event_cs/all"] == pytest.approx(inter_annotator(
        [list(r) for r in out.data["event_cs_raw"]]))
    assert m["pairwise_spearman_event_cs/all"] == pytest.approx(agreed["pairwise_spearman_event_cs"])


def test_the_sampled_contract_holds_ratings_to_their_raters():
    from tasks.deco.sample import sample

    kept, rows = _samples()
    rated = rows.assign(raters=[["11", "12", "13"]] + [[] for _ in range(len(rows) - 1)],
                        rating_annotation_ids=[[1, 2, 3]] + [[] for _ in range(len(rows) - 1)])
    validate_contract("sample", "deco.Sampled", rated)  # the release's [5, 4, 5], mean 14/3
    wrong = rated.copy()
    wrong.loc[0, "event_cs"] = 3.0
    with pytest.raises(ContractError, match="one_rating_of_each_kind"):
        validate_contract("sample", "deco.Sampled", wrong)
    with pytest.raises(ContractError, match="one_rating_of_each_kind"):
        validate_contract("sample", "deco.Sampled", rated.assign(
            raters=[["11", "12"]] + [[] for _ in range(len(rows) - 1)]))
    with pytest.raises(InputError, match="Label Studio's JSON export of the ratings"):
        sample(kept, ratings=str(RELEASE))  # a release is not an export


# ------------------------------------------------------------------ tuple validation
def test_tuple_validation_step_makes_one_task_per_tuple_with_the_relation_in_words():
    from tasks.deco.extract import extract

    step = _step("tuple_validation")
    assert step.stage is extract and step.imports == (extract, "validations") and step.annotators == 3
    assert step.source == "validation_sheet.jsonl"
    _, rows = _samples()
    _, out, sheet = _tuples(rows)
    assert sheet["id"].tolist() == out.data["id"].tolist() and len(sheet) == 15  # the 9 samples' gold tuples
    tasks = tasks_of(step, sheet)
    assert [t["data"]["row_id"] for t in tasks] == sheet["id"].tolist()
    root = check_config(step, tasks)
    assert [el.get("value") for el in root.iter("Choice")] == ["accept", "reject"]
    assert next(root.iter("Choices")).get("choice") == "single-radio"
    by = {t["data"]["row_id"]: t["data"] for t in tasks}
    single = by["deco-1:xIntent#0"]
    assert single["tuple"] == "PersonX joins a hiking club — xIntent — PersonX meets people"
    assert single["meaning"] == "xIntent: “PersonX meets people” shows PersonX's intent for “PersonX joins a hiking club”"
    assert single["where"] == "Both events are taken from the response."
    assert "<b>A:</b> you will make friends soon .</p>" in single["dialogue_html"]
    assert single["dialogue_html"].endswith("<b>i joined a hiking club so i can meet people on weekends .</b></mark></p></div>")
    pair = by["deco-1:xWant#0"]
    assert pair["where"].startswith("event1 is taken from the conversation before the response")
    assert pair["meaning"] == ("xWant: “PersonX wants to meet people” shows what PersonX wants after “PersonX misses "
                               "PersonX's town” happens")


# votes of validators 21, 22, 23 on the first tuples; the rest all accept, the last tuple nobody judges
VOTES = {0: ("accept", "accept", "reject"),   # 2 of 3: kept
         1: ("reject", "reject", "accept"),   # 1 of 3: removed
         2: ("accept", None, "reject"),       # 22 skips: 1 of 2, no majority: removed
         3: ("accept", "accept", None),       # 23 skips: 2 of 2: kept
         4: ("reject", "reject", "reject")}   # removed


def _validation_export(tmp_path, tasks: list[dict]):
    answers, cancelled = {}, set()
    for k in range(len(tasks) - 1):
        votes = VOTES.get(k, ("accept", "accept", "accept"))
        answers[k] = [(v, [ls.choices("verdict", vote or "accept")]) for v, vote in zip((21, 22, 23), votes)]
        cancelled |= {(k, v) for v, vote in zip((21, 22, 23), votes) if vote is None}
    stale = json.loads(json.dumps(tasks))
    stale[5]["data"]["tail"] = "PersonX sleeps"  # a task of another run: its tuple had another tail
    answers[5].append((24, [ls.choices("verdict", "reject")]))
    answers[6].append((21, [ls.choices("verdict", "reject")]))  # a second vote: the first counts
    return ls.write(tmp_path / "validation.json", stale, answers, cancelled=cancelled)


def test_validated_tuples_are_kept_by_a_majority_of_their_validators(tmp_path):
    from tasks.deco.compatibility import compatibility
    from tasks.deco.extract import extract

    _, rows = _samples()
    tasks, plain, sheet = _tuples(rows)
    path = _validation_export(tmp_path, tasks_of(_step("tuple_validation"), sheet))
    out = extract(tasks, validations=str(path))
    validate_contract("extract", "deco.Tuples", out.data)
    ids = sheet["id"].tolist()
    removed = {ids[1], ids[2], ids[4]}
    assert out.data["id"].tolist() == [i for i in ids if i not in removed]
    invalid = out.rejected[out.rejected["reason_code"] == "validators_rejected"].set_index("id")
    assert set(invalid.index) == removed
    assert invalid.loc[ids[2], "reason"] == "1 of 2 validators accepted the tuple: not a majority"
    assert invalid.loc[ids[1], "parent_id"] == sheet.set_index("id").loc[ids[1], "task_id"]
    assert plain.rejected is None or len(out.rejected) == len(plain.rejected) + 3  # the tasks' rows: unchanged
    by = out.data.set_index("id")
    assert (by.loc[ids[0], "votes_accept"], by.loc[ids[0], "votes_reject"]) == (2, 1)
    assert list(by.loc[ids[0], "validators"]) == ["21", "22", "23"] and list(by.loc[ids[3], "validators"]) == ["21", "22"]
    assert list(by.loc[ids[6], "validators"]) == ["21", "22", "23"]  # 21's second vote did not count
    assert list(by.loc[ids[0], "validation_annotation_ids"]) == [1, 2, 3]
    assert not by.loc[ids[-1], "validated"] and by.loc[ids[-1], "votes_accept"] == 0  # nobody judged it: kept
    assert not by.loc[ids[5], "validated"] and list(by.loc[ids[5], "validators"]) == []  # judged as another tuple
    assert by["validated"].sum() == len(ids) - 2 - len(removed)
    # every vote with its annotation's lineage; the skipped, stale and second ones rejected with why
    votes = pd.read_parquet(io.BytesIO(out.files["validations.parquet"]))
    assert len(votes) == 3 * (len(ids) - 1) - 2 - 3
    v = votes[(votes["row_id"] == ids[1]) & (votes["validator"] == "23")].iloc[0]
    assert bool(v["accept"]) and v["annotation_id"] == 6 and v["ls_task_id"] == 2 and v["source_file"] == str(path)
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_annotations.parquet"]))
    assert sorted(bad["reason_code"]) == ["second_vote", "skipped", "skipped"] + ["tuple_changed"] * 4
    assert all("PersonX sleeps" in r for r in bad.loc[bad["reason_code"] == "tuple_changed", "reason"])
    # agreement: Light's kappa (Cohen's over each pair of validators), the unanimous share, Fleiss' kappa
    labels = votes.pivot_table(index="row_id", columns="validator", values="accept", aggfunc="first")
    pairs = []
    for a, b in combinations(labels.columns, 2):
        both = labels[[a, b]].dropna()
        pairs.append(cohen_kappa_score(both[a].astype(str), both[b].astype(str)))
    agreed = out.notes["agreement"]
    assert agreed["light_kappa"] == pytest.approx(np.mean(pairs))
    assert agreed["unanimous_share"] == pytest.approx(10 / 13)  # of the 13 tuples voted on, 0, 1 and 2 split
    assert agreed["validators"] == 3 and agreed["votes"] == len(votes) and agreed["rejected_annotations"] == 7
    assert agreed["rejected_tuples"] == 3 and agreed["unvalidated_tuples"] == 2
    assert -1 <= agreed["fleiss_kappa"] <= 1 and out.notes["extracted"] == len(ids)
    # compatibility scores the kept tuples only
    scores = compatibility(rows, out.data, comet="off").data.set_index("id")
    kept_per = out.data.groupby("sample_id").size()
    assert scores["n_tuples"].to_dict() == {i: int(kept_per.get(i, 0)) for i in scores.index}
    # the contract holds a kept tuple to its majority
    tampered = out.data.copy()
    tampered.loc[0, "votes_reject"] = 2
    with pytest.raises(ContractError, match="majority"):
        validate_contract("extract", "deco.Tuples", tampered)
    with pytest.raises(InputError, match="tuple_validation"):
        extract(tasks, validations=str(RELEASE))


def test_fleiss_kappa_by_hand():
    from tasks.deco.agreement import fleiss_kappa

    # p = (5/9, 4/9): P_e = 41/81; P_i = 1, 1, 1/3: P = 7/9; kappa = (63 - 41) / (81 - 41) = 0.55
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1]]) == pytest.approx(0.55)
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1], [1, 1]]) == pytest.approx(0.55)  # two votes: not counted
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category: undefined
    assert fleiss_kappa([]) is None


def test_the_card_says_which_human_work_was_imported_and_which_collected():
    from csk.release import _deviations
    from flows.deco import RELEASE

    def said(sample: dict, extract: dict) -> list[str]:
        stages = {"sample": sample, "extract": extract, "compatibility": {"comet": "off", "embed": {"model": "x"}}}
        return [d for d in _deviations(RELEASE, {k: {"manifest": {"params": v}} for k, v in stages.items()})
                if "Label Studio" in d]

    assert said({}, {})[0].startswith("Human ratings and validated tuples are imported")
    assert said({"ratings": "r.json"}, {})[0].startswith("Human validated tuples are imported")
    assert said({"ratings": "r.json"}, {"validations": "v.json"}) == []


# ------------------------------------------------------------------ tuples (written)
def test_tuples_step_makes_one_task_per_sample_and_relation_with_two_event_boxes():
    from tasks.deco.extraction import RELATIONS
    from tasks.deco.sample import sample

    step = _step("tuples")
    assert step.stage is sample and step.imports == (sample, "tuples") and step.instructions
    _, rows = _samples()
    tasks = tasks_of(step, rows)
    assert len(tasks) == 12 * len(rows) == 108
    assert [t["data"]["row_id"] for t in tasks[:12]] == [f"{rows['id'].iloc[0]}#{r}" for r in RELATIONS]
    root = check_config(step, tasks)
    assert {el.get("name") for el in root.iter("TextArea")} == {"event1", "event2"}
    assert [c.get("value") for c in root.iter("Choice")] == ["single", "pair", "none"]
    intent = next(t["data"] for t in tasks if t["data"]["row_id"].endswith("#xIntent"))
    assert intent["meaning"] == "xIntent: event2 shows PersonX's intent for event1" and intent["relation"] == "xIntent"


def test_written_tuples_become_the_samples_tuples_with_their_writers_and_go_on_to_the_extraction(tmp_path):
    from tasks.deco.extract import extraction_tasks
    from tasks.deco.sample import sample

    kept, rows = _samples()
    tasks = tasks_of(_step("tuples"), rows)
    at = {t["data"]["row_id"]: k for k, t in enumerate(tasks)}
    ids = rows["id"].tolist()
    answers = {
        at[f"{ids[0]}#xIntent"]: [(21, [ls.textarea("event1", "PersonX carries the box"),
                                        ls.textarea("event2", "PersonX helps PersonY"), ls.choices("setting", "single")])],
        at[f"{ids[0]}#oReact"]: [(22, [ls.textarea("event1", "PersonX asks for help"),
                                       ls.textarea("event2", "PersonY agrees"), ls.choices("setting", "pair")])],
        at[f"{ids[0]}#xNeed"]: [(21, [ls.choices("setting", "none")])],                 # none of this relation
        at[f"{ids[1]}#xWant"]: [(21, [ls.textarea("event1", "PersonX is tired"), ls.choices("setting", "single")])],
        at[f"{ids[1]}#xReact"]: [(21, [ls.textarea("event1", "PersonX is tired"), ls.choices("setting", "none")])],
        at[f"{ids[1]}#xAttr"]: [(22, [ls.textarea("event1", "PersonX is late"),
                                      ls.textarea("event2", "PersonX is careless")])],  # neither single nor pair
    }
    path = ls.write(tmp_path / "tuples.json", tasks, answers)
    out = sample(kept, tuples=str(path))
    validate_contract("sample", "deco.Sampled", out.data)
    by = out.data.set_index("id")
    # sample 0: its released tuples replaced by the written ones, in the relation order, as released
    assert [list(t) for t in by.loc[ids[0], "tuples_single"]] == [["PersonX carries the box", "xIntent",
                                                                   "PersonX helps PersonY"]]
    assert [list(t) for t in by.loc[ids[0], "tuples_pair"]] == [["PersonX asks for help", "oReact", "PersonY agrees"]]
    assert list(by.loc[ids[0], "writers"]) == ["21", "22"]
    # sample 1: both its answers rejected, sample 2: nobody wrote: the release's tuples stay, no writer named
    for k in (1, 2):
        released = rows.set_index("id").loc[ids[k]]
        assert [list(t) for t in by.loc[ids[k], "tuples_single"]] == [list(t) for t in released["tuples_single"]]
        assert list(by.loc[ids[k], "writers"]) == []
    written = out.notes["written"]
    assert (written["answers"], written["tuples"], written["none_answers"], written["rejected_answers"]) == (3, 2, 1, 3)
    assert written["tuples_by_relation"]["xIntent"] == 1 and written["samples_written"] == 1
    table = pd.read_parquet(io.BytesIO(out.files["written_tuples.parquet"]))
    assert table["source_file"].eq(str(path)).all() and set(table["annotator"]) == {"21", "22"}
    bad = pd.read_parquet(io.BytesIO(out.files["rejected_tuples.parquet"]))
    assert sorted(bad["reason_code"]) == ["events_with_none", "half_tuple", "no_setting"]
    # they are the extractor's targets now, single and pair, and what the extract stage validates
    targets = extraction_tasks(out.data).data.set_index(["sample_id", "relation"])
    assert list(targets.loc[(ids[0], "xIntent"), "gold_targets"]) == ["event1: PersonX carries the box; event2: "
                                                                     "PersonX helps PersonY"]
    assert list(targets.loc[(ids[0], "oReact"), "gold_settings"]) == ["pair"]
    with pytest.raises(InputError, match="tuples labeling step"):
        sample(kept, tuples=str(RELEASE))
