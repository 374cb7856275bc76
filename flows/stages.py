"""The stage registry: each construction step bound to its function, contract and lineage link."""

from __future__ import annotations

from csk.runtime import Stage
from data_contracts import cicero as cc
from tasks.cicero.annotation import annotation_tasks, annotations, release_fingerprint, release_instances
from tasks.cicero.length_filter import length_filter
from tasks.cicero.nlg import nlg
from tasks.cicero.sources import sources, sources_fingerprint
from tasks.cicero.splits import splits
from tasks.cicero.statistics import statistics
from tasks.cicero.targets import targets
from tasks.dedup import dedup
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.mcq import mcq, verdicts_fingerprint, verification
from tasks.distractors.quality import distractor_quality
from tasks.embed import embed, embed_fingerprint
from tasks.sources import fingerprint_paths


def _embed_fingerprint(params: dict) -> dict:
    return embed_fingerprint(params["embed"])


def _model_fingerprint(*keys: str):
    """Key material for the model directories a stage uses (their weights' sha256)."""
    from csk.models import model_hash, resolve_model

    def fingerprint(params: dict) -> dict:
        out = _embed_fingerprint(params) if "embed" in params else {}
        for k in keys:
            spec = params.get(k)
            if spec and spec != "off":
                out[k] = model_hash(resolve_model(spec, k))
        for name in ("conceptnet_db", "candidates"):  # knowledge bases and candidate files are inputs too
            if params.get(name):
                out.update(fingerprint_paths({name: params[name]}))
        return out

    return fingerprint


CICERO = {
    s.name: s
    for s in (
        Stage("sources", sources, cc.Dialogues, parent_column=None, fingerprint=sources_fingerprint),
        Stage("length_filter", length_filter, cc.FilteredDialogues),
        Stage("embed", embed, cc.Embeddings, fingerprint=embed_fingerprint),
        Stage("dedup", dedup, cc.Deduplicated),
        Stage("targets", targets, cc.Targets, parent_column="dialogue_id", conserves_rows=False,
              fingerprint=_embed_fingerprint),
        Stage("annotation_tasks", annotation_tasks, cc.AnnotationTasks),
        Stage("annotations", annotations, cc.Annotations, parent_column="source_dialogue_id",
              fingerprint=release_fingerprint),
        Stage("splits", splits, cc.Splits),
        Stage("nlg", nlg, cc.NLG, parent_column="annotation_id", conserves_rows=False),
        Stage("statistics", statistics, cc.Statistics, parent_column=None, conserves_rows=False),
        # the distractor engine
        Stage("release", release_instances, cc.Annotations, parent_column=None, fingerprint=release_fingerprint),
        Stage("counterfactuals", counterfactuals, cc.Counterfactuals, parent_column="instance_id",
              conserves_rows=False, fingerprint=_model_fingerprint("model")),
        Stage("candidate_filter", candidate_filter, cc.Candidates, fingerprint=_model_fingerprint("nli")),
        Stage("adversarial_filter", adversarial_filter, cc.AdversarialChoices,
              fingerprint=_model_fingerprint("model")),
        Stage("aflite", aflite, cc.AdversarialChoices, fingerprint=_embed_fingerprint),
        Stage("verification", verification, cc.Verified, fingerprint=verdicts_fingerprint),
        Stage("mcq", mcq, cc.MCQ),
        Stage("distractor_quality", distractor_quality, cc.DistractorQuality, parent_column=None,
              conserves_rows=False, fingerprint=_embed_fingerprint),
    )
}

PIPELINE_STAGES = {"cicero": CICERO}
