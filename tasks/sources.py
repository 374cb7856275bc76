"""Source stages: turn release files into tables with provenance, and fingerprint them for keys."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

from csk.errors import ConfigError
from csk.runtime import StageOutput, sha256_file
from readers import ReadResult


def fingerprint_paths(paths: dict[str, str | None]) -> dict[str, dict[str, str]]:
    """sha256 of every file behind each configured path, so editing a source recomputes."""
    out: dict[str, dict[str, str]] = {}
    for name, p in sorted(paths.items()):
        if not p:
            continue
        path = Path(p)
        if path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.is_file())
        elif path.exists():
            files = [path]
        else:
            files = []  # the reader reports the missing file with a clear error
        out[name] = {str(f.relative_to(path) if path.is_dir() else f.name): sha256_file(f) for f in files}
    return out


def read_sources(readers: dict[str, Callable[..., ReadResult]], paths: dict[str, str | None],
                 lenient: bool) -> StageOutput:
    """Run each configured reader; rows with provenance out, malformed records rejected (lenient)."""
    total = ReadResult()
    used = {}
    for name, reader in readers.items():
        p = paths.get(name)
        if not p:
            continue
        result = reader(p, lenient=lenient)
        used[name] = {"path": str(p), "records": result.records, "rows": len(result.rows),
                      "rejected": len(result.rejected)}
        total.extend(result)
    if not used:
        raise ConfigError(f"no source configured: set at least one of {', '.join(readers)}")
    data = pd.DataFrame(total.rows)
    rejected = pd.DataFrame(total.rejected) if total.rejected else None
    return StageOutput(data=data, rejected=rejected, rows_in=total.records, notes={"sources": used})
