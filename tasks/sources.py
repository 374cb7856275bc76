"""Source stages: turn release files into tables with provenance."""

from __future__ import annotations

from typing import Callable

import pandas as pd

from csk.errors import ConfigError
from csk.runtime import StageOutput
from readers import ReadResult


def read_sources(readers: dict[str, Callable[..., ReadResult]], paths: dict[str, str | None],
                 lenient: bool, dyadic_only: bool = False) -> StageOutput:
    """Run each configured reader; rows with provenance out, malformed records rejected (lenient),
    and with `dyadic_only` every dialogue without exactly two speakers rejected as `not_dyadic`."""
    total = ReadResult()
    used = {}
    for name, reader in readers.items():
        p = paths.get(name)
        if not p:
            continue
        result = reader(p, lenient=lenient)
        used[name] = {"path": str(p), "records": result.records, "rows": len(result.rows),
                      "rejected": len(result.rejected), **({"skipped": result.skipped} if result.skipped else {})}
        total.extend(result)
    if not used:
        raise ConfigError(f"no source configured: set at least one of {', '.join(readers)}")
    data = pd.DataFrame(total.rows)
    rejected = [pd.DataFrame(total.rejected)] if total.rejected else []
    if dyadic_only and len(data):
        speakers = data["turns"].map(lambda turns: len({t["speaker"] for t in turns}))
        multi = speakers != 2
        rejected.append(data[multi].assign(
            reason_code="not_dyadic",
            reason=[f"{k} speaker{'s' if k != 1 else ''}, not two: the sources are dyadic dialogues"
                    for k in speakers[multi]]))
        for name, n in data[multi].groupby("source").size().items():
            used[name]["not_dyadic"] = int(n)
        data = data[~multi]
    return StageOutput(data=data, rejected=pd.concat(rejected, ignore_index=True) if rejected else None,
                       rows_in=total.records, notes={"sources": used})
