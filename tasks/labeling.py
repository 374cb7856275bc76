"""What every labeling step's import shares (csk.label_studio declares the steps; readers.label_studio reads
the exports): the annotations of an export as rows an import stage reads, and the agreement measures the
papers report. How a task looks in Label Studio is tasks/labeling_views.py: stage code never imports it, so
a styling edit moves no key.

An import stage that reads a Label Studio export keeps, for every row it makes, the annotation it came
from: `ANNOTATION_COLUMNS` (annotator, Label Studio's annotation and task ids, created / updated time,
lead time, the export file and task), so `csk lineage` goes from a final row to the person who wrote it.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from csk.errors import InputError
from readers.label_studio import is_label_studio_export, read_label_studio_export

ANNOTATION_COLUMNS = ["annotator", "annotation_id", "ls_task_id", "created_at", "updated_at", "lead_time"]

def is_export(path: str | Path | None) -> bool:
    """Is this setting's file a Label Studio JSON export (rather than the stage's own layout)?"""
    return bool(path) and is_label_studio_export(path)


def export_rows(path: str | Path, known: set[str] | None = None, lenient: bool = True) -> tuple[list[dict], list[dict]]:
    """(annotations, rejected) of a Label Studio export: one dict per submitted annotation with its
    `row_id` (the id of the row its task was made from), `values` (control -> value) and the lineage
    columns; an annotation of a task whose row is not among `known` is rejected (`unknown_row`)."""
    read = read_label_studio_export(path, lenient=lenient)
    rows, rejected = [], [dict(r) for r in read.rejected]
    for r in read.rows:
        row = {"row_id": r["row_id"], "values": r["values"], "annotator": r["annotator"],
               "annotation_id": int(r["annotation_id"]), "ls_task_id": int(r["task_id"]) if r["task_id"] is not None
               else None, "created_at": r["created_at"], "updated_at": r["updated_at"],
               "lead_time": float(r["lead_time"]) if r["lead_time"] is not None else None,
               "source_file": r["source_file"], "source_record": r["source_record"],
               "source_locator": r["source_locator"], "id": r["id"]}
        if known is not None and r["row_id"] not in known:
            rejected.append({**{k: v for k, v in row.items() if k != "values"}, "reason_code": "unknown_row",
                             "reason": f"the task's row {r['row_id']!r} is not one of this run's rows (the project "
                                       "was made from another run)"})
            continue
        rows.append(row)
    if not rows and not rejected:
        raise InputError(str(path), None, "a Label Studio export without any annotation")
    return rows, rejected


def one(values: dict, control: str, default=None):
    """The single value of a control (a TextArea's first text, a Choices' first choice), or default."""
    v = values.get(control, default)
    return v[0] if isinstance(v, list) and v else (default if isinstance(v, list) else v)


def light_kappa(labels: pd.DataFrame, item: str = "row_id", rater: str = "annotator", value: str = "label") -> float | None:
    """Light's kappa: the mean of Cohen's kappa over every pair of raters, each pair on the items both
    labelled (scikit-learn's cohen_kappa_score). None where no pair shares two items."""
    from sklearn.metrics import cohen_kappa_score

    wide = labels.pivot_table(index=item, columns=rater, values=value, aggfunc="first")
    scores = []
    for a, b in combinations(wide.columns, 2):
        both = wide[[a, b]].dropna()
        if len(both) >= 2:
            k = cohen_kappa_score(both[a].astype(str), both[b].astype(str))
            if np.isfinite(k):
                scores.append(float(k))
    return float(np.mean(scores)) if scores else None


def pairwise_spearman(ratings: pd.DataFrame, item: str = "row_id", rater: str = "annotator",
                      value: str = "rating") -> float | None:
    """The mean Spearman correlation over every pair of raters, on the items both rated (scipy)."""
    from scipy.stats import spearmanr

    wide = ratings.pivot_table(index=item, columns=rater, values=value, aggfunc="first")
    scores = []
    for a, b in combinations(wide.columns, 2):
        both = wide[[a, b]].dropna()
        if len(both) >= 3 and both[a].nunique() > 1 and both[b].nunique() > 1:
            scores.append(float(spearmanr(both[a], both[b]).statistic))
    return float(np.mean(scores)) if scores else None


def observed_agreement(labels: pd.DataFrame, item: str = "row_id", value: str = "label") -> float | None:
    """The share of items (labelled at least twice) on which every rater gave the same label."""
    per = labels.groupby(item)[value].agg(lambda s: (len(s), s.astype(str).nunique()))
    multi = [n_unique == 1 for n, n_unique in per if n >= 2]
    return float(np.mean(multi)) if multi else None
