"""ConceptNet through conceptnet-lite, strictly offline.

conceptnet-lite's `connect()` downloads a database when the file is missing; here a missing
database is an error, and `build_db` loads a local assertions dump (ConceptNet 5.7 format:
assertion URI, relation URI, start URI, end URI, JSON info, tab-separated) into one with
conceptnet-lite's own loader. `edges` and `one_hop` are the batched look-ups the stages use.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from csk.errors import InputError

_OPEN: str | None = None
CHECKPOINT_EVERY = 500_000  # dump lines between checkpoints of the filtering pass


def _checkpointed(state: dict) -> None:
    """Called after each checkpoint is written (a seam for crash tests)."""


def build_db(dump: str | Path, db: str | Path, languages: tuple[str, ...] | None = None,
             progress: bool = True) -> Path:
    """Build a conceptnet-lite database from a local assertions dump, streaming, with progress, resumable.

    Two phases, each resumable: (1) the dump (plain or gzipped) is streamed once, keeping the edges
    whose two ends are in `languages` (all edges when None), into `<db>.part.tsv`, with a checkpoint
    every CHECKPOINT_EVERY lines (a rerun after a crash truncates to the last checkpoint and goes on from there);
    beside it, `<db>.lines` maps each kept edge to its line in the dump (the edge's database id is its
    position in the filtered file, so lineage can name the dump line). (2) conceptnet-lite's own
    loader (`load_dump_to_db`) loads the filtered file into `<db>.tmp`, renamed to `db` when done;
    a crash there redoes phase 2 only.
    """
    import gzip
    import json as _json

    from conceptnet_lite.db import load_dump_to_db
    from csk.progress import Progress

    dump, db = Path(dump), Path(db)
    if not dump.is_file():
        raise InputError(str(dump), None, "ConceptNet assertions dump not found")
    db.parent.mkdir(parents=True, exist_ok=True)
    part, lines, ckpt = (db.with_name(db.name + s) for s in (".part.tsv", ".lines", ".checkpoint.json"))
    state = _json.loads(ckpt.read_text()) if ckpt.exists() else {"line": 0, "bytes": 0, "kept": 0, "done": False}
    state.setdefault("malformed", 0)  # lines that are not five tab-separated columns
    state.setdefault("other_languages", 0)
    wanted = tuple(f"/c/{lang}/" for lang in languages) if languages else None
    if not state["done"]:
        opener = gzip.open if dump.suffix == ".gz" else open
        mode = "r+b" if part.exists() else "wb"
        with opener(dump, "rb") as src, open(part, mode) as out, open(lines, "a+b") as linemap:
            out.truncate(state["bytes"])
            out.seek(state["bytes"])
            linemap.truncate(8 * state["kept"])
            # the project's bar: shown once the filter has run a few seconds, whole lines in a log file
            bar = Progress(None, f"ConceptNet: filtering {dump.name}", unit="lines", disable=not progress)
            if state["line"]:
                bar.update(state["line"])  # lines a killed run filtered already
            n = 0
            for n, raw in enumerate(src, start=1):
                if n <= state["line"]:
                    continue
                cols = raw.split(b"\t", 4)
                if len(cols) != 5:
                    state["malformed"] += 1
                elif wanted is None or (cols[2].decode("utf-8", "replace").startswith(wanted)
                                        and cols[3].decode("utf-8", "replace").startswith(wanted)):
                    out.write(raw if raw.endswith(b"\n") else raw + b"\n")
                    linemap.write(n.to_bytes(8, "little"))
                    state["kept"] += 1
                else:
                    state["other_languages"] += 1
                if n % CHECKPOINT_EVERY == 0:
                    out.flush()
                    linemap.flush()
                    state.update(line=n, bytes=out.tell())
                    _write_checkpoint(ckpt, state)
                    bar.update(CHECKPOINT_EVERY)
                    _checkpointed(state)
            out.flush()
            linemap.flush()
            state.update(line=n, bytes=out.tell(), done=True)
            _write_checkpoint(ckpt, state)
            bar.close()
    tmp = db.with_name(db.name + ".tmp")
    for leftover in ("", "-journal", "-wal", "-shm"):  # a killed load's SQLite journal must not roll into a new file
        Path(str(tmp) + leftover).unlink(missing_ok=True)
    if state["kept"]:
        load_dump_to_db(dump_path=part, db_path=tmp, edge_count=state["kept"], delete_dump=False)
    else:
        _open_empty(tmp)
    _write_checkpoint(Path(str(db) + ".counts.json"), {k: state[k] for k in ("line", "kept", "malformed",
                                                                             "other_languages")})
    tmp.replace(db)
    part.unlink(missing_ok=True)
    ckpt.unlink(missing_ok=True)
    return db


def dump_counts(db: str | Path) -> dict | None:
    """What building `db` read from its dump: lines, kept (edges in the languages), malformed (not five
    tab-separated columns), other_languages; None for a database built elsewhere or by an older csk."""
    import json as _json

    p = Path(str(db) + ".counts.json")
    return _json.loads(p.read_text()) if p.exists() else None


def _write_checkpoint(path: Path, state: dict) -> None:
    """Atomically: a kill while writing leaves the previous checkpoint, never half a JSON."""
    import json as _json

    tmp = path.with_name(path.name + ".new")
    tmp.write_text(_json.dumps(state))
    tmp.replace(path)


def _open_empty(path: Path) -> None:
    from conceptnet_lite.db import _open_db

    _open_db(path)


def dump_lines(db: str | Path):
    """The dump line of each edge id (1-based) of a database built by `build_db`; None for a database
    built by conceptnet-lite from the whole dump, where an edge's id is its line."""
    import numpy as np

    p = Path(str(db) + ".lines")
    return np.fromfile(p, dtype="<u8") if p.exists() else None


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


