"""The judge's kept activations (issue 72, item 3): a folder named by everything their bytes depend on, and a
size cap that holds while a run adds to it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from csk.errors import ConfigError
from tests import tiny_models

WORDS = "the speaker wants to buy a new dog . the listener is happy about the storm tonight".split()


def _pairs(n: int, salt: str = "") -> list[tuple[str, str]]:
    return [(f"{WORDS[i % len(WORDS)]} {WORDS[(3 * i) % len(WORDS)]} the park {salt}{i}",
             f"the {WORDS[(5 * i) % len(WORDS)]} is coming {salt}{i}") for i in range(n)]


def _judge_run(model, ctx, pairs, **kw):
    """One judge run through the factory (kept activations), scoring `pairs` as one-choice items: (pairs
    computed, scores)."""
    from tasks.distractors.discriminators import make_discriminator_factory

    factory = make_discriminator_factory("cached-transformer", model=str(model), epochs=1, lr=1e-3, batch_size=4,
                                         seed=0, ctx=ctx, trainable_layers=1, max_length=64, kept_activations=True,
                                         **kw)
    disc = factory()
    contexts, choices = [c for c, _ in pairs], [[x] for _, x in pairs]
    disc.head = disc._fresh_head().eval()
    scores = [s.tolist() for s in disc.score(contexts, choices)]
    computed = disc.lower.computed
    del disc, factory
    import gc

    gc.collect()  # the run's discriminator gone: its folder's lock released
    return computed, scores


def _ctx(tmp_path):
    return SimpleNamespace(cache_dir=tmp_path / "store" / "_cache", record_model=lambda *a, **k: None)


def _folders(ctx) -> set[str]:
    return {f.name for f in (ctx.cache_dir / "activations").iterdir() if f.is_dir()}


def test_each_part_of_the_activation_identity_changed_is_a_miss(tmp_path, monkeypatch):
    """A tokenizer file, config.json, a library's version, the code that computes them, the token budget and
    the frozen layers: each changed, the next run finds no kept activation and computes every pair (in a folder
    of its own); unchanged, it computes none."""
    from csk import codehash
    from tasks.distractors.discriminators import activation_identity, kept_activation_folder

    model = tiny_models.multiple_choice(tmp_path / "mc", layers=3)
    ctx, pairs = _ctx(tmp_path), _pairs(6)
    first, scores = _judge_run(model, ctx, pairs)
    assert first == len(pairs) and _judge_run(model, ctx, pairs) == (0, scores)  # unchanged: every pair kept
    (name,) = _folders(ctx)
    assert "-frozen2-64tok-" in name  # 3 layers, 1 trained: 2 frozen (the name once held the trainable count)
    identity = json.loads((ctx.cache_dir / "activations" / name / "identity.json").read_text())
    assert identity == activation_identity(model, 1, 64)
    assert {"model", "frozen_layers", "max_length", "truncation", "precision", "machine", "transformers", "torch",
            "tokenizers", "code"} <= set(identity)

    def edited(what: str, edit) -> object:
        copy = tmp_path / what
        shutil.copytree(model, copy)
        edit(copy)
        return copy

    def tokenizer_edit(d):  # another tokenizer, same weights: "dog" now reads as an unknown word
        tok = json.loads((d / "tokenizer.json").read_text())
        tok["model"]["vocab"]["dog"], tok["model"]["vocab"]["[UNK]"] = tok["model"]["vocab"]["[UNK]"], \
            tok["model"]["vocab"]["dog"]
        (d / "tokenizer.json").write_text(json.dumps(tok))

    def config_edit(d):
        cfg = json.loads((d / "config.json").read_text())
        cfg["layer_norm_eps"] = 1e-5
        (d / "config.json").write_text(json.dumps(cfg))

    seen = {name}
    for what, directory in (("tokenizer", edited("tokenizer", tokenizer_edit)), ("config", edited("config", config_edit)),
                            ("readme", edited("readme", lambda d: (d / "README.md").write_text("prose")))):
        computed, _ = _judge_run(directory, ctx, pairs)
        if what == "readme":  # prose is not read: the same identity (its own folder copy, the same bytes)
            assert computed == 0 and _folders(ctx) == seen, what
            continue
        assert computed == len(pairs) and len(_folders(ctx) - seen) == 1, what
        seen = _folders(ctx)
    for name in ("transformers", "tokenizers", "torch"):
        module = sys.modules[name]  # (transformers puts another module object there once a model is loaded)
        with monkeypatch.context() as m:
            m.setattr(module, "__version__", str(module.__version__) + "+another")
            assert _judge_run(model, ctx, pairs)[0] == len(pairs), name
        assert len(_folders(ctx) - seen) == 1
        seen = _folders(ctx)
    # the code: an edit of the module that computes them (FrozenLower's, or any project module it imports)
    real = codehash.module_file
    source = tmp_path / "discriminators.py"
    source.write_text(real("tasks.distractors.discriminators").read_text() + "\n\ndef _a_new_helper():\n    return 1\n")
    codehash.forget()
    try:
        with monkeypatch.context() as m:
            m.setattr(codehash, "module_file",
                      lambda n: source if n == "tasks.distractors.discriminators" else real(n))
            assert _judge_run(model, ctx, pairs)[0] == len(pairs)
    finally:
        codehash.forget()
    assert len(_folders(ctx) - seen) == 1
    seen = _folders(ctx)
    # the budget and the frozen layers (the precision and the machine: in `activation_identity`, asserted above)
    assert activation_identity(model, 1, 32) != identity and activation_identity(model, 2, 64)["frozen_layers"] == 1
    folder, lock = kept_activation_folder(ctx, model, 2, 64)
    lock.release()
    assert "-frozen1-64tok-" in folder.name and folder.name not in seen


def test_a_kept_store_stays_within_its_cap_inside_a_run(tmp_path):
    """Pairs added past the cap (rows and index) evict the least recently used pairs not in use, down to three
    quarters of it, and never one in use: the store is within the cap after every addition, a pair used again
    survives, the files on disk (rows and index) are within it, and a reopened store reads what was kept."""
    import torch

    from tasks.distractors.discriminators import ActivationStore

    hidden, rows = 8, 5
    one = rows * hidden * 2 + ActivationStore._entry_bytes(_pairs(1)[0])
    cap_bytes = 10 * one
    store = ActivationStore(hidden, str(tmp_path / "kept"), max_gb=cap_bytes / 2**30, keep=True)
    pairs = _pairs(40)
    value = {p: torch.full((rows, hidden), float(i)) for i, p in enumerate(pairs)}
    store.pin(pairs[:4])
    for p in pairs[:4]:
        store.add(p, value[p])
    favourite = pairs[0]
    for k in range(4, 40, 2):  # rounds of two new pairs, each round also using the favourite again
        batch = pairs[k:k + 2] + [favourite]
        store.pin(batch)
        for p in batch:
            if p not in store:
                store.add(p, value[p])
            assert store.size <= cap_bytes
        store.persist()
        assert all(p in store for p in batch)
        on_disk = sum(os.path.getsize(tmp_path / "kept" / f) for f in os.listdir(tmp_path / "kept"))
        assert on_disk <= cap_bytes, on_disk
    assert store.evicted > 0 and favourite in store and pairs[1] not in store and len(store) < 40
    for p in store.index:  # what is kept is what was added
        assert np.array_equal(store.get(p), value[p].to(torch.bfloat16).view(torch.int16).numpy())
    again = ActivationStore(hidden, str(tmp_path / "kept"), max_gb=cap_bytes / 2**30, keep=True)
    assert again.index.keys() == store.index.keys()
    assert all(np.array_equal(again.get(p), store.get(p)) for p in store.index)
    assert sorted(f for f in os.listdir(tmp_path / "kept") if f.startswith("activations")) == [again.data]
    # a store kept under a larger cap, opened under a smaller one: evicted down to it at once
    small = ActivationStore(hidden, str(tmp_path / "kept"), max_gb=3 * one / 2**30, keep=True)
    assert small.size <= 3 * one and 0 < len(small) < len(again)
    # only pairs in use that alone pass the cap stop the run
    small.pin(pairs[:6])
    with pytest.raises(ConfigError, match="max_cache_gb"):
        for p in pairs[:6]:
            if p not in small:
                small.add(p, value[p])


def test_the_judge_within_a_small_cap_scores_as_within_a_large_one(tmp_path):
    """The factory's kept folder under a cap a few pairs wide: the judge's runs evict and compute pairs again
    and give the same scores as runs under the default cap (a pair's activations are a function of its text)."""
    model = tiny_models.multiple_choice(tmp_path / "mc", layers=2)
    rounds = [_pairs(8, "a"), _pairs(8, "b"), _pairs(8, "a")]
    large_ctx = _ctx(tmp_path / "large")
    large = [_judge_run(model, large_ctx, r)[1] for r in rounds]
    (kept,) = [f for f in (large_ctx.cache_dir / "activations").iterdir() if f.is_dir()]
    per_pair = sum(f.stat().st_size for f in kept.iterdir() if f.name != "identity.json") / 16
    small_ctx = _ctx(tmp_path / "small")
    cap = 12 * per_pair / 2**30  # one run's 8 pairs fit, two runs' 16 do not
    small = [_judge_run(model, small_ctx, r, max_cache_gb=cap) for r in rounds]
    assert [s for _, s in small] == large
    assert small[2][0] > 0  # the first run's pairs were evicted by the second's, and computed again
    (folder,) = [f for f in (small_ctx.cache_dir / "activations").iterdir() if f.is_dir()]
    assert sum(f.stat().st_size for f in folder.iterdir()) <= cap * 2**30 + 4096  # (+ identity.json)
