"""CICERO's source dialogues: DailyDialog, MuTual and DREAM in their release formats."""

from __future__ import annotations

from csk.runtime import StageOutput
from readers import read_dailydialog, read_dream, read_mutual
from tasks.sources import fingerprint_paths, read_sources

READERS = {"dailydialog": read_dailydialog, "mutual": read_mutual, "dream": read_dream}


def sources(*, dailydialog: str | None = None, mutual: str | None = None, dream: str | None = None,
            lenient: bool = False) -> StageOutput:
    """One dialogues table from the three corpora; speakers relabelled A, B in order of appearance."""
    return read_sources(READERS, {"dailydialog": dailydialog, "mutual": mutual, "dream": dream}, lenient)


def sources_fingerprint(params: dict) -> dict:
    return fingerprint_paths({k: params.get(k) for k in READERS})
