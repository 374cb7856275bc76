"""One key, one content: the machine's precision decision is stable, cached, resolved into the key,
and a byte difference between stores is named with how each side was computed."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from csk import precision
from csk.params import Device, Precision, resolve_settings
from csk.pipeline import Stage
from csk.runtime import StageOutput
from csk.store import Store
from csk.artifacts import manifest_bytes
from data_contracts import register
from data_contracts.common import Contract
from pandera.typing import Series
from tasks.embed import EmbedSpec


class Probe(Contract):
    n: Series[int]


register("test.Probe", Probe)


def fake(p: str) -> dict:
    return {"precision": p, "id": f"test-{p}", "why": f"{p} (test)", "speedup": 1.0}


@pytest.fixture(autouse=True)
def ladder_follows_the_machine(monkeypatch):
    """These tests fake the machine decision; the embedder's ladder (tests/shared/test_embed_precision.py) then
    takes it as it is, without timing the model under a decision this machine did not make."""
    from tasks import embed_precision

    monkeypatch.setattr(embed_precision, "measure", lambda model, dev, machine_precision, rounds=3:
                        embed_precision.choose(machine_precision, {}))
    monkeypatch.setattr(embed_precision, "_DECISIONS", {})


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CSK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "_DECISIONS", {})
    return tmp_path / "cache"


BURN = "import numpy as np\na = np.random.rand(600, 600)\nwhile True:\n    a = np.tanh(a @ a.T / 600)\n"


@pytest.mark.slow  # timings under load: never in the default suite (issue 64)
def test_decision_is_one_answer_under_load():
    """Measured from scratch three times while two other processes keep both cores busy: one answer."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN], env={"OMP_NUM_THREADS": "1", "PATH": ""})
               for _ in range(2)]
    try:
        answers = [precision.measure("cpu") for _ in range(3)]
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert len({a["precision"] for a in answers}) == 1, [(a["precision"], a.get("speedups")) for a in answers]
    for a in answers:  # a decision says why, with the figures it rests on
        assert a["why"] and (a["screen_speedup"] < precision.EMULATED_BELOW or len(a["speedups"]) == precision.ROUNDS)


def test_decision_is_measured_once_per_machine(own_cache, monkeypatch):
    calls = []
    monkeypatch.setattr(precision, "measure", lambda dev="cpu": calls.append(dev) or fake("bf16"))
    first = precision.decision("cpu")
    precision.forget()  # another process on the same machine reads the cached answer
    again = precision.decision("cpu")
    assert calls == ["cpu"] and again == first and first["precision"] == "bf16"
    cached = json.loads(precision.cache_path(precision.fingerprint("cpu")).read_text())
    assert cached["fingerprint"]["threads"] and cached["fingerprint"]["torch"] and cached["precision"] == "bf16"
    # another thread count (or CPU, flags, torch) is another machine: measured again
    real = precision.fingerprint
    monkeypatch.setattr(precision, "fingerprint", lambda dev="cpu": {**real(dev), "threads": 97})
    monkeypatch.setenv("OMP_NUM_THREADS", "97")  # (how the thread count changes: the machine key follows it)
    monkeypatch.setattr(precision, "measure", lambda dev="cpu": calls.append(dev) or fake("fp32"))
    precision.forget()
    assert precision.decision("cpu")["precision"] == "fp32" and len(calls) == 2
    # within a process the first answer stays, whatever the cache says later
    assert precision.decision("cpu")["precision"] == "fp32"


def test_a_known_machine_reads_its_decision_without_torch(own_cache, monkeypatch):
    """Later processes find the decision under a key built without importing torch (a second of a
    fully reused run's start-up); the key moves with what torch's part of the fingerprint follows."""
    monkeypatch.setattr(precision, "measure", lambda dev="cpu": fake("bf16"))
    first = precision.decision("cpu")
    precision.forget()
    monkeypatch.setattr(precision, "fingerprint", lambda dev="cpu": pytest.fail("torch's fingerprint was taken"))
    assert precision.decision("cpu") == first
    precision.forget()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # another kernel choice: not this machine's decision
    assert precision._known_without_torch("cpu") is None


def _stage(*, embed: EmbedSpec = EmbedSpec(), precision: Precision = "auto",
           device: Device = "cpu") -> StageOutput:
    return StageOutput(data=pd.DataFrame({"id": ["a"], "n": [1]}), rows_in=1)


STAGE = Stage(_stage, contract="test.Probe", name="probe", parent_column=None, conserves_rows=False)


def test_key_follows_the_resolved_precision(tmp_path, monkeypatch):
    store = Store(tmp_path)
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": fake("bf16")})
    bf = store.plan("t", STAGE, {}, [])
    assert bf.resolved == {"device": "cpu", "embed.device": "cpu", "embed.precision": "bf16", "precision": "bf16"}
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": fake("fp32")})
    fp = store.plan("t", STAGE, {}, [])
    assert fp.key != bf.key and fp.resolved["precision"] == "fp32"
    # an explicit precision does not depend on the machine's decision
    pinned = {"precision": "fp32", "embed": {"precision": "fp32"}}
    k1 = store.plan("t", STAGE, pinned, []).key
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": fake("bf16")})
    assert store.plan("t", STAGE, pinned, []).key == k1


