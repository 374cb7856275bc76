"""How close is the rebuild to CICERO? The rebuild's figures beside the paper's and, on the same
dialogues, the release's: dialogues per source after each filter, targets per dialogue, target
positions, inference-type shares, instances per split, and the share of the release's targets and
instances the rebuild reproduces. A table and a plot."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from csk.runtime import StageOutput
from tasks.cicero.statistics import PAPER_DIALOGUES, PAPER_TARGETS_PER_DIALOGUE
from tasks.plots import figure, png

PAPER_SPLIT_DIALOGUES = {"train": 3477, "validation": 1097, "test": 1098}
POSITIONS = ("first", "early", "middle", "late", "last")


def _position_shares(index: pd.Series, length: pd.Series) -> dict[str, float]:
    """Where targets sit: the first or last utterance, else the third of the dialogue they fall in."""
    i, n = index.to_numpy(), length.to_numpy()
    rel = i / np.maximum(n - 1, 1)
    where = np.select([i == 0, i == n - 1, rel <= 1 / 3, rel <= 2 / 3], ["first", "last", "early", "middle"], "late")
    return {p: float((where == p).mean()) if len(where) else 0.0 for p in POSITIONS}


def _type_shares(types: pd.Series) -> dict[str, float]:
    return {k: float(v) for k, v in types.value_counts(normalize=True).sort_index().items()}


def fidelity(sources: pd.DataFrame, filtered: pd.DataFrame, deduped: pd.DataFrame, targets: pd.DataFrame,
             annotations: pd.DataFrame | None = None, splits: pd.DataFrame | None = None) -> StageOutput:
    """The rebuild's figures beside the paper's and the release's, and the share of the release it reproduces."""
    rows = []

    def add(section: str, measure: str, group: str, rebuild, paper=None, release=None, note: str = ""):
        rows.append({"id": f"{section}/{measure}/{group}", "section": section, "measure": measure, "group": group,
                     "rebuild": None if rebuild is None else float(rebuild),
                     "paper": None if paper is None else float(paper),
                     "release": None if release is None else float(release), "note": note})

    for stage, df in (("sources", sources), ("length_filter", filtered), ("dedup", deduped)):
        for source, n in df.groupby("source").size().sort_index().items():
            add("dialogues", stage, source, n, PAPER_DIALOGUES.get(source) if stage == "dedup" else None)
    per_dialogue = targets.groupby("dialogue_id")["utterance_index"].nunique()
    lengths = deduped.set_index("id")["turns"].map(len)
    unique_targets = targets.drop_duplicates(["dialogue_id", "utterance_index"])
    rebuilt_positions = _position_shares(unique_targets["utterance_index"].reset_index(drop=True),
                                         unique_targets["dialogue_id"].map(lengths).reset_index(drop=True))
    release_per_dialogue = release_positions = release_types = None
    matched = pd.DataFrame()
    if annotations is not None and len(annotations):
        matched = annotations[annotations["source_dialogue_id"].notna()]
    if len(matched):
        same = per_dialogue.reindex(matched["source_dialogue_id"].unique())
        rel_targets = matched.drop_duplicates(["source_dialogue_id", "utterance_index"])
        release_per_dialogue = rel_targets.groupby("source_dialogue_id").size().mean()
        release_positions = _position_shares(rel_targets["utterance_index"].reset_index(drop=True),
                                             rel_targets["dialogue"].map(len).reset_index(drop=True))
        release_types = _type_shares(matched["inference_type"])
        add("targets", "unique_targets_per_dialogue", "same dialogues as the release", same.mean(), None,
            release_per_dialogue, f"{len(same)} dialogues matched to the release")
        chosen = set(zip(targets["dialogue_id"], targets["utterance_index"]))
        reproduced = [(d, u) in chosen for d, u in zip(rel_targets["source_dialogue_id"], rel_targets["utterance_index"])]
        add("reproduction", "released_targets_reproduced", "share", np.mean(reproduced), None, 1.0,
            "released target utterances the rebuild also chose, on matched dialogues")
        add("reproduction", "released_instances_reproduced", "share", matched["task_id"].notna().mean(), None, 1.0,
            "released (target, question) instances among the rebuild's annotation tasks")
    add("targets", "unique_targets_per_dialogue", "all rebuilt dialogues", per_dialogue.mean() if len(per_dialogue)
        else None, PAPER_TARGETS_PER_DIALOGUE, None, "paper: 28,066 unique targets / 5,672 dialogues")
    # the release's own dialogues (sources.cicero) apart from the rebuilt corpora: TextRank on dialogues the
    # authors chose against TextRank on dialogues this run chose
    source_of = deduped.set_index("id")["source"]
    by_origin = per_dialogue.groupby(per_dialogue.index.map(
        lambda d: "release's dialogues (sources.cicero)" if source_of.get(d) == "cicero"
        else "rebuilt sources (dailydialog, mutual, dream)"))
    for origin, values in by_origin:
        add("targets", "unique_targets_per_dialogue", origin, values.mean(), PAPER_TARGETS_PER_DIALOGUE, None,
            f"{len(values)} dialogues")
    for name in POSITIONS:
        add("target_positions", "share_of_targets", name, rebuilt_positions.get(name), None,
            release_positions.get(name) if release_positions else None)
    rebuilt_types = _type_shares(targets["inference_type"])
    for t in sorted(set(rebuilt_types) | set(release_types or {})):
        add("inference_types", "share_of_instances", t, rebuilt_types.get(t, 0.0), None,
            (release_types or {}).get(t) if release_types else None)
    if splits is not None and len(splits):
        for s, n in splits.groupby("split")["dialogue_id"].nunique().items():
            add("splits", "dialogues", s, n, PAPER_SPLIT_DIALOGUES.get(s))
        for s, share in splits["split"].value_counts(normalize=True).sort_index().items():
            add("splits", "share_of_instances", s, share, {"train": 0.6, "validation": 0.2, "test": 0.2}.get(s))
    data = pd.DataFrame(rows, columns=["id", "section", "measure", "group", "rebuild", "paper", "release", "note"])
    data[["rebuild", "paper", "release"]] = data[["rebuild", "paper", "release"]].astype(float)  # None -> NaN
    return StageOutput(data=data, rows_in=len(data), files={"fidelity.png": _plot(data)}, tables=ui_tables(data))


