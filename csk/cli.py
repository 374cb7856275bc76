"""`csk`: run pipelines, see what a run would do, list artifacts, trace lineage, validate Parquet,
serve schedules. Pipelines are found through the registry (`csk.pipeline.discover`); each one's
own commands are under `csk PIPELINE ...` (e.g. `csk cicero rebuild-distractors`)."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from csk.errors import CskError

# Offline by construction: models come from installed packages or local directories only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")  # Prefect's client-side usage notice and events: no telemetry
# One Prefect home for `make run` and `csk` alike: ./.prefect where the command runs (the Makefile's
# default), so every run lands in one database and one UI; PREFECT_HOME still overrides.
os.environ.setdefault("PREFECT_HOME", str(Path.cwd() / ".prefect"))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from csk.label_cli import label_app  # noqa: E402

class _CommandsOnDemand(typer.core.TyperGroup):
    """The built-in commands, and each pipeline's (`csk PIPELINE COMMAND`, `csk COMMAND`) and each plugin's
    added when named: `csk run deco` imports deco's stages only, `csk status` none of the others. A name
    that is not a pipeline's, and the command list (`csk --help`), add them all."""

    def get_command(self, ctx, cmd_name):
        found = super().get_command(ctx, cmd_name)
        if found is None and not _ALL_ADDED:
            from csk.pipeline import _REGISTRY, _entry_module

            if cmd_name in _REGISTRY or _entry_module(cmd_name) is not None:
                self._add(_pipeline_group(cmd_name))
            else:
                self._add_all()
            found = super().get_command(ctx, cmd_name)
        return found

    def list_commands(self, ctx):
        """The command list (`csk --help`, completion): read from the pipelines' and plugins' sources where
        they declare their commands plainly (`_declared_commands`), else every pipeline imported."""
        if not _ALL_ADDED:
            listed = _declared_commands([c.name for c in app.registered_commands])
            if listed is not None:
                label = self.commands.pop("label", None)
                self.commands.update({c.name: c for c in listed if c.name not in self.commands})
                if label is not None:
                    self.commands["label"] = label
                return super().list_commands(ctx)
        self._add_all()
        return super().list_commands(ctx)

    def _add(self, group) -> None:
        if group is not None:
            self.commands[group.name] = group

    def _add_all(self) -> None:
        """Every command in the order `csk --help` lists them: built-ins, aliases, plugins, pipelines, label."""
        if not _ALL_ADDED:
            _add_pipeline_commands()
            _add_plugin_commands()
        whole = typer.main.get_group(app)
        self.commands = dict(whole.commands)


_ALL_ADDED = False

app = typer.Typer(help="Commonsense-dialogue dataset construction pipelines.", no_args_is_help=True,
                  pretty_exceptions_enable=False, cls=_CommandsOnDemand)


def _console(stderr: bool = False) -> Console:
    """A terminal gets rich's layout at its width; a pipe or a log gets whole lines (an artifact path
    is one line to copy or grep, never wrapped at 80 columns)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, soft_wrap=True, width=100_000)


console = _console()
err = _console(stderr=True)

CONFIG = typer.Option(Path("pipelines.toml"), "--config", help="pipelines.toml to read; where the working "
                      "directory has none and no --config is given: the installed defaults (`csk config PIPELINE`)")
STORE = typer.Option(Path("artifacts"), "--store", help="artifact store directory")
SET = typer.Option([], "--set", help="override a setting, e.g. cicero.seed=1 (repeatable)")
UNTIL = typer.Option(None, "--until", help="run only this stage and the stages it needs")
RUN = typer.Option(None, "--run", help="which run to read: an id (or its prefix), latest, -1, -2 ... (any "
                   "recorded run, rebuilds and partial runs included; `csk runs PIPELINE` lists them); default: "
                   "the latest full run of `csk run PIPELINE`")
ONLY = typer.Option([], "--only", help="run only this stage (repeatable), on its inputs' artifacts in the store")
# A release is what the user last built: a rebuild (`csk cicero rebuild-distractors`) as well as `csk run`
RELEASE_RUN = typer.Option(None, "--run", help="which run to publish: an id (or its prefix), latest, -1, -2 ... "
                           "(`csk runs PIPELINE` lists them); default: the latest finished run of any of the "
                           "pipeline's flows (`csk run PIPELINE` or a rebuild such as `csk cicero "
                           "rebuild-distractors`), partial runs (--until, --only) aside")


def _quiet_user_errors() -> None:
    """Errors about the user's input (CskError) are reported in one line at the end; keep Prefect's
    task and flow loggers from printing their tracebacks too. Real bugs keep their tracebacks."""
    make_record = logging.getLogRecordFactory()
    if getattr(make_record, "csk_quiet", False):
        return

    def factory(*args, **kwargs):
        record = make_record(*args, **kwargs)
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, CskError) and (exc.__cause__ is None or isinstance(exc.__cause__, CskError)):
            record.exc_info = None  # a user error: its one line says it all (a bug's traceback is kept)
        return record

    factory.csk_quiet = True
    logging.setLogRecordFactory(factory)


class _ReportedOnce(logging.Filter):
    """On the console, a user error (a CskError) is printed once, by `_fail`, at the end: Prefect's own
    copies ("Encountered exception during execution: SourceError(...)", "Finished in state Failed(...
    SourceError: ...)") are kept from the console. Prefect's UI and API logs keep them."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, CskError):
            return False
        names = "|".join(sorted(_error_names()))
        return not re.search(rf"\b(?:{names})\b[(:]", record.getMessage())


@functools.lru_cache(maxsize=1)
def _error_names() -> frozenset[str]:
    seen, todo = set(), [CskError]
    while todo:
        cls = todo.pop()
        seen.add(cls.__name__)
        todo += cls.__subclasses__()
    return frozenset(seen)


