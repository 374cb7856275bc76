"""docs/method.md 2.5: splits by edge (fact), never by instance: no fact in two splits. Answers of a release file
that names its split (`PaCo_nli_train.csv`) keep it, with their facts; the other facts fill the shares left."""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput
from tasks.splits import group_splits


def splits(answers: pd.DataFrame, *, seed: int = 0, train: float = 0.45, dev: float = 0.15,
           test: float = 0.40) -> StageOutput:
    """Each fact, with all its answers, to one split; answer shares track the fractions.

    Args:
        seed: seed of the fact shuffle
        train: share of answers in train (the paper: 0.45; the release has 0.51 of statements)
        dev: share of answers in dev (the paper: 0.15)
        test: share of answers in test (the paper: 0.40)
    """
    data, table = group_splits(answers, "fact_id", {"train": train, "dev": dev, "test": test}, seed, unit="facts")
    return StageOutput(data=data, tables={"splits": table}, notes={"sizes": table})
