"""How hard and how valid are the distractors? Measured, not assumed.

A linear probe (frozen embeddings + logistic regression) is trained on one half of the
instances (split by dialogue, seeded) and asked to pick the gold in the other half, once with
the rebuilt choices and once with the published choices where the input has them. Lower
probe accuracy with every distractor still contradicting the gold = harder, valid distractors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk import compute
from csk.runtime import StageContext, StageOutput
from tasks.distractors.adversarial import vector_lookup
from tasks.distractors.discriminators import LinearProbe
from tasks.distractors.candidate_filter import PAPER_EMBEDDER
from tasks.embed import EmbedSpec, open_embedder
from tasks.plots import hist_png


def probe_accuracy(train: list[int], test: list[int], contexts, choices, correct, vector,
                   seed: int) -> tuple[float, float]:
    """(accuracy, pairwise accuracy): the share of test items whose top choice is correct, and the share
    of (correct, distractor) pairs in which the correct answer scores higher. Pairs compare item sets
    with different numbers of choices fairly."""
    gold = [min(correct[i]) for i in train]
    probe = LinearProbe(vector, seed=seed).fit([contexts[i] for i in train], [choices[i] for i in train], gold)
    scores = probe.score([contexts[i] for i in test], [choices[i] for i in test])
    acc = float(np.mean([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)]))
    won = [s[c] > s[d] for i, s in zip(test, scores) for c in correct[i] for d in range(len(s)) if d not in correct[i]]
    return acc, float(np.mean(won)) if won else float("nan")


def distractor_quality(mcq: pd.DataFrame, instances: pd.DataFrame, candidates: pd.DataFrame, *,
                       embed: EmbedSpec = EmbedSpec(), similarity_embedder: EmbedSpec = PAPER_EMBEDDER, seed: int = 0,
                       ctx: StageContext | None = None) -> StageOutput:
    """Probe accuracy on the rebuilt and the published choices, and distractor-correct-answer similarity.

    Args:
        embed: the frozen sentence embedder of the probe
        similarity_embedder: the embedder of the paraphrase check (the candidate filter's): no final
            distractor may reach cosine 0.9 with a correct answer
        seed: seed of the half/half split by group
    """
    view = instances.set_index("id").loc[mcq["id"]].reset_index()
    contexts = view["context"].tolist()
    final = [list(c) for c in mcq["choices"]]
    final_correct = [set(c) for c in mcq["correct_answers"]]
    published = [list(c) if c is not None and len(c) else None for c in view["choices"]]
    published_correct = [set(c) if c is not None else set() for c in view["correct_answers"]]
    texts = contexts + [c for ch in final for c in ch] + [c for ch in published if ch for c in ch]
    vector = vector_lookup(texts, embed, ctx)
    groups = sorted(view["group_id"].unique())
    rng = compute.rng(seed, "quality-halves")
    half = set(groups[i] for i in rng.permutation(len(groups))[: len(groups) // 2])
    a = [i for i, g in enumerate(view["group_id"]) if g in half]
    b = [i for i, g in enumerate(view["group_id"]) if g not in half]
    rows = []

    def add(measure: str, value, note: str = ""):
        rows.append({"id": measure, "measure": measure, "value": float(value) if value is not None else np.nan,
                     "note": note})

    def lift(acc: float, chance: float) -> float:
        """Accuracy above chance as a share of the room above chance: comparable across choice sets."""
        return (acc - chance) / (1 - chance) if chance < 1 else float("nan")

    for name, choices, correct in (("rebuilt", final, final_correct), ("published", published, published_correct)):
        train = [i for i in a if choices[i]]
        test = [i for i in b if choices[i]]
        if not (train and test):
            continue
        acc, pairwise = probe_accuracy(train, test, contexts, choices, correct, vector, seed)
        chance = float(np.mean([len(correct[i]) / len(choices[i]) for i in test]))
        add(f"probe_accuracy_{name}", acc, f"train {len(train)} / test {len(test)} instances, disjoint dialogues")
        add(f"chance_{name}", chance)
        add(f"probe_lift_{name}", lift(acc, chance), "(accuracy - chance) / (1 - chance); lower = harder")
        add(f"probe_pairwise_accuracy_{name}", pairwise,
            "share of (correct, distractor) pairs the probe orders right; chance 0.5; lower = harder")
    # Paraphrase check with the candidate filter's embedder, against every correct answer.
    correct_texts = [[final[i][k] for k in sorted(final_correct[i])] +
                     ([published[i][k] for k in sorted(published_correct[i])] if published[i] else [])
                     for i in range(len(final))]
    distractors = [[d for k, d in enumerate(final[i]) if k not in final_correct[i]] for i in range(len(final))]
    with open_embedder(similarity_embedder, ctx) as emb:
        sv = emb.lookup([t for ts in correct_texts + distractors for t in ts])
    sims = [max(float(sv(d) @ sv(c)) for c in correct_texts[i]) for i in range(len(final)) for d in distractors[i]]
    add("distractor_correct_cosine_mean", np.mean(sims) if sims else np.nan,
        "each distractor's highest cosine with a correct answer (the filter's embedder)")
    add("distractor_correct_cosine_max", np.max(sims) if sims else np.nan, "must stay below the filter's 0.9")
    if "contradiction" in candidates.columns and candidates["contradiction"].notna().any():
        add("min_p_contradiction_of_kept_candidates", candidates["contradiction"].min(),
            "every kept candidate passed the NLI contradiction rule")
    else:
        add("min_p_contradiction_of_kept_candidates", None, "NLI off: contradiction not measured")
    add("instances", len(mcq))
    data = pd.DataFrame(rows)
    return StageOutput(data=data, rows_in=len(data),
                       files={"distractor_similarity.png": hist_png(sims, "cosine(distractor, nearest correct answer)", "cosine")},
                       tables={"distractor_quality": data.astype(object).where(data.notna(), None).to_dict(orient="records")})
