"""Stage parameters: the signature is the parameter list (scikit-learn's rule).

A stage function's keyword-only parameters, with their types and defaults, ARE its
parameters; each one's one-line doc is its entry in the docstring's `Args:` section.
`params_model(fn)` turns them into a pydantic model (unknown keys are errors), so a default
is written once, where the work is, and pipelines.toml, `csk config` and the artifact key
all read it from there.

Parameters that name data or a model are typed as such, and the runtime hashes their
content into the artifact key and records them in the manifest, the same way for every
stage:

* `InputPath`: a file or a directory of files (sources, releases, candidate files);
* `InputFile`: a file, never a directory (the preflight says so before anything runs);
* `ModelDir`: a model directory or `package:NAME` (an installed package shipping one).

Settings whose "auto" is decided by the machine are typed too, and the runtime resolves them
before it computes the key, so the key says what the stage will run with:

* `Device`: "auto" is CUDA when a GPU is visible, else CPU;
* `Precision`: "auto" is this machine's one bf16-or-fp32 decision (`csk.precision`), for the
  `Device` setting beside it.

Relative paths are resolved against the directory of the pipelines.toml they were read
from. "" / None mean "not used"; a `ModelDir` may also be "off" where a stage documents it.
"""

from __future__ import annotations

import inspect
import typing
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Literal

import docstring_parser
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, create_model
from pydantic.fields import FieldInfo

OFF = "off"


class Input:
    """Marks a parameter whose content is an input of the stage: "path" (file or directory) or "model"."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"Input({self.kind!r})"


def unused(value: Any) -> bool:
    """A path or model setting that names nothing (not configured, or explicitly off)."""
    return value is None or value == "" or value == OFF


def _resolve_path(value: str | None, info: ValidationInfo) -> str | None:
    """Relative paths in pipelines.toml are relative to the file itself."""
    if unused(value) or str(value).startswith(("package:", "split-package:")):
        return value
    base = (info.context or {}).get("base_dir")
    p = Path(value).expanduser()
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    return str(p)


def portable_name(path: str, root: str | None) -> str:
    """A read file's name that travels with a store (in keys and rows, never a machine's folder): relative
    to the configured setting's folder (`mutual/dev/dev_1.txt` for a file of the configured directory
    `.../mutual`), else its last component (`dialogues_text.txt` for a configured file)."""
    p = Path(path)
    if root and p != Path(root) and p.is_relative_to(root):
        return f"{Path(root).name}/{p.relative_to(root).as_posix()}"
    return p.name


def setting_value(values: dict, dotted: str):
    """The value of a dotted setting (`server.templates`) in a params dict, or None."""
    for part in dotted.split("."):
        if not isinstance(values, dict):
            return None
        values = values.get(part)
    return values


def portable_params(model: type[BaseModel], values: dict) -> dict:
    """`values` with every typed input (file, directory, model folder) that is a local path replaced by its
    last component: the key holds the content of what it names (its sha256, beside), not where it lives."""
    import copy

    out = copy.deepcopy(values)
    for setting, _kind, value in typed_inputs(model, values):
        if isinstance(value, str) and not unused(value) and Path(value).is_absolute():
            *parents, last = setting.split(".")
            node = out
            for part in parents:
                node = node[part]
            node[last] = Path(value).name
    return out


InputPath = Annotated[str | None, Input("path"), AfterValidator(_resolve_path)]
InputFile = Annotated[str | None, Input("file"), AfterValidator(_resolve_path)]
ModelDir = Annotated[str | None, Input("model"), AfterValidator(_resolve_path)]


class Resolved:
    """Marks a setting the runtime resolves on this machine before keying the stage: "device" or
    "precision". `decide(settings, device, model, cache)` (optional) resolves a precision "auto" for the
    settings table it sits in (`model`: the manifest entry of that table's ModelDir, or None; `cache`:
    the store's cache directory, where split models are unpacked) instead
    of the machine's one bf16-or-fp32 decision: the sentence embedder's ladder, which has an int8 rung."""

    def __init__(self, kind: str, decide: Callable[[dict, str, dict | None, Path | None], str] | None = None):
        self.kind = kind
        self.decide = decide

    def __repr__(self) -> str:
        return f"Resolved({self.kind!r})"


Device = Annotated[str, Resolved("device")]
Precision = Annotated[Literal["auto", "fp32", "bf16"], Resolved("precision")]


class Params(BaseModel):
    """Base of every parameter model: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True, use_attribute_docstrings=True, frozen=True,
                              protected_namespaces=())


class SignatureParams(Params):
    """Base of the models made from a function's signature: their field docs come from its docstring,
    so pydantic need not look for attribute docstrings in source it does not have (that search,
    inspect.getmodule over every loaded module, took most of `csk`'s start-up)."""

    model_config = ConfigDict(use_attribute_docstrings=False)


