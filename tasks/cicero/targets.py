"""CICERO target selection and inference-type assignment (docs/method.md 1.3).

Per dialogue, with a random generator seeded by (seed, dialogue id) so a dialogue's targets do
not depend on which other dialogues are in the run:
* k targets: 1-6 utterances -> 2 or 3; 7-12 -> 3 to 5; more -> 4 to 7;
* x2: the longest utterance(s) and every utterance with I'm / I'd / I've / I'll or the
  expansions I am / I would / I had / I have / I will;
* TextRank (PageRank over the SBERT-cosine graph of the whole dialogue) ranks every utterance
  once; the dialogue is cut into 2-3 segments of consecutive utterances and the top-ranked
  utterances of each segment, split as evenly as the segments allow, form x1 (ranking a
  two-utterance segment on its own always ties, so the ranking is never per segment);
* x3: the final utterance.
The paper does not say what k counts. `count = "x1_x2"` (default): k is the size of x1 u x2,
x1 filling what x2 leaves, and x3 comes on top. On the 77 dialogues of the real CICERO v2
sample this gives 4.97 unique targets per dialogue, the release's figure being 4.95 (28,066 /
5,672); k = |x1| alone gives 5.96 and k = all targets 4.49 there.
Types: from x1 u x2, Subsequent Event for 80%; Cause and Prerequisite for 60%, Cause only 28%,
Prerequisite only 12%; Motivation for every x2 target; Reaction for the x3 target.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.runtime import StageContext, StageOutput
from tasks.embed import EmbedSpec, open_embedder
from tasks.textrank import select_x1, textrank_batch
from data_contracts.cicero import QUESTIONS, TYPE_OF_QUESTION  # noqa: F401  (the release's five questions)

# Handles tokenised releases too ("I 'm", "i 'll" in MuTual/DailyDialog).
FIRST_PERSON = re.compile(r"\bi\s*(?:'\s*(?:m|d|ve|ll)|’\s*(?:m|d|ve|ll)|\s+(?:am|would|had|have|will))\b", re.I)


def n_targets(n_utterances: int, rng: np.random.Generator) -> int:
    lo, hi = (2, 3) if n_utterances <= 6 else (3, 5) if n_utterances <= 12 else (4, 7)
    return int(rng.integers(lo, hi + 1))


def n_segments(n_utterances: int) -> int:
    """The paper's segments: 2 for a dialogue of up to 8 utterances, else 3."""
    return 2 if n_utterances <= 8 else 3


def select_x2(texts: list[str], longest: int) -> list[int]:
    words = [len(t.split()) for t in texts]
    by_length = sorted(range(len(texts)), key=lambda i: (-words[i], i))[:longest]
    first_person = [i for i, t in enumerate(texts) if FIRST_PERSON.search(t)]
    return sorted(set(by_length) | set(first_person))


def assign_types(x1: list[int], x2: list[int], x3: int, rng: np.random.Generator, p_subsequent: float,
                 p_cause_and_prerequisite: float, p_cause_only: float) -> dict[int, list[str]]:
    types: dict[int, list[str]] = {}
    for u in sorted(set(x1) | set(x2)):
        t = []
        if rng.random() < p_subsequent:
            t.append("subsequent_event")
        draw = rng.random()
        if draw < p_cause_and_prerequisite:
            t += ["cause", "prerequisite"]
        elif draw < p_cause_and_prerequisite + p_cause_only:
            t.append("cause")
        else:
            t.append("prerequisite")
        if u in x2:
            t.append("motivation")
        types[u] = t
    types.setdefault(x3, []).append("reaction")
    return types


def targets(dialogues: pd.DataFrame, *, seed: int = 0, embed: EmbedSpec = EmbedSpec(),
            count: Literal["x1_x2", "x1", "all"] = "x1_x2", segments: Literal["auto", 2, 3] = "auto",
            damping: float = 0.85, longest: int = 1,
            p_subsequent: float = 0.8, p_cause_and_prerequisite: float = 0.6, p_cause_only: float = 0.28,
            p_prerequisite_only: float = 0.12, ctx: StageContext | None = None) -> StageOutput:
    """Target utterances and their inference types, per dialogue (docs/method.md 1.3).

    Args:
        seed: seed of the per-dialogue random draws
        embed: the sentence embedder of the TextRank similarity graph
        count: what the paper's number of targets counts: x1_x2 (x1 u x2, x3 on top; reproduces the
            release's 4.95 per dialogue), x1 (x1 alone) or all (x1 u x2 u x3)
        segments: segments per dialogue; auto: 2 up to 8 utterances, else 3
        damping: PageRank damping of TextRank
        longest: how many of the longest utterances go to x2
        p_subsequent: share of x1/x2 targets asked for the subsequent event
        p_cause_and_prerequisite: share asked for both cause and prerequisite
        p_cause_only: share asked for the cause only
        p_prerequisite_only: share asked for the prerequisite only
    """
    total = p_cause_and_prerequisite + p_cause_only + p_prerequisite_only
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(f"targets: cause/prerequisite proportions must sum to 1 (got {total:.3f})")
    with open_embedder(embed, ctx) as embedder:
        vectors = embedder.encode([str(t["text"]) for turns in dialogues["turns"] for t in turns])
    rows = []
    bounds = np.cumsum([0] + [len(turns) for turns in dialogues["turns"]])
    ranks = textrank_batch([vectors[a:b] for a, b in zip(bounds[:-1], bounds[1:])], damping)
    for did, turns, scores in zip(dialogues["id"], dialogues["turns"], ranks):
        texts = [str(t["text"]) for t in turns]
        rng = compute.rng(seed, did)
        n = len(texts)
        k = n_targets(n, rng)
        n_seg = n_segments(n) if segments == "auto" else int(segments)
        x2 = select_x2(texts, longest)
        x3 = n - 1
        if count == "x1":
            x1 = select_x1(scores, k, n_seg)
        else:
            taken = set(x2) | ({x3} if count == "all" else set())
            x1 = select_x1(scores, max(0, k - len(taken)), n_seg, exclude=taken)
        types = assign_types(x1, x2, x3, rng, p_subsequent, p_cause_and_prerequisite, p_cause_only)
        for u in sorted(types):
            sets = [name for name, members in (("x1", x1), ("x2", x2), ("x3", [x3])) if u in members]
            for t in types[u]:
                rows.append({"id": f"{did}/u{u:02d}/{t}", "dialogue_id": did, "utterance_index": u,
                             "target": texts[u], "speaker": str(turns[u]["speaker"]), "inference_type": t,
                             "question": QUESTIONS[t], "sets": sets, "textrank": float(scores[u]),
                             "n_targets_drawn": k})
    data = pd.DataFrame(rows, columns=["id", "dialogue_id", "utterance_index", "target", "speaker",
                                       "inference_type", "question", "sets", "textrank", "n_targets_drawn"])
    per_dialogue = data.groupby("dialogue_id")["utterance_index"].nunique()
    return StageOutput(data=data, notes={
        "textrank": "PageRank (networkx.pagerank's power iteration, batched over dialogues of one length) over "
                    "the whole dialogue's SBERT cosine graph; top-ranked per segment",
        "count": count, "unique_targets_per_dialogue": float(per_dialogue.mean()) if len(per_dialogue) else None,
        "paper_unique_targets_per_dialogue": 4.95})
