"""CORECODE run statistics comparable to the paper's Table 1 (SEEDS 3.4): dialogues, turns and tokens
per dialogue, annotations per dimension and conflict phrases, per set, with the published totals;
a table and a plot."""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput
from tasks.statistics import Measures
from tasks.corecode.annotations import words
from tasks.plots import figure, png

PAPER = {("dialogues", "all"): 19700.0, ("annotations", "all"): 76787.0, ("conflict_phrases", "all"): 153574.0,
         ("dialogues", "EASY"): 9700.0, ("dialogues", "HARD"): 10000.0}


def statistics(dialogues: pd.DataFrame, screening: pd.DataFrame, annotations: pd.DataFrame,
               splits: pd.DataFrame) -> StageOutput:
    measures = Measures(PAPER)
    add = measures.add

    add("dialogues_read", "all", len(dialogues), "sources")
    add("dialogues_screened_in", "all", len(screening), "screening")
    add("matches_per_dialogue", "screened_in", screening["matches"].mean() if len(screening) else 0, "screening")
    turns = dict(zip(screening["id"], screening["turns"]))
    tokens = {d: sum(len(words(t["text"])) for t in ts) for d, ts in turns.items()}
    for group, ann in [("all", annotations), *((s, g) for s, g in annotations.groupby("set"))]:
        ds = sorted(set(ann["dialogue_id"]))
        add("dialogues", group, len(ds), "annotations")
        add("turns_per_dialogue", group, sum(len(turns[d]) for d in ds) / len(ds) if ds else 0, "annotations")
        add("tokens_per_dialogue", group, sum(tokens[d] for d in ds) / len(ds) if ds else 0, "annotations")
        add("annotations", group, len(ann), "annotations")
        add("conflict_phrases", group, 2 * len(ann), "annotations")
        for dim, n in ann.groupby("dimension").size().items():
            add(f"annotations_{dim.replace(' ', '_')}", group, n, "annotations")
    for split, g in splits.groupby("split"):
        add("dialogues_in_split", split, g["dialogue_id"].nunique(), "splits")
        add("annotations_in_split", split, len(g), "splits")
    plt, fig, axes = figure(14, 4, ncols=3)
    per = annotations.groupby(["dimension", "set"]).size().unstack(fill_value=0) if len(annotations) else pd.DataFrame()
    if len(per):
        per.plot.bar(ax=axes[0], rot=0)
    axes[0].set_title(f"annotations per dimension ({len(annotations)})")
    doms = annotations.groupby("domain").size().sort_values() if len(annotations) else pd.Series(dtype=int)
    axes[1].barh(list(doms.index), list(doms.values))
    axes[1].set_title("annotations per domain")
    axes[2].hist(screening["matches"], bins=20) if len(screening) else None
    axes[2].set_title("one-hop matches per screened-in dialogue")
    return measures.output({"statistics.png": png(plt, fig)})
