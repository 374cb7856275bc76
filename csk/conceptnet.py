"""ConceptNet through conceptnet-lite, strictly offline.

conceptnet-lite's `connect()` downloads a database when the file is missing; here a missing
database is an error, and `build_db` loads a local assertions dump (ConceptNet 5.7 format:
assertion URI, relation URI, start URI, end URI, JSON info, tab-separated) into one.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from csk.errors import InputError

_OPEN: str | None = None


def build_db(dump: str | Path, db: str | Path) -> Path:
    from conceptnet_lite.db import load_dump_to_db

    dump, db = Path(dump), Path(db)
    if not dump.is_file():
        raise InputError(str(dump), None, "ConceptNet assertions dump not found")
    if dump.suffix == ".gz":  # conceptnet-lite's loader reads plain text: decompress beside the database
        import gzip
        import shutil
        import tempfile

        with tempfile.NamedTemporaryFile(dir=db.parent, suffix=".csv", delete=False) as tmp:
            with gzip.open(dump, "rb") as src:
                shutil.copyfileobj(src, tmp)
        try:
            return build_db(tmp.name, db)
        finally:
            Path(tmp.name).unlink(missing_ok=True)
    with open(dump, "rb") as f:
        n = sum(1 for _ in f)
    load_dump_to_db(dump_path=dump, db_path=db, edge_count=n, delete_dump=False)
    return db


def connect(db: str | Path) -> None:
    global _OPEN
    from conceptnet_lite.db import _open_db

    db = Path(db).expanduser().resolve()
    if _OPEN == str(db):
        return
    if not db.is_file():
        raise InputError(str(db), None, "ConceptNet database not found; build one from a local dump with "
                         "`python -m csk.conceptnet DUMP DB` (nothing is downloaded)")
    _open_db(db)
    _OPEN = str(db)
    related.cache_clear()


@lru_cache(maxsize=100_000)
def related(word: str, relations: tuple[str, ...], language: str = "en") -> tuple[str, ...]:
    """Texts of concepts linked to `word` by any of `relations` (either direction)."""
    from conceptnet_lite import Label, edges_for
    from peewee import DoesNotExist

    try:
        label = Label.get(text=word.replace(" ", "_"), language=language)
    except DoesNotExist:
        return ()
    out = []
    for edge in edges_for(label.concepts, same_language=True):
        if edge.relation.name not in relations:
            continue
        other = edge.end if edge.start.text == label.text else edge.start
        out.append(other.text.replace("_", " "))
    return tuple(dict.fromkeys(out))


def antonyms(word: str) -> tuple[str, ...]:
    return related(word, ("antonym", "distinct_from"))


if __name__ == "__main__":  # python -m csk.conceptnet DUMP DB
    import sys

    print(build_db(sys.argv[1], sys.argv[2]))
