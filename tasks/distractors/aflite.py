"""AF-Lite (docs/method.md 2.6; Sakaguchi et al. 2020, Le Bras et al. 2020).

Frozen embeddings of every instance; repeat: train `m` linear classifiers, each on a random
subset of size `t`, and record each instance's predictions when it was held out;
predictability = fraction of those predictions that were right; remove the `k` most
predictable instances with predictability >= `tau`; stop when fewer than `k` qualify or the
set is down to `n`. Public implementations use m=64, k=500, tau=0.75 with logistic regression;
for small data `k` is capped at 5% of the remaining instances and `t` may be a fraction.

Instances are multiple choice: the classifier scores (context, choice) features and predicts
the argmax choice, so this serves CICERO's MCQ and CoreQuisite's P-MCQA alike.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from csk import compute
from csk.runtime import StageContext, StageOutput
from tasks.distractors.discriminators import ProbeFamily, probe_features
from tasks.embed import EmbedSpec, vector_lookup


PROBES = ("m logistic regressions a round (scikit-learn's LogisticRegression objective: balanced class weights, "
          "L2 with C = 1, an unpenalised intercept), solved together by L-BFGS on whitened features, each round "
          "started from the last round's probes averaged")


def predictability(family: ProbeFamily, active: np.ndarray, gold: np.ndarray, *, m: int, t: float,
                   seed: int) -> np.ndarray:
    """Each active instance's share of right predictions by the probes that did not train on it."""
    n = len(active)
    size = int(t * n) if t < 1 else int(t)
    size = min(max(size, 2), n - 1)
    rng = compute.rng(seed, "aflite-subsets")
    train = np.zeros((m, n), dtype=bool)
    for k in range(m):
        train[k, rng.choice(n, size, replace=False)] = True
    full = np.zeros((m, family.n), dtype=bool)
    full[:, active] = train
    rows = np.flatnonzero(np.isin(family.owner, active))
    predicted = family.fit_predict(full, gold, rows)[:, active]  # (m, n)
    held = ~train
    right = ((predicted == gold[active][None, :]) & held).sum(0)
    seen = held.sum(0)
    return np.divide(right, seen, out=np.zeros(n), where=seen > 0)


def most_rounds(size: int, *, n: int, k: int, qualified: int | None = None) -> int:
    """The most rounds AF-Lite can run on `size` instances: each round but the last removes k (capped at
    5% of those left) until n are left; a round where fewer than k qualify is the last. Given how many
    qualify now, the rounds left if no other instance comes to qualify (the progress bar's estimate)."""
    left, rounds, q = size, 0, size if qualified is None else qualified
    while left > max(n, 2):
        rounds += 1
        k_eff = min(k, max(1, math.ceil(0.05 * left)))
        if q < k_eff:
            break
        drop = min(k_eff, left - max(n, 2))
        left, q = left - drop, q - drop
    return rounds