class _OneLinePerStage(logging.Filter):
    """Without -v, the console shows one line per stage (csk's own): Prefect's "Finished in state
    Completed()" after every task is left to the UI and `-v`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("prefect") and record.getMessage().startswith("Finished in state Completed"))


def _verbose() -> bool:
    return os.environ.get("CSK_VERBOSE", "") not in ("", "0")


def _quiet_prefect_console() -> None:
    """Attach `_ReportedOnce` (and, without -v, `_OneLinePerStage`) to the console handlers (the root's and
    Prefect's; not Prefect's API handlers, which feed the UI); without -v, no weight-loading bars."""
    quiet = not _verbose()
    if quiet:  # "Loading weights ..." bars, one per model load: transformers reads this when imported
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
    for name in ["", *[n for n in logging.Logger.manager.loggerDict if n.startswith("prefect")]]:
        logger = logging.getLogger(name)
        for handler in getattr(logger, "handlers", []):
            if "API" in type(handler).__name__:
                continue
            if not any(isinstance(f, _ReportedOnce) for f in handler.filters):
                handler.addFilter(_ReportedOnce())
            if quiet and not any(isinstance(f, _OneLinePerStage) for f in handler.filters):
                handler.addFilter(_OneLinePerStage())


def _release_alone(pipeline: str, release: Path) -> list[str]:
    """The --set a release-alone run takes (the pipeline's `release_alone`), said on the console."""
    from csk.pipeline import get_pipeline

    try:
        p = get_pipeline(pipeline)
    except CskError as exc:
        _fail(exc)
    if not p.release_alone:
        # the pipeline's own commands that take a --release say what else can start from a release
        import inspect

        others = [f"; `csk {pipeline} {getattr(c, 'command_name', c.__name__.replace('_', '-'))} --release FILE`: "
                  f"{(c.__doc__ or '').strip().splitlines()[0].rstrip('.').lower()}"
                  for c in p.commands if "release" in inspect.signature(c).parameters]
        _fail(CskError(f"`csk run {pipeline}` has no --release: set the release file in its sources "
                       f"(`csk config {pipeline}`)" + "".join(others)))
    if not release.exists():  # a file, or a directory where the pipeline reads a whole release (corequisite)
        _fail(CskError(f"{release}: not found"))
    sets = [t.replace("{release}", str(release.resolve())) for t in p.release_alone]
    console.print(f"{pipeline} from the release alone ({release.name}); settings: " +
                  " ".join(f"--set {x}" for x in sets), highlight=False, soft_wrap=True)
    return sets


@app.callback()
def _options(verbose: bool = typer.Option(False, "--verbose", "-v", help="every log line (Prefect's state changes, "
                                           "model-loading bars); default: one line per stage")) -> None:
    """Commonsense-dialogue dataset construction pipelines."""
    if verbose:
        os.environ["CSK_VERBOSE"] = "1"


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(1)


def _logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("csk").setLevel(logging.INFO)
    _quiet_user_errors()


def prepare(pipeline: str, config: Path, overrides: list[str]):
    """Everything checkable before Prefect starts: the pipeline, every config key and type, and that
    every configured input file and model exists. Returns (pipeline, its validated settings)."""
    from csk.config import load_config
    from csk.orchestration import preflight
    from csk.pipeline import get_pipeline

    p = get_pipeline(pipeline)
    loaded = load_config(config, overrides, pipelines=[p.name])
    cfg = loaded[p.name]
    if loaded.path is None:  # which settings a run used is never a guess: said before anything runs
        err.print(f"no {config} in {Path.cwd()}: {pipeline} runs with {loaded.source}; `csk config {pipeline}` "
                  f"prints them, --set changes one, --config FILE reads a file", highlight=False, soft_wrap=True)
    preflight(p, cfg, loaded.path.parent if loaded.path is not None else None)
    return p, cfg


def run_flow(pipeline: str, steps, config: Path, store: Path, overrides: list[str],
             options: dict[str, Any] | None = None, until: str | None = None, only: list[str] | None = None) -> None:
    """Check, then run one of a pipeline's flows in Prefect and print its stages."""
    _logging()
    try:
        p, cfg = prepare(pipeline, config, overrides)
        from csk.orchestration import prefect_flow, selection

        selection(p, cfg, store, steps, until, only or ())  # a misnamed stage is an error before Prefect starts
        if steps is p.main and not (until or only or options):
            from csk.config import load_config
            from csk.orchestration import reuse_everything

            done = reuse_everything(p, cfg, store, verify=load_config(config, overrides, pipelines=[p.name]).runtime.verify)
            if done is not None:  # every stage's artifact is there: recorded without starting Prefect
                _print_stages(p, done)
                console.print("every stage reused: nothing to compute, so Prefect was not started",
                              highlight=False, soft_wrap=True)
                return
        _quiet_prefect_console()
        from csk.interrupt import interruptible, temporary_server

        flow = prefect_flow(p, steps)
        with temporary_server() as server, interruptible(f"csk run {pipeline}", server):
            stages = flow(config=str(config), store=str(store), overrides=list(overrides),
                          options=options or {}, until=until, only=list(only or []))
    except CskError as exc:
        _fail(exc)
    _print_stages(p, stages, partial=bool(until or only) or steps is not p.main,
                  release=not (until or only) and getattr(p, "release", None) is not None)


@app.command()
def run(pipeline: str, config: Path = CONFIG, store: Path = STORE, set_: list[str] = SET,
        strict: Optional[bool] = typer.Option(None, "--strict/--lenient", help="strict: stop at the first malformed "
                                              "source record, naming file and record; lenient (the default): "
                                              "reject it with its reason and go on"),
        runner: Optional[str] = typer.Option(None, "--runner", help="local: shards in this process; dask: on a Dask "
                                             "cluster (a LocalCluster, or --address); default: [runtime] runner"),
        address: Optional[str] = typer.Option(None, "--address", help="scheduler of an existing Dask cluster, "
                                              "e.g. tcp://10.0.0.5:8786"),
        verify: bool = typer.Option(False, "--verify", help="check the sha256 of every reused artifact's files "
                                    "(sizes are always checked)"),
        release: Optional[Path] = typer.Option(None, "--release", help="rebuild this released file (corequisite: "
                                               "or a directory of its files) from the release alone (the bundled "
                                               "corpora, answers and labels left out; the settings it takes are printed)"),
        until: Optional[str] = UNTIL, only: list[str] = ONLY) -> None:
    """Run a pipeline's Prefect flow end to end (finished stages are reused), or part of it."""
    if release is not None:
        set_ = [*_release_alone(pipeline, release), *set_]
    if strict is not None:
        set_ = [*set_, f"{pipeline}.sources.lenient={'false' if strict else 'true'}"]
    if runner is not None:
        set_ = [*set_, f"runtime.runner={runner}"]
    if address is not None:
        set_ = [*set_, f'runtime.address="{address}"', "runtime.runner=dask"]
    if verify:
        set_ = [*set_, "runtime.verify=true"]
    try:
        from csk.pipeline import get_pipeline

        steps = get_pipeline(pipeline).main
    except CskError as exc:
        _fail(exc)
    run_flow(pipeline, steps, config, store, set_, until=until, only=only)


@app.command()
def status(pipeline: str, config: Path = CONFIG, store: Path = STORE, set_: list[str] = SET,
           as_json: bool = typer.Option(False, "--json", help="print a JSON list"),
           until: Optional[str] = UNTIL, only: list[str] = ONLY) -> None:
    """Say, without running anything, which stages a run would reuse and which it would recompute, and why."""
    try:
        p, cfg = prepare(pipeline, config, set_)
        from csk.orchestration import status as dry_status

        stages = dry_status(p, cfg, store, until=until, only=only)
    except CskError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(stages, indent=2))
        return
    table = Table(title=f"{pipeline}: what `csk run {pipeline}` would do")
    for col in ("stage", "status", "why"):
        table.add_column(col, overflow="fold")
    for s in stages:
        table.add_row(s["stage"], s["status"], escape(s["why"]))
    console.print(table)


