"""Pipelines: what a dataset declares, and the registry that finds them.

A dataset is a vertical slice: `flows/<name>.py` declares one `PIPELINE = Pipeline(...)`
(its stages, its settings shared by several stages, its flows and extra commands);
`tasks/<name>/` holds the stage functions, `data_contracts/<name>.py` the contracts and
`pipelines.toml` its table. The runtime (this package) finds pipelines only through the
registry below and knows nothing about any of them.

The pipeline's configuration model is composed, never written: one table per stage holding
the stage function's own parameters (see `csk.params`), plus the pipeline's shared
settings (`seed`, `schedule`, `embed`, ...), which are handed to every stage that takes a
parameter of that name.
"""

from __future__ import annotations

import importlib
import inspect
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from pydantic import ConfigDict, Field, create_model

from csk.errors import ConfigError, CskError
from csk.params import Params, SignatureParams, params_model


class PipelineSettings(Params):
    """Settings every pipeline has."""

    seed: int = 0
    """seed of every random choice (per-key generators derive from it)"""
    schedule: str | None = None
    """cron of `csk schedule PIPELINE`; none: not scheduled"""


@dataclass(frozen=True)
class Stage:
    """A construction step, declared once, by its function: `Stage(dedup, contract=cicero.Deduplicated,
    unit="dialogues")`. Everything else is read from the function: its name (the artifact's, the
    paper's word for the step), its upstream inputs (its parameters before `*`, bound by name in the
    flow body; one with a default of None is optional) and its settings (its keyword-only parameters).
    The declaration is checked when it is made: the contract resolves, the unit is named, the
    parameters form a settings model; a broken one fails `csk config` and the tests, not a run.

    fn: `fn(<inputs>, *, <settings>) -> StageOutput`.
    contract: the pandera model its data satisfies (`data_contracts/<dataset>.py`), or the qualified
        name of one registered with `data_contracts.register`.
    unit: what its rows are (dialogues, targets, instances ...), for run summaries.
    name: the artifact's name when it is not the function's (e.g. two stages of one function).
    parent_column: column holding the id of the primary input's row each output row came from
        (None: a source or a summary table).
    parent_inputs: how many leading inputs hold parents (1: the primary input only; a stage that
        gathers rows of several like inputs, e.g. perturbations of several MCQ tasks, names more).
    table: the pipelines.toml table of its settings (default: its name).
    enabled: None: always runs; True/False: the table gets an `enabled` switch with this default.
    """

    fn: Callable[..., Any]
    contract: Any
    unit: str = "rows"
    name: str = ""
    parent_column: str | None = "id"
    parent_inputs: int = 1
    version: str = "1"  # bump when the output's meaning changes without a code change
    conserves_rows: bool = True  # rows in == out + rejected (False for 1 -> many stages)
    table: str | None = None
    enabled: bool | None = None

    def __post_init__(self):
        if not callable(self.fn):
            raise ConfigError(f"Stage({self.fn!r}, ...): the first argument is the stage function "
                              "(its name is the stage's: write Stage(fn, contract=..., unit=...))")
        name = self.name or self.fn.__name__
        object.__setattr__(self, "name", name)
        where = f"stage {name!r} ({self.fn.__module__}.{self.fn.__qualname__})"
        contract = self.contract
        if isinstance(contract, str):
            from data_contracts import get_contract

            try:
                contract = get_contract(contract)
            except CskError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            object.__setattr__(self, "contract", contract)
        import pandera.pandas as pa

        if not (isinstance(contract, type) and issubclass(contract, pa.DataFrameModel)):
            raise ConfigError(f"{where}: contract must be a pandera DataFrameModel from data_contracts, got {contract!r}")
        if not isinstance(self.unit, str) or not self.unit.strip():
            raise ConfigError(f"{where}: unit must name what its rows are (dialogues, instances ...), got {self.unit!r}")
        try:
            params_model(self.fn)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: its parameters do not form a settings model: {exc}") from None
        kinds = {p.kind for p in inspect.signature(self.fn).parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in kinds or inspect.Parameter.VAR_KEYWORD in kinds:
            raise ConfigError(f"{where}: inputs are bound by name; use one named parameter per input, not *args/**kwargs")
        if not 0 <= self.parent_inputs <= max(1, len(self.inputs)):
            raise ConfigError(f"{where}: parent_inputs={self.parent_inputs} but it has {len(self.inputs)} inputs")

    @property
    def inputs(self) -> tuple[tuple[str, bool], ...]:
        """(name, required) of each upstream input, in the function's order."""
        return tuple((n, p.default is inspect.Parameter.empty)
                     for n, p in inspect.signature(self.fn).parameters.items()
                     if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))

    @property
    def contract_name(self) -> str:
        """The qualified name `csk validate --contract` and `data_contracts.get_contract` take."""
        from data_contracts import contract_name

        return contract_name(self.contract)

    @property
    def params_model(self) -> type[Params]:
        return params_model(self.fn)

    @property
    def config_table(self) -> str:
        return self.table or self.name

    @property
    def trains(self) -> bool:
        """Does its function train a model (`csk.compute.trains`)? It then runs with a fixed thread count."""
        return bool(getattr(self.fn, "trains", False))

    @property
    def threads_matter(self) -> str | None:
        """Why the thread count is in its key (it trains, or its code can run a threaded float kernel:
        `csk.compute.THREADED`), or None: its bytes do not depend on the count."""
        from csk.codehash import stage_third_party
        from csk.compute import THREADED

        if self.trains:
            return "it trains a model (gradients summed in an order the thread count decides)"
        hit = sorted(set(stage_third_party(*self._roots(), threaded=True)) & set(THREADED))
        return f"its code can run {', '.join(hit)} (float reductions per thread)" if hit else None

    @property
    def thread_count_free(self) -> str:
        """Why its bytes are the same on any thread count (when `threads_matter` is None)."""
        from csk.codehash import thread_count_free_reasons
        from csk.compute import THREADED

        module = self.fn.__module__
        reasons = thread_count_free_reasons(tuple(m for m in (module, self.contract.__module__) if m), THREADED)
        return ("its threaded kernels are free of the count (" + "; ".join(reasons) + ")" if reasons else
                "no threaded float kernel in its code: the same bytes on any thread count")

    def _roots(self) -> tuple[Callable, str]:
        return self.fn, self.contract.__module__

    def code_hash(self) -> str:
        from csk.codehash import stage_code_hash

        return stage_code_hash(*self._roots())

    def packages(self) -> dict[str, str]:
        from csk.codehash import stage_packages

        return stage_packages(*self._roots())


