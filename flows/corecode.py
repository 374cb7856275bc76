"""CORECODE (Shi et al. 2024): the construction steps of docs/method.md section 3.

Chinese dyadic dialogues -> concepts (jieba POS) -> ConceptNet one-hop screening -> knowledge
annotations checked against the ontology -> splits by dialogue -> six tasks -> perturbations of the
multiple-choice tasks -> statistics.
"""

from __future__ import annotations

from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, PipelineSettings, Stage
from csk.release import Release
from data_contracts import common
from data_contracts import corecode as contracts
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
from tasks.corecode import labeling as corecode_labeling
from tasks.corecode.concepts import concepts
from tasks.corecode.screening import screening
from tasks.corecode.sources import sources
from tasks.corecode.splits import splits
from tasks.corecode.statistics import statistics


class CorecodeSettings(PipelineSettings):
    """Settings shared by CORECODE's stages."""

    schedule: str | None = "0 5 * * 1"
    """cron of `csk schedule corecode` (Mondays 05:00)"""


TASKS = (knowledge_filling, knowledge_generation, conflict_phrase_detection, domain_identification,
         slot_identification, event_causal_inference)  # the paper's six tasks, in its order

STAGES = (
    Stage(sources, contract=contracts.Dialogues, unit="dialogues", parent_column=None),
    Stage(concepts, contract=contracts.Concepts, unit="utterances", parent_column="dialogue_id", conserves_rows=False),
    Stage(conceptnet, contract=common.ConceptNet, unit="relations", parent_column=None),
    Stage(screening, contract=contracts.Screening, unit="dialogues"),
    Stage(annotations, contract=contracts.Annotations, unit="annotations", parent_column="dialogue_id"),
    Stage(splits, contract=contracts.Splits, unit="annotations"),
    *(Stage(task, contract=contracts.TaskItems, unit="items", parent_column="annotation_id", conserves_rows=False)
      for task in TASKS),
    Stage(perturbations, contract=contracts.Perturbed, unit="items", parent_column="item_id", parent_inputs=3,
          conserves_rows=False),
    Stage(statistics, contract=contracts.Statistics, unit="measures", parent_column=None, conserves_rows=False),
)
TASK_STAGES = tuple(t.__name__ for t in TASKS)


def corecode(run: PipelineRun) -> None:
    """sources -> concepts -> screening (ConceptNet one hop) -> annotations -> splits -> six tasks ->
    perturbations -> statistics."""
    dialogues = run.stage(sources)
    tagged = run.stage(concepts, dialogues=dialogues)
    db = run.stage(conceptnet)
    screened = run.stage(screening, dialogues=dialogues, concepts=tagged, conceptnet=db)
    knowledge = run.stage(annotations, screening=screened)
    split = run.stage(splits, annotations=knowledge)
    items = {name: run.stage(name, annotations=knowledge, splits=split) for name in TASK_STAGES}
    run.stage(perturbations, knowledge_filling=items["knowledge_filling"],
              domain_identification=items["domain_identification"], slot_identification=items["slot_identification"])
    run.stage(statistics, dialogues=dialogues, screening=screened, annotations=knowledge, splits=split)

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
    labeling=corecode_labeling.STEPS,
)
