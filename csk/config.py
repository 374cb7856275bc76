"""pipelines.toml: one table per registered pipeline, validated against its composed model.

Each table is checked against the model its pipeline composes from its stages' signatures
(`csk.pipeline.Pipeline.config_model`): an unknown or misspelt key is an error naming the
key, the table and the keys it has; a wrong type names the key and what was expected.
Everything here runs before Prefect starts.

Without a config file (no --config and no ./pipelines.toml: an installed `csk` run from any folder) the
installed defaults hold: pipelines.toml as the package ships it (`csk/pipelines.toml`), whose choices the
stage signatures leave to the user (no NLI model bundled: `candidate_filter.nli = "off"`), less the paths
into the checkout's sample data it names (an installed tool carries none of it). `csk config PIPELINE`
prints them; a run says on its console that it used them.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from typing import Literal

from pydantic import BaseModel, ValidationError

from csk.errors import ConfigError
from csk.params import Params

DEFAULT_CONFIG = "pipelines.toml"
RUNTIME_TABLE = "runtime"


class RuntimeSettings(Params):
    """Where a flow's sharded work runs, and with how many threads (`[runtime]`); never part of an
    artifact's key (the local and the dask runner give the same bytes), except `threads` for the stages
    whose bytes can depend on it."""

    runner: Literal["local", "dask"] = "local"
    """local: every shard in the flow's process; dask: shards on a Dask cluster through prefect-dask"""
    address: str = ""
    """scheduler of an existing Dask cluster (tcp://host:8786); empty: a LocalCluster for the run"""
    workers: int = 2
    """worker processes of the LocalCluster"""
    threads_per_worker: int = 1
    """shards a LocalCluster worker runs at once (each computes with the flow process's torch threads)"""
    threads: int = 0
    """intra-op threads every stage computes with; 0: the CPUs this process may use. The count is in the
    key of the stages whose bytes can depend on it (they train, or run torch): set it (e.g. to the count
    a store was built with) and those stages are reused on a machine with another core count"""
    shard_rows: int = 4096
    """rows or texts per shard, the unit of distributed work (rounded to a stage's own unit)"""
    verify: bool = False
    """check the sha256 of every reused artifact's files (sizes are always checked; sources always
    get the full check)"""


