"""SEEDS 2.4, P-MCQA: multiple-choice instances, then AF-Lite (the generic engine's `aflite` stage),
then the task files.

Instances (`variants`), every one built inside one split so no text crosses splits:
* `same_fact` (the paper): each answer is the gold, three answers of the opposite polarity of the
  same fact are the distractors (an enabling answer cannot make the fact impossible);
* `similar`: negative sampling by cosine-similarity filtering (Zhang, Lyu & Callison-Burch 2020
  drew wikiHow negatives from other articles by embedding similarity): the distractors are answers
  of the same polarity given for *other* facts, the most similar to the gold first, skipping any at
  or above `max_similarity` (a paraphrase could be right for this fact too);
* `shuffled`: question/answer shuffling (their goal-inference direction): the precondition is the
  prompt and the choices are facts: the gold fact and the most similar other facts, again below
  `max_similarity`.
Choices are shuffled per instance (seeded) in `p_mcqa`; AF-Lite's removals are its rejected rows.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from csk import compute
from csk.runtime import StageContext, StageOutput
from tasks.distractors.adversarial import vector_lookup
from tasks.embed import EmbedSpec

SHUFFLED_QUESTION = {"enabling": "Which statement does this make possible?",
                     "disabling": "Which statement does this make impossible?"}


def _most_similar(gold_vec, pool_ids, vectors, texts, gold_text, k, max_similarity):
    """The k pool entries most similar to the gold, below max_similarity, distinct texts."""
    if not pool_ids:
        return [], []
    sims = np.stack([vectors[i] for i in pool_ids]) @ gold_vec
    out, scores, seen = [], [], {gold_text.strip().lower()}
    for j in np.argsort(-sims, kind="stable"):
        t = texts[pool_ids[j]].strip().lower()
        if sims[j] >= max_similarity or t in seen:
            continue
        seen.add(t)
        out.append(pool_ids[j])
        scores.append(float(sims[j]))
        if len(out) == k:
            break
    return out, scores


def mcqa_instances(answers: pd.DataFrame, splits: pd.DataFrame, *, embed: EmbedSpec = EmbedSpec(), seed: int = 0,
                   variants: list[Literal["same_fact", "similar", "shuffled"]] = ["same_fact", "similar", "shuffled"],
                   distractors: int = 3, max_similarity: float = 0.9,
                   ctx: StageContext | None = None) -> StageOutput:
    """Multiple-choice instances from the answers: the paper's same-fact pairing plus negative sampling.

    Args:
        embed: the sentence embedder of the similarity sampling (and of AF-Lite's probes)
        seed: seed of the choice among surplus same-fact distractors
        variants: instance kinds to build: same_fact (the paper), similar, shuffled (see the module doc)
        distractors: distractors per instance (the paper: 3)
        max_similarity: cosine at or above which a sampled text counts as a paraphrase and is skipped
    """
    split = dict(zip(splits["id"], splits["split"]))
    a = answers.assign(split=answers["id"].map(split)).reset_index(drop=True)
    facts = a.drop_duplicates("fact_id")[["fact_id", "statement", "split"]].reset_index(drop=True)
    vec = vector_lookup(a["answer"].tolist() + facts["statement"].tolist(), embed, ctx)
    answer_vec = {r: vec(t) for r, t in zip(a["id"], a["answer"])}
    answer_text = dict(zip(a["id"], a["answer"]))
    fact_vec = {f: vec(t) for f, t in zip(facts["fact_id"], facts["statement"])}
    fact_text = dict(zip(facts["fact_id"], facts["statement"]))
    rows, rejected = [], []
    for r in a.itertuples(index=False):
        same = a[(a["fact_id"] == r.fact_id) & (a["polarity"] != r.polarity)]
        base = {"answer_id": r.id, "group_id": r.fact_id, "split": r.split, "polarity": r.polarity,
                "passage": [r.statement], "swaps": 0}
        for variant in variants:
            iid = f"{r.id}/{variant}"
            if variant == "same_fact":
                ids = same["id"].tolist()
                if len(ids) > distractors:
                    ids = [ids[i] for i in sorted(compute.rng(seed, "same_fact", r.id).choice(
                        len(ids), distractors, replace=False))]
                chosen, texts, sims = ids, [answer_text[i] for i in ids], []
                context, question, gold = f"{r.statement} {r.question}", r.question, r.answer
            elif variant == "similar":
                pool = a[(a["fact_id"] != r.fact_id) & (a["polarity"] == r.polarity) & (a["split"] == r.split)]
                chosen, sims = _most_similar(answer_vec[r.id], pool["id"].tolist(), answer_vec, answer_text,
                                             r.answer, distractors, max_similarity)
                texts = [answer_text[i] for i in chosen]
                context, question, gold = f"{r.statement} {r.question}", r.question, r.answer
            else:
                pool = facts[(facts["fact_id"] != r.fact_id) & (facts["split"] == r.split)]["fact_id"].tolist()
                chosen, sims = _most_similar(fact_vec[r.fact_id], pool, fact_vec, fact_text, r.statement,
                                             distractors, max_similarity)
                texts = [fact_text[i] for i in chosen]
                question = SHUFFLED_QUESTION[r.polarity]
                context, gold = f"{r.answer} {question}", r.statement
            row = {"id": iid, **base, "variant": variant, "context": context, "question": question, "gold": gold,
                   "distractors": texts, "distractor_ids": chosen, "similarities": sims}
            if len(texts) < distractors:
                rejected.append({**row, "reason_code": "too_few_distractors",
                                 "reason": f"{variant}: {len(texts)} distractor(s) found, {distractors} needed"})
            else:
                rows.append(row)
    data = pd.DataFrame(rows)
    counts = data.groupby("variant").size().to_dict() if len(data) else {}
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None,
                       rows_in=len(data) + len(rejected), notes={"instances_by_variant": counts})


def p_mcqa(kept: pd.DataFrame, *, seed: int = 0) -> StageOutput:
    """The task files: choices shuffled per instance (seeded), `label` the gold's index.

    Args:
        seed: seed of the choice order
    """
    rows = []
    for r in kept.itertuples(index=False):
        choices = [r.gold] + list(r.distractors)
        order = compute.rng(seed, "p_mcqa", r.id).permutation(len(choices)).tolist()
        rows.append({"id": r.id, "group_id": r.group_id, "variant": r.variant, "split": r.split,
                     "context": r.context, "question": r.question, "choices": [choices[i] for i in order],
                     "label": order.index(0)})
    data = pd.DataFrame(rows, columns=["id", "group_id", "variant", "split", "context", "question", "choices",
                                       "label"])
    files = {}
    for s, part in data.groupby("split", sort=False):
        files[f"PaCo_mcqa_{s}.jsonl"] = compute.jsonl_bytes(
            part[["id", "context", "question", "choices", "label"]].to_dict(orient="records"))
    return StageOutput(data=data, files=files, notes={
        "instances_by_split": data.groupby("split").size().to_dict() if len(data) else {},
        "label_balance": data["label"].value_counts().sort_index().to_dict() if len(data) else {}})
