"""CoreQuisite, published as PaCo (Qasemi et al. 2022): the construction steps of docs/method.md section 2.

ConceptNet edges -> fact sentences -> crowd questions and answers -> answer rules and experts'
labels -> splits by fact -> P-NLI, P-G, and P-MCQA (negative sampling, then AF-Lite).
"""

from __future__ import annotations

import logging

from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, PipelineSettings, Stage
from csk.release import Release
from data_contracts import common
from flows import ran_dry
from data_contracts import corequisite as contracts
from tasks.conceptnet import conceptnet
from tasks.corequisite import labeling as corequisite_labeling
from tasks.corequisite.annotation import annotation_tasks, annotations
from tasks.corequisite.answer_quality import answer_quality, answer_rules
from tasks.corequisite.edges import edges
from tasks.corequisite.lexicalize import lexicalize
from tasks.corequisite.p_mcqa import mcqa_instances, p_mcqa
from tasks.corequisite.p_nli import p_g, p_nli
from tasks.corequisite.splits import splits
from tasks.corequisite.statistics import statistics
from tasks.distractors.aflite import aflite
from tasks.embed import EmbedSpec


class CorequisiteSettings(PipelineSettings):
    """Settings shared by CoreQuisite's stages."""

    schedule: str | None = "0 4 * * 1"
    """cron of `csk schedule corequisite` (Mondays 04:00)"""
    embed: EmbedSpec = EmbedSpec()
    """the sentence embedder of the similarity sampling and of AF-Lite's probes"""


STAGES = (
    Stage(conceptnet, contract=common.ConceptNet, unit="relations", parent_column=None),
    Stage(edges, contract=contracts.Edges, unit="edges", parent_column=None, conserves_rows=False),
    Stage(lexicalize, contract=contracts.Facts, unit="facts", parent_column="edge_id"),
    Stage(annotation_tasks, contract=contracts.AnnotationTasks, unit="tasks", parent_column="fact_id",
          conserves_rows=False),
    Stage(annotations, contract=contracts.Answers, unit="answers", parent_column="source_fact_id",
          conserves_rows=False),
    Stage(answer_rules, contract=contracts.CheckedAnswers, unit="answers"),
    Stage(answer_quality, contract=contracts.KeptAnswers, unit="answers"),
    Stage(splits, contract=contracts.Splits, unit="answers"),
    Stage(p_nli, contract=contracts.PNLI, unit="instances"),
    Stage(p_g, contract=contracts.PG, unit="prompts", parent_column="answer_id", conserves_rows=False),
    Stage(mcqa_instances, contract=contracts.MCQAInstances, unit="instances", parent_column="answer_id",
          conserves_rows=False),
    Stage(aflite, contract=contracts.MCQAInstances, unit="instances"),
    Stage(p_mcqa, contract=contracts.PMCQA, unit="instances"),
    Stage(statistics, contract=contracts.Statistics, unit="measures", parent_column=None, conserves_rows=False),
)


def corequisite(run: PipelineRun) -> None:
    """ConceptNet -> edges -> lexicalize -> annotation tasks -> answers -> rules -> splits -> P-NLI / P-G /
    P-MCQA (+ AF-Lite) -> statistics."""
    db = run.stage(conceptnet)
    sampled = run.stage(edges, conceptnet=db)
    facts = run.stage(lexicalize, edges=sampled)
    tasks = run.stage(annotation_tasks, facts=facts)
    cfg = run.config.annotations
    if not (cfg.answers or cfg.release):
        logging.getLogger("csk").info("corequisite.annotations has neither answers nor release: stopping after the "
                                      "annotation task export")
        return
    answers = run.stage(annotations, facts=facts, tasks=tasks)
    checked = run.stage(answer_rules, answers=answers)
    kept = run.stage(answer_quality, checked=checked)
    split = run.stage(splits, answers=kept)
    nli = run.stage(p_nli, answers=kept, splits=split)
    gen = run.stage(p_g, answers=kept, splits=split)
    instances = run.stage(mcqa_instances, answers=kept, splits=split)
    mcqa = None
    if not ran_dry(instances, "P-MCQA instances", "AF-Lite and P-MCQA are skipped (an answer needs three answers "
                   "of the opposite polarity, or of other facts, as distractors: more answers give them)"):
        filtered = run.stage(aflite, mcq=instances, instances=instances)
        mcqa = run.stage(p_mcqa, kept=filtered)
    run.stage(statistics, edges=sampled, facts=facts, checked=checked, kept=kept, p_nli=nli, p_g=gen,
              instances=instances, p_mcqa=mcqa)

RELEASE = Release(
    table="answer_quality", split_stage="splits", files=("annotation_tasks", "p_nli", "p_g", "p_mcqa"),
    pretty_name="CoreQuisite / PaCo (rebuilt)", task_categories=("text-classification", "multiple-choice",
                                                                  "text-generation"),
    licences={"dump": "CC BY-SA 4.0 (ConceptNet 5)", "release": "PaCo's release terms: check before redistributing"},
    deviations=(
        lambda p: None if p["lexicalize"]["masked_lm"] else
                  "Templates were scored by an offline spaCy grammar scorer (no masked-LM directory configured), "
                  "not by RoBERTa; corequisite.lexicalize.masked_lm sets one.",
        "Zhang et al.'s two negative-sampling methods are read as the `similar` and `shuffled` variants.",
    ))

PIPELINE = Pipeline(
    name="corequisite",
    release=RELEASE,
    # a PaCo release alone: its rows, neither the bundled crowd answers nor the experts' labels, no rule
    # removing what the authors kept (the P-NLI rows come back as released)
    release_alone=("corequisite.annotations.release={release}", "corequisite.annotations.answers=",
                   "corequisite.answer_rules.expert_labels=", "corequisite.answer_quality.rules=[]"),
    doc="CoreQuisite / PaCo: preconditions of commonsense facts (Qasemi et al. 2022)",
    stages=STAGES,
    flows=(corequisite,),
    settings=CorequisiteSettings,
    labeling=corequisite_labeling.STEPS,
)
