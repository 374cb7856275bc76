"""SEEDS 4.3: a seeded selection of N samples split train / test, with the dev slice of train
(DECO: 300 = 200 train + 100 test; the released train marks 40 as dev). Samples read from a
release keep the split they were released in."""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.runtime import StageOutput


def sample(samples: pd.DataFrame, *, n: int = 300, train: int = 200, dev: int = 40, seed: int = 0) -> StageOutput:
    """Selected samples with `split` (train / test) and `dev`; the others rejected as not_sampled.

    Args:
        n: samples to select among those without a released split (the paper: 300)
        train: of the n, how many go to train; the rest is test (the paper: 200)
        dev: of train, how many are marked dev (the release: 40)
        seed: seed of the selection and the split
    """
    if not 0 <= dev <= train <= n:
        raise ConfigError(f"deco.sample: need 0 <= dev <= train <= n, got dev={dev}, train={train}, n={n}")
    released = samples["split"].notna()
    kept = samples[released].assign(dev=samples.loc[released, "for_dev"].astype(bool), selection="released")
    pool = samples[~released].sort_values("id")
    order = compute.rng(seed, "deco-sample").permutation(len(pool))
    chosen = pool.iloc[order[:n]]
    k_train = min(train, len(chosen)) if len(chosen) >= n else round(len(chosen) * train / n)
    k_dev = min(dev, k_train) if len(chosen) >= n else round(len(chosen) * dev / n)
    split = ["train"] * k_train + ["test"] * (len(chosen) - k_train)
    drawn = chosen.assign(split=split, dev=[i < k_dev for i in range(len(chosen))], selection="sampled",
                          for_dev=[i < k_dev for i in range(len(chosen))])
    rest = pool.iloc[order[n:]]
    data = pd.concat([f for f in (kept, drawn) if len(f)] or [kept]).sort_values("id", kind="stable")
    data = data.astype({"dev": bool, "for_dev": bool, "split": "str"}).reset_index(drop=True)
    counts = data.groupby(["split", "dev"]).size()
    return StageOutput(
        data=data,
        rejected=rest.assign(reason_code="not_sampled", reason=f"not among the {n} samples drawn (seed {seed})"),
        notes={"released": int(released.sum()), "drawn": len(drawn), "candidates": len(pool),
               **({"short": f"only {len(pool)} candidates for n={n}: train/dev scaled to {k_train}/{k_dev}"}
                  if len(pool) < n else {}),
               "splits": {f"{s}{' (dev)' if d else ''}": int(c) for (s, d), c in counts.items()}})
