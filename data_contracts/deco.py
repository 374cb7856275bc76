"""Contracts of the DECO / ACCENT pipeline's artifacts (docs/method.md 4)."""

from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Contract, Provenance, RunStatistics

# The 12 relations, spelt as ACCENT's released code and COMET-ATOMIC 2020 spell them.
RELATIONS = ("xNeed", "xAttr", "xReact", "xEffect", "xWant", "xIntent", "oEffect", "oReact", "oWant", "isAfter",
             "HasSubEvent", "HinderedBy")
# An extractor target as ACCENT trains on it ("event1: HEAD; event2: TAIL"): the contract checks it, the
# extraction stages write and parse it.
TARGET = re.compile(r"event1: (?P<head>.*?); event2: (?P<tail>.*)", re.DOTALL)

CORPORA = ["DailyDialog", "PersonaChat", "TopicalChat", "ConTurE"]
SPLITS = ["train", "test"]
SETTINGS = ["single", "pair"]


def _tuples_ok(v) -> bool:
    return all(len(t) == 3 and t[1] in RELATIONS and str(t[0]).strip() and str(t[2]).strip() for t in v)


class Samples(Provenance):
    """A history of `window` slots (DECO: 4; empty ones padded in front, as DECO does) and a response to it."""

    history: Series[object]
    response: Series[str]
    corpus: Series[str] = pa.Field(isin=CORPORA)
    system: Series[str] = pa.Field(nullable=True)
    event_cs: Series[float] = pa.Field(nullable=True, ge=1, le=5)
    general_cs: Series[float] = pa.Field(nullable=True, ge=1, le=5)
    tuples_single: Series[object]
    tuples_pair: Series[object]
    split: Series[str] = pa.Field(nullable=True, isin=SPLITS)
    for_dev: Series[bool]  # a released sample the release marks as dev
    guid: Series[str] = pa.Field(nullable=True)  # the release's id
    history_id: Series[str] = pa.Field(nullable=True)  # a dialogue system response's history
    event_cs_raw: Series[object] = pa.Field(nullable=True)  # the release's individual ratings
    general_cs_raw: Series[object] = pa.Field(nullable=True)
    overall_impression: Series[float] = pa.Field(nullable=True)
    evidence: Series[object]

    @pa.check("history", name="history_has_an_utterance")
    def window(cls, s):
        return s.map(lambda h: len(h) > 0 and any(str(u).strip() for u in h))

    @pa.dataframe_check(name="histories_have_one_length")
    def one_length(cls, df):
        return pd.Series(df["history"].map(len).nunique() <= 1, index=df.index)

    @pa.check("tuples_single", "tuples_pair", name="tuples_are_head_known_relation_tail")
    def tuples(cls, s):
        return s.map(_tuples_ok)


class Filtered(Samples):
    """Responses that pass docs/method.md 4.2: at least 5 words, a sentence that is not a question, more than courtesy."""

    words: Series[int] = pa.Field(ge=1)
    statements: Series[object]

    @pa.check("statements", name="has_a_statement")
    def statement(cls, s):
        return s.map(lambda v: len(v) > 0)


class Sampled(Filtered):
    """The selected samples, each in train or test; dev marks the dev slice of train. Ratings read from
    Label Studio (deco.sample.ratings) name their raters and annotations, one per raw rating; tuples written
    in Label Studio (deco.sample.tuples) their writers."""

    split: Series[str] = pa.Field(isin=SPLITS)
    dev: Series[bool]
    selection: Series[str] = pa.Field(isin=["released", "sampled"])
    raters: Optional[Series[object]]  # Label Studio's annotator ids, in the order of the *_raw ratings
    rating_annotation_ids: Optional[Series[object]]
    writers: Optional[Series[object]]  # who wrote the sample's tuples in Label Studio (deco.sample.tuples)

    @pa.dataframe_check(name="dev_is_part_of_train")
    def dev_in_train(cls, df):
        return ~df["dev"] | (df["split"] == "train")

    @pa.dataframe_check(name="one_rating_of_each_kind_per_named_rater_and_the_score_their_mean")
    def rated(cls, df):
        if "raters" not in df.columns:
            return pd.Series(True, index=df.index)

        def ok(r) -> bool:
            n = len(r["raters"])
            return n == 0 or (n == len(r["rating_annotation_ids"]) == len(r["event_cs_raw"]) == len(r["general_cs_raw"])
                              and all(1 <= x <= 5 for x in list(r["event_cs_raw"]) + list(r["general_cs_raw"]))
                              and abs(r["event_cs"] - float(np.mean(r["event_cs_raw"]))) < 1e-9
                              and abs(r["general_cs"] - float(np.mean(r["general_cs_raw"]))) < 1e-9)

        return df.apply(ok, axis=1).astype(bool)


