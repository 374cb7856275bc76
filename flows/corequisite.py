"""CoreQuisite, published as PaCo (Qasemi et al. 2022): the construction steps of SEEDS.md section 2.

ConceptNet edges -> fact sentences -> crowd questions and answers -> answer rules and experts'
labels -> splits by fact -> P-NLI, P-G, and P-MCQA (negative sampling, then AF-Lite).
"""

from __future__ import annotations

import logging

from csk.orchestration import PipelineRun
from csk.pipeline import Pipeline, PipelineSettings, Stage
from csk.release import Release
from tasks.conceptnet import conceptnet
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
    Stage("conceptnet", conceptnet, "common.ConceptNet", parent_column=None),
    Stage("edges", edges, "corequisite.Edges", parent_column=None, conserves_rows=False),
    Stage("lexicalize", lexicalize, "corequisite.Facts", parent_column="edge_id"),
    Stage("annotation_tasks", annotation_tasks, "corequisite.AnnotationTasks", parent_column="fact_id",
          conserves_rows=False),
    Stage("annotations", annotations, "corequisite.Answers", parent_column="source_fact_id", conserves_rows=False),
    Stage("answer_rules", answer_rules, "corequisite.CheckedAnswers"),
    Stage("answer_quality", answer_quality, "corequisite.KeptAnswers"),
    Stage("splits", splits, "corequisite.Splits"),
    Stage("p_nli", p_nli, "corequisite.PNLI"),
    Stage("p_g", p_g, "corequisite.PG", parent_column="answer_id", conserves_rows=False),
    Stage("mcqa_instances", mcqa_instances, "corequisite.MCQAInstances", parent_column="answer_id",
          conserves_rows=False),
    Stage("aflite", aflite, "corequisite.MCQAInstances"),
    Stage("p_mcqa", p_mcqa, "corequisite.PMCQA"),
    Stage("statistics", statistics, "corequisite.Statistics", parent_column=None, conserves_rows=False),
)


def corequisite(run: PipelineRun) -> None:
    """ConceptNet -> edges -> lexicalize -> annotation tasks -> answers -> rules -> splits -> P-NLI / P-G /
    P-MCQA (+ AF-Lite) -> statistics."""
    db = run.stage("conceptnet")
    sampled = run.stage("edges", db)
    facts = run.stage("lexicalize", sampled)
    tasks = run.stage("annotation_tasks", facts)
    cfg = run.config.annotations
    if not (cfg.answers or cfg.release):
        logging.getLogger("csk").info("corequisite.annotations has neither answers nor release: stopping after the "
                                      "annotation task export")
        return
    answers = run.stage("annotations", facts, tasks)
    checked = run.stage("answer_rules", answers)
    kept = run.stage("answer_quality", checked)
    split = run.stage("splits", kept)
    nli = run.stage("p_nli", kept, split)
    gen = run.stage("p_g", kept, split)
    instances = run.stage("mcqa_instances", kept, split)
    filtered = run.stage("aflite", instances, instances)
    mcqa = run.stage("p_mcqa", filtered)
    run.stage("statistics", sampled, facts, checked, kept, nli, gen, instances, mcqa)


RELEASE = Release(
    table="answer_quality", split_stage="splits", files=("annotation_tasks", "p_nli", "p_g", "p_mcqa"),
    pretty_name="CoreQuisite / PaCo (rebuilt)", task_categories=("text-classification", "multiple-choice",
                                                                  "text-generation"),
    licences={"dump": "CC BY-SA 4.0 (ConceptNet 5)", "release": "PaCo's release terms: check before redistributing"},
    deviations=(
        "Without a masked-LM directory, templates are scored by an offline spaCy grammar scorer instead of "
        "RoBERTa (corequisite.lexicalize.masked_lm).",
        "Zhang et al.'s two negative-sampling methods are read as the `similar` and `shuffled` variants.",
    ))

PIPELINE = Pipeline(
    name="corequisite",
    release=RELEASE,
    doc="CoreQuisite / PaCo: preconditions of commonsense facts (Qasemi et al. 2022)",
    stages=STAGES,
    flows=(corequisite,),
    settings=CorequisiteSettings,
    units={"conceptnet": "relations", "edges": "edges", "lexicalize": "facts", "annotation_tasks": "tasks",
           "annotations": "answers", "answer_rules": "answers", "answer_quality": "answers", "splits": "answers",
           "p_nli": "instances", "p_g": "prompts", "mcqa_instances": "instances", "aflite": "instances",
           "p_mcqa": "instances", "statistics": "measures"},
)
