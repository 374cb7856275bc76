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


class Checkpoint:
    """One stage's resumable state under its key (the key holds code, parameters and inputs, so a checkpoint
    is never read by other work): `save` commits a JSON state by an fsync'd rename (a kill leaves the last
    whole state, never a torn one, as torch.distributed.checkpoint commits its metadata); `load` gives it
    back or None. `folder` holds bulky side files the state names (an activation store), written by their
    owner before the state that names them is saved."""

    def __init__(self, path: Path, ctx: "StageContext"):
        self.folder = path
        self.ctx = ctx
        self._before: list = []

    def before_save(self, commit) -> None:
        """`commit()` runs before every `save`: a side file the state relies on is committed first."""
        self._before.append(commit)

    @property
    def _state(self) -> Path:
        return self.folder / "state.json"

    def load(self) -> Any:
        """The last committed state, or None: none yet, or one that does not read (edited or damaged by hand:
        a commit is atomic), which is set aside with a warning and the work starts afresh."""
        import json
        import logging

        try:
            return json.loads(self._state.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            aside = self._state.with_suffix(".unreadable")
            self._state.replace(aside)
            logging.getLogger("csk").warning("%s does not read (%s): set aside as %s; the stage starts afresh",
                                             self._state, exc, aside.name)
            return None

    def save(self, state: Any) -> None:
        import json
        import os

        self.folder.mkdir(parents=True, exist_ok=True)
        for commit in self._before:
            commit()
        tmp = self.folder / f".state.{os.getpid()}.json"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._state)
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself durable
        finally:
            os.close(fd)


class StageContext:
    """Handed to stage functions that declare a `ctx` parameter: store access and model records."""

    def __init__(self, store: Any, pipeline: str, stage: str, key: str | None = None):
        # store: the csk.store.Store computing the stage (not imported: the store imports this module)
        self.store = store
        self.pipeline = pipeline
        self.stage = stage
        self.key = key
        self.models: list[dict] = []
        self.resumed: dict[str, Any] = {}  # what a checkpoint gave this run (into the manifest: `resumed`)

    def checkpoint(self, name: str) -> "Checkpoint | None":
        """Work in progress of this stage's key that survives a killed run (`<store>/_checkpoints/<pipeline>/
        <stage>/<key>/<name>`); the store removes it once the artifact is written. None outside a store run
        (no key: nothing to resume into)."""
        if self.key is None:
            return None
        return Checkpoint(self.store.root / "_checkpoints" / self.pipeline / self.stage / self.key / name, self)

    def record_model(self, name: str, path: str | None, sha256: str | None, **extra: Any) -> None:
        """How a model was used (precision, device, counts); merged into its manifest entry."""
        self.models.append({"name": name, "path": path, "sha256": sha256, **extra})

    @property
    def cache_dir(self) -> Path:
        return self.store.root / "_cache"