def test_resolve_settings_pairs_precision_with_its_device(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": fake("fp32"), "cuda": fake("bf16")})
    from csk.params import params_model

    model = params_model(_stage)
    values = model.model_validate({"embed": {"device": "cuda"}, "device": "cpu"}).model_dump(mode="json")
    got = resolve_settings(model, values)
    assert got["embed.precision"] == "bf16" and got["precision"] == "fp32"  # each for its own device


def _artifact(tmp_path, name: str, monkeypatch, decided: str):
    monkeypatch.setattr(precision, "_DECISIONS", {"cpu": fake(decided)})
    store = Store(tmp_path / name)
    return store, store.run("t", STAGE, {"precision": "fp32"}, []).ref


def test_verify_against_names_machine_and_precision(tmp_path, monkeypatch):
    from csk.verify import compare_stores

    a, ref_a = _artifact(tmp_path, "a", monkeypatch, "bf16")
    b, ref_b = _artifact(tmp_path, "b", monkeypatch, "bf16")
    assert ref_a.key == ref_b.key
    assert compare_stores(a, b) == (1, [], [])  # same key, same bytes
    # the same key computed on another machine, with different bytes (as a store copied from there would be)
    path = ref_b.path + "/manifest.json"
    m = json.loads(open(path).read())
    m["data_sha256"] = "0" * 64
    m["machine"] = {**m["machine"], "cpu": "AMD EPYC 9B14", "flags": ["avx2", "fma"],
                    "precision": {"cpu": {"precision": "fp32", "id": "x"}}}
    m["models"] = [{"name": "sentence-embedder", "precision": "fp32"}]
    open(path, "wb").write(manifest_bytes(m))
    # this side as an AMX machine wrote it, whatever machine runs the test (CI's CPU type changes)
    path_a = ref_a.path + "/manifest.json"
    m_a = json.loads(open(path_a).read())
    m_a["machine"] = {**m_a["machine"], "cpu": "Intel Xeon Platinum 8480C",
                      "flags": ["amx_bf16", "avx2", "avx512_bf16", "avx512f", "fma"]}
    open(path_a, "wb").write(manifest_bytes(m_a))
    shared, lines, damaged = compare_stores(a, b)
    assert shared == 1 and len(lines) == 1 and not damaged
    assert "AMD EPYC 9B14" in lines[0] and "sentence-embedder ran in None vs fp32" in lines[0]
    assert "machine precision decision" in lines[0] and "avx512" in lines[0]


def test_same_machine_difference_is_called_nondeterminism(tmp_path, monkeypatch):
    from csk.verify import compare_stores

    a, _ = _artifact(tmp_path, "a", monkeypatch, "bf16")
    b, ref_b = _artifact(tmp_path, "b", monkeypatch, "bf16")
    path = ref_b.path + "/manifest.json"
    m = json.loads(open(path).read())
    m["data_sha256"] = "0" * 64
    open(path, "wb").write(manifest_bytes(m))
    assert "nondeterministic" in compare_stores(a, b)[1][0]


def test_verify_against_fails_when_nothing_is_compared_and_names_damaged_manifests(tmp_path, monkeypatch):
    """Two stores sharing no key prove nothing: exit 1, saying so. A damaged manifest on either side is
    named (DAMAGED, its path) with exit 1, never a traceback."""
    from typer.testing import CliRunner

    from csk.cli import app

    a, _ = _artifact(tmp_path, "a", monkeypatch, "bf16")
    b, ref_b = _artifact(tmp_path, "b", monkeypatch, "bf16")
    (tmp_path / "empty").mkdir()
    runner = CliRunner()
    ok = runner.invoke(app, ["verify", "--store", str(a.root), "--against", str(b.root)])
    assert ok.exit_code == 0 and "1 keys in both stores, 0 with different bytes" in ok.output, ok.output
    none = runner.invoke(app, ["verify", "--store", str(a.root), "--against", str(tmp_path / "empty")])
    assert none.exit_code == 1 and "0 keys in both stores" in none.output and "share no key" in none.output
    assert none.exception is None or isinstance(none.exception, SystemExit)
    for side in (ref_b.path, _artifact_path(a)):
        path = side + "/manifest.json"
        original = open(path, "rb").read()
        open(path, "wb").write(original[:-20])  # cut short: not JSON
        bad = runner.invoke(app, ["verify", "--store", str(a.root), "--against", str(b.root)])
        assert bad.exit_code == 1 and "DAMAGED" in bad.output and path in bad.output.replace("\n", ""), bad.output
        assert isinstance(bad.exception, SystemExit) and "Traceback" not in bad.output
        open(path, "wb").write(original)


def _artifact_path(store) -> str:
    return str(next(p for p in store.root.glob("t/*/*") if (p / "manifest.json").exists()))


def test_a_cuda_setting_without_a_gpu_is_a_clear_error(monkeypatch):
    import torch

    from csk.errors import ConfigError
    from csk.params import params_model

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = params_model(_stage)
    values = model.model_validate({"device": "cuda"}).model_dump(mode="json")
    with pytest.raises(ConfigError, match="setting device = 'cuda': no CUDA device"):
        resolve_settings(model, values)
