"""End to end: the CORECODE flow through `csk` on the bundled sample."""

from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests.release_checks import check_release
from tests.conftest import SAMPLE

pytestmark = pytest.mark.flow
runner = CliRunner()
STAGES = ["sources", "concepts", "conceptnet", "screening", "annotations", "splits", "knowledge_filling",
          "knowledge_generation", "conflict_phrase_detection", "domain_identification", "slot_identification",
          "event_causal_inference", "perturbations", "statistics"]


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_corecode_flow_bundled_sample(prefect_harness, tmp_path, config_copy):
    store = tmp_path / "artifacts"
    first = _csk("run", "corecode", "--config", config_copy, "--store", store)
    assert first.exit_code == 0, first.output
    stages = json.loads(_csk("artifacts", "corecode", "--store", store, "--json").output)
    assert [s["stage"] for s in stages] == STAGES
    for s in stages:
        contract = json.load(open(f"{s['path']}/manifest.json"))["contract"]
        assert _csk("validate", f"{s['path']}/data.parquet", "--contract", contract).exit_code == 0
    by = {s["stage"]: s for s in stages}
    # a screened dialogue traces to its matched triples, each at its dump line, with the dump's sha256
    dump = SAMPLE / "corecode" / "conceptnet-assertions-zh-sample.csv"
    sha = hashlib.sha256(dump.read_bytes()).hexdigest()
    steps = json.loads(_csk("lineage", "corecode", "screening", "--row", "naturalconv-1_1", "--store", store,
                            "--json").output)
    evidence = steps[0]["evidence"]
    assert len(evidence) == 7 and all(e["sha256"] == sha and e["file"] == str(dump) for e in evidence)
    assert "下雨 -[RelatedTo]-> 雨伞" in evidence[0]["text"]
    assert steps[-1]["source"]["file"].endswith("dialog_release.json") and steps[-1]["source"]["locator"] == "item 0"
    text = _csk("lineage", "corecode", "screening", "--row", "naturalconv-1_1", "--store", store).output
    assert f"sha256 {sha}" in text and "evidence: utterance" in text
    # a perturbed item of the second MCQ task reaches its annotation through that task's items
    perturbed = pd.read_parquet(f"{by['perturbations']['path']}/data.parquet")
    row = perturbed[perturbed["task"] == "slot_identification"]["id"].iloc[0]
    steps = json.loads(_csk("lineage", "corecode", "perturbations", "--row", row, "--store", store, "--json").output)
    assert [s["stage"] for s in steps][:4] == ["perturbations", "slot_identification", "annotations", "screening"]
    assert steps[2]["record"]["file"].endswith("annotations.jsonl")
    # every rejected annotation says which rule it broke
    rejected = pd.read_parquet(f"{by['annotations']['path']}/rejected.parquet")
    assert {"unknown_domain", "wrong_domain", "wrong_slot", "unknown_slot", "phrase_not_in_dialogue",
            "conflict_equals_original", "conflict_edit_too_large", "speaker_letter_in_hard",
            "dialogue_not_screened", "malformed_record"} <= set(rejected["reason_code"].astype(str))
    # no dialogue in two splits, in the splits and in every task's items
    split = pd.read_parquet(f"{by['splits']['path']}/data.parquet")
    assert split.groupby("dialogue_id")["split"].nunique().max() == 1
    for task in STAGES[6:12]:
        items = pd.read_parquet(f"{by[task]['path']}/data.parquet")
        assert len(items) and items.groupby("dialogue_id")["split"].nunique().max() == 1, task
    # released files in the release's layout, ids from 0, MCQ answers ["(x)", text], the release's keys only
    files = {str(p): p for p in store.rglob("*.jsonl") if "_lineage" not in p.parts}  # not the OpenLineage log
    assert any(re.search(r"/easy/generation/(train|dev|test)/Event_Causal_Inference--Clipped_Subsequent_Event_"
                         r"Inference\.jsonl$", n) for n in files)
    assert any(re.search(r"/reindex_shuffle/easy/multiple_choice/(train|dev|test)/Commonsense_Knowledge_Filling\.jsonl$",
                         n) for n in files)
    for name, p in files.items():
        rows = [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]
        assert [r["id"] for r in rows] == list(range(len(rows))), name
        for r in rows:
            assert set(r) - {"id", "dialogue", "question", "answer"} <= {f"({c})" for c in [*"abcdefghijklmno", *map(str, range(1, 16))]}, name
            if isinstance(r["answer"], list):
                assert r[r["answer"][0]] == r["answer"][1], name
    assert (tmp_path / "artifacts").rglob("statistics.png")
    splits = check_release("corecode", store, tmp_path / "release")
    assert splits
    again = _csk("run", "corecode", "--config", config_copy, "--store", store)
    assert again.exit_code == 0, again.output
    assert all(s["reused"] for s in json.loads(_csk("artifacts", "corecode", "--store", store, "--json").output))
