"""DECO's human agreement, as the paper reports it, from the `*_raw` ratings of the samples:
inter-annotator Spearman (every rating against the mean of the other raters' ratings of that sample,
all raters' pairs pooled; the paper: 0.578 for event commonsense on all 300) and the Spearman of
event commonsense with the overall (general) rating (each rater's two ratings of a sample as a pair,
pooled; the paper: 0.862), per split and over all, beside the paper. Pooling is what reproduces the
figures on the released train (0.548 and 0.853; averaging per rater gives 0.555 and 0.852).

Ratings collected in Label Studio (deco.sample.ratings) name their raters (`raters`): the mean
Spearman over every pair of raters on the samples both rated is added (`pairwise_spearman_*`).
The tuple validation's agreement (Fleiss' and Light's kappa, `fleiss_kappa` below) is the extract
stage's, which reads its votes (deco.extract.validations); the release carries no votes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk.runtime import StageOutput
from tasks.labeling import pairwise_spearman
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


def fleiss_kappa(counts: list[list[int]]) -> float | None:
    """Fleiss' kappa of items x categories vote counts, over the items with the most common number of
    votes (the measure needs the same number per item); None below 2 such items, 2 votes or one category."""
    lengths = pd.Series([sum(c) for c in counts], dtype=int)
    if not len(lengths):
        return None
    n = int(lengths.mode().iloc[0])
    m = np.array([c for c in counts if sum(c) == n], dtype=float)
    if n < 2 or len(m) < 2:
        return None
    p = m.sum(axis=0) / m.sum()
    observed = ((m * (m - 1)).sum(axis=1) / (n * (n - 1))).mean()
    expected = float((p ** 2).sum())
    return None if expected >= 1 else float((observed - expected) / (1 - expected))


def rater_ratings(g: pd.DataFrame, rating: str) -> pd.DataFrame:
    """One row per (sample, rater, rating) of the samples whose raters are named (Label Studio's)."""
    rows = [{"row_id": i, "annotator": a, "rating": float(x)}
            for i, raters, raw in zip(g["id"], g["raters"], g[f"{rating}_raw"])
            if isinstance(raters, (list, np.ndarray)) and isinstance(raw, (list, np.ndarray)) and len(raters) == len(raw)
            for a, x in zip(raters, raw)]
    return pd.DataFrame(rows, columns=["row_id", "annotator", "rating"])


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
            named = rater_ratings(g, rating) if "raters" in g.columns else None
            if named is not None and len(named):
                value = pairwise_spearman(named)
                if value is not None:
                    measures.add(f"pairwise_spearman_{rating}", group, value, "sample")
                else:
                    notes[f"pairwise_spearman_{rating}/{group}"] = "no pair of raters rated 3 samples in common, with varied ratings"
        value = paired_raters(list(g.get("event_cs_raw", [])), list(g.get("general_cs_raw", [])))
        if value == value:
            measures.add("event_vs_overall_spearman", group, value, "sample")
        else:
            notes[f"event_vs_overall_spearman/{group}"] = "fewer than 3 rater pairs of both ratings"
    out = measures.output({})
    out.notes = {**out.notes, "not_computed": notes,
                 "fleiss_kappa": "the tuple validation's agreement is the extract stage's (deco.extract.validations: "
                                 "its manifest's agreement); the samples carry no votes"}
    return out