def ui_tables(data: pd.DataFrame) -> dict[str, list[dict]]:
    """Two narrow tables for Prefect's UI (one wide table put the figures off-screen at 1400 px): the
    figures (measure, rebuild, paper, release; 4 significant digits) and the notes of the rows that have one."""
    def fig(v):
        return None if pd.isna(v) else float(f"{v:.4g}")

    figures = [{"measure": f"{r.section}: {r.measure} ({r.group})", "rebuild": fig(r.rebuild), "paper": fig(r.paper),
                "release": fig(r.release)} for r in data.itertuples()]
    notes = [{"measure": f"{r.section}: {r.measure} ({r.group})", "note": r.note}
             for r in data.itertuples() if isinstance(r.note, str) and r.note]
    return {"fidelity": figures, **({"fidelity-notes": notes} if notes else {})}


def _plot(data: pd.DataFrame) -> bytes:
    plt, fig, axes = figure(15, 4, ncols=3)
    for ax, section, title in zip(axes, ("target_positions", "inference_types", "targets"),
                                  ("where targets sit", "inference-type shares", "unique targets per dialogue")):
        part = data[data["section"] == section]
        x = np.arange(len(part))
        missing = []
        for k, (col, label) in enumerate((("rebuild", "rebuild"), ("release", "release (same dialogues)"),
                                          ("paper", "paper"))):
            values = part[col].astype(float).fillna(0).to_numpy()
            if part[col].notna().any():
                ax.bar(x + (k - 1) * 0.27, values, 0.27, label=label)
            elif col != "rebuild":  # said on the panel: an absent bar is no reference, not a zero
                missing.append("no release read" if col == "release" else "the paper gives no figure")
        ax.set_xticks(x, [textwrap.fill(g.replace("_", " "), 14) for g in part["group"]], fontsize=7)
        ax.set_title(title + (f"\n({'; '.join(missing)})" if missing else ""), fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=ax.transAxes)
    return png(plt, fig)