@app.command("config")
def show_config(pipeline: str, config: Path = CONFIG, set_: list[str] = SET,
                as_json: bool = typer.Option(False, "--json", help="print a JSON list")) -> None:
    """Print a pipeline's effective settings: each key's value, its default and what it does."""
    from csk.config import load_config
    from csk.params import describe
    from csk.pipeline import get_pipeline

    try:
        p = get_pipeline(pipeline)
        loaded = load_config(config, set_, pipelines=[p.name])
        cfg = loaded[p.name]
    except CskError as exc:
        _fail(exc)
    rows = list(describe(p.config_model, cfg, f"{p.name}."))
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    # TOML as pipelines.toml writes it, each key with its doc; a value differing from the default says so.
    lines, table = [f"# {pipeline}: effective settings from {loaded.source}"], None
    # a table's keys together: a key declared after a nested table (a setting after `server`) would open
    # its table a second time, which TOML forbids
    heads = list(dict.fromkeys(r["key"].rpartition(".")[0] for r in rows))
    for r in sorted(rows, key=lambda r: heads.index(r["key"].rpartition(".")[0])):
        head, _, key = r["key"].rpartition(".")
        if head != table:
            lines += ["", f"[{head}]"]
            table = head
        note = "" if r["value"] == r["default"] else f"  (default: {_toml(r['default'])})"
        # TOML has no null: an unset key is printed commented out, so the output still parses
        setting = f"# {key} = (unset)" if r["value"] is None else f"{key} = {_toml(r['value'])}"
        lines.append(setting.ljust(40) + f"  # {r['doc']}{note}")
    print("\n".join(lines))


