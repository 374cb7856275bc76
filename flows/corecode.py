"""CORECODE (Shi et al. 2024): the construction steps of SEEDS.md section 3.

Chinese dyadic dialogues -> concepts (jieba POS) -> ConceptNet one-hop screening -> knowledge
annotations checked against the ontology -> splits by dialogue -> six tasks -> perturbations of the
multiple-choice tasks -> statistics.
"""

from __future__ import annotations

from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, PipelineSettings, Stage
from csk.release import Release
from tasks.conceptnet import conceptnet
from tasks.corecode.annotations import annotations
from tasks.corecode.benchmark import (
    conflict_phrase_detection,
    domain_identification,
    event_causal_inference,
    knowledge_filling,
    knowledge_generation,
    perturbations,
    slot_identification,
)
from tasks.corecode.concepts import concepts
from tasks.corecode.screening import screening
from tasks.corecode.sources import sources
from tasks.corecode.splits import splits
from tasks.corecode.statistics import statistics


class CorecodeSettings(PipelineSettings):
    """Settings shared by CORECODE's stages."""

    schedule: str | None = "0 5 * * 1"
    """cron of `csk schedule corecode` (Mondays 05:00)"""


TASK_STAGES = ("knowledge_filling", "knowledge_generation", "conflict_phrase_detection", "domain_identification",
               "slot_identification", "event_causal_inference")
MCQ_TASKS = ("knowledge_filling", "domain_identification", "slot_identification")

STAGES = (
    Stage("sources", sources, "corecode.Dialogues", parent_column=None),
    Stage("concepts", concepts, "corecode.Concepts", parent_column="dialogue_id", conserves_rows=False),
    Stage("conceptnet", conceptnet, "common.ConceptNet", parent_column=None),
    Stage("screening", screening, "corecode.Screening"),
    Stage("annotations", annotations, "corecode.Annotations", parent_column="dialogue_id"),
    Stage("splits", splits, "corecode.Splits"),
    *(Stage(name, fn, "corecode.TaskItems", parent_column="annotation_id", conserves_rows=False)
      for name, fn in zip(TASK_STAGES, (knowledge_filling, knowledge_generation, conflict_phrase_detection,
                                        domain_identification, slot_identification, event_causal_inference))),
    Stage("perturbations", perturbations, "corecode.Perturbed", parent_column="item_id", parent_inputs=len(MCQ_TASKS),
          conserves_rows=False),
    Stage("statistics", statistics, "corecode.Statistics", parent_column=None, conserves_rows=False),
)


def corecode(run: PipelineRun) -> None:
    """sources -> concepts -> screening (ConceptNet one hop) -> annotations -> splits -> six tasks ->
    perturbations -> statistics."""
    dialogues = run.stage("sources")
    tagged = run.stage("concepts", dialogues)
    db = run.stage("conceptnet")
    screened = run.stage("screening", dialogues, tagged, db)
    knowledge = run.stage("annotations", screened)
    split = run.stage("splits", knowledge)
    items = {name: run.stage(name, knowledge, split) for name in TASK_STAGES}
    run.stage("perturbations", *(items[name] for name in MCQ_TASKS))
    run.stage("statistics", dialogues, screened, knowledge, split)


RELEASE = Release(
    table="annotations", split_stage="splits", files=TASK_STAGES + ("perturbations",),
    pretty_name="CORECODE (rebuilt)", language=("zh",),
    task_categories=("multiple-choice", "text-generation", "token-classification"),
    licences={"dump": "CC BY-SA 4.0 (ConceptNet 5)", "naturalconv": "NaturalConv's license.pdf (research use): check before redistributing",
              "dulemon": "DuLeMon's release terms (PaddlePaddle/Research): check before redistributing",
              "release": "CORECODE's release terms"},
    deviations=(
        "Splits are drawn by dialogue, 60/20/20; the release splits per annotation and lets dialogues cross splits.",
        "36 slots: the paper counts 37, the 37th is not public.",
    ))

PIPELINE = Pipeline(
    name="corecode",
    release=RELEASE,
    doc="CORECODE: commonsense knowledge annotated on Chinese dyadic dialogues, six tasks (Shi et al. 2024)",
    stages=STAGES,
    flows=(corecode,),
    settings=CorecodeSettings,
    units={"sources": "dialogues", "concepts": "utterances", "conceptnet": "relations", "screening": "dialogues",
           "annotations": "annotations", "splits": "annotations", **{t: "items" for t in TASK_STAGES},
           "perturbations": "items", "statistics": "measures"},
)