Steps = Callable[..., None]  # steps(run: PipelineRun, **options): the flow body


@dataclass(frozen=True)
class Pipeline:
    """A dataset's pipeline: stages, shared settings, flows (the first is `csk run`'s) and commands."""

    name: str
    stages: tuple[Stage, ...]
    flows: tuple[Steps, ...]
    settings: type[PipelineSettings] = PipelineSettings
    commands: tuple[Callable, ...] = ()  # extra `csk` commands (typer functions)
    doc: str = ""
    release: Any = None  # csk.release.Release: what `csk card` / `csk export` publish
    # `csk run NAME --release FILE`: the settings that rebuild a release from the release alone, each
    # `--set` with "{release}" for the file (the user's own --set come after and win)
    release_alone: tuple[str, ...] = ()
    # the paper's human steps as Label Studio projects (csk.label_studio.LabelingStep): `csk label`
    labeling: tuple[Any, ...] = ()

    def __post_init__(self):
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ConfigError(f"pipeline {self.name!r}: stage names repeat: {names}")
        steps = [step.name for step in self.labeling]
        if len(set(steps)) != len(steps):
            raise ConfigError(f"pipeline {self.name!r}: labeling step names repeat: {steps}")
        for step in self.labeling:  # each names a declared stage and an import stage's real setting
            self.stage(step.stage)
            fn, setting = step.imports
            fields = self.stage(fn).params_model.model_fields
            for name in (setting, *getattr(step, "replaces", ())):
                if name not in fields:
                    raise ConfigError(f"pipeline {self.name!r}: labeling step {step.name!r} names {fn.__name__}."
                                      f"{name}, which is not one of its settings")
        try:
            self.config_model  # noqa: B018  (built for its check: every table composes, a setting in two stages agrees)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def units(self) -> dict[str, str]:
        return {s.name: s.unit for s in self.stages}

    def stage(self, which: "str | Stage | Callable") -> Stage:
        """The declared stage: by its function (how flow bodies name it), its declaration, or its name
        (the command line's and the store's)."""
        if isinstance(which, Stage):
            found = [s for s in self.stages if s is which or s == which]
        elif callable(which):
            found = [s for s in self.stages if s.fn is which]
            if len(found) > 1:
                raise CskError(f"pipeline {self.name!r} declares {which.__name__} as {len(found)} stages "
                               f"({', '.join(s.name for s in found)}): pass the Stage declaration itself")
        elif isinstance(which, str):
            found = [s for s in self.stages if s.name == which]
        else:
            raise CskError(f"pipeline {self.name!r}: a stage is named by its function, its Stage or its name, "
                           f"not a {type(which).__name__}")
        if not found:
            label = getattr(which, "name", None) or getattr(which, "__name__", which)
            raise CskError(f"pipeline {self.name!r} has no stage {label!r}; its stages: "
                           f"{', '.join(s.name for s in self.stages)}")
        return found[0]

    def labeling_step(self, name: str):
        for step in self.labeling:
            if step.name == name:
                return step
        raise CskError(f"pipeline {self.name!r} has no labeling step {name!r}; its steps: "
                       f"{', '.join(s.name for s in self.labeling) or 'none'}")

    @property
    def main(self) -> Steps:
        return self.flows[0]

    def flow_named(self, name: str) -> Steps:
        for f in self.flows:
            if f.__name__.replace("_", "-") == name.replace("_", "-"):
                return f
        raise CskError(f"pipeline {self.name!r} has no flow {name!r}")

    @cached_property
    def config_model(self) -> type[Params]:
        """Shared settings + one table per stage (its own parameters; `enabled` where switchable)."""
        shared = set(self.settings.model_fields)
        tables: dict[str, dict[str, tuple]] = {}
        for stage in self.stages:
            from csk.params import field_definitions

            defs = {k: v for k, v in field_definitions(stage.fn).items() if k not in shared}
            if stage.enabled is not None:
                defs["enabled"] = (bool, Field(stage.enabled, description=f"run the {stage.name} stage"))
            table = tables.setdefault(stage.config_table, {})
            for k, (ann, info) in defs.items():
                if k in table and table[k][1].default != info.default:
                    raise ValueError(f"pipeline {self.name!r}: table [{stage.config_table}] gets {k!r} from two "
                                     f"stages with different defaults ({table[k][1].default!r}, {info.default!r})")
                table.setdefault(k, (ann, info))
        fields = {}
        for tname, defs in tables.items():
            if not defs:
                continue
            if tname in shared:
                raise ValueError(f"pipeline {self.name!r}: table {tname!r} is also a shared setting")
            model = create_model(f"{self.name}.{tname}", __base__=SignatureParams, **defs)
            fields[tname] = (model, Field(default_factory=model))
        # the settings' own fields keep their docs; the generated model has no source to look them up in
        base = type(f"{self.settings.__name__}Generated", (self.settings,),
                    {"model_config": ConfigDict(use_attribute_docstrings=False), "__module__": self.settings.__module__})
        return create_model(f"{self.name}", __base__=base, **fields)

    def stage_params(self, stage: Stage, cfg: Params, overrides: dict | None = None) -> dict:
        """The values a stage runs with: its table, the shared settings it takes, then `overrides`."""
        wanted = stage.params_model.model_fields
        values: dict[str, Any] = {k: getattr(cfg, k) for k in self.settings.model_fields if k in wanted}
        table = getattr(cfg, stage.config_table, None)
        if table is not None:
            values.update({k: getattr(table, k) for k in type(table).model_fields if k in wanted})
        values.update(overrides or {})
        unknown = set(values) - set(wanted)
        if unknown:
            raise CskError(f"stage {stage.name!r} has no parameter {sorted(unknown)}")
        return values

    def enabled(self, stage: "str | Stage | Callable", cfg: Params) -> bool:
        s = self.stage(stage)
        if s.enabled is None:
            return True
        return bool(getattr(cfg, s.config_table).enabled)


