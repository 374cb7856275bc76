"""Source stages: turn release files into tables with provenance."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Callable

import pandas as pd
from pydantic import Field

from csk.errors import ConfigError
from csk.runtime import StageOutput
from readers.base import ReadResult


MAX_REJECTED_SHARE = 0.5
Share = Annotated[float, Field(ge=0, le=1)]


def unreadable(name: str, path: str, result: ReadResult, max_rejected_share: float = MAX_REJECTED_SHARE,
               top: int = 3) -> str | None:
    """Why a configured source file looks like the wrong file, or None: it gave no row, or more than
    `max_rejected_share` of its records could not be read. Lenient reading is for a corpus's
    irregular records; a file most of whose records fail is another format (or another file)."""
    if result.records and result.rows and len(result.rejected) / result.records <= max_rejected_share:
        return None
    if not result.records:
        return f"{name} = {path}: no record in it (an empty file, or not a {name} file)"
    if not result.rejected and result.skipped:  # read, but every record outside the selection
        why = ", ".join(f"{k}: {n}" for k, n in sorted(result.skipped.items()))
        return f"{name} = {path}: {result.records} records read, none selected ({why})"
    share = len(result.rejected) / result.records
    reasons = Counter(str(r.get("reason", r.get("reason_code", "?"))) for r in result.rejected)
    top_reasons = "; ".join(f"{why[:120]} ({n})" for why, n in reasons.most_common(top))
    return (f"{name} = {path}: {len(result.rejected)} of {result.records} records rejected ({share:.0%}"
            + (", no row read" if not result.rows else f", over max_rejected_share {max_rejected_share}")
            + f"): {top_reasons}")


def stop_unless_readable(problems: list[str], table: str) -> dict:
    """The notes that stop the run after the source's artifact and rejected rows are written (the
    runtime raises `notes["stop"]`), naming each file that looks wrong."""
    if not problems:
        return {}
    return {"stop": "source files that do not read as their format:\n  " + "\n  ".join(problems) +
                    f"\nCheck that each setting of [{table}] names a file in its release's format; lenient reading "
                    "rejects a corpus's irregular records, not a wrong file. To accept the file anyway, raise "
                    f"{table}.max_rejected_share (now the share above which a file stops the run)."}


def read_sources(readers: dict[str, Callable[..., ReadResult]], paths: dict[str, str | None],
                 lenient: bool, dyadic_only: bool = False, max_rejected_share: float = MAX_REJECTED_SHARE,
                 table: str = "sources") -> StageOutput:
    """Run each configured reader; rows with provenance out, malformed records rejected (lenient),
    and with `dyadic_only` every dialogue without exactly two speakers rejected as `not_dyadic`. A file
    that gives no row, or whose unreadable share passes `max_rejected_share`, stops the run (after
    its artifact and rejected rows are written) naming the file, the share and the top reasons."""
    total = ReadResult()
    used, problems = {}, []
    for name, reader in readers.items():
        p = paths.get(name)
        if not p:
            continue
        result = reader(p, lenient=lenient)
        used[name] = {"path": str(p), "records": result.records, "rows": len(result.rows),
                      "rejected": len(result.rejected), **({"skipped": result.skipped} if result.skipped else {})}
        problems += filter(None, [unreadable(name, str(p), result, max_rejected_share)])
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
                       rows_in=total.records, notes={"sources": used, **stop_unless_readable(problems, table)})
