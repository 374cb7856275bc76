"""CoreQuisite run statistics against the paper's figures (docs/method.md 2): facts per relation, answers flagged
and kept, polarity balance (the paper: 2.7K / 2.7K), the experts' label shares, instances per task and
split (P-MCQA beside the paper's ~40K), label balance, AF-Lite's removals; what still differs from the
release; a table and a plot."""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk.runtime import StageOutput
from tasks.statistics import Measures
from tasks.plots import figure, png

PAPER = {("facts", "sampled"): 1000.0, ("answers", "collected"): 6000.0, ("answers", "kept"): 5400.0,
         ("instances", "p_mcqa"): 40000.0, ("answers_kept", "enabling"): 2700.0, ("answers_kept", "disabling"): 2700.0}
DIFFERS = [
    "the paper samples 1,000 UsedFor edges; the release (and the default quotas) mix UsedFor, Desires and Causes",
    "the release ships no P-MCQA file: PaCo_mcqa_{train,eval,test}.jsonl are named as its P-NLI files",
    "the experts' label shares have no published figure to compare with (the paper reports ~5.4K kept of 6K)",
]


def statistics(edges: pd.DataFrame, facts: pd.DataFrame, checked: pd.DataFrame, kept: pd.DataFrame,
               p_nli: pd.DataFrame, p_g: pd.DataFrame, instances: pd.DataFrame,
               p_mcqa: pd.DataFrame | None = None) -> StageOutput:
    """Facts per relation, answers kept, polarity and expert-label shares, instances per task, beside the paper
    (no P-MCQA: too few answers for an instance, counted as 0)."""
    if p_mcqa is None:
        p_mcqa = pd.DataFrame({"id": pd.Series([], dtype=str), "variant": pd.Series([], dtype=str),
                               "split": pd.Series([], dtype=str)})
    measures = Measures(PAPER)
    add = measures.add

    add("facts", "sampled", len(edges), "edges")
    for rel, n in edges["relation"].value_counts().sort_index().items():
        add("facts_sampled", rel, n, "edges")
    add("facts", "lexicalized", len(facts), "lexicalize")
    for t, n in facts["template"].value_counts().sort_index().items():
        add("template_chosen", t, n, "lexicalize")
    add("answers", "collected", len(checked), "annotations")
    for rule in ("negatives", "object_pronouns"):
        for polarity in ("enabling", "disabling"):
            add(f"flagged_{rule}", polarity, int((checked[f"rule_{rule}"] & (checked["polarity"] == polarity)).sum()),
                "answer_rules")
    add("answers", "kept", len(kept), "answer_quality")
    add("answers", "removed", len(checked) - len(kept), "answer_quality")
    for polarity in ("enabling", "disabling"):
        add("answers_kept", polarity, int((kept["polarity"] == polarity).sum()), "answer_quality")
    labelled = checked["expert_label"].notna() if "expert_label" in checked else pd.Series(False, index=checked.index)
    for label in ("truism", "informative", "irrelevant"):
        n = int((checked.get("expert_label") == label).sum()) if labelled.any() else 0
        add("expert_label_share", label, n / labelled.sum() if labelled.any() else 0.0, "answer_rules")
    facts_seen = checked["fact_id"].nunique() if len(checked) else 0
    invalid = checked.loc[checked["fact_invalid"], "fact_id"].nunique() if "fact_invalid" in checked and len(checked) else 0
    add("expert_invalid_fact_share", "facts", invalid / facts_seen if facts_seen else 0.0, "answer_rules")
    add("expert_labelled", "answers", int(labelled.sum()), "answer_rules")
    for task, frame in (("p_nli", p_nli), ("p_g", p_g), ("p_mcqa", p_mcqa)):
        add("instances", task, len(frame), task)
        for s, n in frame.groupby("split").size().items():
            add(f"instances_{task}", s, n, task)
    for label, n in p_nli["label"].value_counts().sort_index().items():
        add("p_nli_label", str(label), n, "p_nli")
    for v, n in instances.groupby("variant").size().items():
        add("p_mcqa_built", v, n, "mcqa_instances")
    for v, n in p_mcqa.groupby("variant").size().items():
        add("p_mcqa_after_aflite", v, n, "p_mcqa")
    add("aflite", "removed", len(instances) - len(p_mcqa), "aflite")
    data = measures.frame()
    plt, fig, axes = figure(16, 4.5, ncols=3)
    flags = data[data["measure"].str.startswith("flagged_")]
    # horizontal bars: rule names are long, so they read along the y axis instead of colliding on x
    axes[0].barh([f"{m[8:]} ({g})" for m, g in zip(flags["measure"], flags["group"])], flags["value"])
    axes[0].invert_yaxis()
    axes[0].set_title(f"answers flagged per rule ({len(checked)} answers, {len(kept)} kept)")
    per = pd.DataFrame({t: f.groupby("split").size() for t, f in (("P-NLI", p_nli), ("P-G", p_g), ("P-MCQA", p_mcqa))})
    if per.size:  # (nothing to draw for an empty run)
        per.fillna(0).T.plot.bar(ax=axes[1], rot=0)
    axes[1].set_title("instances per task and split")
    built = instances.groupby("variant").size()
    after = p_mcqa.groupby("variant").size().reindex(built.index, fill_value=0)
    x = np.arange(len(built))
    axes[2].bar(x - 0.2, built.values, 0.4, label="built")
    axes[2].bar(x + 0.2, after.values, 0.4, label="kept by AF-Lite")
    axes[2].set_xticks(x, [str(v) for v in built.index])
    if len(built):
        axes[2].legend()
    axes[2].set_title("P-MCQA instances before / after AF-Lite")
    out = measures.output({"statistics.png": png(plt, fig)})
    out.notes = {**out.notes, "differs_from_release": DIFFERS,
                 "p_mcqa_vs_paper": f"{len(p_mcqa)} instances after AF-Lite ({len(instances)} built from {len(kept)} "
                                    f"answers) beside the paper's ~40K from ~5.4K"}
    return out
