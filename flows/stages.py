"""The stage registry: each construction step bound to its function, contract and lineage link."""

from __future__ import annotations

from csk.runtime import Stage
from data_contracts import cicero as cc
from tasks.cicero.annotation import annotation_tasks, annotations, release_fingerprint
from tasks.cicero.length_filter import length_filter
from tasks.cicero.nlg import nlg
from tasks.cicero.sources import sources, sources_fingerprint
from tasks.cicero.splits import splits
from tasks.cicero.statistics import statistics
from tasks.cicero.targets import targets
from tasks.dedup import dedup
from tasks.embed import embed, embed_fingerprint


def _targets_fingerprint(params: dict) -> dict:
    return embed_fingerprint(params["embed"])


CICERO = {
    s.name: s
    for s in (
        Stage("sources", sources, cc.Dialogues, parent_column=None, fingerprint=sources_fingerprint),
        Stage("length_filter", length_filter, cc.FilteredDialogues),
        Stage("embed", embed, cc.Embeddings, fingerprint=embed_fingerprint),
        Stage("dedup", dedup, cc.Deduplicated),
        Stage("targets", targets, cc.Targets, parent_column="dialogue_id", conserves_rows=False,
              fingerprint=_targets_fingerprint),
        Stage("annotation_tasks", annotation_tasks, cc.AnnotationTasks),
        Stage("annotations", annotations, cc.Annotations, parent_column="source_dialogue_id",
              fingerprint=release_fingerprint),
        Stage("splits", splits, cc.Splits),
        Stage("nlg", nlg, cc.NLG, parent_column="annotation_id", conserves_rows=False),
        Stage("statistics", statistics, cc.Statistics, parent_column=None, conserves_rows=False),
    )
}

PIPELINE_STAGES = {"cicero": CICERO}
