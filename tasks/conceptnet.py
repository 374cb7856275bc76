"""The `conceptnet` stage, shared by every pipeline that reads ConceptNet (CoreQuisite's edges,
CORECODE's one-hop screening): a conceptnet-lite database built from a local assertions dump with
conceptnet-lite's own loader, cached in the store by the dump's sha256, or an existing database.

Its rows are the database's relations with their edge counts; each names the database and the dump
(file and sha256), so downstream stages open the same database and lineage ends at the dump. A
database built here is a cache: a store that has lost it (a cleaned `_cache`, artifacts copied to
another store) rebuilds it from the dump the artifact names, the same bytes, when a stage opens it."""

from __future__ import annotations

import logging

import pandas as pd

from csk import conceptnet as cn
from csk.compute import sha256_file
from csk.errors import ConfigError, InputError
from csk.params import InputPath, unused
from csk.runtime import StageContext, StageOutput

log = logging.getLogger("csk")


def conceptnet(*, dump: InputPath = None, database: InputPath = None, languages: list[str] = ["en", "zh"],
               ctx: StageContext | None = None) -> StageOutput:
    """A conceptnet-lite database of the dump's edges in the asked languages.

    Args:
        dump: ConceptNet assertions dump (5.7 format: assertion, relation, start, end, JSON info; tab-separated,
            gzipped or not); built once into the store's cache, keyed by its sha256
        database: an existing conceptnet-lite database to use as is (instead of building one from `dump`)
        languages: keep the edges whose two ends are in these languages when building (the full dump has 34M
            lines; English and Chinese keep about a tenth)
    """
    languages = tuple(languages)
    if unused(database) and unused(dump):
        raise ConfigError("conceptnet: set `dump` (an assertions dump to build from) or `database`")
    notes: dict = {}
    if not unused(database):
        db, source, sha = database, str(database), sha256_file(database)
        notes["built"] = False
    else:
        sha = sha256_file(dump)
        root = ctx.cache_dir if ctx is not None else __import__("pathlib").Path(".csk-cache")
        db = root / "conceptnet" / f"{sha[:24]}-{'-'.join(languages)}.db"
        ensure_database(dump, db, languages)
        source = str(dump)
        notes["built"] = True
        counts = cn.dump_counts(db)
        if counts is not None:  # the dump's lines are not rows: what they gave is said per file
            rejected = {k: counts[k] for k in ("malformed", "other_languages") if counts[k]}
            notes["read"] = {str(dump): {"records": counts["line"], "kept": counts["kept"], "unit": "lines",
                                         "rejected": rejected}}
    cn.connect(db)
    counts = cn.relation_counts()
    notes.update(database=str(db), dump=source, dump_sha256=sha, languages=list(languages),
                 edges=sum(c for _, c in counts), loader="conceptnet_lite.db.load_dump_to_db")
    data = pd.DataFrame({"id": [r for r, _ in counts], "relation": [r for r, _ in counts],
                         "edges": [c for _, c in counts]})
    # A database built into the store's cache is named relative to the store: the artifact's bytes do not
    # depend on where the store lives (a moved or copied store gives the same keys downstream).
    data["database"] = _store_relative(db, ctx)
    data["dump_sha256"] = sha
    data["languages"] = ",".join(languages) if notes["built"] else ""
    data["source_file"] = source
    data["source_record"] = 0
    data["source_locator"] = "the whole dump"
    return StageOutput(data=data, rows_in=len(data), notes=notes)


def ensure_database(dump, db, languages: tuple[str, ...]) -> None:
    """Build `db` from `dump` unless it exists; one builder at a time (two pipelines can share a database)."""
    from pathlib import Path

    from filelock import FileLock

    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock"):
        if not db.exists():
            log.info("building a conceptnet-lite database from %s (languages %s) into %s", dump, languages, db)
            cn.build_db(dump, db, languages)


def _store_relative(db, ctx: StageContext | None) -> str:
    from pathlib import Path

    db = Path(db)
    if ctx is not None and db.is_absolute() and db.is_relative_to(ctx.store.root):
        return db.relative_to(ctx.store.root).as_posix()
    return str(db)


def open_database(table: pd.DataFrame, ctx: StageContext | None = None) -> dict:
    """Connect to the database a `conceptnet` artifact names (a relative name is in the store `ctx`
    belongs to); returns where it came from, with the database's absolute path."""
    from pathlib import Path

    if not len(table):
        raise ConfigError("the conceptnet artifact names no database (it has no rows)")
    row = table.iloc[0]
    db = Path(row["database"])
    if not db.is_absolute() and ctx is not None:
        db = ctx.store.root / db
    if not db.exists() and row.get("languages"):  # built by the conceptnet stage: rebuild the lost cache
        dump = Path(row["source_file"])
        if not dump.is_absolute() and ctx is not None:  # a portable name: the file of that content here
            dump = ctx.store.local_file(row["dump_sha256"]) or dump
        if not dump.is_file() or sha256_file(dump) != row["dump_sha256"]:
            raise InputError(str(dump), None, f"the ConceptNet database {db} is gone and this dump, which it was "
                             "built from, is missing or changed: rerun the conceptnet stage (csk run)")
        ensure_database(dump, db, tuple(row["languages"].split(",")))
    cn.connect(db)
    return {"database": str(db), "source_file": row["source_file"], "dump_sha256": row["dump_sha256"],
            "lines": cn.dump_lines(db)}
