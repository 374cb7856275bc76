"""What a stage function sees of the runtime: it returns a `StageOutput` (kept rows, rejected rows with a
`reason_code` and a `reason`, notes, extra files) and, where it declares a `ctx` parameter, gets a
`StageContext` (model records, the cache directory). Everything else is the runtime's: the store
(`csk.store`: plan, compute, check, write), the artifact format and its integrity (`csk.artifacts`), data
contracts (`csk.contracts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from csk.artifacts import ArtifactRef, read_parquet, to_parquet_bytes

__all__ = ["StageOutput", "StageContext", "StageRun", "ArtifactRef", "read_parquet", "to_parquet_bytes"]


@dataclass
class StageOutput:
    """What a stage function returns."""

    data: pd.DataFrame
    rejected: pd.DataFrame | None = None  # dropped rows: `id`, `reason_code`, `reason`, their own columns
    rows_in: int | None = None  # default: rows of the primary input
    notes: dict[str, Any] = field(default_factory=dict)  # algorithm choices etc., into the manifest
    files: dict[str, bytes] = field(default_factory=dict)  # extra files (CSV, JSONL, PNG) beside the data
    tables: dict[str, list[dict]] = field(default_factory=dict)  # extra Prefect table artifacts


@dataclass
class StageRun:
    ref: ArtifactRef
    reused: bool
    tables: dict[str, list[dict]] = field(default_factory=dict)


class StageContext:
    """Handed to stage functions that declare a `ctx` parameter: store access and model records."""

    def __init__(self, store: Any, pipeline: str, stage: str):
        # store: the csk.store.Store computing the stage (not imported: the store imports this module)
        self.store = store
        self.pipeline = pipeline
        self.stage = stage
        self.models: list[dict] = []

    def record_model(self, name: str, path: str | None, sha256: str | None, **extra: Any) -> None:
        """How a model was used (precision, device, counts); merged into its manifest entry."""
        self.models.append({"name": name, "path": path, "sha256": sha256, **extra})

    @property
    def cache_dir(self) -> Path:
        return self.store.root / "_cache"
