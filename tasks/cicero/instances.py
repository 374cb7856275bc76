"""CICERO's annotated instances in the distractor engine's terms (`distractors.Instances`).

The engine knows no dataset: a group is a dialogue (AF and the quality probe never split
one), the discriminator's context is question + target + dialogue, names for entity swaps
come from the dialogue's utterances, and the release's own choices are the published ones: every
released correct answer stays a correct choice, and an instance gets as many new distractors as it
had published ones (an instance of v2 with three correct answers of five gets two).
"""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput


def instances(annotations: pd.DataFrame, splits: pd.DataFrame | None = None) -> StageOutput:
    """Annotated answers as the distractor engine's instances (a group is a dialogue; published choices kept;
    the split, where there is one, keeps retrieval and reuse within it)."""
    # The released wording of dialogue and target (as `csk distractors rebuild --preset cicero` reads the
    # same file): the discriminators read the same text through either command, so they give one verdict.
    turns = annotations["release_dialogue"] if "release_dialogue" in annotations.columns else annotations["dialogue"]
    target = annotations["release_target"] if "release_target" in annotations.columns else annotations["target"]
    dialogue = turns.map(lambda d: " ".join(str(t).strip() for t in d))
    data = pd.DataFrame({
        "id": annotations["id"].astype(str),
        "group_id": annotations["dialogue_id"].astype(str),
        "context": annotations["question"].astype(str).str.strip() + " " + target.astype(str).str.strip() + " " +
        dialogue,
        "question": annotations["question"].astype(str),
        "gold": annotations["answer"].astype(str),
        "passage": turns.map(lambda d: [str(t).strip() for t in d]),
        "choices": annotations["choices"].map(list),
        "correct_answers": annotations["correct_answers"].map(list),
        "target": target.astype(str),
        # the published distractor slots; 0 (no published choices): adversarial_filter.n_distractors
        "n_distractors": [len(ch) - len(set(c)) if len(ch) else 0
                          for ch, c in zip(annotations["choices"], annotations["correct_answers"])],
    })
    if splits is not None:
        data["split"] = data["id"].map(dict(zip(splits["id"], splits["split"]))).fillna("unsplit").astype(str)
    return StageOutput(data=data)
