"""Checking a whole store (`csk verify`) and removing what no run uses (`csk gc`).

A store is `<root>/<pipeline>/<stage>/<key>/` artifact directories beside bookkeeping that
starts with `_` or `.` (`_runs`, `_cache`, `_lineage`, `_quarantine`, `.tmp`, `.locks`).
`verify_store` reports one line per problem, each naming the file it is about:

* every file's size and sha256 against its manifest, and the manifest against its own sha256;
* rows: the Parquet files hold the rows the manifest says, and rows in = out + rejected for a
  stage that conserves rows;
* lineage: every input the manifest names is in the store with the data it recorded, and every
  parent id of a row (kept or rejected) is a row of those inputs;
* runs: every artifact a run record names is in the store.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from csk.artifacts import MANIFEST, check_artifact

from csk.store import _pid_alive, Store

BOOKKEEPING = ("_", ".")


@dataclass
class Report:
    artifacts: int = 0
    problems: list[tuple[Path, str]] = field(default_factory=list)  # (artifact dir, "file: what is wrong")
    damaged: set[Path] = field(default_factory=set)  # artifact dirs whose files do not match their manifest
    checked: dict[Path, list[str]] = field(default_factory=dict)  # check_artifact's lines, each dir hashed once

    def check(self, d: Path) -> list[str]:
        if d not in self.checked:
            self.checked[d] = check_artifact(d, content=True)
        return self.checked[d]

    def add(self, artifact: Path, line: str, damaged: bool = False) -> None:
        self.problems.append((artifact, line))
        if damaged:
            self.damaged.add(artifact)


def artifact_dirs(store: Store, pipeline: str | None = None) -> list[tuple[str, str, Path]]:
    """(pipeline, stage, directory) of every artifact in the store, sorted."""
    out = []
    for p in sorted(store.root.iterdir()):
        if not p.is_dir() or p.name.startswith(BOOKKEEPING) or (pipeline and p.name != pipeline):
            continue
        for s in sorted(x for x in p.iterdir() if x.is_dir() and not x.name.startswith(BOOKKEEPING)):
            out += [(p.name, s.name, k) for k in sorted(s.iterdir()) if k.is_dir()]
    return out


class Unreadable(Exception):
    """A stored file that does not read (its checksum problem, if any, is reported on its own line)."""


def _parquet_ids(path: Path, column: str) -> set[str] | None:
    if not path.exists():
        return set()
    try:
        if column not in pq.read_schema(path).names:
            return None
        return {str(v) for v in pq.read_table(path, columns=[column]).column(0).to_pylist() if v is not None}
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise Unreadable(f"{path}: does not read as Parquet ({type(exc).__name__})") from None


def _conserves(pipeline: str, stage: str) -> bool | None:
    from csk.errors import CskError
    from csk.pipeline import get_pipeline

    try:
        return get_pipeline(pipeline).stage(stage).conserves_rows
    except (CskError, KeyError):
        return None


def verify_artifact(store: Store, pipeline: str, stage: str, d: Path, report: Report, lineage: bool = True) -> None:
    problems = report.check(d)
    for line in problems:
        report.add(d, line, damaged=True)
    if problems:
        return  # what follows reads the files: only meaningful once they are intact
    m = json.loads((d / MANIFEST).read_text())
    rows = m["rows"]
    for name, expected in (("data.parquet", rows["out"]), ("rejected.parquet", rows["rejected"])):
        f = d / name
        try:
            n = pq.ParquetFile(f).metadata.num_rows if f.exists() else 0
        except (OSError, ValueError, pa.ArrowException) as exc:
            report.add(d, f"{f}: does not read as Parquet ({type(exc).__name__}); its rows and lineage are not "
                       "checked", damaged=True)
            return
        if n != expected:
            report.add(d, f"{f}: {n} rows, the manifest says {expected}")
    if _conserves(pipeline, stage) and rows["in"] != rows["out"] + rows["rejected"]:
        report.add(d, f"{d / MANIFEST}: {rows['in']} rows in but {rows['out']} out + {rows['rejected']} rejected")
    parent_ids: set[str] = set()
    inputs_ok = True
    for i, entry in enumerate(m.get("inputs", [])):
        src = store.artifact_dir(pipeline, entry["stage"], entry["key"])
        try:
            found = json.loads((src / MANIFEST).read_text()).get("data_sha256")
        except (OSError, ValueError):
            report.add(d, f"{d / MANIFEST}: input {entry['stage']}/{entry['key']} is not in the store ({src})")
            inputs_ok = False
            continue
        if found != entry.get("data_sha256"):
            report.add(d, f"{d / MANIFEST}: input {entry['stage']}/{entry['key']} holds other data than it recorded")
            inputs_ok = False
        elif lineage and i < m.get("parent_inputs", 1) and m.get("parent_column"):
            if report.check(src):  # a damaged input is reported on its own lines
                report.add(d, f"{d / MANIFEST}: input {entry['stage']}/{entry['key']} is damaged; this "
                           "artifact's lineage is not checked against it")
                inputs_ok = False
                continue
            try:
                ids = _parquet_ids(src / "data.parquet", "id")
            except Unreadable as exc:
                report.add(d, f"{d / MANIFEST}: input {exc}; lineage not checked")
                inputs_ok = False
                continue
            parent_ids |= ids or set()
    column = m.get("parent_column")
    if not (lineage and column and inputs_ok and m.get("inputs")):
        return
    for name, col in (("data.parquet", column), ("rejected.parquet", "parent_id")):
        try:
            ids = _parquet_ids(d / name, col)
        except Unreadable as exc:
            report.add(d, str(exc), damaged=True)
            continue
        missing = sorted((ids or set()) - parent_ids)
        if missing:
            report.add(d, f"{d / name}: {len(missing)} {col} value(s) name no row of the inputs, e.g. {missing[:3]}")


def verify_store(store: Store, pipeline: str | None = None, lineage: bool = True) -> Report:
    report = Report()
    for p, stage, d in artifact_dirs(store, pipeline):
        report.artifacts += 1
        verify_artifact(store, p, stage, d, report, lineage)
    for record in sorted(store.root.glob(f"{pipeline or '*'}/_runs/*.json")):
        try:
            stages = json.loads(record.read_text())["stages"]
        except (OSError, ValueError, KeyError) as exc:
            report.add(record.parent, f"{record}: unreadable run record ({exc})")
            continue
        for s in stages:
            d = store.artifact_dir(record.parent.parent.name, s["stage"], s["key"])
            if not (d / MANIFEST).exists():
                report.add(d, f"{record}: names artifact {s['stage']}/{s['key']}, which is not in the store")
    return report


def repair(store: Store, report: Report) -> list[tuple[Path, Path]]:
    """Move every damaged artifact aside; a rerun recomputes those keys."""
    return [(d, store.quarantine(d)) for d in sorted(report.damaged) if d.exists()]


# ------------------------------------------------------------------ gc
@dataclass
class Garbage:
    artifacts: list[Path] = field(default_factory=list)
    tmp: list[Path] = field(default_factory=list)
    caches: list[Path] = field(default_factory=list)  # store caches no kept artifact needs
    quarantine: list[Path] = field(default_factory=list)  # damaged artifacts moved aside by verify --repair
    kept_recent: int = 0

    @property
    def paths(self) -> list[Path]:
        return self.artifacts + self.tmp + self.caches + self.quarantine


def _referenced(store: Store) -> set[Path]:
    """Artifacts a run record names, and (transitively) every input their manifests name."""
    todo: list[Path] = []
    for record in store.root.glob("*/_runs/*.json"):
        try:
            stages = json.loads(record.read_text())["stages"]
        except (OSError, ValueError, KeyError):
            continue
        todo += [store.artifact_dir(record.parent.parent.name, s["stage"], s["key"]) for s in stages]
    seen: set[Path] = set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        try:
            m = json.loads((d / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        todo += [store.artifact_dir(m["pipeline"], e["stage"], e["key"]) for e in m.get("inputs", [])]
    return seen


def find_garbage(store: Store, keep_minutes: float = 60.0) -> Garbage:
    """Artifacts no run record references (directly or as an input), older than `keep_minutes`
    (a run in progress has not recorded itself yet), and temporary directories of dead processes."""
    g = Garbage()
    used = _referenced(store)
    now = time.time()
    for _, _, d in artifact_dirs(store):
        if d in used:
            continue
        if now - d.stat().st_mtime < keep_minutes * 60:
            g.kept_recent += 1
            continue
        g.artifacts.append(d)
    tmp = store.tmp_dir
    if tmp.exists():
        for d in sorted(tmp.iterdir()):
            pid = d.name.split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                g.tmp.append(d)
    gone = set(g.artifacts)
    kept = [d for _, _, d in artifact_dirs(store) if d not in gone]
    g.caches = _unneeded_caches(store, kept, keep_minutes, now)
    # a stage's checkpoint is resumable work until its artifact is written (the run then removes it); one
    # left beside a written artifact (a run killed between the two) is garbage
    points = store.root / "_checkpoints"
    if points.is_dir():  # <pipeline>/<stage>/<key>
        g.caches += sorted(d for d in points.glob("*/*/*")
                           if d.is_dir() and store.find(*d.relative_to(points).parts) is not None)
    q = store.root / "_quarantine"
    if q.is_dir():  # <pipeline>/<stage>/<key>-<stamp>
        g.quarantine = sorted(d for d in q.glob("*/*/*") if d.is_dir() and now - d.stat().st_mtime >= keep_minutes * 60)
    return g


def _unneeded_caches(store: Store, kept: list[Path], keep_minutes: float, now: float) -> list[Path]:
    """Entries of `<store>/_cache` that no kept artifact's manifest names: an embedding LMDB (the
    `cache` its embedder record names: model, precision, pass shapes), an unpacked model (by sha256),
    a ConceptNet database with its side files. All are memos a run rebuilds when it needs them again;
    a young entry (a run in progress) stays."""
    cache = store.root / "_cache"
    if not cache.is_dir():
        return []
    embeddings, any_precision, models, databases = set(), set(), set(), set()
    for d in kept:
        try:
            m = json.loads((d / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        for rec in m.get("models", []):
            sha = str(rec.get("sha256") or "")
            if not sha:
                continue
            models.add(sha[:12])
            if rec.get("cache"):
                embeddings.add(str(rec["cache"]))
            elif not rec.get("precision"):  # a model recorded without how it ran: keep its every cache
                any_precision.add(sha[:16])
            # (an embedder recorded with a precision but no cache name wrote the layout before pass
            # shapes, `<sha>-<precision>`, which no code reads now)
        db = (m.get("notes") or {}).get("database")
        if db:
            databases.add(Path(db).name)
    out = []
    for d in sorted((cache / "embeddings").glob("*")) if (cache / "embeddings").is_dir() else []:
        if d.name not in embeddings and d.name.split("-", 1)[0] not in any_precision:
            out.append(d)
    for d in sorted((cache / "models").glob("*")) if (cache / "models").is_dir() else []:
        if d.name.rsplit("-", 1)[-1] not in models:
            out.append(d)
    cn = cache / "conceptnet"
    for f in sorted(cn.glob("*.db")) if cn.is_dir() else []:
        if f.name not in databases:
            out += [f] + sorted(p for p in cn.glob(f.name + ".*") if p.suffix != ".lock")
    return [p for p in out if now - p.stat().st_mtime >= keep_minutes * 60]


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def collect(store: Store, garbage: Garbage) -> int:
    """Remove what `find_garbage` found; returns the bytes freed. An artifact is removed under its key's
    lock, so a run writing that key at the same moment is never cut short."""
    freed = 0
    for d in garbage.artifacts:
        rel = d.relative_to(store.root).parts
        with store.lock(rel[0], rel[1], rel[2]):
            freed += size_of(d)
            shutil.rmtree(d, ignore_errors=True)
    for d in garbage.tmp + garbage.quarantine:
        freed += size_of(d)
        shutil.rmtree(d, ignore_errors=True)
    from filelock import FileLock

    for p in garbage.caches:
        freed += size_of(p)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.suffix == ".db":  # not while a run builds it (the builder holds this lock)
            with FileLock(str(p) + ".lock"):
                p.unlink(missing_ok=True)
        else:
            p.unlink(missing_ok=True)
    return freed


def compare_stores(a: Store, b: Store, pipeline: str | None = None) -> tuple[int, list[str], list[str]]:
    """(keys both stores hold, one line per key whose data differs, one line per damaged manifest).
    A difference names how the two were computed (machine, precision; `csk.runs.compute_differences`):
    one key must have one content, and on the same machine and precision a difference is a
    nondeterministic stage, which the line says. A manifest that cannot be read or whose own sha256
    does not match (on either side) is named, never compared and never a traceback."""
    from csk.artifacts import parse_manifest
    from csk.runs import compute_differences

    def read(d: Path) -> tuple[dict | None, str | None]:
        try:
            return parse_manifest((d / MANIFEST).read_bytes())
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or exc})"

    theirs = {(p, s, d.name): d for p, s, d in artifact_dirs(b, pipeline)}
    shared, lines, damaged = 0, [], []
    for p, s, d in artifact_dirs(a, pipeline):
        other = theirs.get((p, s, d.name))
        if other is None or not (d / MANIFEST).exists() or not (other / MANIFEST).exists():
            continue
        shared += 1
        (ma, bad_a), (mb, bad_b) = read(d), read(other)
        damaged += [f"{x / MANIFEST}: {why}" for x, why in ((d, bad_a), (other, bad_b)) if why]
        if ma is None or mb is None:
            continue
        if ma.get("data_sha256") == mb.get("data_sha256"):
            continue
        how = compute_differences(ma, mb)
        lines.append(f"{p}/{s}/{d.name}: data sha256 {str(ma.get('data_sha256'))[:12]} vs {str(mb.get('data_sha256'))[:12]}: "
                     + ("computed differently: " + "; ".join(how) if how else
                        "same machine, precision and inputs: a nondeterministic stage (please report it)"))
    return shared, lines, damaged