def aflite_rounds(contexts, choices, gold, vector, *, n: int = 0, m: int = 64, t: float = 0.5, k: int = 500,
                  tau: float = 0.75, seed: int = 0,
                  max_iter: int = 100, precondition: str = "whiten",
                  warm_start: bool = True) -> tuple[dict[int, tuple[float, int]], list[dict]]:
    """Returns {removed index: (predictability, round)} and per-round history (precondition, warm_start:
    ProbeFamily's; other than their defaults only for bench/bench_aflite.py's baselines)."""
    from csk.progress import progress

    if len(contexts) <= max(n, 2):  # nothing to filter (an empty or tiny set)
        return {}, []
    family = ProbeFamily(*probe_features(vector, contexts, choices), max_iter=max_iter, precondition=precondition,
                         warm_start=warm_start)
    gold = np.asarray(gold)
    active = np.arange(len(contexts))
    removed: dict[int, tuple[float, int]] = {}
    history = []
    rnd = 0
    bound = most_rounds(len(contexts), n=n, k=k)  # usually far more than run: rounds stop when few qualify;
    # the bar's total is re-estimated each round from how many qualify
    with progress(bound, f"AF-Lite rounds (at most {bound})", unit="rounds", disable=len(contexts) < 2000) as bar:
        while len(active) > max(n, 2):
            rnd += 1
            p = predictability(family, active, gold, m=m, t=t, seed=seed + rnd)
            k_eff = min(k, max(1, math.ceil(0.05 * len(active))))
            qualified = sorted([j for j in range(len(active)) if p[j] >= tau], key=lambda j: (-p[j], active[j]))
            bar.set_total(min(bound, rnd - 1 + most_rounds(len(active), n=n, k=k, qualified=len(qualified))))
            history.append({"round": rnd, "instances": len(active), "mean_predictability": float(p.mean()),
                            "qualified": len(qualified), "k": k_eff, "lbfgs_iterations": family.iterations,
                            "lbfgs_evaluations": family.evaluations})
            bar.update(1, instances=len(active), qualified=len(qualified))
            if len(qualified) < k_eff:
                break
            drop = qualified[:min(k_eff, len(active) - max(n, 2))]
            for j in drop:
                removed[int(active[j])] = (float(p[j]), rnd)
            keep = np.ones(len(active), dtype=bool)
            keep[drop] = False
            active = active[keep]
    return removed, history


@compute.trains  # fits discriminators: a fixed thread count, in its key
def aflite(mcq: pd.DataFrame, instances: pd.DataFrame, *, embed: EmbedSpec = EmbedSpec(), seed: int = 0, n: int = 0,
           m: int = 64, t: float = 0.5, k: int = 500, tau: float = 0.75, max_iter: int = 100,
           ctx: StageContext | None = None) -> StageOutput:
    """Remove the instances a family of linear probes finds too predictable.

    Args:
        embed: the frozen sentence embedder of the probes' features
        seed: seed of the probes' training subsets
        n: target size: stop when this few instances are left (0: no target)
        m: linear classifiers per round
        t: training subset of each classifier: a fraction (< 1) or a count
        k: most instances removed per round (capped at 5% of those left)
        tau: predictability at or above which an instance may be removed
        max_iter: L-BFGS iterations of each round's probes (scikit-learn's LogisticRegression default)
    """
    if len(mcq) <= max(n, 2):  # nothing to filter: a probe trains on some instances and judges others
        import logging

        why = (f"AF-Lite passed its {len(mcq)} instance(s) through: it needs more than {max(n, 2)} (its target size n "
               f"= {n}, and at least 2 to train a probe on some and judge the others)")
        logging.getLogger("csk").warning(why)
        return StageOutput(data=mcq, notes={"rounds": [], "passed_through": why}, tables={"aflite_rounds": []})
    view = instances.set_index("id").loc[mcq["id"]]
    contexts = view["context"].tolist()
    choices = [[g] + list(d) for g, d in zip(mcq["gold"], mcq["distractors"])]
    gold = [0] * len(mcq)  # the linear probe scores each choice alone: position carries no signal
    vector = vector_lookup(contexts + [c for ch in choices for c in ch], embed, ctx)
    removed, history = aflite_rounds(contexts, choices, gold, vector, n=n, m=m, t=t, k=k, tau=tau, seed=seed,
                                    max_iter=max_iter)
    drop = np.array([i in removed for i in range(len(mcq))], dtype=bool)
    rejected = mcq[drop].assign(
        predictability=[removed[i][0] for i in range(len(mcq)) if i in removed],
        reason_code="predictable",
        reason=[f"AF-Lite: predictability {removed[i][0]:.2f} >= {tau} (round {removed[i][1]})"
                for i in range(len(mcq)) if i in removed])
    return StageOutput(data=mcq[~drop], rejected=rejected, notes={"rounds": history, "probes": PROBES},
                       tables={"aflite_rounds": history})
