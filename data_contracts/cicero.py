"""Contracts of the CICERO pipeline's artifacts."""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Annotated, Contract, Provenance, RunStatistics
from data_contracts.distractors import MultipleChoice

# The five question texts of CICERO's release, by inference type: a format fact (the annotation stages
# read them, the targets stage writes them), kept with the contracts so that a stage reading them
# imports no other stage's code (annotation_tasks' key does not hash the embedder).
QUESTIONS = {
    "cause": "What is or could be the cause of target?",
    "subsequent_event": "What subsequent event happens or could happen following the target?",
    "prerequisite": "What is or could be the prerequisite of target?",
    "motivation": "What is or could be the motivation of target?",
    "reaction": "What is the possible emotional reaction of the listener in response to target?",
}
TYPE_OF_QUESTION = {q: t for t, q in QUESTIONS.items()}

SOURCES = ["dailydialog", "mutual", "dream", "cicero"]


def _turns_ok(turns) -> bool:
    return turns is not None and len(turns) > 0 and all(
        isinstance(t, dict) and t.get("speaker") and isinstance(t.get("text"), str) and t["text"].strip()
        for t in turns)


class Dialogues(Provenance):
    """One row per source dialogue: `turns` is a list of {speaker, text, raw_speaker}."""

    id: Series[str] = pa.Field(unique=True, str_matches=r"^(dailydialog|mutual|dream|cicero)-\S+$")
    source: Series[str] = pa.Field(isin=SOURCES)
    turns: Series[object]

    @pa.check("turns", name="turns_are_nonempty_speaker_text_lists")
    def turns_well_formed(cls, turns):
        return turns.map(_turns_ok)


class FilteredDialogues(Dialogues):
    """Dialogues that passed the length filter, with the counts the rule used."""

    n_utterances: Series[int] = pa.Field(ge=1)
    n_words: Series[int] = pa.Field(ge=1)
    avg_words: Series[float] = pa.Field(gt=0)


class Deduplicated(FilteredDialogues):
    """Dialogues left after near-duplicate removal (rejected rows name `duplicate_of`)."""


INFERENCE_TYPES = ["cause", "subsequent_event", "prerequisite", "motivation", "reaction"]


class Targets(Contract):
    id: Series[str] = pa.Field(unique=True, str_matches=r"^.+/u\d{2}/[a-z_]+$")
    dialogue_id: Series[str]
    utterance_index: Series[int] = pa.Field(ge=0)
    target: Series[str] = pa.Field(str_length={"min_value": 1})
    inference_type: Series[str] = pa.Field(isin=INFERENCE_TYPES)
    question: Series[str]
    sets: Series[object]
    textrank: Series[float] = pa.Field(ge=0)

    @pa.check("sets", name="sets_within_x1_x2_x3")
    def sets_ok(cls, s):
        return s.map(lambda v: len(v) > 0 and set(v) <= {"x1", "x2", "x3"})


class AnnotationTasks(Contract):
    dialogue_id: Series[str]
    utterance_index: Series[int] = pa.Field(ge=0)
    target: Series[str]
    question: Series[str]
    dialogue: Series[object]


class Annotations(Provenance, Annotated):
    """Human answers from a CICERO release, joined to the pipeline's dialogues and targets, or written in
    Label Studio (version "label-studio": with the annotator, annotation and task they came from)."""

    cicero_id: Series[str]
    version: Series[str] = pa.Field(isin=["v1", "v2", "label-studio"])
    source_dialogue_id: Series[str] = pa.Field(nullable=True)
    dialogue_id: Series[str]
    dialogue_from_release: Series[bool]
    task_id: Series[str] = pa.Field(nullable=True)
    utterance_index: Series[int] = pa.Field(ge=0)
    target_match: Series[str] = pa.Field(isin=["exact", "contained", "fuzzy"])
    inference_type: Series[str] = pa.Field(isin=INFERENCE_TYPES)
    answer: Series[str] = pa.Field(str_length={"min_value": 1})
    choices: Series[object]
    correct_answers: Series[object]
    corpus: Series[str]
    target: Series[str]  # the target utterance of the dialogue used (rebuilt when matched)
    dialogue: Series[object]  # that dialogue, rendered as the release renders one
    question: Series[str]
    release_dialogue: Series[object]  # the release's own Dialogue and Target strings
    release_target: Series[str]
    human_written_answer: Series[pd.Int64Dtype] = pa.Field(nullable=True)  # an index; absent in v2 releases


class Splits(Contract):
    dialogue_id: Series[str]
    split: Series[str] = pa.Field(isin=["train", "validation", "test"])

    @pa.dataframe_check(name="no_dialogue_in_two_splits")
    def dialogue_level(cls, df):
        return bool((df.groupby("dialogue_id")["split"].nunique() <= 1).all())


class NLG(Contract):
    annotation_id: Series[str]
    task: Series[str] = pa.Field(isin=[
        "1.1.1_cause", "1.1.2_subsequent_event", "1.1.3_subsequent_event_clipped", "1.1.4_chained_cause",
        "1.1.5_chained_subsequent_event", "1.2.1_prerequisite", "1.2.2_motivation", "1.2.3_reaction"])
    split: Series[str] = pa.Field(isin=["train", "validation", "test"])
    input: Series[str] = pa.Field(str_contains=r" \\n context: ")  # a regex: the literal " \n context: "
    output: Series[str] = pa.Field(str_length={"min_value": 1})


class Statistics(RunStatistics):
    """CICERO's run statistics beside the paper's figures."""


class MCQ(MultipleChoice):
    """CICERO's MCQ items (tasks 2.1/2.2); the JSON Lines files beside it use the release's key names."""

    cicero_id: Series[str]
    dialogue: Series[object]
    target: Series[str]
    question: Series[str]
    human_written_answer: Series[object]




class ExperimentFiles(Contract):
    """One row per experiment file written (the authors' NLG / MCQ training formats)."""

    variant: Series[str] = pa.Field(isin=["rebuilt", "published"])
    task: Series[str] = pa.Field(isin=["nlg", "mcq"])
    file: Series[str] = pa.Field(str_matches=r"^(nlg|mcq/(selection|generation))/[a-z]+(_zs)?_[a-z_]+\.json$")
    lines: Series[int] = pa.Field(ge=0)


class CheckedAnnotations(Annotations):
    """Answers left after the checkers' majority vote, with the votes."""

    votes_valid: Series[int] = pa.Field(ge=0)
    votes_invalid: Series[int] = pa.Field(ge=0)
    checked: Series[bool]


class Fidelity(Contract):
    """The rebuild's figures beside the paper's and the release's (on the same dialogues)."""

    section: Series[str]
    measure: Series[str]
    group: Series[str]
    rebuild: Series[float] = pa.Field(nullable=True)
    paper: Series[float] = pa.Field(nullable=True)
    release: Series[float] = pa.Field(nullable=True)
    note: Series[str]
