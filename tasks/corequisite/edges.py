"""SEEDS 2.1: a seeded uniform sample of English ConceptNet edges of the configured relations."""

from __future__ import annotations

import re

import pandas as pd

from csk import compute
from csk import conceptnet as cn
from csk.runtime import StageContext, StageOutput
from tasks.conceptnet import open_database

SURFACE = re.compile(r"\[\[(.+?)\]\]")


def edges(conceptnet: pd.DataFrame, *, relations: list[str] = ["UsedFor"], language: str = "en", n: int = 1000,
          seed: int = 0, ctx: StageContext | None = None) -> StageOutput:
    """Every edge of the relations with both ends in the language, then `n` of them uniformly at random.

    Args:
        relations: ConceptNet relations to sample (the paper: UsedFor; the release also has Desires and Causes)
        language: both ends of an edge in this language
        n: edges sampled (the paper: 1,000); all of them when fewer exist
        seed: seed of the sample
    """
    db = open_database(conceptnet, ctx)
    population = cn.edges(relations, language)
    rng = compute.rng(seed, "edges")
    take = sorted(rng.choice(len(population), size=min(n, len(population)), replace=False).tolist()) \
        if population else []
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
    notes = {"population": len(population), "sampled": len(rows), "population_by_relation": by_relation}
    return StageOutput(data=pd.DataFrame(rows, columns=[
        "id", "relation", "head", "tail", "start_uri", "end_uri", "weight", "surface_text", "surface_start",
        "surface_end", "dataset", "source_file", "source_record", "source_locator"]), rows_in=len(rows), notes=notes)
