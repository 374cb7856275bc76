"""Walk manifests back from any artifact (and any row) to the source files it came from."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from csk.errors import CskError
from csk.artifacts import ArtifactRef
from csk.store import Store


# What a row made from a Label Studio annotation carries of it (tasks.labeling.ANNOTATION_COLUMNS, and the
# id of the row its task was made from).
ANNOTATION_FIELDS = ("annotator", "annotation_id", "ls_task_id", "task_id", "created_at", "updated_at", "lead_time")


def latest_ref(store: Store, pipeline: str, stage: str, run: str | None = None) -> ArtifactRef:
    """The artifact of `stage` in a run (default: the latest full run of the main flow)."""
    from csk.runs import chosen_run, run_name

    record = chosen_run(store, pipeline, run)
    for entry in record["stages"]:
        if entry["stage"] == stage:
            return store.ref_from_manifest_entry(pipeline, entry)
    names = ", ".join(e["stage"] for e in record["stages"])
    raise CskError(f"stage {stage!r} is not in {run_name(record)} of {pipeline}; its stages: {names}")


def source_files(manifest: dict) -> list[dict]:
    """Absolute path + sha256 of every file a stage read (the typed inputs the runtime hashed)."""
    return [{"source": f["param"], "path": f["path"], "sha256": f["sha256"]} for f in manifest.get("files", [])]


def artifact_chain(store: Store, ref: ArtifactRef) -> list[dict]:
    """Every artifact upstream of `ref` (depth-first, each once), ending in source files."""
    seen: set[str] = set()
    chain: list[dict] = []

    def visit(r: ArtifactRef, depth: int) -> None:
        if r.key in seen:
            return
        seen.add(r.key)
        m = r.manifest()
        entry = {"depth": depth, "stage": r.stage, "key": r.key, "path": r.path, "rows": m["rows"]}
        if not m["inputs"]:
            entry["source_files"] = source_files(m)
        chain.append(entry)
        for inp in m["inputs"]:
            visit(ArtifactRef(r.pipeline, inp["stage"], inp["key"], inp["path"]), depth + 1)

    visit(ref, 0)
    return chain


def _drop_inherited_records(steps: list[dict]) -> list[dict]:
    """Rows carry their source's provenance columns forward; name a step's own record only where
    it was read from another file than the source reached at the end (e.g. an annotation release)."""
    final = steps[-1]["source"]["file"]
    for step in steps[:-1]:
        if step.get("record", {}).get("file") == final:
            del step["record"]
    return steps


def _files_by_name(ref: ArtifactRef) -> dict[str, tuple[str, str]]:
    """path and portable name -> (sha256, the path where this store's run read it)."""
    from csk.params import portable_name, setting_value

    out: dict[str, tuple[str, str]] = {}
    todo, seen = [ref], set()
    while todo:
        r = todo.pop()
        if r.key in seen:
            continue
        seen.add(r.key)
        m = r.manifest()
        for f in m.get("files", []):
            out.setdefault(f["path"], (f["sha256"], f["path"]))
            out.setdefault(portable_name(f["path"], setting_value(m.get("params", {}), f["param"])),
                           (f["sha256"], f["path"]))
        todo += [ArtifactRef(r.pipeline, i["stage"], i["key"], i["path"]) for i in m["inputs"]]
    return out


def _sha(path: str) -> str | None:
    from csk.compute import sha256_file

    return sha256_file(path) if path and Path(path).is_file() else None


def _rejected_upstream(ref: ArtifactRef, row_id: str) -> tuple[ArtifactRef, dict] | None:
    """The upstream artifact (nearest first) whose rejected rows hold `row_id`, with that row."""
    todo, seen = [ArtifactRef(ref.pipeline, i["stage"], i["key"], i["path"]) for i in ref.manifest()["inputs"]], set()
    while todo:
        r = todo.pop(0)
        if r.key in seen:
            continue
        seen.add(r.key)
        found = _find_row(r, row_id)
        if found is not None and found[1]:
            return r, found[0]
        todo += [ArtifactRef(r.pipeline, i["stage"], i["key"], i["path"]) for i in r.manifest()["inputs"]]
    return None


def _find_row(ref: ArtifactRef, row_id: str) -> tuple[dict, bool] | None:
    for path, rejected in ((ref.data_path, False), (ref.rejected_path, True)):
        if not path.exists():
            continue
        table = pq.read_table(path, filters=[("id", "=", row_id)])
        if table.num_rows:
            return table.slice(0, 1).to_pylist()[0], rejected
    return None


def _evidence(ref: ArtifactRef, items: list[dict]) -> list[dict]:
    """A row's `evidence`: the records of other files it rests on (e.g. the ConceptNet edges that
    kept a dialogue), each with its file's sha256 as the run hashed it."""
    files = _files_by_name(ref)
    return [{"text": e.get("text"), "file": files.get(e.get("source_file"), (None, e.get("source_file")))[1],
             "locator": e.get("source_locator"),
             "sha256": files.get(e.get("source_file"), (None,))[0] or _sha(e.get("source_file") or "")}
            for e in (items if isinstance(items, (list, tuple)) else []) if isinstance(e, dict)]


def _origin_source(ref: ArtifactRef, manifest: dict, item: str) -> dict | None:
    """The source record of the item a candidate was written for (its answer, taken for another item)."""
    for i in manifest["inputs"][:manifest.get("parent_inputs", 1)]:
        parent = ArtifactRef(ref.pipeline, i["stage"], i["key"], i["path"])
        if _find_row(parent, item) is not None:
            try:
                return row_lineage(None, parent, item)[-1].get("source")
            except CskError:
                return None
    return None


def stored_file_paths(ref: ArtifactRef, text):
    """`text` (a row's rationale) with every file a stage wrote that it names bare (`server_responses.parquet`)
    as that file's path in the store: the nearest artifact, from `ref` upstream, whose manifest lists it among
    its outputs. A name alone says neither which stage wrote it nor which run."""
    import re

    if not isinstance(text, str) or not text:
        return text
    todo, seen, done = [ref], set(), set()
    while todo:
        r = todo.pop(0)
        if r.key in seen:
            continue
        seen.add(r.key)
        m = r.manifest()
        for name in m.get("outputs", []):
            if name not in done and name in text:
                done.add(name)
                full = str(Path(r.path) / name)
                text = re.sub(rf"(?<![\w/.-]){re.escape(name)}(?![\w/-])", lambda _m, f=full: f, text)
        todo += [ArtifactRef(r.pipeline, i["stage"], i["key"], i["path"]) for i in m["inputs"]]
    return text


def row_lineage(store: Store, ref: ArtifactRef, row_id: str) -> list[dict]:
    """The row's ancestors, one per stage, down to the source file and record it was read from."""
    steps = []
    current, rid = ref, row_id
    while True:
        found = _find_row(current, rid)
        if found is None:
            where = f"{current.stage} ({current.path})"
            if not steps:
                earlier = _rejected_upstream(current, rid)
                if earlier is not None:
                    r, row = earlier
                    raise CskError(f"row {rid!r} is not in {current.stage}: it was rejected earlier, at stage "
                                   f"{r.stage!r} ({row.get('reason_code')}: {row.get('reason')}); "
                                   f"`csk lineage {r.pipeline} {r.stage} --row {rid}` traces it to its source")
            raise CskError(f"row id {rid!r} not found in {where}" + ("" if steps else
                           "; list ids with: csk show " + current.pipeline + " " + current.stage +
                           " (or its rejected rows: --rejected)"))
        row, rejected = found
        m = current.manifest()
        step = {"stage": current.stage, "key": current.key, "path": current.path, "id": rid, "rejected": rejected}
        if m.get("parent_column") is None and m["inputs"] and not row.get("source_file"):
            step["aggregate"] = True  # a summary row (statistics): it has no single source record
            steps.append(step)
            return steps
        if rejected:
            step["reason"] = row.get("reason")
            step["reason_code"] = row.get("reason_code")
        if row.get("evidence"):
            step["evidence"] = _evidence(current, row["evidence"])
        if row.get("annotator") not in (None, ""):  # a row made from a Label Studio annotation: who, when
            step["annotation"] = {k: row.get(k) for k in ANNOTATION_FIELDS if row.get(k) is not None}
        for k in ("checkers", "validators", "raters", "labellers", "writers"):  # the people who voted on it
            if row.get(k) is not None and len(row[k]):
                step[k] = [str(v) for v in row[k]]
        parent_col = m.get("parent_column")
        if row.get("generator") and row.get("written_for") and "origin" not in (steps[-1] if steps else {}):
            # a distractor candidate: what made it, and the item (and source record) whose answer it is
            step["origin"] = {k: row.get(k) for k in ("generator", "rule", "rationale", "written_for")}
            step["origin"]["rationale"] = stored_file_paths(current, row.get("rationale"))
            if parent_col and row["written_for"] != row.get(parent_col):
                step["origin"]["source"] = _origin_source(current, m, str(row["written_for"]))
        steps.append(step)
        if not m["inputs"] or parent_col is None:
            files = _files_by_name(current)
            src = row.get("source_file")
            sha, local = files.get(src, (None, src))
            step["source"] = {"file": local, "sha256": sha or _sha(src), "record": row.get("source_record"),
                              "locator": row.get("source_locator")}
            return _drop_inherited_records(steps)
        if row.get("source_file"):  # rows read from a file mid-pipeline (e.g. an annotation release)
            sha, local = _files_by_name(current).get(row["source_file"], (None, row["source_file"]))
            step["record"] = {"file": local, "sha256": sha or _sha(row["source_file"]),
                              "locator": row.get("source_locator")}
        parent_id = row.get(parent_col)
        if parent_id is None or (isinstance(parent_id, float) and pd.isna(parent_id)):
            if "record" in step:
                step["source"] = {**step.pop("record"), "record": row.get("source_record")}
                return _drop_inherited_records(steps)
            raise CskError(f"row {rid!r} of {current.stage} has no {parent_col!r}: lineage broken")
        candidates = [ArtifactRef(current.pipeline, i["stage"], i["key"], i["path"])
                      for i in m["inputs"][:m.get("parent_inputs", 1)]]
        rid = str(parent_id)
        current = next((r for r in candidates if _find_row(r, rid) is not None), candidates[0])
