"""Run statistics compared with the paper's figures (docs/method.md 1.3-1.4), as a table and a plot."""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk.runtime import StageOutput
from tasks.plots import figure, png

PAPER_DIALOGUES = {"dailydialog": 3280, "mutual": 1640, "dream": 753}
PAPER_TARGETS_PER_DIALOGUE = 28066 / 5672  # unique target utterances per dialogue in the release (4.95)
PAPER_TYPE_SHARES = {"subsequent_event": 0.80, "cause_and_prerequisite": 0.60, "cause_only": 0.28,
                     "prerequisite_only": 0.12}


def type_shares(targets: pd.DataFrame) -> dict[str, float]:
    """Shares among x1 u x2 targets (the population the paper's proportions are stated over)."""
    pool = targets[targets["sets"].map(lambda s: "x1" in s or "x2" in s).astype(bool)]
    per_target = pool.groupby(["dialogue_id", "utterance_index"])["inference_type"].agg(set)
    n = max(len(per_target), 1)
    return {
        "subsequent_event": sum("subsequent_event" in t for t in per_target) / n,
        "cause_and_prerequisite": sum({"cause", "prerequisite"} <= t for t in per_target) / n,
        "cause_only": sum("cause" in t and "prerequisite" not in t for t in per_target) / n,
        "prerequisite_only": sum("prerequisite" in t and "cause" not in t for t in per_target) / n,
    }


def _plot(per_stage: pd.DataFrame, hist: pd.Series, shares: dict[str, float]) -> bytes:
    plt, fig, axes = figure(15, 4, ncols=3)
    if per_stage.size:  # (nothing to draw for an empty run)
        per_stage.plot.bar(ax=axes[0], rot=0)
        # headroom for the legend in one row above the bars, so it never hides one
        axes[0].set_ylim(0, per_stage.to_numpy().max() * 1.3)
        axes[0].legend(title=None, ncol=len(per_stage.columns), loc="upper center", fontsize=8)
    axes[0].set_title("dialogues per source after each stage")
    axes[1].bar(hist.index.astype(str), hist.values)
    axes[1].set_title("target utterances per dialogue")
    x = np.arange(len(PAPER_TYPE_SHARES))
    axes[2].bar(x - 0.2, [shares[k] for k in PAPER_TYPE_SHARES], 0.4, label="this run")
    axes[2].bar(x + 0.2, list(PAPER_TYPE_SHARES.values()), 0.4, label="paper")
    axes[2].set_xticks(x, [k.replace("_", "\n") for k in PAPER_TYPE_SHARES])
    axes[2].set_title("inference-type shares of x1 u x2 targets")
    axes[2].legend()
    return png(plt, fig)


def statistics(sources: pd.DataFrame, filtered: pd.DataFrame, deduped: pd.DataFrame, targets: pd.DataFrame,
               splits: pd.DataFrame | None = None, annotations: pd.DataFrame | None = None) -> StageOutput:
    """Dialogues per source after each filter, targets, inference types and splits, beside the paper's figures."""
    rows = []
    stages = {"sources": sources, "length_filter": filtered, "dedup": deduped}
    per_stage = pd.DataFrame({name: df.groupby("source").size() for name, df in stages.items()}).fillna(0)
    per_stage = per_stage.reindex(sorted(per_stage.index)).T
    for stage, counts in per_stage.iterrows():
        for source, n in counts.items():
            rows.append({"id": f"dialogues/{stage}/{source}", "measure": "dialogues", "stage": stage,
                         "group": source, "value": float(n),
                         "paper": float(PAPER_DIALOGUES[source]) if stage == "dedup" and source in PAPER_DIALOGUES else None})
    per_dialogue = targets.groupby("dialogue_id")["utterance_index"].nunique()
    hist = per_dialogue.value_counts().sort_index()
    if len(per_dialogue):
        rows.append({"id": "targets_per_dialogue/mean", "measure": "unique_targets_per_dialogue", "stage": "targets",
                     "group": "mean", "value": float(per_dialogue.mean()), "paper": PAPER_TARGETS_PER_DIALOGUE})
    for k, n in hist.items():
        rows.append({"id": f"targets_per_dialogue/{k}", "measure": "targets_per_dialogue", "stage": "targets",
                     "group": str(k), "value": float(n), "paper": None})
    shares = type_shares(targets)
    for k, v in shares.items():
        rows.append({"id": f"type_share/{k}", "measure": "inference_type_share", "stage": "targets", "group": k,
                     "value": float(v), "paper": PAPER_TYPE_SHARES[k]})
    for t, n in targets["inference_type"].value_counts().sort_index().items():
        rows.append({"id": f"inferences/{t}", "measure": "inferences", "stage": "targets", "group": t,
                     "value": float(n), "paper": None})
    if splits is not None:
        for s, n in splits.groupby("split")["dialogue_id"].nunique().items():
            paper = {"train": 3477.0, "validation": 1097.0, "test": 1098.0}.get(s)
            rows.append({"id": f"split_dialogues/{s}", "measure": "split_dialogues", "stage": "splits", "group": s,
                         "value": float(n), "paper": paper})
    if annotations is not None and len(annotations):
        for corpus, g in annotations.groupby("corpus"):
            rows.append({"id": f"release_match/{corpus}", "measure": "release_dialogues_matched", "stage": "annotations",
                         "group": corpus, "value": float((~g["dialogue_from_release"]).mean()), "paper": None})
    data = pd.DataFrame(rows)
    table = data.assign(paper=data["paper"].astype(object).where(data["paper"].notna(), None)).to_dict(orient="records")
    return StageOutput(data=data, rows_in=len(data), files={"statistics.png": _plot(per_stage, hist, shares)},
                       tables={"statistics": table})
