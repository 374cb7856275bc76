"""docs/method.md 3.2: one-hop ConceptNet screening. A match is a triple (e1, r, e2) with e1 a concept of
utterance i and e2 a concept of utterance i+1; a dialogue is kept with more than three matches.

Look-ups are batched: every distinct concept of a shard is looked up once (a few SQL queries of
500 labels each, reading only each edge's id and two labels), the per-dialogue work is set
look-ups in memory, and only the matched edges are read whole (URIs, relation)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from csk import conceptnet as cn
from csk.runtime import StageContext, StageOutput
from csk.shards import map_shards, spans
from tasks.conceptnet import open_database


def one_hop_index(concepts: set[str], language: str, relations: list[str] | None) -> dict[str, dict[str, list[int]]]:
    """e1 -> e2 -> the ids of the edges (e1, r, e2) of ConceptNet, for every e1 among `concepts`."""
    index: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for edge_id, head, tail in cn.one_hop_pairs(sorted(concepts), language, relations or None):
        index[head.replace(" ", "_")][tail.replace(" ", "_")].append(edge_id)
    return index


def dialogue_matches(concept_sets: list[list[str]], index: dict) -> list[tuple[int, int]]:
    """(i, edge id) for every edge from a concept of utterance i to a concept of utterance i+1."""
    out = []
    for i in range(len(concept_sets) - 1):
        following = set(concept_sets[i + 1])
        for e1 in concept_sets[i]:
            targets = index.get(e1)
            if not targets:
                continue
            # the few concepts of the next utterance looked up in e1's targets (a hub concept has
            # thousands: `following.intersection(targets)` walked all of them, 37% of the stage)
            for e2 in sorted(c for c in following if c in targets):
                if e2 != e1:
                    out += [(i, e) for e in targets[e2]]
    return out


def match_shard(frame: pd.DataFrame, *, database: str, language: str, relations: list[str]) -> pd.DataFrame:
    """The matches of a shard of dialogues (each concept of the shard looked up once; only the matched
    edges read whole), and the concepts of each dialogue that have edges; on a worker, the database is
    opened there."""
    cn.connect(database)
    sets = [[list(c) for c in cs] for cs in frame["concept_sets"]]
    index = one_hop_index({c for cs in sets for u in cs for c in u}, language, relations)
    found = [dialogue_matches(cs, index) for cs in sets]
    edges = cn.edges_by_id([e for m in found for _, e in m])
    keys = ("head", "relation", "tail", "edge_uri", "edge_id")
    matches = [[{"utterance": i, **{k: edges[e][k] for k in keys}} for i, e in m] for m in found]
    heads = [sorted({c for u in cs for c in u if c in index}) for cs in sets]
    return pd.DataFrame({"matches": matches, "heads": heads})


def screening(dialogues: pd.DataFrame, concepts: pd.DataFrame, conceptnet: pd.DataFrame, *, min_matches: int = 4,
              language: str = "zh", relations: list[str] = [], ctx: StageContext | None = None) -> StageOutput:
    """Dialogues with at least `min_matches` one-hop matches between consecutive utterances.

    Args:
        min_matches: keep a dialogue with at least this many matches (the paper: more than three)
        language: ConceptNet language of both ends of a triple (`/c/zh/...`)
        relations: count only these relations (e.g. ["RelatedTo", "Causes"]); empty: every relation
    """
    db = open_database(conceptnet, ctx)
    ordered = concepts.sort_values("utterance", kind="stable")  # once, not once per dialogue
    per_dialogue = {d: [list(c) for c in cs] for d, cs in ordered.groupby("dialogue_id", sort=False)["concepts"]}
    ids = dialogues["id"].tolist()
    frames = [pd.DataFrame({"dialogue_id": ids[a:b], "concept_sets": [per_dialogue.get(d, []) for d in ids[a:b]]})
              for a, b in spans(len(ids))]
    found = map_shards(match_shard, frames, database=str(db["database"]), language=language,
                       relations=list(relations))
    matches = pd.concat(found, ignore_index=True) if found else pd.DataFrame({"matches": [], "heads": []})
    lines = db["lines"]
    counts, evidence = [], []
    for edges in matches["matches"]:
        counts.append(len(edges))
        items = []
        for e in edges:
            i = int(e["utterance"])
            line = int(lines[e["edge_id"] - 1]) if lines is not None else int(e["edge_id"])
            items.append({"text": f"utterance {i} -> {i + 1}: {e['head']} -[{e['relation']}]-> {e['tail']}",
                          "utterance": i, "e1": e["head"], "relation": e["relation"], "e2": e["tail"],
                          "edge_uri": e["edge_uri"], "source_file": db["source_file"], "source_record": line,
                          "source_locator": f"line {line}"})
        evidence.append(items)
    with_edges = {h for heads in matches["heads"] for h in heads}
    out = dialogues.assign(matches=counts, evidence=evidence, dump_sha256=db["dump_sha256"])
    keep = out["matches"] >= min_matches
    rejected = out[~keep].drop(columns=["evidence"]).assign(
        reason_code="too_few_matches",
        reason=[f"{n} one-hop ConceptNet match{'es' if n != 1 else ''} between consecutive utterances, fewer than "
                f"{min_matches}" for n in out.loc[~keep, "matches"]])
    notes = {"concepts_looked_up": len({c for cs in concepts["concepts"] for c in cs}),
             "concepts_with_edges": len(with_edges), "kept": int(keep.sum()), "screened_out": int((~keep).sum()),
             "matches_per_kept_dialogue": round(float(out.loc[keep, "matches"].mean()), 2) if keep.any() else 0.0,
             "dump": db["source_file"], "dump_sha256": db["dump_sha256"]}
    return StageOutput(data=out[keep], rejected=rejected, notes=notes,
                       tables={"matches_by_relation": _by_relation(out[keep])})


def _by_relation(kept: pd.DataFrame) -> list[dict]:
    counts = pd.Series([e["relation"] for ev in kept["evidence"] for e in ev], dtype=object).value_counts()
    return [{"relation": r, "matches": int(n)} for r, n in counts.sort_index().items()]
