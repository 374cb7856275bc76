"""Splits by dialogue: every annotation of a dialogue in one split. The released CORECODE splits are
per annotation and leak dialogues between train, dev and test (docs/method.md 3, checked); this rebuild does not."""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput
from tasks.splits import group_splits


def splits(annotations: pd.DataFrame, *, seed: int = 0, train: float = 0.6, dev: float = 0.2,
           test: float = 0.2) -> StageOutput:
    """Each dialogue, with all its annotations, to one split; annotation shares track the fractions.

    Args:
        seed: seed of the dialogue shuffle
        train: share of annotations in train
        dev: share of annotations in dev
        test: share of annotations in test
    """
    data, table = group_splits(annotations, "dialogue_id", {"train": train, "dev": dev, "test": test}, seed,
                               unit="dialogues")
    return StageOutput(data=data, tables={"splits": table}, notes={"sizes": table})
