"""DECO's human agreement, as the paper reports it, from the `*_raw` ratings of the samples:
inter-annotator Spearman (every rating against the mean of the other raters' ratings of that sample,
all raters' pairs pooled; the paper: 0.578 for event commonsense on all 300) and the Spearman of
event commonsense with the overall (general) rating (each rater's two ratings of a sample as a pair,
pooled; the paper: 0.862), per split and over all, beside the paper. Pooling is what reproduces the
figures on the released train (0.548 and 0.853; averaging per rater gives 0.555 and 0.852).

Not computed: the Fleiss kappa of the tuple validation, whose votes neither the release nor the
annotation import carries."""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk.runtime import StageOutput
from tasks.statistics import Measures

PAPER = {("inter_annotator_spearman_event_cs", "all"): 0.578, ("event_vs_overall_spearman", "all"): 0.862}


def _matrix(raw: list) -> np.ndarray:
    """Ratings as samples x raters, keeping the samples with the most common number of raters."""
    lengths = pd.Series([len(r) for r in raw])
    if not len(lengths):
        return np.zeros((0, 0))
    k = int(lengths.mode().iloc[0])
    return np.array([list(r) for r in raw if len(r) == k], dtype=float).reshape(-1, k)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from scipy import stats  # imported on use: scipy.stats alone took a third of `csk`'s start-up

    return float(stats.spearmanr(x, y).statistic)


def inter_annotator(raw: list) -> float:
    """Spearman of every rating with the mean of the other raters' ratings of its sample, pooled."""
    m = _matrix(raw)
    if m.shape[1] < 2:
        return float("nan")
    others = np.stack([np.delete(m, j, axis=1).mean(axis=1) for j in range(m.shape[1])], axis=1)
    return _spearman(m.T.ravel(), others.T.ravel())


def paired_raters(a: list, b: list) -> float:
    """Spearman of two ratings given by the same rater to the same sample, all raters pooled."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None and len(x) == len(y) and len(x)]
    if not pairs:
        return float("nan")
    return _spearman(np.concatenate([np.asarray(x, float) for x, _ in pairs]),
                     np.concatenate([np.asarray(y, float) for _, y in pairs]))


def agreement(samples: pd.DataFrame) -> StageOutput:
    """The human ratings' agreement of DECO's samples, per split and over all, beside the paper; ConTurE's
    rated turns (another dataset) on their own."""
    measures = Measures(PAPER)
    conture = samples["corpus"] == "ConTurE"
    deco = samples[~conture]
    groups = [("all", deco)] + [(s, g) for s, g in deco.groupby("split", sort=True)]
    groups += [("ConTurE", samples[conture])] if conture.any() else []
    notes = {}
    for group, g in groups:
        for rating in ("event_cs", "general_cs"):
            raw = [r for r in g.get(f"{rating}_raw", pd.Series(dtype=object)) if r is not None and len(r)]
            measures.add("rated_samples", f"{group}:{rating}", len(raw), "sample")
            value = inter_annotator(raw)
            if value == value:
                measures.add(f"inter_annotator_spearman_{rating}", group, value, "sample")
            else:
                notes[f"inter_annotator_spearman_{rating}/{group}"] = "fewer than 3 samples rated by 2+ raters"
        value = paired_raters(list(g.get("event_cs_raw", [])), list(g.get("general_cs_raw", [])))
        if value == value:
            measures.add("event_vs_overall_spearman", group, value, "sample")
        else:
            notes[f"event_vs_overall_spearman/{group}"] = "fewer than 3 rater pairs of both ratings"
    out = measures.output({})
    out.notes = {**out.notes, "not_computed": notes,
                 "fleiss_kappa": "not computed: no tuple-validation votes in the samples"}
    return out
