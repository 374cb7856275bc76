"""Contract building blocks shared by every pipeline."""

from __future__ import annotations

import pandera.pandas as pa
from pandera.typing import Series


class Contract(pa.DataFrameModel):
    """Every artifact row has a unique, non-empty string `id` (the handle lineage follows)."""

    id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})

    class Config:
        strict = False  # stages may carry extra columns forward; the named ones are guaranteed


class Rejected(Contract):
    """Rows a stage dropped, each with the reason it was dropped."""

    id: Series[str] = pa.Field(str_length={"min_value": 1})  # a rejected source record may repeat
    reason: Series[str] = pa.Field(str_length={"min_value": 1})


class Provenance(Contract):
    """Rows read from a source file: where exactly each came from."""

    source_file: Series[str] = pa.Field(str_length={"min_value": 1})
    source_record: Series[int] = pa.Field(ge=0)
    source_locator: Series[str]


def nonempty_lists(series) -> bool:
    return bool(series.map(lambda v: v is not None and len(v) > 0).all())
