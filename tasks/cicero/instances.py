"""CICERO's annotated instances in the distractor engine's terms (`distractors.Instances`).

The engine knows no dataset: a group is a dialogue (AF and the quality probe never split
one), the discriminator's context is question + target + dialogue, names for entity swaps
come from the dialogue's utterances, and the release's own choices are the published ones.
"""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput


def instances(annotations: pd.DataFrame) -> StageOutput:
    """Annotated answers as the distractor engine's instances (a group is a dialogue; published choices kept)."""
    dialogue = annotations["dialogue"].map(lambda d: " ".join(list(d)))
    data = pd.DataFrame({
        "id": annotations["id"].astype(str),
        "group_id": annotations["dialogue_id"].astype(str),
        "context": annotations["question"].astype(str) + " " + annotations["target"].astype(str) + " " + dialogue,
        "question": annotations["question"].astype(str),
        "gold": annotations["answer"].astype(str),
        "passage": annotations["dialogue"].map(list),
        "choices": annotations["choices"].map(list),
        "correct_answers": annotations["correct_answers"].map(list),
    })
    return StageOutput(data=data)