# ------------------------------------------------------------------ registry
_REGISTRY: dict[str, Pipeline] = {}
_DISCOVERED = False


def register(pipeline: Pipeline) -> Pipeline:
    """Add a pipeline (a dataset module's PIPELINE is found by `discover`; tests may register their own)."""
    known = _REGISTRY.get(pipeline.name)
    if known is not None and known is not pipeline:
        raise ValueError(f"two pipelines are named {pipeline.name!r}")
    _REGISTRY[pipeline.name] = pipeline
    return pipeline


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def discover() -> dict[str, Pipeline]:
    """Register the `PIPELINE` of every module named in the `csk.pipelines` entry points (pyproject.toml)
    and in $CSK_PIPELINES (comma-separated module names). The kernel imports no dataset code by name."""
    global _DISCOVERED
    if not _DISCOVERED:
        from importlib.metadata import entry_points

        names = [ep.value.split(":")[0] for ep in entry_points(group="csk.pipelines")]
        if not names:
            raise CskError("no pipeline is installed: the `csk.pipelines` entry points of pyproject.toml are "
                           "missing; run `make install` (pip install -e .) again")
        names += [n.strip() for n in os.environ.get("CSK_PIPELINES", "").split(",") if n.strip()]
        for name in dict.fromkeys(names):
            module = importlib.import_module(name)
            pipeline = getattr(module, "PIPELINE", None)
            if isinstance(pipeline, Pipeline):
                register(pipeline)
        _DISCOVERED = True
    return dict(sorted(_REGISTRY.items()))


def pipeline_names() -> list[str]:
    """The registered pipelines' names, sorted, without importing them where the entry points name them all."""
    if _DISCOVERED or os.environ.get("CSK_PIPELINES", "").strip():
        return list(discover())
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="csk.pipelines")} | set(_REGISTRY))


def _entry_module(name: str) -> str | None:
    """The module the `csk.pipelines` entry point called `name` names (None: no such entry point)."""
    from importlib.metadata import entry_points

    return next((ep.value.split(":")[0] for ep in entry_points(group="csk.pipelines") if ep.name == name), None)


def get_pipeline(name: str) -> Pipeline:
    """The pipeline called `name`: only its own module is imported when an entry point of that name
    declares it (a command imports what it runs); otherwise every pipeline is discovered."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if not _DISCOVERED and not os.environ.get("CSK_PIPELINES", "").strip():
        module = _entry_module(name)
        pipeline = getattr(importlib.import_module(module), "PIPELINE", None) if module else None
        if isinstance(pipeline, Pipeline) and pipeline.name == name:
            return register(pipeline)
    known = discover()
    if name not in known:
        raise ConfigError(f"unknown pipeline {name!r}; choose one of: {', '.join(known) or '(none registered)'}")
    return known[name]
