"""docs/method.md 4 (ACCENT's evaluation): how the automatic scores agree with the human ratings. Pearson and
Spearman (scipy) of the compatibility scores with `event_cs` (and `general_cs`), per split and over
all rated samples, each with a percentile bootstrap confidence interval (scipy.stats.bootstrap,
pairs resampled together), as a table and a scatter plot."""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk import compute
from csk.runtime import StageOutput
from tasks.plots import figure, png

METHODS = ("pearson", "spearman")  # scipy.stats functions, looked up on use (scipy.stats is slow to import)
MIN_PAIRS = 3  # a correlation of fewer pairs says nothing
NOT_SCORED = "not scored: no COMET model configured (deco.compatibility.comet)"


def _interval(x: np.ndarray, y: np.ndarray, method: str, n_resamples: int, confidence: float,
              seed: int) -> tuple[float, float, int]:
    """Percentile interval over scipy's paired resamples. On few samples some resamples hold one
    distinct score (their correlation is undefined, scipy makes the whole interval NaN): the interval
    is taken over the defined ones and their number is returned."""
    from scipy import stats

    fn = getattr(stats, f"{method}r")

    def statistic(a, b):
        return fn(a, b).statistic if np.ptp(a) > 0 and np.ptp(b) > 0 else np.nan

    with np.errstate(invalid="ignore"):
        res = stats.bootstrap((x, y), statistic, paired=True, vectorized=False, n_resamples=n_resamples,
                              confidence_level=confidence, method="percentile",
                              random_state=compute.rng(seed, "deco-bootstrap", method))
    dist = res.bootstrap_distribution[~np.isnan(res.bootstrap_distribution)]
    if not len(dist):
        return np.nan, np.nan, 0
    alpha = (1 - confidence) / 2
    low, high = np.percentile(dist, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high), int(len(dist))


def correlation(scores: pd.DataFrame, *, ratings: list[str] = ["event_cs", "general_cs"], n_resamples: int = 1000,
                confidence: float = 0.95, seed: int = 0) -> StageOutput:
    """One row per (split, rating, method): the correlation, its p-value and bootstrap interval.

    Args:
        ratings: human rating columns to correlate the score with (DECO: event_cs, general_cs)
        n_resamples: bootstrap resamples of the interval
        confidence: level of the interval
        seed: seed of the bootstrap
    """
    rows = []
    scored = scores[scores["score"].notna()]
    off = len(scores) > 0 and "scorer" in scores and bool((scores["scorer"] == "off").all())
    groups = [("all", scored)] + [(s, g) for s, g in scored.groupby("split", sort=True)]
    for split, g in groups:
        for rating in ratings:
            pairs = g[g[rating].notna()] if rating in g else g.iloc[:0]
            x, y = pairs["score"].to_numpy(float), pairs[rating].to_numpy(float) if len(pairs) else np.array([])
            for method in METHODS:
                row = {"id": f"{split}:{rating}:{method}", "split": split, "rating": rating, "method": method,
                       "n": len(pairs), "r": np.nan, "p_value": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                       "note": None}
                if off:
                    row["note"] = NOT_SCORED
                elif len(pairs) < MIN_PAIRS:
                    row["note"] = f"{len(pairs)} scored and rated samples: too few to correlate"
                elif np.ptp(x) == 0 or np.ptp(y) == 0:
                    row["note"] = "constant scores or ratings: the correlation is undefined"
                else:
                    from scipy import stats

                    res = getattr(stats, f"{method}r")(x, y)
                    low, high, defined = _interval(x, y, method, n_resamples, confidence, seed)
                    row.update(r=float(res.statistic), p_value=float(res.pvalue), ci_low=low, ci_high=high)
                    if defined < n_resamples:
                        row["note"] = (f"interval over the {defined} of {n_resamples} resamples whose "
                                       "correlation is defined")
                rows.append(row)
    data = pd.DataFrame(rows).astype({"r": float, "p_value": float, "ci_low": float, "ci_high": float})
    files = {"scatter.png": _scatter(scored, ratings, NOT_SCORED if off else None)}
    why = NOT_SCORED if off else "no scored sample" if scored.empty else None
    return StageOutput(data=data, files=files, tables={"correlation": data.astype(object).where(data.notna(), None).to_dict("records")},
                       notes={"confidence": confidence, "n_resamples": n_resamples, "bootstrap": "percentile, pairs",
                              **({"empty": why} if why else {}),
                              **({"notice": f"every correlation is NaN: {NOT_SCORED}; give it a COMET directory "
                                            "to score (docs/deco.md)"} if off else {})})


def _scatter(scored: pd.DataFrame, ratings: list[str], empty: str | None = None) -> bytes:
    plt, fig, axes = figure(4.5 * len(ratings), 4, ncols=len(ratings))
    for ax, rating in zip(np.atleast_1d(axes), ratings):
        if empty:  # say why the plot has no points rather than draw empty axes
            ax.text(0.5, 0.5, empty.replace(": ", ":\n", 1), ha="center", va="center", wrap=True,
                    transform=ax.transAxes)
        have = scored[scored[rating].notna()] if rating in scored else scored.iloc[:0]
        for split, g in have.groupby("split", sort=True):
            ax.scatter(g[rating], g["score"], s=14, alpha=0.7, label=f"{split} ({len(g)})")
        ax.set(xlabel=f"human {rating} (1-5)", ylabel="compatibility score", title=f"score vs {rating}")
        if len(have):
            ax.legend()
    return png(plt, fig)
