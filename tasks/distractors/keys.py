"""Content keys of the engine's random draws: an instance draws by what it is, not by what it is called.

The CICERO flow names a released record `cicero-<file>-<line>` and its dialogue `cicero-<ID>`; the
generic `csk distractors rebuild` names the same record `r<line>` and its dialogue by a hash of its
turns. Keyed by those names, the two commands would draw different initial distractors and different
AF splits from one file. Keyed by content (an instance by its context and gold, a group by its
members' keys), the same file and settings give the same choices through either command.
"""

from __future__ import annotations

import hashlib

import pandas as pd


def instance_keys(view: pd.DataFrame) -> dict[str, str]:
    """id -> a key of the instance's context and gold answer (with the id only to tell exact repeats apart)."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    context_of = view["context"] if "context" in view.columns else view["question"]
    for iid, context, gold in zip(view["id"], context_of, view["gold"]):
        key = hashlib.sha1(f"{context}\x00{gold}".encode()).hexdigest()[:20]
        n = seen.get(key, 0)
        seen[key] = n + 1
        out[str(iid)] = key if n == 0 else f"{key}.{n}"  # the n-th repeat of one item, in input order
    return out


def group_order(view: pd.DataFrame) -> list[str]:
    """The groups ordered by their smallest member key: the order every seeded split permutes."""
    keys = instance_keys(view)
    first: dict[str, str] = {}
    for iid, g in zip(view["id"], view["group_id"]):
        k = keys[str(iid)]
        if g not in first or k < first[g]:
            first[g] = k
    return sorted(first, key=lambda g: (first[g], str(g)))
