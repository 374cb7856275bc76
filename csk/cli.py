"""`csk`: run pipelines, list artifacts, trace lineage, validate Parquet, serve schedules."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from csk.errors import CskError

# Offline by construction: models come from installed packages or local directories only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = typer.Typer(help="Commonsense-dialogue dataset construction pipelines.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)


def _quiet_user_errors() -> None:
    """Errors about the user's input (CskError) are reported in one line at the end; keep Prefect's
    task and flow loggers from printing their tracebacks too. Real bugs keep their tracebacks."""
    make_record = logging.getLogRecordFactory()
    if getattr(make_record, "csk_quiet", False):
        return

    def factory(*args, **kwargs):
        record = make_record(*args, **kwargs)
        if record.exc_info and isinstance(record.exc_info[1], CskError):
            record.exc_info = None
        return record

    factory.csk_quiet = True
    logging.setLogRecordFactory(factory)


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(1)


def _flow_for(pipeline: str):
    from csk.config import PIPELINES

    if pipeline not in PIPELINES:
        raise CskError(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    if pipeline == "cicero":
        from flows.cicero import cicero_flow

        return cicero_flow
    raise CskError(f"pipeline {pipeline!r} has no flow yet")


@app.command()
def run(pipeline: str,
        config: Path = typer.Option(Path("pipelines.toml"), "--config", help="pipelines.toml to read"),
        store: Path = typer.Option(Path("artifacts"), "--store", help="artifact store directory"),
        set_: list[str] = typer.Option([], "--set", help="override a setting, e.g. cicero.seed=1"),
        lenient: bool = typer.Option(False, "--lenient", help="reject malformed source records with a reason "
                                     "instead of stopping at the first one")) -> None:
    """Run a pipeline's Prefect flow end to end (finished stages are reused)."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("csk").setLevel(logging.INFO)
    _quiet_user_errors()
    if lenient:
        set_ = [*set_, f"{pipeline}.sources.lenient=true"]
    try:
        from csk.config import load_config

        load_config(config, set_)  # fail fast, before Prefect starts, on a bad config
        flow = _flow_for(pipeline)
        stages = flow(config=str(config), store=str(store), overrides=list(set_))
    except CskError as exc:
        _fail(exc)
    _print_stages(pipeline, stages)


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _print_stages(pipeline: str, stages: list[dict]) -> None:
    table = Table(title=f"{pipeline}: artifacts")
    for col in ("stage", "status", "in", "out", "rejected"):
        table.add_column(col)
    table.add_column("path", overflow="fold")
    for s in stages:
        r = s["rows"]
        table.add_row(s["stage"], "reused" if s["reused"] else "computed", str(r["in"]), str(r["out"]),
                      str(r["rejected"]), _short(s["path"]))
    console.print(table)
    console.print(f"artifacts of the latest run: csk artifacts {pipeline}", highlight=False, soft_wrap=True)


@app.command("rebuild-distractors")
def rebuild_distractors(
        pipeline: str,
        release: Optional[Path] = typer.Option(None, "--release", help="a released CICERO JSON Lines file to start from"),
        config: Path = typer.Option(Path("pipelines.toml"), "--config"),
        store: Path = typer.Option(Path("artifacts"), "--store"),
        set_: list[str] = typer.Option([], "--set", help="override a setting, e.g. cicero.adversarial_filter.max_iterations=3")) -> None:
    """Rerun only the distractor stages, on the cached upstream artifacts or on a release file alone."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("csk").setLevel(logging.INFO)
    _quiet_user_errors()
    try:
        from csk.config import load_config

        load_config(config, set_)
        if pipeline != "cicero":
            raise CskError(f"rebuild-distractors supports 'cicero' (got {pipeline!r})")
        if release is not None and not release.exists():
            raise CskError(f"{release}: file not found")
        from flows.cicero import rebuild_distractors_flow

        stages = rebuild_distractors_flow(config=str(config), store=str(store), overrides=list(set_),
                                          release=str(release.resolve()) if release else None)
    except CskError as exc:
        _fail(exc)
    _print_stages(pipeline, stages)


@app.command("train-generator")
def train_generator(
        base: Path = typer.Option(..., "--base", help="seq2seq model directory to fine-tune (e.g. t5-large saved locally)"),
        out: Path = typer.Option(..., "--out", help="directory to write the fine-tuned generator to"),
        snli: list[Path] = typer.Option([], "--snli", help="SNLI JSON Lines (sentence1, sentence2, gold_label)"),
        timetravel: list[Path] = typer.Option([], "--timetravel", help="TimeTravel JSON Lines"),
        epochs: int = typer.Option(1, "--epochs"), lr: float = typer.Option(3e-4, "--lr"),
        batch_size: int = typer.Option(16, "--batch-size"), max_steps: int = typer.Option(0, "--max-steps"),
        seed: int = typer.Option(0, "--seed")) -> None:
    """Fine-tune the counterfactual generator on SNLI contradictions and TimeTravel rewrites."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        from tasks.distractors.generator_training import read_pairs, train

        pairs = read_pairs(snli, timetravel)
        info = train(base, out, pairs, epochs=epochs, lr=lr, batch_size=batch_size, max_steps=max_steps, seed=seed)
    except CskError as exc:
        _fail(exc)
    console.print(f"fine-tuned on {info['pairs']} pairs ({info['steps']} steps, final loss {info['loss']:.4f}); "
                  f"saved to {out}", highlight=False)


