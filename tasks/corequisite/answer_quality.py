"""docs/method.md 2.3: the automated answer rules, then the experts' labels.

Rules (the annotators' instructions; each switchable, each one's verdict recorded per answer):
* `negatives`: the answer uses negative language (a spaCy `neg` dependency or a word of
  `negative_words`);
* `object_pronouns`: the answer refers to an object by a pronoun it never names ("It is broken."):
  it/its/itself always, they/them/their/these/those/this as pronouns unless the fact's subject is a
  person or people (then they refer to people). A pronoun is not counted where its antecedent is in
  the answer itself (a noun before it: "The boat has a hole in it.") nor where it is a dummy subject
  ("It is raining.", "It is dark.", "It is sunday morning.", "It is possible to ...": the parser's
  `expl`, or "it" as the subject of a weather verb or of "be" with an adjective or a time as its
  complement). Calibrated on the release: the authors kept such answers, and the rule that counted
  every "it" removed 27 of the first 1,200 P-NLI rows (330 of 11,888 on the full release); this one
  removes 5.
Only the switched-on rules remove answers. As released, PaCo's disabling answers keep negative
words (53 of 573 in the real P-NLI sample, against 1 of 627 enabling ones), so the negatives rule
was enforced on enabling answers only: `negatives_for` defaults to that, `rules` switches rules,
and the statistics report what each rule flags.

Experts' labels (`id,label`): an answer id with truism / informative / irrelevant, or a fact id with
invalid. Recorded per answer by `answer_rules` with the rules' verdicts (`expert_label`,
`fact_invalid`, so the statistics can report the experts' shares); `answer_quality` removes irrelevant
answers and every answer of an invalid fact; truisms are kept.

The labels may also be Label Studio's JSON export of the `answer_quality` labeling step
(tasks/corequisite/labeling.py: each crowd answer with its fact and question; an expert picks truism /
informative / irrelevant and may tick that the fact is invalid). Where two or more experts labelled an
answer, the majority label is its label (a tie leaves it unlabelled, counted in `ties`); a fact is
invalid when more than half of the experts who labelled any of its answers ticked it. Each answer keeps
who labelled it (`labellers`, `label_annotation_ids`, their labels `expert_votes`); the
experts' agreement on the label (Light's kappa, the share of unanimous answers among those labelled
at least twice) goes into the notes under `agreement`, rejected annotations (skipped, no label, an
expert's second label of an answer, a task of another run) into `rejected_annotations.parquet`.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import pandas as pd

from csk.errors import InputError
from csk.params import InputPath, unused
from csk.runtime import StageOutput, to_parquet_bytes
from readers.base import csv_rows
from tasks.labeling import export_rows, is_export, light_kappa, observed_agreement
from tasks.vocabulary import PEOPLE

RULES = ("negatives", "object_pronouns")
OBJECT_PRONOUNS = {"it", "its", "itself"}
PLURAL_PRONOUNS = {"they", "them", "their", "theirs", "themselves", "these", "those", "this"}
LABELS = {"truism", "informative", "irrelevant", "invalid"}
ANSWER_LABELS = ("truism", "informative", "irrelevant")
LABEL_CONTROL, INVALID_CONTROL = "label", "fact_invalid"  # the labeling step's Choices
INVALID_OPTION = "The fact is invalid."
WEATHER_VERBS = {"rain", "snow", "pour", "drizzle", "hail", "thunder", "freeze", "sleet", "storm"}
TIME_WORDS = {"morning", "afternoon", "evening", "night", "midnight", "noon", "day", "daytime", "weekend", "time",
              "winter", "summer", "spring", "autumn", "fall", "season", "o'clock", "late", "early", "today", "tonight"}


def dummy_it(t) -> bool:
    """"it" with no referent: the parser's `expl`, the subject of a weather verb ("It is raining."), or of
    "be" with an adjective ("It is dark.", "It is possible to ...") or a time ("It is sunday morning.")."""
    if t.dep_ == "expl":
        return True
    if t.lower_ != "it" or t.dep_ not in ("nsubj", "nsubjpass"):
        return False
    head = t.head
    if head.lemma_.lower() in WEATHER_VERBS:
        return True
    if head.lemma_.lower() != "be":
        return False
    for c in head.children:
        if c.dep_ == "acomp":
            return True
        if c.dep_ == "attr" and (c.ent_type_ in ("DATE", "TIME") or c.lemma_.lower() in TIME_WORDS):
            return True
    return False


def object_pronouns(doc, people_subject: bool) -> list[str]:
    """The pronouns of an answer that stand for an object it never names (see the module's rule)."""
    out = []
    for t in doc:
        if t.pos_ != "PRON" or dummy_it(t):
            continue
        if not (t.lower_ in OBJECT_PRONOUNS or (t.lower_ in PLURAL_PRONOUNS and not people_subject)):
            continue
        if any(u.pos_ in ("NOUN", "PROPN") for u in doc[:t.i]):  # its antecedent is in the answer
            continue
        out.append(t.text)
    return out


def _people_subject(nlp, statements: list[str]) -> dict[str, bool]:
    out = {}
    for s, doc in zip(statements, nlp.pipe(statements, batch_size=256)):
        subj = [t for t in doc if t.dep_ in ("nsubj", "nsubjpass")]
        out[s] = bool(subj) and (subj[0].lemma_.lower() in PEOPLE or subj[0].ent_type_ == "PERSON")
    return out


def rule_verdicts(answers: list[str], statements: list[str], negative_words: list[str]) -> pd.DataFrame:
    """Per answer: whether each rule finds a violation, and the words that did."""
    from tasks.english import english

    nlp = english()
    people = _people_subject(nlp, sorted(set(statements)))
    neg_words = {w.lower() for w in negative_words}
    rows = []
    for _text, statement, doc in zip(answers, statements, nlp.pipe(answers, batch_size=256)):
        neg = [t.text for t in doc if t.dep_ == "neg" or t.lower_ in neg_words]
        pron = object_pronouns(doc, people[statement])
        rows.append({"negatives": bool(neg), "negatives_words": neg, "object_pronouns": bool(pron),
                     "object_pronouns_words": pron})
    return pd.DataFrame(rows, columns=["negatives", "negatives_words", "object_pronouns", "object_pronouns_words"]) \
        .astype({"negatives": bool, "object_pronouns": bool})


def _expert_labels(path, answer_ids: set[str], fact_ids: set[str]) -> dict[str, str]:
    header, rows = csv_rows(path)
    if not {"id", "label"} <= set(header):
        raise InputError(str(path), "line 1", f"expert labels need columns id,label, got {header}")
    out = {}
    for n, rec, problem in rows:
        if problem:
            raise InputError(str(path), f"line {n}", problem)
        rid, label = (rec["id"] or "").strip(), (rec["label"] or "").strip().lower()
        if label not in LABELS:
            raise InputError(str(path), f"line {n}", f"label must be one of {sorted(LABELS)}, got {label!r}")
        if label == "invalid" and rid not in fact_ids:
            raise InputError(str(path), f"line {n}", f"{rid!r} is not a fact id of this run")
        if label != "invalid" and rid not in answer_ids:
            raise InputError(str(path), f"line {n}", f"{rid!r} is not an answer id of this run")
        out[rid] = label
    return out


def label_studio_expert_labels(path, answers: pd.DataFrame) -> tuple[dict[str, str], pd.DataFrame, list[dict], dict]:
    """(labels, votes, rejected annotations, agreement) of the `answer_quality` step's export: labels as
    `_expert_labels` gives them (answer id -> majority label, fact id -> "invalid"), one vote per kept
    annotation {row_id, annotator, annotation_id, label, fact_invalid} with its lineage, and the experts'
    agreement on the label."""
    rows, bad = export_rows(path, set(answers["id"]))
    rejected = [{**{k: v for k, v in b.items() if k != "task_id"}, "ls_task_id": b.get("ls_task_id", b.get("task_id"))}
                for b in bad]  # the reader's rejects name Label Studio's task id as the rows do
    fact_of = dict(zip(answers["id"], answers["fact_id"]))
    votes, seen = [], set()
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        label = list(r["values"].get(LABEL_CONTROL) or [])
        invalid = INVALID_OPTION in (r["values"].get(INVALID_CONTROL) or [])
        if len(label) > 1 or (label and label[0] not in ANSWER_LABELS):
            rejected.append({**lineage, "reason_code": "unknown_label", "reason": f"expert {r['annotator']} chose "
                             f"{label!r}, not one of {', '.join(ANSWER_LABELS)}"})
        elif not label and not invalid:
            rejected.append({**lineage, "reason_code": "no_label", "reason": f"expert {r['annotator']} neither "
                             "labelled the answer nor marked its fact invalid"})
        elif (r["row_id"], r["annotator"]) in seen:
            rejected.append({**lineage, "reason_code": "second_label", "reason": f"expert {r['annotator']} labelled "
                             f"{r['row_id']!r} twice: the first counts"})
        else:
            seen.add((r["row_id"], r["annotator"]))
            votes.append({**lineage, "fact_id": fact_of[r["row_id"]], "label": label[0] if label else None,
                          "fact_invalid": invalid})
    table = pd.DataFrame(votes) if votes else pd.DataFrame(
        columns=["row_id", "annotator", "annotation_id", "fact_id", "label", "fact_invalid"])
    labels, ties, multi = {}, 0, 0
    for rid, g in table.groupby("row_id", sort=False):
        counts = Counter(v for v in g["label"] if pd.notna(v))
        multi += int(sum(counts.values()) >= 2)
        top = counts.most_common()
        if top and (len(top) == 1 or top[0][1] > top[1][1]):
            labels[rid] = top[0][0]
        elif top:
            ties += 1
    for fid, g in table.groupby("fact_id", sort=False):  # per expert: did they mark the fact invalid anywhere
        per_expert = g.groupby("annotator")["fact_invalid"].any()
        if 2 * int(per_expert.sum()) > len(per_expert):
            labels[fid] = "invalid"
    labelled = table[table["label"].notna()] if len(table) else table
    agreement = {"experts": int(table["annotator"].nunique()) if len(table) else 0, "votes": len(table),
                 "answers_labelled": int(labelled["row_id"].nunique()) if len(labelled) else 0,
                 "answers_labelled_twice_or_more": multi, "ties": ties, "rejected_annotations": len(rejected),
                 "light_kappa": light_kappa(labelled) if len(labelled) else None,
                 "observed_agreement": observed_agreement(labelled) if len(labelled) else None,
                 "invalid_facts": sum(v == "invalid" for v in labels.values())}
    return labels, table, rejected, agreement


def answer_rules(answers: pd.DataFrame, *, negative_words: list[str] = [
        "no", "not", "never", "nothing", "nobody", "none", "neither", "nor", "nowhere", "cannot", "n't"],
        expert_labels: InputPath = None) -> StageOutput:
    """Every rule's verdict and the experts' label on every answer (nothing removed here: `answer_quality`
    applies the rules switched on and the labels).

    Args:
        negative_words: words the negatives rule looks for (besides spaCy's `neg` dependency)
        expert_labels: CSV id,label: answer id -> truism / informative / irrelevant, fact id -> invalid; or
            Label Studio's JSON export of the `answer_quality` labeling step (`csk label pull corequisite
            answer_quality`): the majority of the experts' labels, their agreement in the notes
    """
    verdicts = rule_verdicts(answers["answer"].tolist(), answers["statement"].tolist(), negative_words)
    data = pd.concat([answers.reset_index(drop=True), verdicts.add_prefix("rule_")], axis=1)
    files, agreement, votes = {}, {}, None
    if not unused(expert_labels) and is_export(expert_labels):
        labels, votes, rejected, agreement = label_studio_expert_labels(expert_labels, data)
        if rejected:
            files["rejected_annotations.parquet"] = to_parquet_bytes(pd.DataFrame(rejected).astype({"reason": str}))
    else:
        labels = {} if unused(expert_labels) else _expert_labels(expert_labels, set(data["id"]), set(data["fact_id"]))
    data["expert_label"] = pd.Series([labels.get(i) for i in data["id"]], dtype=object)
    data["fact_invalid"] = data["fact_id"].map(lambda f: labels.get(f) == "invalid").astype(bool)
    if votes is not None:  # who labelled each answer (Label Studio's users), their annotations and labels
        by = {rid: g for rid, g in votes.groupby("row_id", sort=False)} if len(votes) else {}
        empty = pd.DataFrame({"annotator": [], "annotation_id": [], "label": []})
        data["labellers"] = [[str(a) for a in by.get(i, empty)["annotator"]] for i in data["id"]]
        data["label_annotation_ids"] = [[int(a) for a in by.get(i, empty)["annotation_id"]] for i in data["id"]]
        data["expert_votes"] = [[str(v) if pd.notna(v) else None for v in by.get(i, empty)["label"]] for i in data["id"]]
    flagged = {r: data[data[f"rule_{r}"]].groupby("polarity").size().to_dict() for r in RULES}
    notes = {"flagged": flagged, **({"agreement": agreement} if agreement else {})}
    return StageOutput(data=data, notes=notes, files=files,
                       tables={"answer_rules": [{"rule": r, "answers_flagged": int(data[f"rule_{r}"].sum()),
                                                 **{f"flagged_{k}": int(v) for k, v in flagged[r].items()}}
                                                for r in RULES],
                               **({"agreement": [{"measure": k, "value": v} for k, v in agreement.items()]}
                                  if agreement else {})})


def answer_quality(checked: pd.DataFrame, *, rules: list[Literal["negatives", "object_pronouns"]] = list(RULES),
                   negatives_for: list[Literal["enabling", "disabling"]] = ["enabling"]) -> StageOutput:
    """Remove the answers the switched-on rules flag, then those the experts' labels remove.

    Args:
        rules: rules that remove answers (`answer_rules` records every rule's verdict whether on or not)
        negatives_for: answers the negatives rule removes, by polarity: the release kept negative words in 53 of
            573 disabling answers and 1 of 627 enabling ones (real P-NLI sample), so it was enforced on enabling
            answers only; add "disabling" for the instructions' letter
    """
    data = checked.reset_index(drop=True).copy()
    reason_code = pd.Series([None] * len(data), dtype=object)
    reason = pd.Series([None] * len(data), dtype=object)
    for rule in rules:
        hit = data[f"rule_{rule}"] & reason_code.isna()
        if rule == "negatives":
            hit &= data["polarity"].isin(negatives_for)
        reason_code[hit] = rule
        reason[hit] = [f"{rule.replace('_', ' ')} rule: {', '.join(w)}" for w in data.loc[hit, f"rule_{rule}_words"]]
    hit = (data["expert_label"] == "irrelevant") & reason_code.isna()
    reason_code[hit], reason[hit] = "irrelevant", "experts labelled the answer irrelevant"
    hit = data["fact_invalid"] & reason_code.isna()
    reason_code[hit], reason[hit] = "invalid_fact", "experts marked the fact invalid"
    drop = reason_code.notna().to_numpy()
    rejected = data[drop].assign(reason_code=reason_code[drop].to_numpy(), reason=reason[drop].to_numpy())
    removed = rejected["reason_code"].value_counts().to_dict() if len(rejected) else {}
    return StageOutput(data=data[~drop], rejected=rejected if len(rejected) else None, notes={
        "rules_on": list(rules), "removed": removed,
        "expert_labels": data["expert_label"].dropna().value_counts().to_dict(),
        "invalid_facts": int(data.loc[data["fact_invalid"], "fact_id"].nunique())},
        tables={"answer_quality": [{"reason": k, "answers_removed": int(v)} for k, v in removed.items()]})
