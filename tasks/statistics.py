"""Run statistics in one shape for every dataset (`common.RunStatistics`): a measure per row, the
stage it describes, a group, the value, and the paper's figure where the paper gives one."""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput


class Measures:
    """Collects measures; `paper` maps (measure, group) to the published figure."""

    def __init__(self, paper: dict[tuple[str, str], float]):
        self.paper, self.rows = paper, []

    def add(self, measure: str, group: str, value: float, stage: str) -> None:
        self.rows.append({"id": f"{measure}/{group}", "measure": measure, "stage": stage, "group": group,
                          "value": float(value), "paper": self.paper.get((measure, group))})

    def frame(self) -> pd.DataFrame:
        cols = ["id", "measure", "stage", "group", "value", "paper"]
        return pd.DataFrame(self.rows, columns=cols).astype({"value": float, "paper": float})

    def output(self, files: dict[str, bytes]) -> StageOutput:
        """The measures as the artifact and as a table (the paper's column null where it gives no figure)."""
        data = self.frame()
        table = data.assign(paper=data["paper"].astype(object).where(data["paper"].notna(), None))
        return StageOutput(data=data, rows_in=len(data), files=files, tables={"statistics": table.to_dict(orient="records")})
