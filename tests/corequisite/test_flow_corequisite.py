"""End to end: the CoreQuisite flow through `csk`, on the bundled sample and on a real PaCo release."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests.release_checks import check_release

pytestmark = pytest.mark.flow
runner = CliRunner()
STAGES = ["conceptnet", "edges", "lexicalize", "annotation_tasks", "annotations", "answer_rules", "answer_quality",
          "splits", "p_nli", "p_g", "mcqa_instances", "aflite", "p_mcqa", "statistics"]


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_corequisite_flow_bundled_sample(prefect_harness, tmp_path, config_copy, monkeypatch, fresh_codehash):
    store = tmp_path / "artifacts"
    fast = ("--set", "corequisite.aflite.m=16")  # 64 probes a round in `make run`; 16 keep the test short
    first = _csk("run", "corequisite", "--config", config_copy, "--store", store, *fast)
    assert first.exit_code == 0, first.output
    stages = json.loads(_csk("artifacts", "corequisite", "--store", store, "--json").output)
    assert [s["stage"] for s in stages] == STAGES
    for s in stages:
        contract = json.load(open(f"{s['path']}/manifest.json"))["contract"]
        assert _csk("validate", f"{s['path']}/data.parquet", "--contract", contract).exit_code == 0
    by = {s["stage"]: s for s in stages}
    # AF-Lite's removals are rejected rows carrying their predictability
    removed = pd.read_parquet(f"{by['aflite']['path']}/rejected.parquet")
    assert len(removed) and (removed["predictability"] >= 0.75).all()
    assert set(removed["reason_code"]) == {"predictable"}
    # a P-MCQA row traces back to its ConceptNet edge and the dump line, with the dump's sha256
    mcqa = pd.read_parquet(f"{by['p_mcqa']['path']}/data.parquet")
    steps = json.loads(_csk("lineage", "corequisite", "p_mcqa", "--row", mcqa["id"].iloc[0], "--store", store,
                            "--json").output)
    edge = next(s for s in steps if s["stage"] == "edges")
    assert edge["id"].startswith("/a/[/r/UsedFor/")
    source = steps[-1]["source"]
    lines = open(source["file"], encoding="utf-8").read().splitlines()
    line = next(n for n, text in enumerate(lines, start=1) if text.startswith(edge["id"] + "\t"))
    assert source["locator"] == f"line {line}"
    assert source["sha256"] == hashlib.sha256(open(source["file"], "rb").read()).hexdigest()
    # task files in the release layouts, no fact in two splits
    files = {p.name for p in (tmp_path / "artifacts").rglob("PaCo_*")}
    assert {"PaCo_nli_train.csv", "PaCo_nli_eval.csv", "PaCo_Gen.csv", "PaCo_mcqa_train.jsonl"} <= files
    assert not any("_dev" in f for f in files)  # the release calls its dev split eval
    split = pd.read_parquet(f"{by['splits']['path']}/data.parquet")
    assert split.groupby("fact_id")["split"].nunique().max() == 1
    splits = check_release("corequisite", store, tmp_path / "release")
    assert splits
    again = _csk("run", "corequisite", "--config", config_copy, "--store", store, *fast)
    assert again.exit_code == 0, again.output
    assert all(s["reused"] for s in json.loads(_csk("artifacts", "corequisite", "--store", store, "--json").output))
    # exact reuse: an edit to a helper imported inside a function (tasks/english.py, imported where
    # lexicalize and answer_rules parse) and a new spaCy each make `csk status` recompute those stages
    from csk import codehash

    def status():
        out = _csk("status", "corequisite", "--config", config_copy, "--store", store, *fast, "--json")
        assert out.exit_code == 0, out.output
        return {s["stage"]: s for s in json.loads(out.output)}

    edited = tmp_path / "english.py"
    edited.write_text(codehash.module_file("tasks.english").read_text() + "\n_AN_EDIT = 1\n")
    real_file, real_version = codehash.module_file, codehash._version
    for patch, reason in ((("module_file", lambda n: edited if n == "tasks.english" else real_file(n)), "code changed"),
                          (("_version", lambda d: "99.0" if d == "spacy" else real_version(d)), "package spacy")):
        monkeypatch.undo()
        codehash.forget()
        monkeypatch.setattr(codehash, *patch)
        by = status()
        assert by["lexicalize"]["status"] == "recompute" and reason in by["lexicalize"]["why"], by["lexicalize"]
        assert by["conceptnet"]["status"] == by["edges"]["status"] == "reused"
        assert all(s["status"] in ("reused", "recompute", "depends") for s in by.values())


@pytest.mark.slow  # over a minute on 2 cores: `make test-all`
def test_corequisite_flow_on_a_real_release(prefect_harness, tmp_path, config_copy, real):
    store = tmp_path / "artifacts"
    release = real / "paco" / "PaCo_nli_train_sample.csv"
    out = _csk("run", "corequisite", "--config", config_copy, "--store", store,
               "--set", f"corequisite.annotations.release={release}", "--set", "corequisite.annotations.answers=",
               "--set", "corequisite.answer_rules.expert_labels=", "--set", "corequisite.aflite.m=8",
               "--set", 'corequisite.mcqa_instances.variants=["same_fact"]')
    assert out.exit_code == 0, out.output
    by = {s["stage"]: s for s in json.loads(_csk("artifacts", "corequisite", "--store", store, "--json").output)}
    answers = pd.read_parquet(f"{by['annotations']['path']}/data.parquet")
    assert len(answers) == 1200 and answers["fact_from_release"].all()
    nli = pd.read_parquet(f"{by['p_nli']['path']}/data.parquet")
    steps = json.loads(_csk("lineage", "corequisite", "p_nli", "--row", nli["id"].iloc[0], "--store", store,
                            "--json").output)
    assert steps[-1]["source"]["file"] == str(release) and steps[-1]["source"]["locator"].startswith("line ")