@app.command()
def artifacts(pipeline: str, store: Path = typer.Option(Path("artifacts"), "--store"),
              as_json: bool = typer.Option(False, "--json", help="print a JSON list")) -> None:
    """List the latest run's stages with artifact path, key and row counts."""
    from csk.runtime import Store

    try:
        run = Store(store).latest_run(pipeline)
    except CskError as exc:
        _fail(exc)
    stages = [{"stage": s["stage"], "path": s["path"], "key": s["key"], "rows": s["rows"],
               "reused": s["reused"]} for s in run["stages"]]
    if as_json:
        print(json.dumps(stages, indent=2))
    else:
        _print_stages(pipeline, stages)


@app.command()
def lineage(pipeline: str, stage: str, row: Optional[str] = typer.Option(None, "--row", help="a row id"),
            store: Path = typer.Option(Path("artifacts"), "--store"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Trace an artifact (or one row of it) back to its source files and records."""
    from csk.lineage import artifact_chain, latest_ref, row_lineage
    from csk.runtime import Store

    try:
        st = Store(store)
        ref = latest_ref(st, pipeline, stage)
        result = row_lineage(st, ref, row) if row else artifact_chain(st, ref)
    except CskError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
        return
    if row:
        for step in result:
            extra = f"  [rejected: {step['reason']}]" if step.get("rejected") else ""
            console.print(f"{step['stage']:<20} {step['id']}  ({step['key']}){extra}", highlight=False, soft_wrap=True)
            if "record" in step:
                s = step["record"]
                console.print(f"{'':<20} read from {s['file']} {s['locator']}", highlight=False, soft_wrap=True)
            if step.get("aggregate"):
                console.print(f"{'':<20} a summary row: it has no single source record; "
                              f"`csk lineage {pipeline} {stage}` lists the artifacts it summarises",
                              highlight=False, soft_wrap=True)
            if "source" in step:
                s = step["source"]
                console.print(f"{'source':<20} {s['file']} {s['locator']} (sha256 {s['sha256']})", highlight=False, soft_wrap=True)
    else:
        for e in result:
            r = e["rows"]
            console.print(f"{'  ' * e['depth']}{e['stage']} {e['key']} (in {r['in']}, out {r['out']}, "
                          f"rejected {r['rejected']}) {e['path']}", highlight=False, soft_wrap=True)
            for f in e.get("source_files", []):
                console.print(f"{'  ' * (e['depth'] + 1)}{f['path']} sha256={f['sha256']}", highlight=False, soft_wrap=True)


@app.command()
def validate(parquet: Path, contract: str = typer.Option(..., "--contract", help="contract name")) -> None:
    """Check any Parquet file against a data contract."""
    from csk.errors import InputError
    from csk.runtime import read_parquet, validate_contract
    from data_contracts import get_contract

    try:
        model = get_contract(contract)
        if not parquet.exists():
            raise InputError(str(parquet), None, "file not found")
        df = read_parquet(parquet)
        validate_contract(str(parquet), model, df)
    except CskError as exc:
        _fail(exc)
    console.print(f"{parquet}: {len(df)} rows satisfy {contract}", highlight=False, soft_wrap=True)


@app.command()
def schedule(pipeline: str, config: Path = typer.Option(Path("pipelines.toml"), "--config"),
             store: Path = typer.Option(Path("artifacts"), "--store")) -> None:
    """Serve the pipeline's flow on the cron schedule in pipelines.toml (needs `prefect server start`)."""

    from prefect import serve

    try:
        deployment = scheduled_deployment(pipeline, config, store)
    except CskError as exc:
        _fail(exc)
    serve(deployment)


def scheduled_deployment(pipeline: str, config: Path, store: Path):
    """The pipeline's flow as a Prefect deployment on its pipelines.toml cron schedule."""
    from csk.config import load_config

    flow = _flow_for(pipeline)
    cfg = getattr(load_config(config), pipeline)
    return flow.to_deployment(name=f"{pipeline}-scheduled", cron=cfg.schedule,
                              parameters={"config": str(config.resolve()), "store": str(store.resolve())})


def main() -> None:  # pragma: no cover
    sys.exit(app())
