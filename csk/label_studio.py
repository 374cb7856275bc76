"""The papers' human steps as Label Studio projects: declared by each pipeline, exported, pushed, pulled.

A pipeline declares its human steps (`Pipeline(labeling=(LabelingStep(...), ...))`): the stage whose
rows people label, the labeling interface (Label Studio's XML config) and what one task shows (its
`data`, built from one row). `project_files` writes a step's project: `config.xml` and `tasks.json`,
each task carrying the `row_id` of the row it came from. `LabelStudio` talks to a running server over
its REST API (create the project, import the tasks, export the annotations as JSON); the export goes
back into the step's import stage (the setting `LabelingStep.imports` names), which reads it with
`readers.label_studio` and keeps each annotation's annotator, ids and times.

The official client (label-studio-sdk) pins packages this project's constraints exclude
(opencv-python-headless with numpy < 2.3, inflect < 6), so the five calls it would make are made here
with httpx; the server runs from its own environment (docker/label-studio/, `make label-studio`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable
from xml.etree import ElementTree

import pandas as pd

from csk.errors import ConfigError, CskError

URL_ENV, KEY_ENV = "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY"


@dataclass(frozen=True)
class LabelingStep:
    """One human step of a paper.

    name: the paper's word for the step (the project's name: `<pipeline>.<name>`).
    stage: the stage function whose artifact holds the rows to label (one task per row).
    config: the labeling interface, Label Studio's XML.
    data: one row (a dict) -> what its task shows (`row_id` is added: the row's id).
    imports: (import stage function, its setting) that reads the step's export.
    annotators: annotators per task in the paper (2 or more: agreement is computed).
    instructions: what the annotators are told (the project's expert instructions).
    rows: optional transform of the stage's rows (e.g. one row per item from a sheet of one row per choice).
    source: the artifact's file holding the rows: its data (data.parquet) or an extra JSON Lines file.
    replaces: settings of the import stage that this export stands in for (`csk label pull` prints them
        unset beside its own, e.g. CICERO's written answers replace the release).
    """

    name: str
    stage: Callable[..., Any]
    config: str
    data: Callable[[dict], dict]
    imports: tuple[Callable[..., Any], str]
    annotators: int = 1
    instructions: str = ""
    rows: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    source: str = "data.parquet"
    replaces: tuple[str, ...] = ()

    def __post_init__(self):
        try:
            root = ElementTree.fromstring(self.config)
        except ElementTree.ParseError as exc:
            raise ConfigError(f"labeling step {self.name!r}: its config is not XML ({exc})") from None
        if root.tag != "View":
            raise ConfigError(f"labeling step {self.name!r}: a Label Studio config starts with <View>, not <{root.tag}>")

    def variables(self) -> set[str]:
        """The task fields the config shows (`value="$field"`)."""
        root = ElementTree.fromstring(self.config)
        return {v[1:] for el in root.iter() for k, v in el.attrib.items() if k == "value" and v.startswith("$")}

    def task(self, row: dict) -> dict:
        data = {**self.data(row), "row_id": str(row["id"])}
        missing = sorted(self.variables() - set(data))
        if missing:
            raise CskError(f"labeling step {self.name!r}: its task data lacks {missing}, which its config shows")
        return {"data": data}


# Label Studio's data-manager columns of every task (label_studio/data_manager/functions.py) that say nothing
# about the task's text: hidden in a pushed project's table, a click away in its Columns menu.
DM_BOOKKEEPING = ("inner_id", "annotations_results", "annotations_ids", "predictions_score",
                  "predictions_model_versions", "predictions_results", "file_upload", "storage_filename",
                  "created_at", "updated_at", "updated_by", "avg_lead_time", "draft_exists")


def tasks_of(step: LabelingStep, rows: pd.DataFrame) -> list[dict]:
    """The step's Label Studio tasks, one per row (in the artifact's order)."""
    if step.rows is not None:
        rows = step.rows(rows)
    return [step.task(r) for r in rows.to_dict(orient="records")]


def project_files(step: LabelingStep, rows: pd.DataFrame, pipeline: str) -> dict[str, bytes]:
    """config.xml, tasks.json and project.json (title, instructions, annotators per task) of a step."""
    tasks = tasks_of(step, rows)
    project = {"title": f"{pipeline}.{step.name}", "annotators_per_task": step.annotators,
               "instructions": step.instructions, "tasks": len(tasks),
               "imports": f"{pipeline}.{step.imports[0].__name__}.{step.imports[1]}"}
    return {"config.xml": step.config.encode(), "tasks.json": _json(tasks), "project.json": _json(project)}


def export_summary(raw: bytes, where: str = "export") -> dict[str, int]:
    """What a pull brought: submitted annotations (not skipped, with a result), their annotators, and
    the annotations left out (skipped or empty), counted on Label Studio's JSON export. Only counts, for
    the pull's message: the import stage reads the export itself (`readers.label_studio`), so the kernel
    needs no dataset reader."""
    try:
        tasks = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CskError(f"{where}: Label Studio's export is not JSON ({exc})") from None
    if not isinstance(tasks, list):
        raise CskError(f"{where}: expected Label Studio's JSON export (a list of tasks)")
    submitted, left_out, annotators = 0, 0, set()
    for task in tasks:
        for ann in (task.get("annotations") or []) if isinstance(task, dict) else []:
            if not isinstance(ann, dict):
                continue
            if ann.get("was_cancelled") or not ann.get("result"):
                left_out += 1
                continue
            submitted += 1
            who = ann.get("completed_by")
            annotators.add(str(who.get("id")) if isinstance(who, dict) else str(who))
    return {"annotations": submitted, "annotators": len(annotators), "left_out": left_out}


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=1, default=str) + "\n").encode("utf-8")


class LabelStudio:
    """A running Label Studio server: URL and API key from LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY (a legacy
    token: `Authorization: Token KEY`; docker/label-studio/serve.sh enables them)."""

    def __init__(self, url: str | None = None, api_key: str | None = None, timeout: float = 60.0):
        import httpx

        self.url = (url or os.environ.get(URL_ENV, "")).rstrip("/")
        key = api_key or os.environ.get(KEY_ENV, "")
        if not self.url or not key:
            raise ConfigError(f"no Label Studio server: set {URL_ENV} (e.g. http://127.0.0.1:8089) and {KEY_ENV} "
                              "(Account & Settings > Legacy Token, or the LS_ADMIN_TOKEN given to "
                              "docker/label-studio/serve.sh)")
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Token {key}"}, timeout=timeout)

    def _call(self, method: str, path: str, **kw) -> Any:
        import httpx

        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise CskError(f"Label Studio at {self.url}: {method} {path} failed ({exc}); is the server running "
                           "(make label-studio)?") from None
        if r.status_code >= 400:
            raise CskError(f"Label Studio at {self.url}: {method} {path} answered {r.status_code}: {r.text[:400]}")
        return r.json() if r.content and r.headers.get("content-type", "").startswith("application/json") else None

    def validate_config(self, config: str) -> None:
        """The server's own check of a labeling interface (an error names what it rejects)."""
        self._call("POST", "/api/projects/validate/", json={"label_config": config})

    def create_project(self, title: str, config: str, instructions: str = "", overlap: int = 1) -> int:
        self.validate_config(config)
        body = {"title": title[:50], "label_config": config, "expert_instruction": instructions,
                "show_instruction": bool(instructions), "maximum_annotations": max(1, overlap),
                "overlap_cohort_percentage": 100}
        return int(self._call("POST", "/api/projects/", json=body)["id"])

    def hide_markup(self, project: int, tasks: list[dict]) -> list[str]:
        """The data manager's table shows every task field as written, so a field holding HTML (the dialogue
        as the labeling page renders it, `*_html`) would show its markup: the project gets one view of its
        tasks that hides those columns (Label Studio's data-manager views API), the labeling page still
        renders them. Returns the fields hidden."""
        fields = sorted({k for t in tasks for k in t.get("data", t) if str(k).endswith("_html")})
        if fields:
            # and the bookkeeping columns a new project's table opens with, so the tasks' own text fields are
            # in view (each can be shown again from the table's Columns menu)
            columns = [f"tasks:data.{f}" for f in fields] + [f"tasks:{c}" for c in DM_BOOKKEEPING]
            self._call("POST", "/api/dm/views/", json={"project": project, "data": {
                "title": "Tasks", "hiddenColumns": {"explore": columns, "labeling": columns}}})
        return fields

    def views(self, project: int) -> list[dict]:
        out = self._call("GET", "/api/dm/views/", params={"project": project})
        return out.get("results", out) if isinstance(out, dict) else (out or [])

    def import_tasks(self, project: int, tasks: list[dict]) -> list[int]:
        out = self._call("POST", f"/api/projects/{project}/import", params={"return_task_ids": "true"}, json=tasks)
        return [int(t) for t in (out or {}).get("task_ids", [])]

    def export(self, project: int) -> bytes:
        """Every task with its annotations, Label Studio's JSON export."""
        import httpx

        try:
            r = self.http.get(f"/api/projects/{project}/export", params={"exportType": "JSON",
                                                                         "download_all_tasks": "true"})
        except httpx.HTTPError as exc:
            raise CskError(f"Label Studio at {self.url}: export of project {project} failed ({exc})") from None
        if r.status_code >= 400:
            raise CskError(f"Label Studio at {self.url}: export of project {project} answered {r.status_code}: "
                           f"{r.text[:400]}")
        return r.content

    def projects(self) -> list[dict]:
        out = self._call("GET", "/api/projects/", params={"page_size": 1000})
        return out.get("results", out) if isinstance(out, dict) else out

    def find_project(self, title: str) -> int | None:
        ids = [p["id"] for p in self.projects() if p.get("title") == title[:50]]
        return max(ids) if ids else None
