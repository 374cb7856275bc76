"""Dialogue-level train/validation/test splits (docs/method.md 1.4: 60:20:20 of instances, by dialogue)."""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput
from tasks.splits import group_splits


def splits(annotations: pd.DataFrame, *, seed: int = 0, train: float = 0.6, validation: float = 0.2,
           test: float = 0.2) -> StageOutput:
    """Each dialogue to one split, so that instance shares track the fractions.

    Args:
        seed: seed of the dialogue shuffle
        train: share of instances in train
        validation: share of instances in validation
        test: share of instances in test
    """
    data, table = group_splits(annotations, "dialogue_id", {"train": train, "validation": validation, "test": test},
                               seed, unit="dialogues")
    return StageOutput(data=data, tables={"splits": table}, notes={"sizes": table})
