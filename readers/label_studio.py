"""Label Studio's JSON export (`GET /api/projects/{id}/export?exportType=JSON`, or the UI's "JSON" export).

The file is a JSON list of tasks; each task holds its `data` (what the annotator saw, with the
`row_id` of the artifact row it was made from: `csk.label_studio.LabelingStep.task`) and its
`annotations`, each with the annotator (`completed_by`: the user's id, or an object with id and
email in the command-line export), its id, created / updated time, lead time (seconds spent) and
its `result`: one region per control of the labeling interface (`from_name`), with the control's
value (`text` of a TextArea, `choices` of Choices, `rating` of Rating, `start` / `end` / `text` /
`labels` of a span).

`read_label_studio_export` returns one row per submitted annotation, its values by control name,
with the lineage back to the task and the export file. A skipped annotation (`was_cancelled`), one
without a result, and a task without a `row_id` are rejected with their reason; a malformed task
stops the read (strict) or is rejected (lenient). JSON_MIN and CSV exports drop skipped annotations
and annotator ids: they are not read (the error says to export JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from readers.base import RECORD_ERRORS, ReadResult, RecordError, handle_bad, load_json, require_file
from csk.errors import InputError

SOURCE = "label-studio"


def is_label_studio_export(path: str | Path) -> bool:
    """A JSON list whose first item is an object with `data` and `annotations` (cheap: the file's start)."""
    p = Path(path)
    if p.suffix.lower() != ".json" or not p.is_file():
        return False
    with open(p, "rb") as f:
        head = f.read(4096).lstrip()
    return head.startswith(b"[") and (b'"annotations"' in head or b'"data"' in head)


def annotator_of(completed_by: Any) -> tuple[str, str | None]:
    """(annotator id, email) of `completed_by`: an id (the API's JSON export) or an object (the CLI's)."""
    if isinstance(completed_by, dict):
        return str(completed_by.get("id")), completed_by.get("email")
    if completed_by is None or isinstance(completed_by, (list, float)):
        raise RecordError(f"annotation without an annotator (completed_by = {completed_by!r})")
    return str(completed_by), None


def values_of(result: list) -> dict[str, Any]:
    """Each control's value in one annotation's result: TextArea -> list of texts, Choices -> list of
    choices, Rating -> int, Number -> number, spans (Labels, HyperTextLabels, ParagraphLabels) -> list
    of {start, end, text, labels} in the order given."""
    out: dict[str, Any] = {}
    for region in result:
        if not isinstance(region, dict) or "from_name" not in region or "value" not in region:
            raise RecordError(f"a result region without from_name / value: {str(region)[:80]}")
        name, value, kind = region["from_name"], region["value"], str(region.get("type", "")).lower()
        if kind == "textarea":
            out.setdefault(name, []).extend(str(t) for t in value.get("text", []))
        elif kind == "choices":
            out.setdefault(name, []).extend(str(c) for c in value.get("choices", []))
        elif kind == "rating":
            out[name] = int(value["rating"])
        elif kind == "number":
            out[name] = value["number"]
        elif kind.endswith("labels"):
            span = {k: value.get(k) for k in ("start", "end", "startOffset", "endOffset", "text") if k in value}
            span["labels"] = list(value.get(kind, value.get("labels", [])))
            out.setdefault(name, []).append(span)
        else:
            out.setdefault(name, []).append(value)
    return out


def read_label_studio_export(path: str | Path, lenient: bool = True) -> ReadResult:
    """One row per submitted annotation: row_id, task_id, annotation_id, annotator, annotator_email,
    created_at, updated_at, lead_time, values (control -> value), data (the task's data) and its lineage
    (source_file, source_record = the task's index, source_locator)."""
    p = require_file(path)
    data = load_json(p)
    if not isinstance(data, list):
        raise InputError(str(p), None, "expected Label Studio's JSON export (a list of tasks with their "
                         "annotations); export the project as JSON, not JSON_MIN or CSV")
    result = ReadResult()
    for i, task in enumerate(data):
        locator = f"task {i}"
        try:
            if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
                raise RecordError("expected a task object with data")
            if "annotations" not in task:
                raise RecordError("a task without annotations: export the project as JSON (JSON_MIN and CSV "
                                  "leave out annotator ids and skipped annotations)")
            annotations = task["annotations"] or []
            if not isinstance(annotations, list):
                raise RecordError("annotations is not a list")
        except RECORD_ERRORS as exc:
            result.records += 1
            handle_bad(result, lenient, p, i, locator, SOURCE, exc)
            continue
        row_id = task["data"].get("row_id")
        for k, ann in enumerate(annotations):
            result.records += 1
            where = f"{locator}, annotation {k}"
            prov = {"source": SOURCE, "source_file": str(p), "source_record": i, "source_locator": where}
            try:
                if not isinstance(ann, dict) or "id" not in ann:
                    raise RecordError("expected an annotation object with an id")
                annotator, email = annotator_of(ann.get("completed_by"))
                base = {"id": f"ls-{task.get('id')}-{ann['id']}", "row_id": None if row_id is None else str(row_id),
                        "task_id": task.get("id"), "annotation_id": ann["id"], "annotator": annotator,
                        "annotator_email": email, "created_at": ann.get("created_at"),
                        "updated_at": ann.get("updated_at"), "lead_time": ann.get("lead_time"),
                        "project": ann.get("project", task.get("project")), **prov}
                if row_id is None:
                    result.rejected.append({**base, "reason_code": "no_row_id",
                                            "reason": "the task's data has no row_id: it was not made by csk label"})
                    continue
                if ann.get("was_cancelled"):
                    result.rejected.append({**base, "reason_code": "skipped",
                                            "reason": f"annotator {annotator} skipped the task"})
                    continue
                values = values_of(ann.get("result") or [])
                if not values:
                    result.rejected.append({**base, "reason_code": "empty_annotation",
                                            "reason": f"annotator {annotator} submitted no answer"})
                    continue
            except RECORD_ERRORS as exc:
                handle_bad(result, lenient, p, i, where, SOURCE, exc)
                continue
            result.rows.append({**base, "values": values, "data": task["data"]})
    return result
