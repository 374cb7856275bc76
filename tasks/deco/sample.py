"""SEEDS 4.3: a seeded selection of N samples split train / test, with the dev slice of train
(DECO: 300 = 200 train + 100 test; the released train marks 40 as dev). Samples read from a
release keep the split they were released in."""

from __future__ import annotations

import json

import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.runtime import StageOutput
from readers.deco import join_history


def _num(v):
    return None if v is None or (isinstance(v, float) and v != v) else v


def _guid(g, k: int):
    g = _num(g)
    return k if g is None else int(g) if str(g).isdigit() else g


def _rating(x):
    """A rater's score as released: an integer where it is one (the release writes [2, 4, 2])."""
    x = float(x)
    return int(x) if x.is_integer() else x


def release_json(rows: pd.DataFrame) -> bytes:
    """Samples in DECO's released JSON layout, as the release writes it (one line, `json.dumps`'s
    defaults, integer ratings as integers, no final newline): an imported release re-exported in its
    order is its bytes. `read_deco` reads it back."""
    out = []
    for k, r in enumerate(rows.itertuples()):
        raw = lambda v: None if v is None or (not hasattr(v, "__len__")) else [_rating(x) for x in v]  # noqa: E731
        out.append({"history": join_history(list(r.history)), "response": r.response, "source": r.corpus,
                    "system": _num(r.system), "GUID": _guid(r.guid, k), "general_cs_raw": raw(r.general_cs_raw),
                    "event_cs_raw": raw(r.event_cs_raw),
                    "tuples_single": [list(map(str, t)) for t in r.tuples_single],
                    "tuples_pair": [list(map(str, t)) for t in r.tuples_pair],
                    "general_cs": _num(r.general_cs), "event_cs": _num(r.event_cs), "for_dev": bool(r.dev)})
    return json.dumps(out).encode()


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
    # in the order read (a release's own order), built samples by their source line
    data = pd.concat([f for f in (kept, drawn) if len(f)] or [kept]).sort_values(
        ["source_file", "source_record", "id"], kind="stable")
    data = data.astype({"dev": bool, "for_dev": bool, "split": "str"}).reset_index(drop=True)
    counts = data.groupby(["split", "dev"]).size()
    return StageOutput(
        data=data, files={f"deco_{split}.json": release_json(rows) for split, rows in data.groupby("split")},
        rejected=rest.assign(reason_code="not_sampled", reason=f"not among the {n} samples drawn (seed {seed})"),
        notes={"released": int(released.sum()), "drawn": len(drawn), "candidates": len(pool),
               **({"short": f"only {len(pool)} candidates for n={n}: train/dev scaled to {k_train}/{k_dev}"}
                  if len(pool) < n else {}),
               "splits": {f"{s}{' (dev)' if d else ''}": int(c) for (s, d), c in counts.items()}})
