"""The precision decisions kept outside any stage's key (issue 72, item 3): the machine's decision
(`csk.precision`, `<cache>/precision/`) and the embedder's ladder (`tasks.embed_precision`,
`<cache>/precision/embedder/`) are each named by everything their answer depends on; each part changed, the
next process measures again (the measuring function stubbed to count its calls: nothing is timed here)."""

from __future__ import annotations

import json
import shutil
from importlib import metadata

import pytest

from csk import codehash, precision
from tasks import embed_precision as ladder


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CSK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "_DECISIONS", {})
    monkeypatch.setattr(ladder, "_DECISIONS", {})
    yield tmp_path / "cache"
    codehash.forget()


@pytest.fixture
def edited_code(tmp_path):
    """edited_code(module, m): the code hash reads that module with a helper added, until the monkeypatch
    context `m` ends."""
    real = codehash.module_file

    def edit(module: str, m: pytest.MonkeyPatch) -> None:
        source = tmp_path / (module.replace(".", "_") + ".py")
        source.write_text(real(module).read_text() + "\n\ndef _a_new_helper():\n    return 1\n")
        m.setattr(codehash, "module_file", lambda n: source if n == module else real(n))
        codehash.forget()

    return edit


def _versions(monkeypatch, dist: str) -> None:
    """Another installed version of `dist`, as importlib.metadata reports it."""
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda d: real(d) + "+another" if d == dist else real(d))


def test_each_part_of_the_machine_decision_changed_measures_again(own_cache, monkeypatch, edited_code):
    """The machine's decision is read back (with torch and without) while nothing changed; another torch, or an
    edit of the code that measures and decides, is another file: measured again."""
    import torch

    calls = []
    monkeypatch.setattr(precision, "measure", lambda dev="cpu": calls.append(dev) or
                        {"precision": "fp32", "why": "test"})

    def again() -> dict:
        precision.forget()  # another process on the same machine
        return precision.decision("cpu")

    first = again()
    assert len(calls) == 1 and first["fingerprint"]["code"] == precision.measuring_code()
    assert again() == first and len(calls) == 1  # read back without torch
    assert precision._read(precision.cache_path(precision.fingerprint("cpu")), precision.fingerprint("cpu")) == first
    assert precision.machine_material("cpu")["code"] == first["fingerprint"]["code"]
    with monkeypatch.context() as m:  # another torch
        m.setattr(torch, "__version__", torch.__version__ + "+another")
        _versions(m, "torch")
        assert again()["fingerprint"]["torch"].endswith("+another") and len(calls) == 2
    with monkeypatch.context() as m:  # the code that measures
        edited_code("csk.precision", m)
        assert again()["id"] != first["id"] and len(calls) == 3
    codehash.forget()
    assert again() == first and len(calls) == 3  # all as before: the first file
    assert len(list((own_cache / "precision").glob("*.json"))) == len(calls)  # each its own file


def _model(root):
    """A sentence-transformers model's folder, as far as its identity reads it."""
    root.mkdir(parents=True)
    (root / "model.safetensors").write_bytes(b"weights")
    (root / "config.json").write_text(json.dumps({"hidden_size": 8, "layer_norm_eps": 1e-12}))
    (root / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"[UNK]": 0, "dog": 1}}}))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (root / "README.md").write_text("prose")
    return root


def test_each_part_of_the_ladders_identity_changed_measures_again(tmp_path, own_cache, monkeypatch, edited_code):
    """The ladder of one model on one machine is measured once; its tokenizer, config.json or pooling config, a
    library that runs it, the code that measures, the calibration sample or the machine decision changed, it is
    measured again; its README is not read. A split model is named by its zip's sha256 alone (every file in it)."""
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": {"precision": "fp32", "id": "test-fp32", "why": "test"}})
    calls = []

    def measured(model, dev, machine_precision, rounds=ladder.ROUNDS):
        calls.append(model)
        return {"rungs": ["fp32"], **ladder.choose(machine_precision, {})}

    monkeypatch.setattr(ladder, "measure", measured)
    model = _model(tmp_path / "model")

    def run(path=model, spec=None) -> dict:
        ladder.forget()  # another process: read from the file, or measured
        return ladder.decision("sha-a", "cpu", lambda: str(path), spec=spec or str(path), path=path)

    first = run()
    assert calls == [str(model)] and first["model_files"] and run() == first and len(calls) == 1

    def edited(name: str, what: str, text: str):
        copy = tmp_path / name
        shutil.copytree(model, copy)
        (copy / what).write_text(text)
        return copy

    for name, what, text in (("tokenizer", "tokenizer.json", '{"model": {"vocab": {"[UNK]": 1, "dog": 0}}}'),
                             ("config", "config.json", '{"hidden_size": 8, "layer_norm_eps": 1e-5}'),
                             ("pooling", "1_Pooling/config.json", '{"pooling_mode_cls_token": true}')):
        n = len(calls)
        run(edited(name, what, text))
        assert len(calls) == n + 1, name
    n = len(calls)
    assert run(edited("readme", "README.md", "other prose")) == first and len(calls) == n  # prose: not read
    for dist in ladder.LIBRARIES:
        with monkeypatch.context() as m:
            _versions(m, dist)
            run()
        assert len(calls) == n + 1, dist
        n += 1
    for module in ("tasks.embed_precision", "tasks.encoder"):  # the ladder's code and the passes it times
        with monkeypatch.context() as m:
            edited_code(module, m)
            run()
        codehash.forget()
        assert len(calls) == n + 1, module
        n += 1
    calibration = tmp_path / "calibration.json"
    sample = json.loads(ladder.CALIBRATION.read_text())
    calibration.write_text(json.dumps({**sample, "pairs": sample["pairs"][:-1]}))
    with monkeypatch.context() as m:
        m.setattr(ladder, "CALIBRATION", calibration)
        run()
    assert len(calls) == n + 1
    precision._DECISIONS["cpu"] = {"precision": "fp32", "id": "test-fp32-again", "why": "test"}
    run()
    assert len(calls) == n + 2
    precision._DECISIONS["cpu"] = {"precision": "fp32", "id": "test-fp32", "why": "test"}
    assert run() == first and len(calls) == n + 2  # all as before: the first file
    assert len(list((own_cache / "precision" / "embedder").glob("*.json"))) == len(calls)  # each its own file
    # a split model: its sha256 is its zip's, every file in it; its folder (unpacked or not) adds nothing
    assert ladder.model_files("split-package:x", model) == "" and ladder.model_files(str(model), None) == ""
    assert ladder.model_files(str(model), model) == first["model_files"]