def _parse_value(raw: str) -> Any:
    """A --set value is read as a TOML literal when it is one (3, 0.5, true, [1,2]), else a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_override(data: dict, assignment: str) -> None:
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. cicero.seed=1")
    dotted, raw = assignment.split("=", 1)
    parts = [p for p in dotted.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set {assignment!r}: empty key")
    value = _parse_value(raw.strip())
    # A value naming an existing path relative to the working directory means that path.
    if isinstance(value, str) and value and not Path(value).is_absolute() and Path(value).exists():
        value = str(Path(value).resolve())
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {p!r} is a value, not a table")
    node[parts[-1]] = value


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    from csk.params import _nested_model

    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        nested = _nested_model(field.annotation)
        if nested is None:
            return None
        model = nested
    return model


def _explain(pipeline: str, model: type[BaseModel], err: dict) -> str:
    loc = tuple(err["loc"])
    key = ".".join(str(x) for x in (pipeline, *loc))
    if err["type"] == "extra_forbidden":
        table = ".".join(str(x) for x in (pipeline, *loc[:-1]))
        parent = _model_at(model, loc[:-1])
        known = list(parent.model_fields) if parent is not None else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"  unknown key {loc[-1]!r} in table [{table}]{hint} (its keys: {', '.join(known)})"
    return f"  {key}: {err['msg']} (got {err.get('input')!r})"


INSTALLED = Path(__file__).with_name(DEFAULT_CONFIG)  # shipped as package data; in a checkout, a link to ../pipelines.toml
INSTALLED_DEFAULTS = f"the installed defaults ({INSTALLED.parent.name}/{INSTALLED.name}, sample-data paths unset)"


class Config:
    """The validated configuration: `cfg[name]` / `cfg.name` is a pipeline's settings model. `path`: the
    file read (None: none was, every setting is the installed default); `source` says which, for a reader."""

    def __init__(self, path: Path | None, values: dict[str, BaseModel], runtime: RuntimeSettings | None = None):
        self.path = path
        self.source = str(path) if path is not None else INSTALLED_DEFAULTS
        self._values = values
        self.runtime = runtime or RuntimeSettings()

    def __getitem__(self, name: str) -> BaseModel:
        return self._values[name]

    def __getattr__(self, name: str) -> BaseModel:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __contains__(self, name: str) -> bool:
        return name in self._values


def _invalid(cfg_path: Path | str, problems: list[str], overrides) -> str:
    """The message of an invalid configuration, each problem that an override caused named by its
    `--set` (the user typed it on the command line, not in the file)."""
    def origin(line: str) -> str | None:
        import re

        named = re.search(r"'([^']+)' in table \[([^\]]+)\]", line)
        for assignment in overrides:
            key = assignment.split("=", 1)[0].strip()
            table, _, last = key.rpartition(".")
            if f"{key}:" in line or (f"'{last}'" in line and f"[{table}]" in line):
                return assignment
            # a misspelt table on the way to the key: cicero.sourcess.dream -> 'sourcess' in table [cicero]
            if named and (key + ".").startswith(f"{named.group(2)}.{named.group(1)}."):
                return assignment
        return None

    lines = [f"{p}  (from --set {o})" if (o := origin(p)) else p for p in problems]
    if all(origin(p) for p in problems):
        return "invalid --set value\n" + "\n".join(lines)
    return f"{cfg_path}: invalid configuration\n" + "\n".join(lines)


def installed_defaults(pipelines: dict) -> dict:
    """The shipped pipelines.toml's tables, each relative input path resolved beside it, or left unset where
    nothing is there (the checkout's data/sample/, which an installed package does not carry). Not shipped
    (a build that left it out): every setting at its signature's default."""
    from csk.params import typed_inputs, unused

    if not INSTALLED.is_file():
        return {}
    data = tomllib.loads(INSTALLED.read_text(encoding="utf-8"))
    for name, pipeline in pipelines.items():
        table = data.get(name)
        if not isinstance(table, dict):
            continue
        for setting, kind, value in list(typed_inputs(pipeline.config_model, table)):
            if kind == "model" or not isinstance(value, str) or unused(value) or Path(value).is_absolute():
                continue
            *parents, last = setting.split(".")
            node = table
            for part in parents:
                node = node[part]
            here = INSTALLED.parent / value  # not resolved: the link's folder, as an installed copy has it
            if here.exists():
                node[last] = str(here)
            else:
                del node[last]
    return data


def uses_defaults(path: str | Path | None) -> bool:
    """No config file to read: none named, or the default name where the working directory has none (an
    installed tool run outside the checkout). A file named otherwise must exist."""
    return not path or (str(path) == DEFAULT_CONFIG and not Path(DEFAULT_CONFIG).exists())


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
                pipelines: list[str] | tuple[str, ...] | None = None) -> Config:
    """Read and validate pipelines.toml (default: ./pipelines.toml; where there is none, the installed
    defaults: `uses_defaults`) with --set overrides. `pipelines`: validate these pipelines' tables only,
    importing only their code (a command imports what it runs); every other table must still be named
    after a pipeline."""
    from csk.pipeline import discover, get_pipeline, pipeline_names

    if pipelines is None:
        pipelines = discover()
        names = list(pipelines)
    else:
        pipelines = {name: get_pipeline(name) for name in pipelines}
        names = pipeline_names()
    defaults = uses_defaults(path)
    cfg_path = Path(path or DEFAULT_CONFIG)
    if defaults:
        data = installed_defaults(pipelines)
    elif not cfg_path.exists():
        raise ConfigError(f"{cfg_path}: config file not found (pass --config FILE, or none for the installed "
                          "defaults: `csk config PIPELINE` prints them)")
    else:
        try:
            data = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{cfg_path}: invalid TOML: {exc}") from exc
    base_dir = Path.cwd() if defaults else cfg_path.resolve().parent  # where a relative path in it points
    for assignment in overrides:
        apply_override(data, assignment)
    runtime_table = data.pop(RUNTIME_TABLE, {})
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{cfg_path}: unknown pipeline table(s) {unknown}; registered pipelines: "
                          f"{', '.join(names)} (and [{RUNTIME_TABLE}])")
    values, problems = {}, []
    runtime = None
    try:
        runtime = RuntimeSettings.model_validate(runtime_table if isinstance(runtime_table, dict) else {})
    except ValidationError as exc:
        problems += [_explain(RUNTIME_TABLE, RuntimeSettings, e) for e in exc.errors()]
    for name, pipeline in pipelines.items():
        table = data.get(name, {})
        if not isinstance(table, dict):
            problems.append(f"  {name}: expected a table, got {table!r}")
            continue
        model = pipeline.config_model
        try:
            values[name] = model.model_validate(table, context={"base_dir": base_dir})
        except ValidationError as exc:
            problems += [_explain(name, model, e) for e in exc.errors()]
    if problems:
        raise ConfigError(_invalid(INSTALLED_DEFAULTS if defaults else cfg_path, problems, overrides))
    from csk import compute

    compute.set_threads(runtime.threads)  # a process-wide setting: what every stage computes with (and keys on)
    return Config(None if defaults else cfg_path.resolve(), values, runtime)
