"""CoreQuisite's (PaCo's) human steps as Label Studio projects (docs/method.md 2.3).

* `preconditions` (crowd): one task per (fact, question) of `annotation_tasks`: the statement, the
  question ("What makes this possible?" / "What makes this impossible?"), three answer boxes and the
  tick "This statement does not make sense."; read back by `annotations.answers` (each answer a row, its
  worker the annotator; a tick rejects the annotation's answers as the plain table's
  does_not_make_sense does);
* `answer_quality` (experts): one task per crowd answer of `annotations`: the statement, the question and
  the answer; the expert labels it truism / informative / irrelevant and may mark the fact invalid; read
  back by `answer_rules.expert_labels` (the majority label where two or more experts labelled an answer,
  their agreement in the notes), applied by `answer_quality`.
"""

from __future__ import annotations

from csk.label_studio import LabelingStep
from tasks.corequisite.annotation import SKIP_CONTROL, SKIP_OPTION, annotation_tasks, annotations
from tasks.corequisite.answer_quality import (ANSWER_LABELS, INVALID_CONTROL, INVALID_OPTION, LABEL_CONTROL,
                                              answer_rules)

ANSWER_BOXES = ("answer_1", "answer_2", "answer_3")  # the paper: three answers per question

_STATEMENT = """  <View style="background:#fff7d6;padding:10px;margin:6px 0;border-left:4px solid #f0b400;font-size:18px">
    <Header value="Statement" size="6"/>
    <Text name="statement" value="$statement"/>
  </View>"""

_BOX = ('  <TextArea name="{name}" toName="statement" rows="2" maxSubmissions="1" showSubmitButton="false" '
        'placeholder="Answer {n}: one sentence"/>')

# The statement, the question as a header, three answer boxes, then the way out for a statement that makes no sense.
PRECONDITIONS_CONFIG = "\n".join([
    "<View>", _STATEMENT,
    '  <Header value="$question"/>',
    '  <Header value="Write three different answers, one per box. Do not use negative words (no, not, never, ...) '
    'and name the objects you mean (not it / they)." size="6"/>',
    *(_BOX.format(name=name, n=n) for n, name in enumerate(ANSWER_BOXES, start=1)),
    f'  <Choices name="{SKIP_CONTROL}" toName="statement" choice="multiple">',
    f'    <Choice value="{SKIP_OPTION}"/>',
    "  </Choices>",
    "</View>"])

ANSWER_QUALITY_CONFIG = "\n".join([
    "<View>", _STATEMENT,
    '  <Header value="$question"/>',
    '  <View style="background:#eef4ff;padding:6px;margin:6px 0">',
    '    <Header value="Answer written by a crowd worker" size="6"/>',
    '    <Text name="answer" value="$answer"/>',
    "  </View>",
    '  <Header value="Label the answer" size="5"/>',
    f'  <Choices name="{LABEL_CONTROL}" toName="answer" choice="single-radio">',
    '    <Choice value="truism" hint="true, but holds for almost any statement (e.g. the object exists)"/>',
    '    <Choice value="informative" hint="a real precondition of this statement"/>',
    '    <Choice value="irrelevant" hint="does not bear on whether the statement holds"/>',
    "  </Choices>",
    f'  <Choices name="{INVALID_CONTROL}" toName="statement" choice="multiple">',
    f'    <Choice value="{INVALID_OPTION}"/>',
    "  </Choices>",
    "</View>"])
assert all(f'value="{label}"' in ANSWER_QUALITY_CONFIG for label in ANSWER_LABELS)


def _precondition_task(row: dict) -> dict:
    return {"statement": row["statement"], "question": row["question"], "polarity": row["polarity"],
            "fact_id": row["fact_id"]}


def _answer_task(row: dict) -> dict:
    return {**_precondition_task(row), "answer": row["answer"]}


STEPS = (
    LabelingStep("preconditions", stage=annotation_tasks, config=PRECONDITIONS_CONFIG, data=_precondition_task,
                 imports=(annotations, "answers"), annotators=1,
                 instructions="Read the statement and answer the question with three different answers, one "
                              "short sentence each: what makes the statement possible (or impossible). Do not use "
                              "negative words and do not refer to an object by a pronoun. If the statement does not "
                              f"make sense, tick \"{SKIP_OPTION}\" instead."),
    LabelingStep("answer_quality", stage=annotations, config=ANSWER_QUALITY_CONFIG, data=_answer_task,
                 imports=(answer_rules, "expert_labels"), annotators=2,
                 instructions="Label the crowd worker's answer: truism (true of almost any situation), informative "
                              "(a real precondition of the statement) or irrelevant. Tick "
                              f"\"{INVALID_OPTION}\" if the statement itself is wrong or makes no sense. Irrelevant "
                              "answers and every answer of an invalid fact are removed; where several experts label "
                              "an answer, the majority decides."),
)
