"""Contracts of the distractor engine (tasks/distractors), shared by every dataset that builds
multiple-choice items: a dataset maps its data into `Instances` and reads `MultipleChoice`."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Contract, Provenance


def _list_or_none(v) -> bool:
    return v is None or hasattr(v, "__len__")


class Instances(Contract):
    """What the engine needs of an item: `group_id` is the unit no split may cut (a dialogue, a fact);
    `context` is what a discriminator reads with each choice; `passage` the texts names are taken
    from; `choices` / `correct_answers` the published options, where the source has them."""

    group_id: Series[str] = pa.Field(str_length={"min_value": 1})
    context: Series[str]
    question: Series[str]
    gold: Series[str] = pa.Field(str_length={"min_value": 1})
    passage: Series[object]
    choices: Series[object] = pa.Field(nullable=True)
    correct_answers: Series[object] = pa.Field(nullable=True)

    @pa.check("passage", name="passage_is_a_list_of_texts")
    def passage_ok(cls, s):
        return s.map(lambda v: v is not None and all(isinstance(t, str) for t in v))


class MCQFile(Instances, Provenance):
    """A multiple-choice file's records as instances: the published choices, the correct ones (the
    gold among them), how many distractor slots each has, its language, and the record as read."""

    gold_index: Series[int] = pa.Field(ge=0)
    n_distractors: Series[int] = pa.Field(ge=0)
    """distractor slots to refill; 0: every published choice is correct (the item comes back as published)"""
    language: Series[str] = pa.Field(isin=["en", "zh"])
    record: Series[str]
    layout: Series[str]

    @pa.dataframe_check(name="gold_is_a_correct_choice")
    def gold_ok(cls, df):
        return pd.Series([ch[g] == gold and g in set(c) and len(ch) - len(c) == n
                          for ch, g, gold, c, n in zip(df["choices"], df["gold_index"], df["gold"],
                                                       df["correct_answers"], df["n_distractors"])], index=df.index)


class Counterfactuals(Contract):
    """Candidate alternatives to each gold answer, with the generator and rule that made them."""

    instance_id: Series[str]
    gold: Series[str]
    candidate: Series[str] = pa.Field(str_length={"min_value": 1})
    generator: Series[str] = pa.Field(isin=["lexical", "dialogue", "grounded", "t5", "file", "server", "retrieval"])
    rule: Series[str]
    rationale: Series[str]
    """why it may be wrong: a rewrite's changed words ("happy -> sad"), a retrieved answer's source"""
    question_type: Series[str] = pa.Field(nullable=True)
    """the relation the question the candidate was written for names ("cause", "reaction"); null: unknown"""
    item_question_type: Series[str] = pa.Field(nullable=True)
    written_for: Series[str]
    """the item whose answer the candidate comes from: another item's, or its own (a rewrite)"""
    placement: Series[str] = pa.Field(isin=["generated", "echo", "rewrite", "negation", "contrary", "word", "flip",
                                            "dialogue", "swap", "retrieved", "unanchored", "foreign", "reserve"])
    """where it was written (tasks/distractors/placement.py PREFERENCE): the order AF starts and swaps in by"""

    @pa.dataframe_check(name="candidate_answers_the_item_question_type")
    def typed(cls, df):
        """An answer written for another kind of question reads as out of place (an emotion as a motivation)."""
        return df["question_type"].isna() | df["item_question_type"].isna() | \
            (df["question_type"] == df["item_question_type"])

    @pa.dataframe_check(name="candidate_differs_from_gold")
    def not_gold(cls, df):
        return df["candidate"].str.strip().str.lower() != df["gold"].str.strip().str.lower()


class Candidates(Counterfactuals):
    """Candidates kept by the similarity (and NLI) filter: the set N."""

    similarity: Series[float] = pa.Field(le=1.0001)
    contradiction: Series[float] = pa.Field(nullable=True, ge=0, le=1)


class AdversarialChoices(Contract):
    group_id: Series[str]
    gold: Series[str]
    distractor_ids: Series[object]
    distractors: Series[object]
    swaps: Series[int] = pa.Field(ge=0)
    as_published: Series[bool]

    @pa.dataframe_check(name="at_least_one_distractor")
    def some(cls, df):
        """An item AF built has a distractor; one whose published choices are all correct has no slot and
        comes back as published (`as_published`), with none."""
        return df["as_published"] | df["distractors"].map(lambda v: len(v) >= 1)


class Verified(Contract):
    gold: Series[str]
    distractors: Series[object]
    verified: Series[bool]
    correct_distractors: Series[object]


class MultipleChoice(Contract):
    """Shuffled items: `choices` and the indices of the correct ones (the gold's among them)."""

    group_id: Series[str]
    split: Series[str]
    choices: Series[object]
    correct_answers: Series[object]
    n_correct: Series[int] = pa.Field(ge=1)

    @pa.dataframe_check(name="correct_answers_index_distinct_choices")
    def indices_ok(cls, df):
        return pd.Series([bool(len(c)) and all(0 <= i < len(ch) for i in c) and len(set(ch)) == len(ch)
                          for c, ch in zip(df["correct_answers"], df["choices"])], index=df.index)


class RebuiltFile(Provenance):
    """The rebuilt records: the full number of choices, the correct ones where they were published, every
    new distractor with the candidate (generator, rule) it came from."""

    group_id: Series[str]
    choices: Series[object]
    published_choices: Series[object]
    correct_answers: Series[object]
    distractor_ids: Series[object]
    distractor_rules: Series[object]

    @pa.dataframe_check(name="same_number_of_choices_and_correct_ones_kept")
    def same_shape(cls, df):
        return pd.Series([len(ch) == len(pub) and all(ch[k] == pub[k] for k in c)
                          for ch, pub, c in zip(df["choices"], df["published_choices"], df["correct_answers"])],
                         index=df.index)


class DistractorQuality(Contract):
    """Measured hardness and validity of the final choices (one row per measure)."""

    measure: Series[str]
    value: Series[float] = pa.Field(nullable=True)
    note: Series[str]