if __name__ == "__main__":  # python -m csk.conceptnet DUMP DB [LANG ...]
    import sys

    print(build_db(sys.argv[1], sys.argv[2], tuple(sys.argv[3:]) or None))


_EDGE_FROM = """
FROM edge e JOIN relation r ON e.relation_id = r.id
JOIN concept cs ON e.start_id = cs.id JOIN label ls ON cs.label_id = ls.id JOIN language ll ON ls.language_id = ll.id
JOIN concept ce ON e.end_id = ce.id JOIN label le ON ce.label_id = le.id JOIN language lle ON le.language_id = lle.id
"""
_EDGE_SQL = "SELECT e.id, r.name, ls.text, cs.sense_label, ll.name, le.text, ce.sense_label, lle.name, e.etc" + _EDGE_FROM


@lru_cache(maxsize=None)  # a few dozen relations, named once per edge read
def relation_uri(name: str) -> str:
    """conceptnet-lite's snake_case relation name -> ConceptNet's URI ('used_for' -> '/r/UsedFor')."""
    return "/r/" + "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _concept_uri(lang: str, text: str, sense: str) -> str:
    return f"/c/{lang}/{text}" + (f"/{sense}" if sense else "")


def _edge_row(row) -> dict:
    import json as _json

    eid, rel, s_text, s_sense, s_lang, e_text, e_sense, e_lang, etc = row
    start, end, ruri = _concept_uri(s_lang, s_text, s_sense), _concept_uri(e_lang, e_text, e_sense), relation_uri(rel)
    info = _json.loads(etc) if isinstance(etc, str) else (etc or {})
    return {"edge_id": int(eid), "edge_uri": f"/a/[{ruri}/,{start}/,{end}/]", "relation": ruri[3:],
            "start_uri": start, "end_uri": end, "head": s_text.replace("_", " "), "tail": e_text.replace("_", " "),
            "start_language": s_lang, "end_language": e_lang, "info": info}


def edges(relations: list[str], language: str) -> list[dict]:
    """Every edge of the relations ("UsedFor", ...) whose two ends are in `language`, by edge id."""
    from conceptnet_lite.db import db as _db

    names = [_snake(r) for r in relations]
    marks = ",".join("?" * len(names))
    sql = _EDGE_SQL + f" WHERE r.name IN ({marks}) AND ll.name = ? AND lle.name = ? ORDER BY e.id"
    return [_edge_row(r) for r in _db.execute_sql(sql, (*names, language, language)).fetchall()]


def one_hop(concepts: list[str], language: str, relations: list[str] | None = None) -> list[dict]:
    """Every edge starting at one of the concepts (label texts; spaces or underscores), both ends in
    `language`: one query per batch of distinct concepts, not one per look-up."""
    return [_edge_row(r) for r in _one_hop_rows(_EDGE_SQL, concepts, language, relations)]


def one_hop_pairs(concepts: list[str], language: str, relations: list[str] | None = None) -> list[tuple[int, str, str]]:
    """(edge id, head, tail) of every edge `one_hop` returns, in the same order: the narrow
    look-up of a screen that keeps few of the edges it reads (`edges_by_id` then reads the kept ones whole;
    decoding every edge's URIs and JSON was most of CORECODE's screening at 19.7K dialogues)."""
    return [(int(i), s.replace("_", " "), e.replace("_", " "))
            for i, s, e in _one_hop_rows("SELECT e.id, ls.text, le.text" + _EDGE_FROM, concepts, language, relations)]


def edges_by_id(ids: list[int]) -> dict[int, dict]:
    """edge id -> the edge as `one_hop` returns it, for the given ids (batches of 500)."""
    from conceptnet_lite.db import db as _db

    wanted = sorted({int(i) for i in ids})
    out: dict[int, dict] = {}
    for a in range(0, len(wanted), 500):
        chunk = wanted[a:a + 500]
        sql = _EDGE_SQL + f" WHERE e.id IN ({','.join('?' * len(chunk))})"
        out.update((e["edge_id"], e) for e in map(_edge_row, _db.execute_sql(sql, tuple(chunk)).fetchall()))
    return out


def _one_hop_rows(select: str, concepts: list[str], language: str, relations: list[str] | None) -> list[tuple]:
    from conceptnet_lite.db import db as _db

    texts = sorted({c.replace(" ", "_") for c in concepts if c})
    out: list[tuple] = []
    rel = ""
    params_rel: tuple = ()
    if relations:
        rel = f" AND r.name IN ({','.join('?' * len(relations))})"
        params_rel = tuple(_snake(r) for r in relations)
    for i in range(0, len(texts), 500):
        chunk = texts[i:i + 500]
        sql = (select + f" WHERE ls.text IN ({','.join('?' * len(chunk))}) AND ll.name = ? AND lle.name = ?"
               + rel + " ORDER BY e.id")
        out += _db.execute_sql(sql, (*chunk, language, language, *params_rel)).fetchall()
    return out


def relation_counts() -> list[tuple[str, int]]:
    from conceptnet_lite.db import db as _db

    sql = ("SELECT r.name, COUNT(*) FROM edge e JOIN relation r ON e.relation_id = r.id "
           "GROUP BY r.name ORDER BY r.name")
    return [(relation_uri(n)[3:], int(c)) for n, c in _db.execute_sql(sql).fetchall()]


def _snake(relation: str) -> str:
    from conceptnet_lite.db import _to_snake_case

    return _to_snake_case(relation)
