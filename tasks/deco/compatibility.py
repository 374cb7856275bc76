"""docs/method.md 4.6: ACCENT's compatibility test. For each tuple a COMET model generates tails for
"{head} {relation} [GEN]" (beam 10, 10 outputs); the tuple's score is the highest cosine between its
tail and a generated tail (Sentence-BERT; ACCENT: paraphrase-MiniLM-L6-v2), floored at 0; a
response scores the mean of its tuples, 0.5 when no tuple was extracted.

Queries are deduplicated and generated in batches (several tuples per `generate` call), on a GPU
when there is one, in bf16 where it is measured faster there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from csk import compute
from csk.errors import ConfigError
from csk.models import model_hash, resolve_model
from csk.params import OFF, Device, ModelDir, Precision
from csk.runtime import StageContext, StageOutput
from tasks import seq2seq
from tasks.embed import EmbedSpec, open_embedder

NO_TUPLE_SCORE = 0.5  # ACCENT: a response without tuples


def query(head: str, relation: str) -> str:
    return f"{head} {relation} [GEN]"


def tuple_scores(tails: list[str], generated: list[list[str]], vectors) -> list[float]:
    """max(0, max cosine(tail, generated tail)) per tuple; 0 when COMET generated nothing."""
    out = []
    for tail, gens in zip(tails, generated):
        gens = [g for g in gens if g]
        if not gens:
            out.append(0.0)
            continue
        sims = np.stack([vectors(g) for g in gens]) @ vectors(tail)
        out.append(max(0.0, float(sims.max())))
    return out


def compatibility(samples: pd.DataFrame, tuples: pd.DataFrame, *, comet: ModelDir = None, num_beams: int = 10,
                  num_return: int = 10, max_length: int = 64, no_repeat_ngram_size: int = 2, batch_size: int = 16,
                  precision: Precision = "auto", device: Device = "auto",
                  embed: EmbedSpec = EmbedSpec(), ctx: StageContext | None = None) -> StageOutput:
    """The event-commonsense score of every sample's response, with each tuple's score and the
    COMET tails it was compared with.

    Args:
        comet: COMET seq2seq directory (ACCENT: comet-atomic_2020_BART); "off": no scores (every
            score empty, said so); the stage refuses to run without one otherwise
        num_beams: COMET beam width (ACCENT: 10)
        num_return: tails generated per tuple (ACCENT: 10)
        max_length: longest tail in tokens (ACCENT: 64)
        no_repeat_ngram_size: ACCENT: 2
        batch_size: tuples per generate call
        precision: auto: bf16 where measured faster on this device (a GPU), else fp32
        device: auto: CUDA when a GPU is visible
        embed: the sentence embedder comparing tails (ACCENT: paraphrase-MiniLM-L6-v2; default here:
            all-MiniLM-L6-v2, the one installed; the manifest records which ran)
    """
    if not comet:
        raise ConfigError("deco.compatibility needs a COMET model: set deco.compatibility.comet to its directory "
                          "(ACCENT: comet-atomic_2020_BART saved with save_pretrained), or comet = \"off\" to run "
                          "without scores")
    by_sample = {sid: g for sid, g in tuples.groupby("sample_id", sort=False)}
    base = samples[["id", "split", "dev", "corpus", "system", "event_cs", "general_cs"]].copy()
    if comet == OFF:
        details = [[{"head": t.head, "relation": t.relation, "tail": t.tail, "score": None, "generated": []}
                    for t in by_sample[sid].itertuples()] if sid in by_sample else [] for sid in base["id"]]
        data = base.assign(score=np.nan, n_tuples=[len(d) for d in details], tuples=details, scorer=OFF)
        return StageOutput(data=data, notes={"scorer": "off: comet = \"off\", no compatibility scores"})

    path = resolve_model(comet, "COMET model", "deco.compatibility.comet")
    dev = compute.device(device)
    decision = compute.precision(precision, dev)
    queries = list(dict.fromkeys(query(h, r) for h, r in zip(tuples["head"], tuples["relation"])))
    generated = dict(zip(queries, seq2seq.generate(
        queries, path, num_return=num_return, num_beams=num_beams, batch_size=batch_size,
        precision=decision["precision"], device=dev, desc="comet", max_length=max_length,
        no_repeat_ngram_size=no_repeat_ngram_size, early_stopping=True)))
    gens = [generated[query(h, r)] for h, r in zip(tuples["head"], tuples["relation"])]
    with open_embedder(embed, ctx) as emb:
        vectors = emb.lookup(tuples["tail"].tolist() + [g for gs in gens for g in gs if g])
        scores = tuple_scores(tuples["tail"].tolist(), gens, vectors)
    scored = tuples.assign(score=scores, generated=gens)
    by_sample = {sid: g for sid, g in scored.groupby("sample_id", sort=False)}
    details, final = [], []
    for sid in base["id"]:
        g = by_sample.get(sid)
        rows = [] if g is None else [{"head": t.head, "relation": t.relation, "tail": t.tail, "score": t.score,
                                      "generated": list(t.generated)} for t in g.itertuples()]
        details.append(rows)
        final.append(float(np.mean([r["score"] for r in rows])) if rows else NO_TUPLE_SCORE)
    sha = model_hash(path)
    if ctx is not None:
        ctx.record_model("comet", str(path), sha, kind="seq2seq", device=dev, precision=decision,
                         queries=len(queries))
    data = base.assign(score=final, n_tuples=[len(d) for d in details], tuples=details,
                       scorer=f"accent:{Path(path).name}@{sha[:12]}")
    return StageOutput(data=data, notes={
        "comet": f"{Path(path).name}@{sha[:12]}", "embedder": embed.model, "precision": decision["precision"],
        "tuples": len(tuples), "distinct_queries": len(queries),
        "without_tuples": int(sum(1 for d in details if not d)), "no_tuple_score": NO_TUPLE_SCORE,
        "decoding": {"num_beams": num_beams, "num_return_sequences": num_return, "max_length": max_length,
                     "no_repeat_ngram_size": no_repeat_ngram_size}})
