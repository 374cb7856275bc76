"""`csk label`: the papers' human steps as Label Studio projects.

    csk label steps [PIPELINE]                      # every human step, the stage it labels, who reads it back
    csk label export PIPELINE STEP --out DIR        # config.xml + tasks.json (+ project.json) of the latest run
    csk label push PIPELINE STEP                    # create the project on $LABEL_STUDIO_URL and import its tasks
    csk label pull PIPELINE STEP --out FILE         # its annotations as Label Studio's JSON export
    csk run PIPELINE --set PIPELINE.<stage>.<setting>=FILE    # the import stage reads them (pull prints the line)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from csk.errors import CskError

label_app = typer.Typer(help="The papers' human steps as Label Studio projects: export, push, pull.",
                        no_args_is_help=True)
STORE = typer.Option(Path("artifacts"), "--store", help="artifact store directory")
RUN = typer.Option(None, "--run", help="a run id or -N (default: the latest full run)")


def _step(pipeline: str, step: str):
    from csk.pipeline import get_pipeline

    p = get_pipeline(pipeline)
    return p, p.labeling_step(step)


def step_rows(store: Path, pipeline: str, step, run: str | None = None):
    """The rows of the step's stage in a run (its data, or the extra JSON Lines file it names)."""
    import pandas as pd

    from csk.lineage import latest_ref
    from csk.store import Store

    p, s = _step(pipeline, step) if isinstance(step, str) else (None, step)
    stage = (p or _pipeline(pipeline)).stage(s.stage).name
    ref = latest_ref(Store(store), pipeline, stage, run)
    if s.source == "data.parquet":
        return s, ref.load(verify=True)
    path = Path(ref.path) / s.source
    if not path.is_file():
        raise CskError(f"{path}: the {stage} artifact has no {s.source}")
    return s, pd.read_json(path, lines=True, dtype=False)


def _pipeline(name: str):
    from csk.pipeline import get_pipeline

    return get_pipeline(name)


def project_title(pipeline: str, step: str) -> str:
    return f"{pipeline}.{step}"


def import_setting(pipeline: str, step) -> str:
    p = _pipeline(pipeline)
    fn, setting = step.imports
    return f"{pipeline}.{p.stage(fn).config_table}.{setting}"


@label_app.command("steps")
def steps_command(pipeline: Optional[str] = typer.Argument(None, help="the pipeline; none: every pipeline")) -> None:
    """List the human steps: the stage whose rows become tasks, annotators per task, the setting that reads them."""
    from csk.pipeline import discover

    for name, p in discover().items():
        if pipeline and name != pipeline:
            continue
        for s in p.labeling:
            print(f"{name}.{s.name}: tasks from {p.stage(s.stage).name} ({s.source}), {s.annotators} annotator(s) "
                  f"per task, read back by {import_setting(name, s)}")


@label_app.command("export")
def export_command(pipeline: str, step: str, out: Path = typer.Option(..., "--out", help="directory to write to"),
                   store: Path = STORE, run_: Optional[str] = RUN) -> None:
    """Write a step's Label Studio project (config.xml, tasks.json, project.json) from a run's artifact."""
    from csk.label_studio import project_files

    s, rows = step_rows(store, pipeline, step, run_)
    out.mkdir(parents=True, exist_ok=True)
    for name, payload in project_files(s, rows, pipeline).items():
        (out / name).write_bytes(payload)
    n = json.loads((out / "project.json").read_text())["tasks"]
    print(f"{out}: config.xml, tasks.json ({n} tasks), project.json; import them in Label Studio (Create project > "
          f"Labeling setup > Code: config.xml; Data import: tasks.json), or: csk label push {pipeline} {step}")


@label_app.command("push")
def push_command(pipeline: str, step: str, store: Path = STORE, run_: Optional[str] = RUN) -> None:
    """Create the step's project on the running Label Studio ($LABEL_STUDIO_URL, $LABEL_STUDIO_API_KEY), import its tasks."""
    from csk.label_studio import LabelStudio, tasks_of

    s, rows = step_rows(store, pipeline, step, run_)
    ls = LabelStudio()
    project = ls.create_project(project_title(pipeline, step), s.config, s.instructions, s.annotators)
    tasks = tasks_of(s, rows)
    ls.hide_markup(project, tasks)  # the data manager's table shows text, not the dialogue's HTML
    ids = ls.import_tasks(project, tasks)
    print(f"project {project} ({project_title(pipeline, step)}): {len(ids)} tasks; {ls.url}/projects/{project}/data")


@label_app.command("pull")
def pull_command(pipeline: str, step: str, out: Path = typer.Option(..., "--out", help="the JSON file to write"),
                 project: Optional[int] = typer.Option(None, "--project", help="project id (default: the newest "
                                                       "project titled PIPELINE.STEP)")) -> None:
    """Write the step's annotations (Label Studio's JSON export) and say which setting reads them back."""
    from csk.label_studio import LabelStudio, export_summary

    _, s = _step(pipeline, step)
    ls = LabelStudio()
    if project is None:
        project = ls.find_project(project_title(pipeline, step))
        if project is None:
            raise CskError(f"no project titled {project_title(pipeline, step)!r} on {ls.url}: push it first "
                           f"(csk label push {pipeline} {step}) or pass --project ID")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(ls.export(project))
    tmp.replace(out)  # a pull cut short leaves no partial export
    got = export_summary(out.read_bytes(), str(out))
    table = import_setting(pipeline, s).rsplit(".", 1)[0]
    unset = "".join(f" --set '{table}.{name}=\"\"'" for name in s.replaces)
    print(f"{out}: {got['annotations']} annotations by {got['annotators']} annotator(s), {got['left_out']} left out "
          f"(skipped or empty); read them back with (keep the --set of earlier steps' pulls):\n"
          f"  csk run {pipeline}{unset} --set {import_setting(pipeline, s)}={out.resolve()}")


def pull_flow(pipeline: str, step: str, out: str, project: int | None = None) -> None:
    """A pull as a Prefect flow body: `csk label schedule` serves it on a cron like the pipelines' flows."""
    pull_command(pipeline, step, Path(out), project)


@label_app.command("schedule")
def schedule_command(pipeline: str, step: str, out: Path = typer.Option(..., "--out", help="the JSON file to write"),
                     cron: str = typer.Option(..., "--cron", help="e.g. '0 * * * *' (hourly)")) -> None:
    """Serve a scheduled pull (a Prefect deployment on a cron; needs a running `prefect server start`)."""
    from prefect import flow

    _step(pipeline, step)
    pull = flow(name=f"label-pull-{pipeline}-{step}".replace("_", "-"), log_prints=True)(pull_flow)
    pull.serve(name=f"{pipeline}-{step}-pull", cron=cron,
               parameters={"pipeline": pipeline, "step": step, "out": str(out.resolve())})
