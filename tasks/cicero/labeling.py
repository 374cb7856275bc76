"""CICERO's human steps as Label Studio projects (docs/method.md 1.4, section 3.3 of the paper).

* `answers`: one answer per (dialogue, target, question): the annotator reads the dialogue with the
  target utterance marked and writes one answer (the `annotation_tasks` rows; read back by
  `annotations.answers`);
* `quality_check`: three checkers judge each answer valid or invalid (the `annotations` rows; read back
  by `quality_check.verdicts`, decided by the majority of three as the paper does).

The final distractors' verification is the distractor engine's step (tasks/distractors/labeling.py).
"""

from __future__ import annotations

from csk.label_studio import LabelingStep
from tasks.cicero.annotation import annotation_tasks, annotations
from tasks.cicero.quality_check import quality_check
from tasks.labeling_views import DIALOGUE, SHOWN, box, dialogue_html

VALID, INVALID = "valid", "invalid"

# The dialogue as turns, the target marked in it and repeated under it, the question, then the answer box.
ANSWER_CONFIG = "\n".join([
    "<View>", '  <Header value="Read the dialogue. The target utterance is marked."/>', DIALOGUE, box("Target", "target"),
    '  <Header value="$question"/>',
    '  <TextArea name="answer" toName="dialogue" rows="3" maxSubmissions="1" required="true" showSubmitButton="false"',
    '            placeholder="One sentence that answers the question about the target"/>',
    "</View>"])

CHECK_CONFIG = "\n".join([
    "<View>", DIALOGUE, box("Target", "target"), '  <Header value="$question"/>',
    box("Answer written by an annotator", "answer", SHOWN),
    '  <Header value="Is the answer a valid answer to the question about the target?" size="5"/>',
    '  <Choices name="valid" toName="dialogue" choice="single-radio" required="true">',
    f'    <Choice value="{VALID}"/>', f'    <Choice value="{INVALID}"/>', "  </Choices>",
    "</View>"])


def _answer_task(row: dict) -> dict:
    return {"dialogue_html": dialogue_html(list(row["dialogue"]), int(row["utterance_index"])),
            "target": row["target"], "question": row["question"], "dialogue_id": row["dialogue_id"]}


def _check_task(row: dict) -> dict:
    return {**_answer_task(row), "answer": row["answer"]}


STEPS = (
    LabelingStep("answers", stage=annotation_tasks, config=ANSWER_CONFIG, data=_answer_task,
                 imports=(annotations, "answers"), replaces=("release",), annotators=1,
                 instructions="Write one answer to the question about the marked target utterance, in one "
                              "sentence, about the people and events of this dialogue."),
    LabelingStep("quality_check", stage=annotations, config=CHECK_CONFIG, data=_check_task,
                 imports=(quality_check, "verdicts"), annotators=3,
                 instructions="Judge whether the answer is a valid answer to the question about the target. "
                              "Three checkers judge every answer; the majority decides."),
)
