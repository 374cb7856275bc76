"""Source stages: turn release files into tables with provenance."""

from __future__ import annotations

from typing import Callable

import pandas as pd

from csk.errors import ConfigError
from csk.runtime import StageOutput
from readers import ReadResult


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
