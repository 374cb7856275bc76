"""Label Studio exports for tests, in the exact shape of a real `GET /api/projects/{id}/export?exportType=JSON`
(docker/label-studio/example_export.json): tasks with data and annotations, each annotation with its id,
annotator (completed_by), times, lead time and result regions."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

OBJECT_TAGS = {"Text", "HyperText", "Paragraphs"}
CONTROL_TAGS = {"TextArea", "Choices", "Rating", "Labels", "Number"}


def check_config(step, tasks: list[dict]) -> ElementTree.Element:
    """A step's config as Label Studio needs it: <View> at the top, every control labels a shown object, tag
    names unique, and every $field it shows is in every task's data."""
    root = ElementTree.fromstring(step.config)
    assert root.tag == "View"
    objects = {el.get("name") for el in root.iter() if el.tag in OBJECT_TAGS}
    controls = [el for el in root.iter() if el.tag in CONTROL_TAGS]
    assert controls and all(el.get("toName") in objects for el in controls)  # each control labels a shown object
    names = [el.get("name") for el in root.iter() if el.get("name")]
    assert len(names) == len(set(names))  # Label Studio needs unique tag names
    used = {v[1:] for el in root.iter() for v in el.attrib.values() if v.startswith("$")}
    assert used == step.variables() and used and all(used <= set(t["data"]) for t in tasks)
    return root


def textarea(name: str, texts: list[str] | str, to: str = "dialogue") -> dict:
    return {"from_name": name, "to_name": to, "type": "textarea",
            "value": {"text": [texts] if isinstance(texts, str) else list(texts)}}


def choices(name: str, chosen: list[str] | str, to: str = "dialogue") -> dict:
    return {"from_name": name, "to_name": to, "type": "choices",
            "value": {"choices": [chosen] if isinstance(chosen, str) else list(chosen)}}


def rating(name: str, value: int, to: str = "dialogue") -> dict:
    return {"from_name": name, "to_name": to, "type": "rating", "value": {"rating": int(value)}}


def span(name: str, start: int, end: int, text: str, labels: list[str], to: str = "dialogue",
         kind: str = "labels") -> dict:
    return {"from_name": name, "to_name": to, "type": kind,
            "value": {"start": start, "end": end, "text": text, kind: list(labels)}}


def export(tasks: list[dict], answers: dict[int, list[tuple[int, list[dict]]]], cancelled: set[tuple[int, int]] = frozenset()
           ) -> list[dict]:
    """tasks: the step's tasks.json; answers: task index -> [(annotator id, result regions)]. Annotation ids
    count from 1 in task order; (task index, annotator) in `cancelled` is a skipped annotation."""
    out, ann_id = [], 0
    for i, task in enumerate(tasks):
        anns = []
        for annotator, result in answers.get(i, []):
            ann_id += 1
            skipped = (i, annotator) in cancelled
            anns.append({"id": ann_id, "completed_by": annotator, "result": [] if skipped else result,
                         "was_cancelled": skipped, "ground_truth": False,
                         "created_at": f"2026-11-25T10:{ann_id // 60:02d}:{ann_id % 60:02d}.000000Z",
                         "updated_at": f"2026-11-25T11:{ann_id // 60:02d}:{ann_id % 60:02d}.000000Z",
                         "lead_time": 10.0 + ann_id, "task": i + 1, "project": 1, "updated_by": annotator})
        out.append({"id": i + 1, "annotations": anns, "drafts": [], "predictions": [], "data": task["data"],
                    "meta": {}, "project": 1})
    return out


def write(path: Path, tasks: list[dict], answers: dict, **kw) -> Path:
    path.write_text(json.dumps(export(tasks, answers, **kw), ensure_ascii=False), encoding="utf-8")
    return path