# ------------------------------------------------------------------ from a signature
def field_definitions(fn: Callable, exclude: tuple[str, ...] = ("ctx",)) -> dict[str, tuple[Any, FieldInfo]]:
    """name -> (annotation, Field(default, description)) of `fn`'s keyword-only parameters."""
    hints = typing.get_type_hints(fn, include_extras=True)
    docs = {p.arg_name: " ".join(p.description.split()) for p in docstring_parser.parse(fn.__doc__ or "").params
            if p.description}
    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY or name in exclude:
            continue
        if name not in hints:
            raise TypeError(f"{fn.__module__}.{fn.__qualname__}: parameter {name!r} needs a type annotation")
        default = ... if p.default is inspect.Parameter.empty else p.default
        out[name] = (hints[name], Field(default, description=docs.get(name)))
    return out


@lru_cache(maxsize=None)
def params_model(fn: Callable) -> type[Params]:
    """The pydantic model of a stage function's parameters."""
    return create_model(f"{fn.__name__}_params", __base__=SignatureParams, **field_definitions(fn))


# ------------------------------------------------------------------ typed inputs
def _input_kind(field: FieldInfo, marker: type = Input) -> str | None:
    found = _marker(field, marker)
    return found.kind if found is not None else None


def _marker(field: FieldInfo, marker: type = Input):
    for meta in field.metadata:
        if isinstance(meta, marker):
            return meta
    return None


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def typed_inputs(model: type[BaseModel], values: dict, prefix: str = "", marker: type = Input
                 ) -> Iterator[tuple[str, str, Any]]:
    """(dotted setting, kind, value) of every InputPath / ModelDir in `values` (with `marker=Resolved`:
    every Device / Precision), nested models included."""
    for name, field in model.model_fields.items():
        value = values.get(name) if isinstance(values, dict) else getattr(values, name, None)
        kind = _input_kind(field, marker)
        if kind is not None:
            yield f"{prefix}{name}", kind, value
            continue
        nested = _nested_model(field.annotation)
        if nested is not None and value is not None:
            sub = value if isinstance(value, dict) else value.model_dump()
            yield from typed_inputs(nested, sub, f"{prefix}{name}.", marker)


def resolve_settings(model: type[BaseModel], values: dict, models: list[dict] | None = None,
                     cache: Path | None = None) -> dict[str, str]:
    """dotted setting -> what it means on this machine, for every Device and Precision setting: the
    device "auto" names, the precision "auto" decides for the Device setting beside it (CPU when
    there is none; a precision whose marker has `decide` asks it, with the manifest entry of the
    ModelDir beside it from `models`, as `csk.store.hash_inputs` lists them). Part of the stage's
    key: a different machine decision gives a different key."""
    from csk import compute
    from csk.precision import decision

    found = list(typed_inputs(model, values, marker=Resolved))
    parent = lambda setting: setting.rpartition(".")[0]  # noqa: E731
    devices = {parent(s): compute.device(str(v)) for s, k, v in found if k == "device"}
    for (s, _k, v), dev in ((f, devices.get(parent(f[0]))) for f in found if f[1] == "device"):
        if dev and dev.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                from csk.errors import ConfigError

                raise ConfigError(f"setting {s} = {v!r}: no CUDA device is visible here; set it to \"auto\" or \"cpu\"")
    out = {}
    for setting, kind, value in found:
        if kind == "device":
            out[setting] = devices[parent(setting)]
        elif value == "auto":
            dev = devices.get(parent(setting), "cpu")
            marker = _resolved_marker(model, setting)
            if marker is not None and marker.decide is not None:
                table = _table(values, parent(setting))
                entry = next((m for m in models or [] if parent(m["param"]) == parent(setting)), None)
                out[setting] = marker.decide(table, dev, entry, cache)
            else:
                out[setting] = decision(dev)["precision"]
        else:
            out[setting] = str(value)
    return dict(sorted(out.items()))


def _resolved_marker(model: type[BaseModel], setting: str) -> Resolved | None:
    """The Resolved marker of a dotted setting."""
    head, _, rest = setting.partition(".")
    field = model.model_fields.get(head)
    if field is None:
        return None
    if not rest:
        return _marker(field, Resolved)
    nested = _nested_model(field.annotation)
    return _resolved_marker(nested, rest) if nested is not None else None


def _table(values: dict, dotted: str) -> dict:
    """The nested settings table at a dotted path ("" : the top)."""
    for part in filter(None, dotted.split(".")):
        values = values.get(part) or {}
    return values


def describe(model: type[BaseModel], values: BaseModel | None, prefix: str = "") -> Iterator[dict]:
    """One row per leaf setting: key, value, default, doc (nested models flattened)."""
    for name, field in model.model_fields.items():
        value = getattr(values, name) if values is not None else None
        nested = _nested_model(field.annotation)
        if nested is not None and _input_kind(field) is None:
            default = field.get_default(call_default_factory=True)
            for row in describe(nested, value, f"{prefix}{name}."):
                if default is not None:
                    row["default"] = getattr(default, row["key"].rsplit(".", 1)[-1], row["default"])
                yield row
            continue
        default = field.get_default(call_default_factory=True)
        yield {"key": f"{prefix}{name}", "value": value, "default": default,
               "doc": " ".join((field.description or "").split())}
