"""Group-level train/dev/test splits: every row of a group (a dialogue, a fact) lands in one split,
and the splits' shares of rows track the asked fractions. Shared by every dataset; each dataset's
`splits` stage states only its fractions and its group column."""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.errors import ConfigError


def assign_splits(sizes: pd.Series, fractions: dict[str, float], seed: int) -> dict[str, str]:
    """Shuffle the groups (seeded) and give each to the split furthest below its share of rows, so
    row proportions track the fractions while no group is in two splits. `sizes`: rows per group."""
    names = list(fractions)
    ids = sorted(sizes.index)
    order = compute.rng(seed, "splits").permutation(len(ids))
    total = float(sizes.sum())
    filled = {s: 0.0 for s in names}
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
    """(id, group, split) per row and a per-split summary table (rows and groups)."""
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise ConfigError(f"splits: fractions must sum to 1, got {sum(fractions.values()):.3f} ({fractions})")
    which = assign_splits(rows.groupby(group).size(), fractions, seed)
    data = rows[["id", group]].copy()
    data["split"] = data[group].map(which)
    summary = data.groupby("split").agg(rows=("id", "size"), groups=(group, "nunique"))
    table = [{"split": s, "instances": int(summary.loc[s, "rows"]) if s in summary.index else 0,
              unit: int(summary.loc[s, "groups"]) if s in summary.index else 0} for s in fractions]
    return data, table
