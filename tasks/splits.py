"""Group-level train/dev/test splits: every row of a group (a dialogue, a fact) lands in one split,
and the splits' shares of rows track the asked fractions. Shared by every dataset; each dataset's
`splits` stage states only its fractions and its group column.

A row imported from a release file that names its split (`PaCo_nli_train.csv`, CICERO's `val.json`) keeps
that split (its `release_split` column, from `split_in_name`): a released train row comes back in train. A
group with such rows takes their split whole; only the other groups are dealt, filling the shares left."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from csk import compute
from csk.errors import ConfigError


def split_in_name(path: str | Path, names: dict[str, str]) -> str | None:
    """The split a release file's name gives (`names`: a word of the name -> the dataset's split, e.g.
    {"train": "train", "eval": "dev"}); None when no word of the name is one (`PaCo_Gen.csv`)."""
    words = [w.lower() for w in re.split(r"[^A-Za-z]+", Path(str(path)).stem) if w]
    found = [names[w] for w in words if w in names]
    return found[0] if found else None


def assign_splits(sizes: pd.Series, fractions: dict[str, float], seed: int,
                  filled: dict[str, float] | None = None) -> dict[str, str]:
    """Shuffle the groups (seeded) and give each to the split furthest below its share of rows, so
    row proportions track the fractions while no group is in two splits. `sizes`: rows per group;
    `filled`: rows already in each split (a release's own), counted in the shares."""
    names = list(fractions)
    ids = sorted(sizes.index)
    order = compute.rng(seed, "splits").permutation(len(ids))
    filled = {s: float((filled or {}).get(s, 0.0)) for s in names}
    total = float(sizes.sum()) + sum(filled.values())
    out = {}
    for k in order:
        gid = ids[k]
        deficit = {s: fractions[s] * total - filled[s] for s in names if fractions[s] > 0}
        split = max(deficit, key=lambda s: (deficit[s], -names.index(s)))
        out[gid] = split
        filled[split] += float(sizes[gid])
    return out


def group_splits(rows: pd.DataFrame, group: str, fractions: dict[str, float], seed: int,
                 unit: str = "groups") -> tuple[pd.DataFrame, list[dict]]:
    """(id, group, split) per row and a per-split summary table (rows and groups). Rows with a
    `release_split` keep it, and so does the rest of their group."""
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise ConfigError(f"splits: fractions must sum to 1, got {sum(fractions.values()):.3f} ({fractions})")
    released = rows["release_split"] if "release_split" in rows.columns else pd.Series(None, index=rows.index,
                                                                                          dtype=object)
    has = released.notna()
    unknown = sorted(set(released[has]) - set(fractions))
    if unknown:
        raise ConfigError(f"splits: rows of a release name the split(s) {unknown}, not among {list(fractions)}")
    # a group with released rows goes whole to the split of its first released row
    group_release = released[has].groupby(rows.loc[has, group]).first().to_dict()
    free = rows[~rows[group].isin(group_release)]
    fixed = rows.loc[rows.index.difference(free.index)]
    filled_sizes = fixed[group].map(group_release).value_counts().to_dict()
    which = {**assign_splits(free.groupby(group).size(), fractions, seed, filled_sizes), **group_release}
    data = rows[["id", group]].copy()
    data["split"] = released.where(has, data[group].map(which))
    summary = data.groupby("split").agg(rows=("id", "size"), groups=(group, "nunique"))
    table = [{"split": s, "instances": int(summary.loc[s, "rows"]) if s in summary.index else 0,
              unit: int(summary.loc[s, "groups"]) if s in summary.index else 0} for s in fractions]
    return data, table