class ExtractionTasks(Contract):
    """One extractor input per sample and relation (12 per sample), with its human targets."""

    sample_id: Series[str]
    relation: Series[str] = pa.Field(isin=list(RELATIONS))
    input: Series[str] = pa.Field(str_startswith="Extract event1 and event2 from the text where ")
    gold_targets: Series[object]
    gold_settings: Series[object]
    annotated: Series[bool]
    negative: Series[str] = pa.Field(nullable=True, isin=SETTINGS)
    split: Series[str] = pa.Field(isin=SPLITS)

    @pa.check("gold_targets", name="targets_in_the_trained_format")
    def targets(cls, s):
        return s.map(lambda ts: all(TARGET.fullmatch(t) for t in ts))

    @pa.dataframe_check(name="twelve_relations_per_sample")
    def twelve(cls, df):
        n = df.groupby("sample_id")["relation"].transform("nunique")
        return n == len(RELATIONS)

    @pa.dataframe_check(name="a_negative_has_no_gold_target")
    def negatives(cls, df):
        return df["negative"].isna() | (df["gold_targets"].map(len) == 0)


class Tuples(Contract):
    """Event-relation tuples, the extractor's (origin extractor) or the annotators' (origin gold). Tuples
    validated in Label Studio (deco.extract.validations) carry their votes and validators: a kept tuple
    that was voted on was accepted by a majority of its validators."""

    task_id: Series[str]
    sample_id: Series[str]
    relation: Series[str] = pa.Field(isin=list(RELATIONS))
    head: Series[str] = pa.Field(str_length={"min_value": 1})
    tail: Series[str] = pa.Field(str_length={"min_value": 1})
    setting: Series[str] = pa.Field(nullable=True, isin=SETTINGS)
    origin: Series[str] = pa.Field(isin=["gold", "extractor"])
    votes_accept: Optional[Series[int]] = pa.Field(ge=0)
    votes_reject: Optional[Series[int]] = pa.Field(ge=0)
    validated: Optional[Series[bool]]
    validators: Optional[Series[object]]  # Label Studio's annotator ids, one per vote
    validation_annotation_ids: Optional[Series[object]]

    @pa.dataframe_check(name="a_validated_tuple_kept_by_a_majority_of_its_validators")
    def majority(cls, df):
        if "validated" not in df.columns:
            return pd.Series(True, index=df.index)
        votes = df["votes_accept"] + df["votes_reject"]
        named = df["validators"].map(len) == votes
        return named & (~df["validated"] | (2 * df["votes_accept"] > votes)) & (df["validated"] == (votes > 0))


class Scores(Contract):
    """ACCENT's score of each sample's response: the mean of its tuples' scores, 0.5 without tuples;
    empty only when the stage ran with comet = "off" (scorer says so)."""

    score: Series[float] = pa.Field(nullable=True, ge=0, le=1.0001)
    n_tuples: Series[int] = pa.Field(ge=0)
    tuples: Series[object]
    scorer: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)

    @pa.dataframe_check(name="no_tuple_scores_one_half")
    def half(cls, df):
        return (df["n_tuples"] > 0) | df["score"].isna() | ((df["score"] - 0.5).abs() < 1e-9)

    @pa.dataframe_check(name="off_means_no_score")
    def off(cls, df):
        return (df["scorer"] == "off") == df["score"].isna()


class Agreement(RunStatistics):
    """The human ratings' agreement (inter-annotator and event-vs-overall Spearman), beside the paper."""


class Correlation(Contract):
    """Correlation of the scores with a human rating, per split and over all, with its interval."""

    split: Series[str]
    rating: Series[str]
    method: Series[str] = pa.Field(isin=["pearson", "spearman"])
    n: Series[int] = pa.Field(ge=0)
    r: Series[float] = pa.Field(nullable=True, ge=-1.0001, le=1.0001)
    ci_low: Series[float] = pa.Field(nullable=True)
    ci_high: Series[float] = pa.Field(nullable=True)

    @pa.dataframe_check(name="interval_is_ordered")
    def interval(cls, df):
        return df["r"].isna() | df["ci_low"].isna() | (df["ci_low"] <= df["ci_high"])
