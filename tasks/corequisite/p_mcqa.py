"""docs/method.md 2.4, P-MCQA: multiple-choice instances, then AF-Lite (the generic engine's `aflite` stage),
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
Each answer gives up to `draws` instances per variant, each with other distractors (the negative-
sampling methods draw many negatives per positive): the paper reaches "about 40K instances" after
AF-Lite from ~5.4K answers, which one instance per answer and variant (16K) cannot. Draw d of
`similar` and `shuffled` takes the (d+1)-th most similar `distractors` texts, so later draws are
easier; `same_fact` draws distinct combinations of the fact's opposite answers (usually one: three
answers a polarity). Choices are shuffled per instance (seeded) in `p_mcqa`; AF-Lite's removals are
its rejected rows.
"""

from __future__ import annotations

from itertools import combinations
from typing import Literal

import numpy as np
import pandas as pd

from csk import compute
from csk.runtime import StageContext, StageOutput
from tasks.corequisite.p_nli import RELEASE_SPLIT
from tasks.embed import vector_lookup
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
                   distractors: int = 3, draws: int = 4, max_similarity: float = 0.9,
                   ctx: StageContext | None = None) -> StageOutput:
    """Multiple-choice instances from the answers: the paper's same-fact pairing plus negative sampling.

    Args:
        embed: the sentence embedder of the similarity sampling (and of AF-Lite's probes)
        seed: seed of the choice among surplus same-fact distractors
        variants: instance kinds to build: same_fact (the paper), similar, shuffled (see the module doc)
        distractors: distractors per instance (the paper: 3)
        draws: instances per answer and variant at most, each with its own distractors (4: ~9 instances an
            answer before AF-Lite, toward the paper's ~40K from ~5.4K answers)
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
                "passage": [r.statement], "swaps": 0, "as_published": False}
        for variant in variants:
            if variant == "same_fact":
                ids = same["id"].tolist()
                combos = [list(c) for c in combinations(ids, distractors)] if len(ids) >= distractors else [ids]
                if len(combos) > 1:  # a seeded order of the distinct combinations
                    combos = [combos[i] for i in compute.rng(seed, "same_fact", r.id).permutation(len(combos))]
                picks = [(c, []) for c in combos[:draws]]
                context, question, gold = f"{r.statement} {r.question}", r.question, r.answer
                text_of = answer_text
            elif variant == "similar":
                pool = a[(a["fact_id"] != r.fact_id) & (a["polarity"] == r.polarity) & (a["split"] == r.split)]
                ids, sims = _most_similar(answer_vec[r.id], pool["id"].tolist(), answer_vec, answer_text,
                                          r.answer, distractors * draws, max_similarity)
                picks = _chunks(ids, sims, distractors)
                context, question, gold = f"{r.statement} {r.question}", r.question, r.answer
                text_of = answer_text
            else:
                pool = facts[(facts["fact_id"] != r.fact_id) & (facts["split"] == r.split)]["fact_id"].tolist()
                ids, sims = _most_similar(fact_vec[r.fact_id], pool, fact_vec, fact_text, r.statement,
                                          distractors * draws, max_similarity)
                picks = _chunks(ids, sims, distractors)
                question = SHUFFLED_QUESTION[r.polarity]
                context, gold = f"{r.answer} {question}", r.statement
                text_of = fact_text
            for d, (chosen, sim) in enumerate(picks):
                texts = [text_of[i] for i in chosen]
                row = {"id": f"{r.id}/{variant}" + (f"/{d}" if d else ""), **base, "variant": variant, "draw": d,
                       "context": context, "question": question, "gold": gold, "distractors": texts,
                       "distractor_ids": chosen, "similarities": sim}
                if len(texts) < distractors:  # only a first draw can fall short: later ones are whole or absent
                    rejected.append({**row, "reason_code": "too_few_distractors",
                                     "reason": f"{variant}: {len(texts)} distractor(s) found, {distractors} needed"})
                else:
                    rows.append(row)
    data = pd.DataFrame(rows)
    counts = data.groupby("variant").size().to_dict() if len(data) else {}
    by_draw = data.groupby("draw").size().to_dict() if len(data) else {}
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None,
                       rows_in=len(data) + len(rejected), notes={
                           "instances_by_variant": counts, "instances_by_draw": {int(k): int(v) for k, v in by_draw.items()},
                           "answers": len(a), "instances_per_answer": round(len(data) / len(a), 2) if len(a) else 0})


def _chunks(ids: list, sims: list, size: int) -> list[tuple[list, list]]:
    """Consecutive groups of `size` (the first even if short: it is rejected with the reason; later
    short ones are not draws)."""
    out = [(ids[i:i + size], sims[i:i + size]) for i in range(0, max(len(ids), 1), size)]
    return [c for k, c in enumerate(out) if k == 0 or len(c[0]) == size]


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
        files[f"PaCo_mcqa_{RELEASE_SPLIT[s]}.jsonl"] = compute.jsonl_bytes(  # named as the release names P-NLI's
            part[["id", "context", "question", "choices", "label"]].to_dict(orient="records"))
    return StageOutput(data=data, files=files, notes={
        "instances_by_split": data.groupby("split").size().to_dict() if len(data) else {},
        "label_balance": data["label"].value_counts().sort_index().to_dict() if len(data) else {}})
