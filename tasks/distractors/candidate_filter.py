"""Candidate filter (docs/method.md 1.6b): keep an alternative only if it is not a paraphrase of the gold
(cosine < 0.9) AND an NLI model says it contradicts the gold. Two guards against answers written for another
item that are likely correct for this one: another dialogue's answer that fits this dialogue as well as its
gold (`retrieval_guard`), and this dialogue's answer to another target that fits this target's turns as well
as its own (`dialogue_guard`).

NLI: any transformers sequence-classification directory; the contradiction label id is read
from its config (`id2label`). With no NLI model the stage refuses to run unless `nli = "off"`
is set explicitly; the manifest then records that only the similarity rule was applied.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from csk import compute
from csk.errors import ConfigError, ModelError
from csk.models import display_name, pretrained_kwargs, resolve_model
from csk.params import OFF, ModelDir
from csk.runtime import StageContext, StageOutput
from tasks.embed import EmbedSpec, open_embedder, vector_lookup
from tasks.plots import bar_png


def contradiction_label(id2label: dict) -> int:
    for i, name in id2label.items():
        if "contra" in str(name).lower():
            return int(i)
    raise ModelError(f"NLI model labels {dict(id2label)} have no contradiction label; "
                     "use an MNLI-style model (entailment / neutral / contradiction)")


def nli_scores(premises: list[str], hypotheses: list[str], path, batch_size: int = 32) -> tuple[np.ndarray, list[str]]:
    """P(contradiction) and the argmax label for each (premise, hypothesis) pair.

    The pairs are tokenised once and run longest first (`length_passes`): passes of `batch_size` pairs on a
    CPU; on CUDA as many pairs as fill 64K padded tokens (256 pairs at 256 tokens), bf16 autocast, and one copy
    of the probabilities to the host at the end. A pair's probabilities do not depend on the pairs beside it
    (up to float rounding)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from csk.progress import progress
    from tasks.distractors.discriminators import TokenRows, length_passes

    device = compute.device()
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(path), **pretrained_kwargs(path)).to(device).eval()
    id2label = {int(k): v for k, v in model.config.id2label.items()}
    contra = contradiction_label(id2label)
    cuda = device.startswith("cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    rows = TokenRows(tok, list(premises), list(hypotheses), 256)
    multiple = 8 if cuda else 1
    passes = (length_passes(rows.lengths, 65536, multiple) if cuda else
              length_passes(rows.lengths, 10**12, 1, max_rows=batch_size))
    probs = torch.zeros((len(rows), len(id2label)), dtype=torch.float32, device=device)
    with progress(len(rows), "NLI", unit="pairs", disable=len(rows) < 8 * batch_size) as bar, torch.inference_mode():
        for part in passes:
            width = -(-int(rows.lengths[part].max()) // multiple) * multiple
            enc = {k: torch.from_numpy(v) for k, v in rows.batch(part, width).items()}
            if cuda:  # pinned memory, copied without blocking: the host prepares the next pass meanwhile
                enc = {k: v.pin_memory().to(device, non_blocking=True) for k, v in enc.items()}
            index = torch.from_numpy(part).to(device)
            with autocast:
                logits = model(**enc).logits.float()
            probs[index] = torch.softmax(logits, dim=-1)
            bar.update(len(part))
    p = probs.cpu().numpy()
    return p[:, contra], [id2label[int(i)] for i in p.argmax(1)]


PAPER_EMBEDDER = EmbedSpec(model="split-package:all-mpnet-base-v2")


def correct_texts(instances: pd.DataFrame | None, candidates: pd.DataFrame) -> dict[str, list[str]]:
    """Every correct answer of each instance: the gold, and the published choices marked correct."""
    out = {i: [g] for i, g in zip(candidates["instance_id"], candidates["gold"])}
    if instances is not None:
        for r in instances.itertuples():
            if r.id in out and r.choices is not None and r.correct_answers is not None:
                out[r.id] += [str(r.choices[k]) for k in r.correct_answers if str(r.choices[k]) not in out[r.id]]
    return out


# Rewrite rules whose change says the opposite of the answer they rewrite by the meaning of its words: a word
# for its antonym, a negation (at the auxiliary, or in the predicate with do-support), an event under
# "refuses / fails / forgets to", a feeling of the other polarity. A sentence embedder reads such a minimal
# edit as a paraphrase of its answer ("wake up early" -> "wake up late": cosine 0.94), so their paraphrase
# check leaves that answer out and reads only the item's other correct answers: a contrary of one that says
# what another says is still caught. What the judge removed was filled with other dialogues' answers, which
# blind readers found far worse than antonym and negation rewrites (77-93% of those read good, 15-55% of
# these: draws H and I, bench/results/readings_history.md); a number changed stays under the judge (the
# quantity rule counts "one" as a number). A role flip says the act was another person's ("The listener failed
# the test" for "The speaker failed the test": cosine 0.95), which an embedder does not read either.
CONTRARY_KINDS = frozenset({"antonym", "negation", "predicate_negation", "contrary_verb", "emotion_swap", "feeling_alone",
                            "role_flip"})


def rewritten_answer(candidates: pd.DataFrame, correct: dict[str, list[str]]) -> list[str | None]:
    """For a rewrite by contrary rules only (CONTRARY_KINDS): the correct answer it rewrites (the nearest in
    characters, as its rationale names it); None for every other candidate."""
    import difflib

    out: list[str | None] = []
    for iid, gen, rule, text in zip(candidates["instance_id"], candidates["generator"], candidates["rule"],
                                    candidates["candidate"]):
        kinds = {p.split(":")[0] for p in str(rule).split("+") if p}
        if gen not in ("lexical", "grounded") or not kinds or not kinds <= CONTRARY_KINDS:
            out.append(None)
            continue
        out.append(max(correct[iid], key=lambda a: (difflib.SequenceMatcher(None, a.lower(), text.lower()).ratio(), a)))
    return out


def similarities(candidates: pd.DataFrame, correct: dict[str, list[str]], spec: EmbedSpec,
                 ctx: StageContext | None, skip: list[str | None] | None = None) -> tuple[list[float], list[str]]:
    """Each candidate's highest cosine with a correct answer of its instance (but `skip[k]`, the answer a
    contrary rewrite rewrites), and that answer (-1 and "" where no other is left)."""
    with open_embedder(spec, ctx) as emb:
        vector = emb.lookup(candidates["candidate"].tolist() + [t for ts in correct.values() for t in ts])
    sims, closest = [], []
    for k, (iid, cand) in enumerate(zip(candidates["instance_id"], candidates["candidate"])):
        against = [t for t in correct[iid] if skip is None or t != skip[k]]
        if not against:
            sims.append(-1.0)
            closest.append("")
            continue
        scores = [float(vector(cand) @ vector(t)) for t in against]
        best = int(np.argmax(scores))
        sims.append(scores[best])
        closest.append(against[best])
    return sims, closest


def likely_correct_here(candidates: pd.DataFrame, instances: pd.DataFrame, spec: EmbedSpec, seed: int,
                        ctx: StageContext | None, negatives: int = 3) -> pd.Series:
    """For each retrieved candidate (an answer written for another dialogue): its score minus the item's own
    gold's, by a judge that knows which answer belongs to which dialogue (NaN for other candidates). An
    answer at or above its item's gold (margin >= 0) fits
    this dialogue as well as its own answer does: it is likely correct here too ("A wanted B to know A
    will be delayed" for a speaker held up at work). The judge is a linear probe on frozen embeddings
    trained to pick each item's gold among `negatives` answers of other dialogues of its split; it is
    cross-fitted over two halves of the groups, so no item is judged by a probe that saw its gold."""
    from tasks.distractors.window import reading_windows
    from tasks.embed import vector_lookup
    from tasks.distractors.discriminators import LinearProbe
    from tasks.distractors.keys import group_order, instance_keys

    margins = pd.Series(np.nan, index=candidates.index)  # a retrieved answer's score minus its item's gold's
    retrieved = candidates[candidates["generator"] == "retrieval"]
    if not len(retrieved) or instances is None or not len(instances):
        return margins
    inst = instances.reset_index(drop=True)
    # the probe reads each item's dialogue window (question, target, the nearest utterances), not its start
    inst = inst.assign(context=reading_windows(inst, None, "linear-probe", model=None, embed=spec, max_length=0,
                                               ctx=ctx, setting="candidate_filter.embed")[0])
    order = group_order(inst)
    rng = compute.rng(seed, "likely-correct-halves")
    half = {g: int(k) % 2 for g, k in zip([order[i] for i in rng.permutation(len(order))], range(len(order)))}
    split = inst["split"].astype(str) if "split" in inst.columns else pd.Series("all", index=inst.index)
    vector = vector_lookup(inst["context"].tolist() + inst["gold"].tolist() + retrieved["candidate"].tolist(),
                           spec, ctx)
    by_id = inst.set_index("id")
    key_of = instance_keys(inst)
    for fold in (0, 1):
        train = inst[[half[g] != fold for g in inst["group_id"]]]
        test = inst[[half[g] == fold for g in inst["group_id"]]]
        if len(train) < 2 or not len(test):
            continue
        contexts, choices = [], []
        pools = {s: (part["gold"].tolist(), part["group_id"].tolist())
                 for s, part in train.groupby(split[train.index].values, sort=False)}
        for r, s in zip(train.itertuples(), split[train.index]):
            golds, groups = pools[s]
            # negatives drawn at random (a few draws, never the whole split per row: 30K rows stay linear)
            draws = compute.rng(seed, "likely-correct-negatives", key_of[r.id]).integers(len(golds), size=8 * negatives)
            picked: list[str] = []
            for k in draws:
                if groups[k] != r.group_id and golds[k] != r.gold and golds[k] not in picked:
                    picked.append(golds[k])
                    if len(picked) == negatives:
                        break
            if not picked:  # every draw fell in its own dialogue (a split of one or two dialogues)
                continue
            contexts.append(r.context)
            choices.append([r.gold] + picked)
        if not contexts:
            continue
        probe = LinearProbe(vector, seed=seed).fit(contexts, choices, [0] * len(contexts))
        mine = retrieved[retrieved["instance_id"].isin(set(test["id"]))]
        for iid, group in mine.groupby("instance_id", sort=False):
            row = by_id.loc[iid]
            scores = probe.score([row["context"]], [[row["gold"]] + group["candidate"].tolist()])[0]
            margins.loc[group.index] = scores[1:] - scores[0]
    return margins


def turns_of(question: str, target, passage) -> str | None:
    """The question, the target and the utterances on either side of it: what an answer about this target
    has to fit (None where the target is not located in its passage)."""
    from tasks.distractors.window import window

    if target is None or passage is None:
        return None
    found = window(question, str(target), list(passage), budget=4, count=lambda _: 1)  # head + 3 utterances
    return None if found is None else found[0]


def fits_this_target(candidates: pd.DataFrame, instances: pd.DataFrame, spec: EmbedSpec,
                     ctx: StageContext | None) -> pd.Series:
    """For each of this dialogue's answers to another target offered as written (generator `dialogue`, rule
    `dialogue:<item>`): its cosine with this item's turns (`turns_of`) minus its cosine with the turns of
    the target it was written for; NaN for other candidates and where a target is not located. Events chain
    from turn to turn, so an answer written for a neighbouring target is often correct for this one too
    (blind readers judged 16-53% of them correct); one that fits its own turns no better than these is
    likely to be."""
    margins = pd.Series(np.nan, index=candidates.index)
    rules = candidates["rule"].astype(str)
    written = candidates[(candidates["generator"] == "dialogue") & rules.str.startswith("dialogue:") &
                         ~rules.str.contains("+", regex=False)]
    if not len(written) or instances is None or not {"target", "passage", "question"} <= set(instances.columns):
        return margins
    turns = {str(i): turns_of(q, t, p) for i, q, t, p in
             zip(instances["id"], instances["question"].astype(str), instances["target"], instances["passage"])}
    pairs = [(k, turns.get(str(iid)), turns.get(rule.split(":", 1)[1]), text) for k, iid, rule, text in
             zip(written.index, written["instance_id"], written["rule"].astype(str), written["candidate"])]
    pairs = [p for p in pairs if p[1] is not None and p[2] is not None]
    if not pairs:
        return margins
    vector = vector_lookup(sorted({x for _, a, b, c in pairs for x in (a, b, c)}), spec, ctx)
    for k, here, own, text in pairs:
        v = np.asarray(vector(text), dtype=np.float64)
        margins.loc[k] = float(v @ np.asarray(vector(here)) - v @ np.asarray(vector(own)))
    return margins


@compute.trains  # fits discriminators: a fixed thread count, in its key
def _nli_columns(df: pd.DataFrame, nli: str, batch_size: int, ctx: StageContext | None) -> str:
    """Each candidate's NLI verdict against the gold (`contradiction`, `nli_label`; empty with nli off); the
    manifest's note on the model."""
    if nli == OFF:
        df["contradiction"] = np.nan
        df["nli_label"] = None
        return "off (explicitly disabled: candidates kept on similarity alone)"
    path = resolve_model(nli, "NLI model", "candidate_filter.nli")
    if ctx is not None:
        ctx.record_model("nli", str(path), None, kind="sequence-classification")
    p, labels = nli_scores(df["gold"].tolist(), df["candidate"].tolist(), path, batch_size)
    df["contradiction"] = p.astype(float)
    df["nli_label"] = labels
    return str(path)


def _why_rejected(r, max_similarity: float, max_embed_similarity: float, second: str, nli: bool,
                  dialogue_margin: float) -> str | None:
    """Why the filters reject a candidate row (its reasons joined), or None: kept."""
    why = []
    if r.similarity >= max_similarity:
        which = "the gold" if r.closest_correct == r.gold else "a correct answer"
        why.append(f"cosine {r.similarity:.3f} >= {max_similarity} with {which} (a paraphrase)")
    elif r.embed_similarity >= max_embed_similarity:
        why.append(f"cosine {r.embed_similarity:.3f} >= {max_embed_similarity} ({second}) "
                   "with a correct answer (a paraphrase)")
    elif r.likely_correct_here:
        why.append("another dialogue's answer that a judge of which answer belongs where scores at least as "
                   "high as this item's gold: likely correct here too")
    elif r.fits_this_target:
        why.append(f"this dialogue's answer to another target that fits this target's turns within "
                   f"{dialogue_margin} of its own (cosine {r.target_margin:+.3f}): likely correct here too")
    if nli and "contra" not in str(r.nli_label).lower():
        why.append(f"NLI says {r.nli_label} (p_contradiction {r.contradiction:.3f}), not contradiction")
    return "; ".join(why) or None


def candidate_filter(candidates: pd.DataFrame, instances: pd.DataFrame | None = None, *, embedder: EmbedSpec = PAPER_EMBEDDER,
                     max_similarity: float = 0.9, embed: EmbedSpec = EmbedSpec(), max_embed_similarity: float = 0.91,
                     retrieval_guard: bool = True, dialogue_guard: bool = True, dialogue_margin: float = 0.1,
                     nli: ModelDir = None,
                     nli_batch_size: int = 32, seed: int = 0, ctx: StageContext | None = None) -> StageOutput:
    """Keep candidates that are no paraphrase of a correct answer and that an NLI model says contradict
    the gold. With the instances as second input, every correct answer counts (v2 releases have several).

    Args:
        embedder: the sentence embedder of the similarity rule: the paper's all-mpnet-base-v2, for which
            the 0.9 threshold was set
        max_similarity: keep only candidates whose cosine with every correct answer is below this
        embed: the pipeline's sentence embedder, a second judge of paraphrase (two models miss fewer)
        max_embed_similarity: keep only candidates whose cosine (embed) with every correct answer is below
            this (all-MiniLM-L6-v2 scores paraphrases of one answer at 0.91 and up)
        retrieval_guard: leave out a retrieved answer that a judge trained on which answer belongs to which
            dialogue scores at least as high as the item's own gold (`likely_correct_here`)
        dialogue_guard: leave out this dialogue's answer to another target, offered as written, unless it
            fits the turns of its own target better than this one's by at least dialogue_margin (cosine,
            embed; `fits_this_target`)
        dialogue_margin: the guard's margin. 0.1: of 34 readings of such answers in draws P and Q, readers
            judged those within 0.1 correct in 10 of 22, those beyond it in 1 of 12
        seed: seed of the guard's halves and negatives
        nli: NLI model directory (paper: roberta-large-mnli); "off" to apply the similarity rule alone
        nli_batch_size: premise/hypothesis pairs per NLI batch
    """
    if dialogue_margin < 0:
        raise ConfigError(f"candidate_filter.dialogue_margin = {dialogue_margin}: give a cosine margin >= 0 (0.1 by "
                          "default), or dialogue_guard = false to offer this dialogue's answers as written")
    if not nli:
        raise ConfigError("candidate_filter.nli is not set: give an NLI model directory (e.g. roberta-large-mnli "
                          "saved locally), or set candidate_filter.nli = \"off\" to keep candidates on similarity alone")
    correct = correct_texts(instances, candidates)
    rewritten = rewritten_answer(candidates, correct)
    sims, closest = similarities(candidates, correct, embedder, ctx, rewritten)
    sims2, closest2 = similarities(candidates, correct, embed, ctx, rewritten) if embed != embedder else (sims, closest)
    df = candidates.assign(similarity=np.asarray(sims, dtype=float), closest_correct=closest,
                           embed_similarity=np.asarray(sims2, dtype=float))
    margin = likely_correct_here(candidates, instances, embed, seed, ctx) if retrieval_guard and \
        instances is not None and "context" in instances.columns else pd.Series(np.nan, index=candidates.index)
    df["fit_margin"] = margin.values  # kept: a reviewer can see how near the guard each retrieved answer came
    df["likely_correct_here"] = (margin >= 0).values
    here = fits_this_target(candidates, instances, embed, ctx) if dialogue_guard else \
        pd.Series(np.nan, index=candidates.index)
    df["target_margin"] = here.values  # kept: how much better an answer of this dialogue fits its own target
    df["fits_this_target"] = (here > -dialogue_margin).values
    nli_note = _nli_columns(df, nli, nli_batch_size, ctx)
    reasons = [_why_rejected(r, max_similarity, max_embed_similarity, display_name(embed.model), nli != OFF,
                             dialogue_margin) for r in df.itertuples()]
    bad = pd.Series([r is not None for r in reasons], index=df.index)
    code = lambda r: "paraphrase" if r.startswith("cosine") else \
        "likely_correct_here" if r.startswith("another dialogue") else \
        "fits_this_target" if r.startswith("this dialogue") else "not_contradiction"  # noqa: E731
    kind = {"paraphrase": "similarity", "likely_correct_here": "retrieval_guard", "fits_this_target": "dialogue_guard",
            "not_contradiction": "nli"}
    rejected = df[bad].assign(reason_code=[code(r) for r in reasons if r is not None],
                              reason=[r for r in reasons if r is not None],
                              filter=[kind[code(r)] for r in reasons if r is not None])
    counts = {"candidates": len(df), "kept": int((~bad).sum()),
              "rejected_similarity": int(rejected["reason"].str.contains("cosine").sum()) if len(rejected) else 0,
              "rejected_second_embedder": int(rejected["reason"].str.contains(r"\) with a correct").sum())
              if len(rejected) else 0,
              "rejected_nli": int(rejected["reason"].str.contains("NLI").sum()) if len(rejected) else 0,
              "rejected_likely_correct_here": int((rejected["reason_code"] == "likely_correct_here").sum())
              if len(rejected) else 0,
              "rejected_fits_this_target": int((rejected["reason_code"] == "fits_this_target").sum())
              if len(rejected) else 0}
    plot = bar_png(["kept", "similarity", "likely correct here", "fits this target", "nli"],
                   [counts["kept"], counts["rejected_similarity"], counts["rejected_likely_correct_here"],
                    counts["rejected_fits_this_target"], counts["rejected_nli"]],
                   "candidates kept and rejected by each filter", "candidates")
    return StageOutput(data=df[~bad], rejected=rejected, notes={"nli": nli_note, "counts": counts},
                       files={"rejected_by_filter.png": plot},
                       tables={"filter": [{"measure": k, "count": v} for k, v in counts.items()]})
