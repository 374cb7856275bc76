"""Contracts of the CoreQuisite (PaCo) pipeline's artifacts."""

from __future__ import annotations

from typing import Optional

import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Annotated, Contract, Provenance, RunStatistics
from data_contracts.distractors import AdversarialChoices

POLARITIES = ["enabling", "disabling"]
SPLITS = ["train", "dev", "test"]


class Edges(Provenance):
    """Sampled ConceptNet edges: `id` is the assertion URI; `source_record` its line in the dump."""

    id: Series[str] = pa.Field(unique=True, str_matches=r"^/a/\[/r/[A-Za-z]+/,/c/[^,]+/,/c/.+/\]$")
    relation: Series[str]
    head: Series[str] = pa.Field(str_length={"min_value": 1})
    tail: Series[str] = pa.Field(str_length={"min_value": 1})
    weight: Series[float]
    surface_text: Series[str]


class Facts(Contract):
    """One sentence per edge, with every candidate sentence and its score."""

    id: Series[str] = pa.Field(unique=True, str_matches=r"^fact-[0-9a-f]{10}$")
    edge_id: Series[str] = pa.Field(unique=True)
    statement: Series[str] = pa.Field(str_length={"min_value": 1})
    template: Series[str]
    score: Series[float]
    candidates: Series[object]

    @pa.check("candidates", name="every_candidate_scored")
    def scored(cls, s):
        return s.map(lambda c: len(c) > 0 and all(isinstance(x, dict) and x.get("sentence") for x in c))


class AnnotationTasks(Contract):
    fact_id: Series[str]
    statement: Series[str]
    polarity: Series[str] = pa.Field(isin=POLARITIES)
    question: Series[str] = pa.Field(isin=["What makes this possible?", "What makes this impossible?"])
    answers_wanted: Series[int] = pa.Field(ge=1)


class Answers(Provenance, Annotated):
    """Crowd answers: `source_fact_id` is the rebuilt fact (null for a statement only the release has); answers
    written in Label Studio keep their annotator, annotation and task (null on a release's rows)."""

    fact_id: Series[str] = pa.Field(str_length={"min_value": 1})
    source_fact_id: Series[str] = pa.Field(nullable=True)
    statement: Series[str] = pa.Field(str_length={"min_value": 1})
    polarity: Series[str] = pa.Field(isin=POLARITIES)
    answer: Series[str] = pa.Field(str_length={"min_value": 1})
    fact_from_release: Series[bool]


class CheckedAnswers(Answers):
    """Answers with every rule's verdict and the experts' label (of the answer, and whether its fact is invalid)."""

    rule_negatives: Series[bool]
    rule_negatives_words: Series[object]
    rule_object_pronouns: Series[bool]
    rule_object_pronouns_words: Series[object]
    expert_label: Series[str] = pa.Field(nullable=True, isin=["truism", "informative", "irrelevant"])
    fact_invalid: Series[bool]
    # labels from Label Studio: who labelled each answer, their annotations and their labels (lists)
    labellers: Optional[Series[object]]
    label_annotation_ids: Optional[Series[object]]
    expert_votes: Optional[Series[object]]


class KeptAnswers(CheckedAnswers):
    expert_label: Series[str] = pa.Field(nullable=True, isin=["truism", "informative"])
    fact_invalid: Series[bool] = pa.Field(isin=[False])


class Splits(Contract):
    fact_id: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)

    @pa.dataframe_check(name="no_fact_in_two_splits")
    def one_split_per_fact(cls, df):
        return df.groupby("fact_id")["split"].transform("nunique") == 1


class PNLI(Contract):
    context: Series[str] = pa.Field(str_length={"min_value": 1})
    question: Series[str] = pa.Field(str_length={"min_value": 1})
    label: Series[int] = pa.Field(isin=[0, 1])
    split: Series[str] = pa.Field(isin=SPLITS)


class PG(Contract):
    prompt: Series[str] = pa.Field(str_matches=r".+ What makes this (im)?possible\? $")
    references: Series[object]
    split: Series[str] = pa.Field(isin=SPLITS)


class MCQAInstances(AdversarialChoices):
    """P-MCQA instances in the distractor engine's terms (AF-Lite reads `context`, `gold`, `distractors`)."""

    answer_id: Series[str]
    variant: Series[str] = pa.Field(isin=["same_fact", "similar", "shuffled"])
    draw: Series[int] = pa.Field(ge=0)
    split: Series[str] = pa.Field(isin=SPLITS)
    context: Series[str]
    question: Series[str]


class PMCQA(Contract):
    group_id: Series[str]
    variant: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)
    choices: Series[object]
    label: Series[int] = pa.Field(ge=0)

    @pa.dataframe_check(name="label_indexes_a_choice")
    def label_ok(cls, df):
        return df["label"] < df["choices"].map(len)


class Statistics(RunStatistics):
    """CoreQuisite's run statistics beside the paper's figures."""
