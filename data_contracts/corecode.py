"""Contracts of the CORECODE pipeline's artifacts, and its annotation ontology (docs/method.md 3.4).

The ontology is data the contracts check against: 3 dimensions, 9 domains, 36 public slots (the paper
counts 37; the 37th is not public). Domains carry the paper's names (prerequisite, cause, consequence,
time, space, social norms); the slot inventory's `precondition` and `subsequent` are accepted on import
as synonyms and written as the paper's. Each domain and slot has the Chinese label the task questions use.
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Annotated, Contract, Provenance, RunStatistics, nonempty_lists

# dimension -> domain -> {slot: Chinese label}; domain Chinese labels in DOMAIN_ZH. The Chinese labels
# are the release's (its README's slot-identification options: 空间位置原因, 后续时间改变, 后续空间位置改变,
# 持续时长, 发生位置, in the order listed there)
ONTOLOGY: dict[str, dict[str, dict[str, str]]] = {
    "entity": {
        "attribute": {"is": "是", "is-a": "是一种", "has": "具有", "includes-type": "包含类型", "made-of": "由……制成",
                      "part-of": "是……的一部分", "used-for": "用于", "capable-of": "能够"},
        "comparison": {"same-as": "等同于", "similar-to": "类似于", "opposite-of": "相反于"},
        "space": {"at-location": "位于", "spatially-adjacent": "空间上邻近", "spatially-contains": "空间上包含"},
    },
    "event": {
        "prerequisite": {"precondition": "前提条件"},
        "cause": {"event cause": "事件原因", "emotion cause": "情绪原因", "time cause": "时间原因",
                  "location cause": "空间位置原因"},
        "consequence": {"subsequent event": "后续事件", "subsequent emotional reaction": "后续情绪反应",
                        "subsequent time change": "后续时间改变", "subsequent location change": "后续空间位置改变"},
        "time": {"time of occurrence": "发生时间", "start time": "开始时间", "end time": "结束时间",
                 "duration": "持续时长", "frequency": "频率"},
        "space": {"location of occurrence": "发生位置"},
    },
    "social interaction": {
        "social norms": {"x's attribute": "x的属性", "x should": "x应该", "x's intent": "x的意图",
                         "x's reaction": "x的反应", "effect on x": "对x的影响", "y's reaction": "y的反应",
                         "effect on y": "对y的影响"},
    },
}
DOMAIN_ZH = {("entity", "attribute"): "属性", ("entity", "comparison"): "比较", ("entity", "space"): "空间",
             ("event", "prerequisite"): "前提", ("event", "cause"): "原因", ("event", "consequence"): "后果",
             ("event", "time"): "时间", ("event", "space"): "空间", ("social interaction", "social norms"): "社会规范"}
DOMAIN_SYNONYMS = {"precondition": "prerequisite", "subsequent": "consequence"}  # the inventory's spelling -> the paper's
DIMENSIONS = list(ONTOLOGY)
DOMAINS = sorted({d for dims in ONTOLOGY.values() for d in dims})
SLOTS = sorted({s for dims in ONTOLOGY.values() for slots in dims.values() for s in slots})
SETS = ["EASY", "HARD"]
SPLITS = ["train", "dev", "test"]
TASKS = ["knowledge_filling", "knowledge_generation", "conflict_phrase_detection", "domain_identification",
         "slot_identification", "event_causal_inference"]
PERTURBATIONS = ["reindex", "shuffle", "reindex_shuffle"]
assert sum(len(s) for dims in ONTOLOGY.values() for s in dims.values()) == 36
assert sum(len(dims) for dims in ONTOLOGY.values()) == 9


class Dialogues(Provenance):
    """Chinese dyadic dialogues, speakers A / B."""

    source: Series[str] = pa.Field(isin=["naturalconv", "dulemon", "corecode"])
    turns: Series[object]

    @pa.check("turns", name="turns_have_a_b_speakers")
    def speakers(cls, s):
        return s.map(lambda t: len(t) > 0 and all(x["speaker"] in ("A", "B") for x in t))


class Concepts(Contract):
    """One row per utterance: its nouns, verbs and adjectives (jieba posseg), stop words removed."""

    dialogue_id: Series[str]
    utterance: Series[int] = pa.Field(ge=0)
    speaker: Series[str] = pa.Field(isin=["A", "B"])
    text: Series[str]
    concepts: Series[object]
    tags: Series[object]


class Screening(Dialogues):
    """Dialogues with more than the threshold of one-hop matches; `evidence`: every matched triple
    (utterance i -> i+1, e1, relation, e2, edge URI, the dump line it was read from)."""

    matches: Series[int] = pa.Field(ge=0)
    evidence: Series[object]
    dump_sha256: Series[str] = pa.Field(str_matches=r"^[0-9a-f]{64}$")

    @pa.check("evidence", name="evidence_is_every_match")
    def every_match(cls, s):
        return nonempty_lists(s)


class Annotations(Provenance, Annotated):
    """Knowledge items checked against the ontology: `phrases` are the dialogue phrases they rest on
    (role instance / value, utterance, character offsets); the conflict phrases replace `phrases[conflict_of]`.
    Items labelled in Label Studio (the `knowledge` step) keep their annotator, annotation and task ids and
    times; items of a release have none."""

    dialogue_id: Series[str]
    set: Series[str] = pa.Field(isin=SETS)
    dimension: Series[str] = pa.Field(isin=DIMENSIONS)
    instance: Series[str] = pa.Field(str_length={"min_value": 1})
    domain: Series[str] = pa.Field(isin=DOMAINS)
    slot: Series[str] = pa.Field(isin=SLOTS)
    value: Series[str] = pa.Field(str_length={"min_value": 1})
    phrases: Series[object]
    conflict_of: Series[int] = pa.Field(ge=0)
    conflict_phrase_1: Series[str] = pa.Field(str_length={"min_value": 1})
    conflict_phrase_2: Series[str] = pa.Field(str_length={"min_value": 1})
    turns: Series[object]

    @pa.dataframe_check(name="slot_under_its_domain")
    def slot_in_domain(cls, df):
        return pd.Series([s in ONTOLOGY[dim].get(d, {}) for dim, d, s in zip(df["dimension"], df["domain"], df["slot"])],
                         index=df.index, dtype=bool)


class Splits(Contract):
    dialogue_id: Series[str]
    split: Series[str] = pa.Field(isin=SPLITS)

    @pa.dataframe_check(name="no_dialogue_in_two_splits")
    def one_split(cls, df):
        return bool((df.groupby("dialogue_id")["split"].nunique() <= 1).all())


class TaskItems(Contract):
    """Items of one task in the released layout (`dialogue` lines "A: ...", `question`, options,
    `answer`) plus the rendered `prompt`, the split and the annotation each came from."""

    annotation_id: Series[str]
    dialogue_id: Series[str]
    set: Series[str] = pa.Field(isin=SETS)
    split: Series[str] = pa.Field(isin=SPLITS)
    task: Series[str] = pa.Field(isin=TASKS)
    variant: Series[str]
    dialogue: Series[object]
    question: Series[str] = pa.Field(str_length={"min_value": 1})
    option_labels: Series[object]
    options: Series[object]
    answer_label: Series[str] = pa.Field(nullable=True)
    answer: Series[str] = pa.Field(str_length={"min_value": 1})
    prompt: Series[str]

    @pa.dataframe_check(name="mcq_answer_names_its_option")
    def answer_is_option(cls, df):
        return pd.Series([(pd.isna(lab) and len(opts) == 0) or (lab in list(labels) and opts[list(labels).index(lab)] == ans)
                          for lab, labels, opts, ans in zip(df["answer_label"], df["option_labels"], df["options"],
                                                            df["answer"])], index=df.index, dtype=bool)


class Perturbed(TaskItems):
    """MCQ items with options re-indexed (a -> 1), shuffled (seeded), or both; `item_id` is the original."""

    item_id: Series[str]
    perturbation: Series[str] = pa.Field(isin=PERTURBATIONS)


class Statistics(RunStatistics):
    """CORECODE's Table 1 measures (dialogues, turns and tokens per dialogue, annotations per dimension,
    conflict phrases) per set, with the paper's figures."""
