"""Contract building blocks shared by every pipeline, and the contracts of shared stages."""

from __future__ import annotations

from typing import Optional

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series


class Contract(pa.DataFrameModel):
    """Every artifact row has a unique, non-empty string `id` (the handle lineage follows)."""

    id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})

    class Config:
        strict = False  # stages may carry extra columns forward; the named ones are guaranteed


class Rejected(Contract):
    """Rows a stage dropped, in one shape for every stage: the row's id, the id of the input row it
    came from (null for a source record, whose provenance columns say where it was read), a
    group-by friendly `reason_code` and the human `reason` with its numbers."""

    id: Series[str] = pa.Field(str_length={"min_value": 1})  # a rejected source record may repeat
    parent_id: Series[str] = pa.Field(nullable=True)
    reason_code: Series[pa.Category] = pa.Field(str_matches=r"^[a-z][a-z0-9_]*$")
    reason: Series[str] = pa.Field(str_length={"min_value": 1})


class Provenance(Contract):
    """Rows read from a source file: where exactly each came from."""

    source_file: Series[str] = pa.Field(str_length={"min_value": 1})
    source_record: Series[int] = pa.Field(ge=0)
    source_locator: Series[str]


class Annotated(Contract):
    """Rows made from annotations read back from a Label Studio export (tasks.labeling): who answered and
    when. Absent where the rows came from a released file."""

    annotator: Optional[Series[str]] = pa.Field(nullable=True)
    annotation_id: Optional[Series[pd.Int64Dtype]] = pa.Field(nullable=True)
    ls_task_id: Optional[Series[pd.Int64Dtype]] = pa.Field(nullable=True)
    created_at: Optional[Series[str]] = pa.Field(nullable=True)
    updated_at: Optional[Series[str]] = pa.Field(nullable=True)
    lead_time: Optional[Series[float]] = pa.Field(nullable=True, ge=0)


class ConceptNet(Provenance):
    """The shared `conceptnet` stage: the database's relations with their edge counts; every row names the database and its dump."""

    relation: Series[str]
    edges: Series[int] = pa.Field(ge=0)
    database: Series[str] = pa.Field(str_length={"min_value": 1})
    dump_sha256: Series[str] = pa.Field(str_matches=r"^[0-9a-f]{64}$")
    languages: Series[str]  # comma-separated, of a database built here (rebuilt from the dump if the cache loses it)


class Embeddings(Contract):
    """One normalised sentence embedding per row of the input (the shared `embed` stage)."""

    embedding: Series[object]

    @pa.check("embedding", name="unit_norm_vectors")
    def unit_norm(cls, s):
        import numpy as np

        return s.map(lambda v: v is not None and len(v) > 0 and abs(float(np.linalg.norm(v)) - 1.0) < 1e-2)


class RunStatistics(Contract):
    """A run's measures, one per row, with the paper's figure where it gives one (each dataset's `Statistics`)."""

    measure: Series[str]
    stage: Series[str]
    group: Series[str]
    value: Series[float]
    paper: Series[float] = pa.Field(nullable=True)


def nonempty_lists(series) -> bool:
    return bool(series.map(lambda v: v is not None and len(v) > 0).all())
