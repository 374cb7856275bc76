"""docs/method.md 2.1: a seeded uniform sample of English ConceptNet edges, a quota per relation."""

from __future__ import annotations

import re
from typing import Annotated

import pandas as pd
from pydantic import Field

from csk import compute
from csk import conceptnet as cn
from csk.runtime import StageContext, StageOutput
from tasks.conceptnet import open_database

SURFACE = re.compile(r"\[\[(.+?)\]\]")
# The release's mix: distinct P-NLI statements per relation (UsedFor 981, Desires 994, Causes 610); the
# paper describes 1,000 UsedFor edges only. {"UsedFor": 1000} samples as the paper says.
RELEASE_MIX = {"UsedFor": 981, "Desires": 994, "Causes": 610}


def edges(conceptnet: pd.DataFrame, *, n_per_relation: dict[str, Annotated[int, Field(ge=0)]] = RELEASE_MIX, language: str = "en",
          seed: int = 0, ctx: StageContext | None = None) -> StageOutput:
    """Every edge of each relation with both ends in the language, then that relation's quota of them
    uniformly at random (its own seeded draw, so one relation's quota never moves another's sample).

    Args:
        n_per_relation: ConceptNet relation -> edges sampled (all of them when fewer exist); the default is
            the release's mix, {"UsedFor": 1000} the paper's description
        language: both ends of an edge in this language
        seed: seed of the sample
    """
    db = open_database(conceptnet, ctx)
    population = cn.edges(sorted(n_per_relation), language)
    take = []
    for relation, quota in sorted(n_per_relation.items()):
        idx = [i for i, e in enumerate(population) if e["relation"] == relation]
        rng = compute.rng(seed, "edges", relation)
        take += [idx[k] for k in rng.choice(len(idx), size=min(quota, len(idx)), replace=False).tolist()] if idx else []
    take.sort()
    rows = []
    for i in take:
        e = population[i]
        info = e["info"]
        surface = str(info.get("surfaceText") or "")
        spans = SURFACE.findall(surface)
        line = int(db["lines"][e["edge_id"] - 1]) if db["lines"] is not None else e["edge_id"]
        rows.append({"id": e["edge_uri"], "relation": e["relation"], "head": e["head"], "tail": e["tail"],
                     "start_uri": e["start_uri"], "end_uri": e["end_uri"], "weight": float(info.get("weight", 1.0)),
                     "surface_text": surface, "surface_start": spans[0] if len(spans) > 0 else e["head"],
                     "surface_end": spans[1] if len(spans) > 1 else e["tail"],
                     "dataset": str(info.get("dataset", "")), "source_file": db["source_file"],
                     "source_record": line, "source_locator": f"line {line}"})
    by_relation = pd.Series([e["relation"] for e in population]).value_counts().to_dict() if population else {}
    sampled = pd.Series([r["relation"] for r in rows]).value_counts().to_dict() if rows else {}
    notes = {"population": len(population), "sampled": len(rows), "population_by_relation": by_relation,
             "sampled_by_relation": sampled, "quota_by_relation": dict(n_per_relation),
             "short_of_quota": {r: q - sampled.get(r, 0) for r, q in n_per_relation.items() if sampled.get(r, 0) < q}}
    return StageOutput(data=pd.DataFrame(rows, columns=[
        "id", "relation", "head", "tail", "start_uri", "end_uri", "weight", "surface_text", "surface_start",
        "surface_end", "dataset", "source_file", "source_record", "source_locator"]), rows_in=len(rows), notes=notes)