def _toml(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table; keys quoted where TOML needs it
        return "{" + ", ".join(f"{k if str(k).isidentifier() else json.dumps(str(k))} = {_toml(v)}"
                               for k, v in value.items()) + "}"
    return json.dumps(value) if isinstance(value, str) else str(value)


def _known_pipeline(pipeline: str, stage: str | None = None) -> None:
    """A reading command's PIPELINE (and STAGE) must name one; the usual slip, the two swapped
    (`csk show targets cicero`), is named as such."""
    from csk.pipeline import discover

    pipelines = discover()
    if pipeline in pipelines:
        return
    if stage in pipelines and pipeline in {s.name for s in pipelines[stage].stages}:
        raise CskError(f"{pipeline!r} is a stage of {stage!r}, not a pipeline: the pipeline comes first "
                       f"(`... {stage} {pipeline}`)")
    raise CskError(f"no pipeline {pipeline!r}; pipelines: {', '.join(pipelines)}")


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _print_stages(pipeline, stages: list[dict], partial: bool = False, release: bool = False) -> None:
    """The run's stages as a table, what a stage could not do, and which commands read this run (`partial`:
    not a full run of `csk run`; `release`: a whole run of a flow, which `csk card` / `csk export` publish)."""
    units = getattr(pipeline, "units", {})
    name = getattr(pipeline, "name", pipeline)
    table = Table(title=f"{name}: artifacts")
    for col in ("stage", "status", "in", "out", "rejected"):
        table.add_column(col)
    table.add_column("path", overflow="fold")
    for s in stages:
        r = s["rows"]
        unit = f" {units[s['stage']]}" if s["stage"] in units else ""
        try:  # why rows were rejected, at a glance (`csk show PIPELINE STAGE --rejected` has each row's reason)
            reasons = json.loads((Path(s["path"]) / "manifest.json").read_text()).get("rejected_reasons") or {}
        except (OSError, ValueError):
            reasons = {}
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        why = ", ".join(f"{k} {v}" for k, v in top[:2]) + (", ..." if len(top) > 2 else "")
        table.add_row(s["stage"], "reused" if s["reused"] else "computed", str(r["in"]), f"{r['out']}{unit}",
                      f"{r['rejected']}" + (f" ({why})" if why else ""), _short(s["path"]))
    console.print(table)
    for s in stages:  # what a stage could not do (too few rows, no model): said here, not only in its manifest
        if s["rows"]["out"] == 0 and s["rows"]["in"]:  # the flow went on without what needs its rows
            console.print(f"{s['stage']}: kept none of its {s['rows']['in']} rows ({s['rows']['rejected']} rejected: "
                          f"csk show {name} {s['stage']} --rejected); the stages that need them did not run",
                          highlight=False, soft_wrap=True)
        try:
            notes = json.loads((Path(s["path"]) / "manifest.json").read_text()).get("notes") or {}
        except (OSError, ValueError):
            continue
        for key, lead in (("passed_through", ""), ("notice", ""), ("not_measured", "not measured: ")):
            if notes.get(key):
                console.print(f"{s['stage']}: {lead}{notes[key]}", highlight=False, soft_wrap=True)
        for line in notes.get("summary") or []:  # a stage's figures a user wants at the end of the run
            console.print(f"{s['stage']}: {line}", highlight=False, soft_wrap=True)
    if partial and release:  # a whole run of another flow (a rebuild): what a user publishes next
        console.print(f"not a run of `csk run {name}`: listed by `csk runs {name}`; `csk card {name}` and `csk export "
                      f"{name}` publish this run (the latest finished run of any flow); artifacts, show and lineage "
                      f"keep reading the latest `csk run {name}` and read this one with --run -1 (e.g. csk artifacts "
                      f"{name} --run -1)", highlight=False, soft_wrap=True)
    elif partial:
        console.print(f"not a full run of `csk run {name}`: listed by `csk runs {name}`; the reading commands "
                      f"(artifacts, show, lineage, card, export) keep reading the latest full run, and read this one "
                      f"with --run -1 (e.g. csk artifacts {name} --run -1)", highlight=False, soft_wrap=True)
    else:
        console.print(f"artifacts of the latest run: csk artifacts {name}", highlight=False, soft_wrap=True)


@app.command()
def artifacts(pipeline: str, store: Path = STORE, run_: Optional[str] = RUN,
              as_json: bool = typer.Option(False, "--json", help="print a JSON list")) -> None:
    """List a run's stages (default: the latest full run) with artifact path, key and row counts."""
    from csk.runs import chosen_run
    from csk.store import Store

    try:
        _known_pipeline(pipeline)
        run = chosen_run(Store(store), pipeline, run_)
    except CskError as exc:
        _fail(exc)
    stages = [{"stage": s["stage"], "path": s["path"], "key": s["key"], "rows": s["rows"],
               "reused": s["reused"]} for s in run["stages"]]
    if as_json:
        print(json.dumps(stages, indent=2))
        return
    try:
        from csk.pipeline import get_pipeline

        _print_stages(get_pipeline(pipeline), stages)
    except CskError:
        _print_stages(pipeline, stages)


@app.command()
def lineage(pipeline: str, stage: str, row: Optional[str] = typer.Option(None, "--row", help="a row id"),
            store: Path = STORE, run_: Optional[str] = RUN, as_json: bool = typer.Option(False, "--json")) -> None:
    """Trace an artifact (or one row of it) back to its source files and records."""
    from csk.lineage import artifact_chain, latest_ref, row_lineage
    from csk.store import Store

    try:
        _known_pipeline(pipeline, stage)
        st = Store(store)
        ref = latest_ref(st, pipeline, stage, run_)
        result = row_lineage(st, ref, row) if row else artifact_chain(st, ref)
    except CskError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
        return
    say = lambda text: console.print(escape(text), highlight=False, soft_wrap=True)  # noqa: E731
    if row:
        for step in result:
            for line in _row_step_lines(step, pipeline, stage):
                say(line)
    else:
        for e in result:
            r = e["rows"]
            say(f"{'  ' * e['depth']}{e['stage']} {e['key']} (in {r['in']}, out {r['out']}, "
                f"rejected {r['rejected']}) {e['path']}")
            for f in e.get("source_files", []):
                say(f"{'  ' * (e['depth'] + 1)}{f['path']} sha256={f['sha256']}")


def _row_step_lines(step: dict, pipeline: str, stage: str) -> list[str]:
    """What `csk lineage` prints of one step of a row's lineage: the row, then what made it and where it
    was read."""
    pad = " " * 20
    a, o, r, s = (step.get(k) for k in ("annotation", "origin", "record", "source"))
    extra = f"  [rejected: {step.get('reason_code')}: {step['reason']}]" if step.get("rejected") else ""
    lines = [f"{step['stage']:<20} {step['id']}  ({step['key']}){extra}"]
    lines += [f"{pad} evidence: {e['text']}  [{e['file']} {e['locator']}, sha256 {e['sha256']}]"
              for e in step.get("evidence", [])]
    if a:
        lines.append(f"{pad} annotated by {a['annotator']} (Label Studio annotation {a.get('annotation_id')}, task "
                     f"{a.get('ls_task_id')} made from row {a.get('task_id', '?')}; created {a.get('created_at')}, "
                     f"lead time {a.get('lead_time')} s)")
    if o:
        lines.append(f"{pad} made by {o['generator']} ({o['rule']}): {o.get('rationale') or ''}")
        if o.get("source"):
            lines.append(f"{pad} the answer of {o['written_for']}, read from {o['source'].get('file')} "
                         f"{o['source'].get('locator')}")
    lines += [f"{pad} {who}: {', '.join(step[who])}" for who in ("checkers", "validators", "raters", "labellers",
                                                                 "writers") if step.get(who)]
    if r:
        lines.append(f"{pad} read from {r['file']} {r['locator']}")
    if step.get("aggregate"):
        lines.append(f"{pad} a summary row: it has no single source record; `csk lineage {pipeline} {stage}` lists "
                     "the artifacts it summarises")
    if s:
        lines.append(f"{'source':<20} {s['file']} {s['locator']} (sha256 {s['sha256']})")
    return lines


@app.command()
def runs(pipeline: str, store: Path = STORE,
         diff_: Optional[list[str]] = typer.Option(None, "--diff", help="two runs to compare: ids, id prefixes, "
                                                   "`latest` or -1, -2 ... (give --diff twice)"),
         as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List a pipeline's past runs, or diff two: per stage, key, changed parameters and row counts."""
    from csk.runs import diff, find_run, run_records, summary
    from csk.store import Store

    try:
        records = run_records(Store(store), pipeline)
        if diff_:
            if len(diff_) != 2:
                raise CskError("--diff takes two runs: --diff -2 --diff -1")
            a, b = (find_run(records, r) for r in diff_)
            result = diff(a, b)
    except CskError as exc:
        _fail(exc)
    if not diff_:
        listed = [summary(r) for r in records]
        if as_json:
            print(json.dumps(listed, indent=2))
            return
        table = Table(title=f"{pipeline}: runs (oldest first)")
        for col in ("run", "finished", "flow", "covered", "computed", "reused", "rows out of the last stage"):
            table.add_column(col)
        for r in listed:
            last = list(r["rows_out"].items())[-1] if r["rows_out"] else ("", "")
            table.add_row(r["run_id"][:8], r["finished"][:19], r["flow"], r["covered"], str(r["computed"]),
                          str(r["reused"]), f"{last[0]} {last[1]}")
        console.print(table)
        console.print(f"artifacts, show and lineage read the latest full `csk run {pipeline}`; card and export the "
                      f"latest finished run of any flow (a rebuild too); --run ID|-N reads another", highlight=False,
                      soft_wrap=True)
        return
    if as_json:
        print(json.dumps({"a": a["run_id"], "b": b["run_id"], "stages": result}, indent=2, default=str))
        return
    say = lambda text: console.print(escape(text), highlight=False, soft_wrap=True)  # noqa: E731
    say(f"{pipeline}: run {a['run_id'][:8]} ({a['finished'][:19]}) -> {b['run_id'][:8]} ({b['finished'][:19]})")
    for r in result:
        if r["key_a"] is None or r["key_b"] is None:
            say(f"{r['stage']:<22} only in run {'b' if r['key_a'] is None else 'a'}")
            continue
        ra, rb = r["rows_a"], r["rows_b"]
        counts = f"out {ra['out']} -> {rb['out']}, rejected {ra['rejected']} -> {rb['rejected']}"
        state = "same key" if r["same_key"] else f"changed ({', '.join(r['why'])})"
        say(f"{r['stage']:<22} {state}  {counts}")
        for k, (x, y) in r["params"].items():
            say(f"{'':<24}{k}: {x!r} -> {y!r}")
        if r.get("computed_differently"):
            say(f"{'':<24}different bytes, computed differently: {'; '.join(r['computed_differently'])}")


@app.command()
def show(pipeline: str, stage: str, store: Path = STORE, run_: Optional[str] = RUN,
         head: int = typer.Option(10, "--head", help="rows to print"),
         id_: Optional[str] = typer.Option(None, "--id", help="print this row only"),
         rejected: bool = typer.Option(False, "--rejected", help="the stage's rejected rows instead"),
         as_json: bool = typer.Option(False, "--json", help="print JSON Lines")) -> None:
    """Print rows of a run's artifact of a stage (default: the latest full run)."""
    from csk.runs import stage_rows
    from csk.store import Store

    try:
        _known_pipeline(pipeline, stage)
        df = stage_rows(Store(store), pipeline, stage, rejected=rejected, head=head, row_id=id_, run=run_)
    except CskError as exc:
        _fail(exc)
    if as_json:
        for rec in df.to_dict("records"):
            print(json.dumps(rec, ensure_ascii=False, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
        return
    if df.empty:
        console.print(f"{pipeline} {stage}: no {'rejected ' if rejected else ''}rows", highlight=False)
        return
    with pd_options():
        console.print(escape(df.to_string(max_colwidth=60)), highlight=False, soft_wrap=True)


def pd_options():
    import pandas as pd

    return pd.option_context("display.width", 200, "display.max_columns", 20)


@app.command("card")
def card_command(pipeline: str, store: Path = STORE, run_: Optional[str] = RELEASE_RUN,
                 out: Optional[Path] = typer.Option(None, "--out", help="write the card here (default: print it)")) -> None:
    """Write the dataset card (Hugging Face layout) of a run (default: the latest finished run of any of the
    pipeline's flows, a rebuild too), from its manifests."""
    from csk.release import card
    from csk.store import Store

    try:
        text = card(Store(store), pipeline, run_)
    except CskError as exc:
        _fail(exc)
    if out is None:
        print(text)
    else:
        out.write_text(text, encoding="utf-8")
        console.print(f"dataset card written to {out}", highlight=False)


@app.command("export")
def export_command(pipeline: str, to: Path = typer.Option(..., "--to", help="an empty or new directory"),
                   store: Path = STORE, run_: Optional[str] = RELEASE_RUN) -> None:
    """Write a release of a run (default: the latest finished run of any of the pipeline's flows: `csk run`
    or a rebuild such as `csk cicero rebuild-distractors` / `csk distractors rebuild`): Parquet splits (datasets /
    DuckDB read them), the released file formats, the card and SHA256SUMS."""
    from csk.release import export, release_run
    from csk.runs import run_name
    from csk.store import Store

    try:
        ran = release_run(Store(store), pipeline, run_)  # said, so a user sees which of their runs is published
        sums = export(Store(store), pipeline, to, ran["run_id"])
    except CskError as exc:
        _fail(exc)
    console.print(f"{len(sums)} files of {run_name(ran)} written to {to} (checksums in {to / 'SHA256SUMS'})",
                  highlight=False, soft_wrap=True)


@app.command()
def validate(parquet: Path, contract: str = typer.Option(..., "--contract",
                                                         help="qualified contract name, e.g. cicero.Dialogues")) -> None:
    """Check any Parquet file against a data contract."""
    from csk.errors import InputError
    from csk.artifacts import read_parquet
    from csk.contracts import validate_contract
    from data_contracts import get_contract

    try:
        get_contract(contract)
        if not parquet.exists():
            raise InputError(str(parquet), None, "file not found")
        df = read_parquet(parquet)
        validate_contract(str(parquet), contract, df)
    except CskError as exc:
        _fail(exc)
    console.print(f"{parquet}: {len(df)} rows satisfy {contract}", highlight=False, soft_wrap=True)


@app.command()
def verify(pipeline: Optional[str] = typer.Argument(None, help="the pipeline; none: every pipeline in the store"),
           store: Path = STORE,
           repair: bool = typer.Option(False, "--repair", help="move damaged artifacts to <store>/_quarantine so "
                                       "the next run recomputes them"),
           lineage: bool = typer.Option(True, "--lineage/--no-lineage", help="check every row's parent ids "
                                        "(reads the id columns)"),
           against: Optional[Path] = typer.Option(None, "--against", help="another store (e.g. built on another "
                                                  "machine): every key both hold must have the same bytes; a "
                                                  "difference is named with its machines and precisions")) -> None:
    """Check a store: every file's sha256 against its manifest, rows in = out + rejected, every input
    and lineage parent present, every run record's artifacts present. Exits 1 naming each damaged file."""
    from csk.store import Store
    from csk.verify import compare_stores, repair as repair_store, verify_store

    if not store.is_dir():
        _fail(CskError(f"{store}: no such store"))
    if against is not None:
        if not against.is_dir():
            _fail(CskError(f"{against}: no such store"))
        shared, differences, damaged = compare_stores(Store(store), Store(against), pipeline)
        for line in damaged:
            err.print(f"[bold red]DAMAGED[/] {escape(line)}", highlight=False, soft_wrap=True)
        for line in differences:
            err.print(f"[bold red]DIFFERS[/] {escape(line)}", highlight=False, soft_wrap=True)
        console.print(f"{shared} keys in both stores, {len(differences)} with different bytes"
                      + (f", {len(damaged)} damaged manifests" if damaged else ""), highlight=False)
        if not shared:  # nothing was compared: a pass would say two stores agree that were never checked
            err.print(f"[bold red]NOTHING COMPARED[/] {escape(str(store))} and {escape(str(against))} share no key"
                      + (f" of {pipeline}" if pipeline else "") + ": built with other code, settings or inputs "
                      "(or a thread count, for stages whose key holds it); `csk status` on each says why",
                      highlight=False, soft_wrap=True)
        if differences or damaged or not shared:
            raise typer.Exit(1)
        return
    if pipeline is not None:
        from csk.pipeline import get_pipeline

        try:
            get_pipeline(pipeline)
        except CskError as exc:
            _fail(exc)
    s = Store(store)
    report = verify_store(s, pipeline, lineage)
    for _, line in report.problems:
        err.print(f"[bold red]DAMAGED[/] {escape(line)}", highlight=False, soft_wrap=True)
    bad = {d for d, _ in report.problems}
    console.print(f"{report.artifacts} artifacts checked, {len(bad)} with problems "
                  f"({len(report.problems)} problems)", highlight=False)
    if repair:
        for src, dst in repair_store(s, report):
            console.print(f"moved {src} -> {dst}", highlight=False, soft_wrap=True)
        if report.damaged:
            console.print("rerun the pipeline to recompute the moved artifacts", highlight=False)
    if report.problems:
        raise typer.Exit(1)


@app.command()
def gc(store: Path = STORE,
       apply: bool = typer.Option(False, "--apply", help="remove them (default: only list them)"),
       keep_minutes: float = typer.Option(60.0, "--keep-minutes", help="never remove artifacts younger than this "
                                          "(a run in progress records itself only when it ends)")) -> None:
    """Artifacts no run record references (directly or as an input), temporary directories of dead
    processes, store caches no kept artifact needs (embedding LMDBs, unpacked models, ConceptNet
    databases) and quarantined artifacts: listed (dry run, the default) or removed with --apply."""
    from csk.store import Store
    from csk.verify import collect, find_garbage, size_of

    if not store.is_dir():
        _fail(CskError(f"{store}: no such store"))
    s = Store(store)
    g = find_garbage(s, keep_minutes)
    total = 0
    for d in g.paths:
        n = size_of(d)
        total += n
        console.print(f"{'removing' if apply else 'would remove'} {d} ({n / 1e6:.1f} MB)", highlight=False,
                      soft_wrap=True)
    if apply:
        collect(s, g)
    verb = "removed" if apply else "unreferenced (dry run: --apply removes them)"
    console.print(f"{len(g.artifacts)} artifacts, {len(g.tmp)} temporary directories, {len(g.caches)} cache entries "
                  f"(embeddings, models, ConceptNet databases) and {len(g.quarantine)} quarantined artifacts {verb}, "
                  f"{total / 1e6:.1f} MB; {g.kept_recent} unreferenced but younger than {keep_minutes:g} min kept",
                  highlight=False)


@app.command()
def schedule(pipeline: Optional[str] = typer.Argument(None, help="the pipeline; none: every pipeline whose "
                                                                   "schedule is set in the config"),
             config: Path = CONFIG, store: Path = STORE, set_: list[str] = SET) -> None:
    """Serve a pipeline's flow (or every scheduled pipeline's) on its cron schedule in pipelines.toml
    (needs a Prefect server: PREFECT_API_URL)."""
    try:
        _needs_server()
        if pipeline is None:
            from csk.config import load_config

            cfg = load_config(config, set_)
            from csk.pipeline import discover

            names = [n for n in discover() if cfg[n].schedule]
            if not names:
                raise CskError(f"no pipeline has a schedule in {config}")
        else:
            names = [pipeline]
        deployments = [scheduled_deployment(n, config, store, set_) for n in names]
    except CskError as exc:
        _fail(exc)
    from prefect import serve

    print(f"serving {', '.join(names)} on their schedules")
    serve(*deployments)


@app.command()
def ui(host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(4200, "--port")) -> None:
    """Start Prefect's server and UI on this project's Prefect home (./.prefect: every `csk run` there) and
    print its address; Ctrl-C stops it."""
    import subprocess

    home, prefect = os.environ["PREFECT_HOME"], Path(sys.executable).with_name("prefect")
    print(f"Prefect UI: http://{host}:{port} (the runs in {home}); Ctrl-C stops it. To run flows on this server: "
          f"export PREFECT_API_URL=http://{host}:{port}/api", flush=True)
    try:
        raise typer.Exit(subprocess.call([str(prefect), "server", "start", "--host", host, "--port", str(port)]))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _needs_server() -> None:
    """Schedules fire only on a real server: a temporary one dies with this process, and what it
    'serves' would never run. Say how to start one instead."""
    if not os.environ.get("PREFECT_API_URL"):
        from prefect.settings import PREFECT_API_URL

        if PREFECT_API_URL.value():  # set in the Prefect profile
            return
        raise CskError("csk schedule needs a running Prefect server; a temporary one would stop with this command "
                       "and its schedules would never fire. Start one (`prefect server start`, in another terminal "
                       "or as a service) and point at it: `export PREFECT_API_URL=http://127.0.0.1:4200/api`, "
                       "then run `csk schedule` again")


def scheduled_deployment(pipeline: str, config: Path, store: Path, overrides: list[str] | None = None):
    """The pipeline's flow as a Prefect deployment on its pipelines.toml cron schedule."""
    from csk.orchestration import prefect_flow

    p, cfg = prepare(pipeline, config, overrides or [])
    if not cfg.schedule:
        raise CskError(f"{pipeline}.schedule is not set in {config}: give a cron expression, e.g. \"0 3 * * 1\"")
    return prefect_flow(p).to_deployment(
        name=f"{pipeline}-scheduled", cron=cfg.schedule,
        parameters={"config": str(config.resolve()) if config.exists() else str(config), "store": str(store.resolve()),
                    "overrides": list(overrides or [])})


def _pipeline_typer(p) -> typer.Typer:
    group = typer.Typer(help=p.doc or f"{p.name} commands", no_args_is_help=True)
    for cmd in p.commands:
        group.command(getattr(cmd, "command_name", cmd.__name__.replace("_", "-")))(_user_errors(cmd))
    _guard_every_command(group)
    return group


def _pipeline_group(name: str):
    """`csk PIPELINE ...`: the click group of the commands the pipeline declares, its module alone imported
    (None: it declares none; a name no pipeline has: an error, said as usual)."""
    from csk.pipeline import get_pipeline

    try:
        p = get_pipeline(name)
    except CskError:
        return None
    if not p.commands:
        return None
    group = typer.main.get_group(_pipeline_typer(p))
    group.name = p.name
    return group


def _declared_commands(taken: list[str]) -> list | None:
    """Stand-ins (name and help only) for the commands `_add_pipeline_commands` and `_add_plugin_commands`
    add, in their order, read from the sources with `ast`: each pipeline module's `PIPELINE = Pipeline(name=...,
    doc=..., commands=(...))`, its command functions' docstrings and `command_name`s, each plugin function's
    docstring. None when a declaration is not plain (then the commands are imported)."""
    import ast
    import inspect
    from importlib.metadata import entry_points

    from csk.codehash import module_file

    def parsed(module: str):
        return ast.parse(module_file(module).read_text(encoding="utf-8"))  # (found without importing it)

    def functions(tree) -> dict:
        return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    from csk.pipeline import _REGISTRY

    declared = entry_points(group="csk.pipelines")
    if os.environ.get("CSK_PIPELINES", "").strip() or set(_REGISTRY) - {ep.name for ep in declared}:
        return None  # pipelines named elsewhere (a test's, $CSK_PIPELINES): imported
    try:
        pipelines = []
        for ep in declared:
            tree = parsed(ep.value.split(":")[0])
            call = next((n.value for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
                         and getattr(n.targets[0], "id", None) == "PIPELINE"), None)
            kw = {k.arg: k.value for k in call.keywords}
            name = ast.literal_eval(kw["name"])
            doc = ast.literal_eval(kw["doc"]) if "doc" in kw else ""
            if name != ep.name or not isinstance(doc, str):
                return None
            names = {a.targets[0].value.id: ast.literal_eval(a.value) for a in tree.body
                     if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Attribute)
                     and a.targets[0].attr == "command_name" and isinstance(a.targets[0].value, ast.Name)}
            defs = functions(tree)
            cmds = [(names.get(e.id, e.id.replace("_", "-")), ast.get_docstring(defs[e.id], clean=False))
                    for e in (kw["commands"].elts if "commands" in kw else [])]
            pipelines.append((name, doc, cmds))
        plugins = []
        for ep in sorted(entry_points(group="csk.commands"), key=lambda e: e.name):
            module, _, fn = ep.value.partition(":")
            plugins.append((ep.name, ast.get_docstring(functions(parsed(module))[fn], clean=True)))
    except (AttributeError, KeyError, TypeError, ValueError, SyntaxError, ImportError, OSError, StopIteration):
        return None
    if len({p[0] for p in pipelines}) != len(pipelines):
        return None
    owners: dict[str, list] = {}
    for name, _, cmds in sorted(pipelines):
        for cmd, doc in cmds:
            owners.setdefault(cmd, []).append((name, doc))
    Command, Group = typer.core.TyperCommand, typer.core.TyperGroup
    out = [Command(name=cmd, help=inspect.cleandoc(f"same as `csk {found[0][0]} {cmd}`. " + (found[0][1] or "")))
           for cmd, found in owners.items() if len(found) == 1 and cmd not in taken]
    out += [Command(name=name, help=doc) for name, doc in plugins if name not in taken]
    out += [Group(name=name, help=doc or f"{name} commands") for name, doc, cmds in sorted(pipelines) if cmds]
    return out


def _add_pipeline_commands() -> None:
    """`csk PIPELINE COMMAND`: the commands each pipeline declares; one whose name no other pipeline's
    command and no built-in command takes is also `csk COMMAND` (e.g. `csk train-extractor`). Once, on
    demand (`_CommandsOnDemand`): it imports every pipeline."""
    global _ALL_ADDED
    from csk.pipeline import discover

    _ALL_ADDED = True
    owners: dict[str, list] = {}
    for p in discover().values():
        if not p.commands:
            continue
        for cmd in p.commands:
            owners.setdefault(getattr(cmd, "command_name", cmd.__name__.replace("_", "-")), []).append(cmd)
        app.add_typer(_pipeline_typer(p), name=p.name)
    # `csk label`, added on import, is listed after the pipelines
    app.registered_groups.sort(key=lambda info: info.typer_instance is label_app)
    taken = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    for name, cmds in owners.items():
        if len(cmds) == 1 and name not in taken:
            app.command(name, help=f"same as `csk {_owner(cmds[0])} {name}`. " + (cmds[0].__doc__ or ""))(
                _user_errors(cmds[0]))


def _owner(cmd) -> str:
    from csk.pipeline import discover

    return next(p.name for p in discover().values() if cmd in p.commands)


def _user_errors(cmd):
    import functools

    @functools.wraps(cmd)
    def wrapper(*args, **kwargs):
        _logging()
        try:
            return cmd(*args, **kwargs)
        except CskError as exc:
            _fail(exc)

    return wrapper


@app.command()
def deps(write: Optional[Path] = typer.Option(None, "--write", help="replace the generated table in this Markdown "
                                              "file (docs/layout.md) instead of printing it"),
         check: Optional[Path] = typer.Option(None, "--check", help="exit 1 when this file's generated table is "
                                              "not the current one")) -> None:
    """For each shared module (not one dataset's), the pipelines whose stage keys hash it and how many of
    their stages: what an edit there recomputes. Read from the import graph, as keys are (`csk.codehash`)."""
    from csk.imports import layout_table, replace_section
    from csk.pipeline import discover

    table = layout_table(discover())
    if check is not None:
        if replace_section(check.read_text(), table) != check.read_text():
            _fail(CskError(f"{check}: its module table is not the import graph's; run `csk deps --write {check}`"))
        console.print(f"{check}: the module table is current", highlight=False)
        return
    if write is not None:
        write.write_text(replace_section(write.read_text(), table))
        console.print(f"{write}: module table written", highlight=False)
        return
    print(table, end="")


def _add_plugin_commands() -> None:
    """`csk NAME`: commands that need the stages' code (e.g. `csk precision`, the embedder's ladder),
    named in the `csk.commands` entry points of pyproject.toml, so the kernel imports none of it."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="csk.commands"), key=lambda e: e.name):
        app.command(ep.name)(_user_errors(ep.load()))
    _guard_every_command(app)


for _info in label_app.registered_commands:  # user errors named, never a traceback
    _info.callback = _user_errors(_info.callback)
app.add_typer(label_app, name="label")


def _damaged_store_files(kwargs: dict) -> list[str]:
    """Every damaged file of the store a command was given (its manifests' checksums), one line each."""
    from csk.store import Store
    from csk.artifacts import check_artifact
    from csk.verify import artifact_dirs

    store = kwargs.get("store")
    if not store or not Path(store).is_dir():
        return []
    lines: list[str] = []
    for _, _, d in artifact_dirs(Store(store)):
        lines += check_artifact(d, content=True)
    return lines


def _named_store_errors(cmd):
    """A stored file that does not read (a flipped byte in a Parquet file, a cut manifest) is reported as
    a user error naming the damaged artifact files, never as a traceback."""
    @functools.wraps(cmd)
    def wrapper(*args, **kwargs):
        try:
            return cmd(*args, **kwargs)
        except (OSError, ValueError) as exc:  # pyarrow's errors are these (ArrowIOError, ArrowInvalid), JSON's too
            if isinstance(exc, CskError):
                raise
            damaged = _damaged_store_files(kwargs)
            if not damaged:  # not the store's damage: a bug, with its traceback
                raise
            _fail(CskError(f"a stored file could not be read ({type(exc).__name__}: {str(exc)[:200]}); damaged "
                           "stored files (checksums differ from their manifests):\n  " + "\n  ".join(damaged) +
                           "\nrun `csk verify PIPELINE --repair` to move damaged artifacts aside, then rerun to "
                           "recompute them"))

    return wrapper


def _guard_every_command(typer_app) -> None:
    for info in typer_app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "_store_guarded", False):
            info.callback = _named_store_errors(info.callback)
            info.callback._store_guarded = True
    for group in typer_app.registered_groups:
        _guard_every_command(group.typer_instance)


_guard_every_command(app)


def main() -> None:  # pragma: no cover
    sys.exit(app())


if __name__ == "__main__":  # python -m csk.cli
    main()
