"""Dialogue-level train/validation/test splits (SEEDS 1.4: 60:20:20 of instances, by dialogue)."""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.runtime import StageOutput

SPLITS = ("train", "validation", "test")


def assign_splits(sizes: pd.Series, fractions: dict[str, float], seed: int) -> dict[str, str]:
    """Shuffle dialogues (seeded) and give each to the split furthest below its share of instances,
    so instance proportions track the fractions while no dialogue is in two splits."""
    ids = sorted(sizes.index)
    order = compute.rng(seed, "splits").permutation(len(ids))
    total = float(sizes.sum())
    filled = {s: 0.0 for s in SPLITS}
    out = {}
    for k in order:
        did = ids[k]
        deficit = {s: fractions[s] * total - filled[s] for s in SPLITS if fractions[s] > 0}
        split = max(deficit, key=lambda s: (deficit[s], -SPLITS.index(s)))
        out[did] = split
        filled[split] += float(sizes[did])
    return out


def splits(annotations: pd.DataFrame, *, seed: int = 0, train: float = 0.6, validation: float = 0.2,
           test: float = 0.2) -> StageOutput:
    """Each dialogue to one split, so that instance shares track the fractions.

    Args:
        seed: seed of the dialogue shuffle
        train: share of instances in train
        validation: share of instances in validation
        test: share of instances in test
    """
    fractions = {"train": train, "validation": validation, "test": test}
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise ConfigError(f"splits: fractions must sum to 1, got {sum(fractions.values()):.3f}")
    sizes = annotations.groupby("dialogue_id").size()
    which = assign_splits(sizes, fractions, seed)
    data = annotations[["id", "dialogue_id"]].copy()
    data["split"] = data["dialogue_id"].map(which)
    summary = data.groupby("split").agg(instances=("id", "size"), dialogues=("dialogue_id", "nunique"))
    table = [{"split": s, "instances": int(summary.loc[s, "instances"]) if s in summary.index else 0,
              "dialogues": int(summary.loc[s, "dialogues"]) if s in summary.index else 0} for s in SPLITS]
    return StageOutput(data=data, tables={"splits": table}, notes={"sizes": table})
