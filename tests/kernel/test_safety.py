"""The data path is safe: nothing read from a file is unpickled or evaluated, model weights load from
safetensors where a directory has them (a manifest warning where it has only pickles), incomplete
model directories are refused before a run, Prefect persists no results, the server binds loopback."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from csk.errors import ModelError
from csk.models import PICKLE_WARNING, pretrained_kwargs, resolve_model, weights_format
from csk.params import ModelDir
from csk.store import hash_inputs
from tests import tiny_models

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("csk", "readers", "tasks", "flows", "data_contracts")
FORBIDDEN_CALLS = {"eval", "exec", "compile"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib"}
FORBIDDEN_ATTRS = {("torch", "load"), ("pd", "read_pickle"), ("pandas", "read_pickle"), ("yaml", "load")}


def _sources():
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            yield f, ast.parse(f.read_text(), str(f))


def test_no_pickle_or_eval_of_anything_read():
    problems = []
    for f, tree in _sources():
        for node in ast.walk(tree):
            where = f"{f.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                bad = [n for n in names if n and n.split(".")[0] in FORBIDDEN_MODULES]
                problems += [f"{where}: imports {n}" for n in bad]
            if isinstance(node, ast.Call):
                fn = node.func
                if isinstance(fn, ast.Name) and fn.id in FORBIDDEN_CALLS:
                    problems.append(f"{where}: calls {fn.id}()")
                if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name):
                    if (fn.value.id, fn.attr) in FORBIDDEN_ATTRS:
                        problems.append(f"{where}: calls {fn.value.id}.{fn.attr}()")
                    if (fn.value.id, fn.attr) == ("np", "load") and not any(
                            k.arg == "allow_pickle" and isinstance(k.value, ast.Constant) and k.value.value is False
                            for k in node.keywords):
                        problems.append(f"{where}: np.load without allow_pickle=False")
    assert not problems, "\n".join(problems)


def test_every_model_load_goes_through_pretrained_kwargs():
    """`X.from_pretrained(...)` of a model (not a tokenizer) passes **pretrained_kwargs(path): local files
    only, and safetensors whenever the directory has them."""
    problems = []
    for f, tree in _sources():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "from_pretrained"):
                continue
            owner = ast.unparse(node.func.value)
            spread = [ast.unparse(k.value) for k in node.keywords if k.arg is None]
            local = any(k.arg == "local_files_only" for k in node.keywords)
            if "Tokenizer" in owner:
                ok = local
            else:
                ok = any(s.startswith("pretrained_kwargs(") for s in spread)
            if not ok:
                problems.append(f"{f.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not problems, "\n".join(problems)


class _Uses(BaseModel):
    model: ModelDir = None


def test_pickle_only_models_load_with_a_manifest_warning(tmp_path):
    safe = tiny_models.multiple_choice(tmp_path / "safe")
    assert weights_format(safe) == "safetensors" and pretrained_kwargs(safe)["use_safetensors"] is True
    pickled = tmp_path / "pickled"
    from transformers import AutoModelForMultipleChoice

    import torch

    m = AutoModelForMultipleChoice.from_pretrained(safe, **pretrained_kwargs(safe))
    pickled.mkdir()
    for f in safe.iterdir():  # the same directory with a pickled state dict instead (as older releases ship)
        if f.suffix != ".safetensors":
            (pickled / f.name).write_bytes(f.read_bytes())
    torch.save(m.state_dict(), pickled / "pytorch_model.bin")
    assert weights_format(pickled) == "pickle" and "use_safetensors" not in pretrained_kwargs(pickled)
    _, models = hash_inputs(_Uses, {"model": str(pickled)})
    assert models[0]["weights"] == "pickle" and models[0]["warning"] == PICKLE_WARNING
    _, models = hash_inputs(_Uses, {"model": str(safe)})
    assert models[0]["weights"] == "safetensors" and "warning" not in models[0]
    # and it still loads (transformers' weights_only unpickler)
    AutoModelForMultipleChoice.from_pretrained(pickled, **pretrained_kwargs(pickled))


def test_a_model_directory_without_weights_is_refused(tmp_path):
    d = tiny_models.multiple_choice(tmp_path / "m")
    (d / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="has a config.json but no weights"):
        resolve_model(str(d), "model", "cicero.adversarial_filter.model")


def test_prefect_persists_no_results():
    from csk.orchestration import prefect_flow
    from csk.pipeline import discover

    for p in discover().values():
        assert prefect_flow(p).persist_result is False, p.name
    source = (ROOT / "csk" / "orchestration.py").read_text() + (ROOT / "csk" / "shards.py").read_text()
    assert source.count("persist_result=False") >= 3  # the flow, each stage's task, each shard's task


def test_compose_binds_the_server_to_loopback():
    import yaml

    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("${PREFECT_BIND:-127.0.0.1}:") or str(port).startswith("127.0.0.1:"), \
                (name, port)
