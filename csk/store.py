"""The artifact store: content-addressed Parquet artifacts with manifests, contracts and lineage.

A stage in `tasks/` states only its rule: it takes DataFrames and parameters and returns a
`StageOutput` (kept rows, rejected rows with a `reason_code` and a `reason`). Everything else
lives here, in three steps a run takes in order (`Store.run`):

* plan: validate the parameters against the stage's signature, hash every typed input
  (files, directories, models) and compute the key from (pipeline, stage, version, code,
  params, the content hash of each input artifact's data, the input hashes). Because the key
  uses the inputs' data, not their keys, a recomputed stage whose bytes did not change stops
  the recompute there (early cut-off). An existing key is reused, never recomputed;
* compute: load the inputs, call the stage;
* check: the data contract, the rejected-row shape, column hygiene, rows in = out + rejected,
  lineage links;
* write: data.parquet, rejected.parquet, extra files and manifest.json, atomically (a temp
  directory renamed into place: an artifact appears complete or not at all).

Integrity: the manifest records the size and sha256 of every file of its artifact and a sha256
of itself, so a changed byte in any file is found (`check_artifact`). The manifest also records
each file's modification time, status-change time and inode as written: reuse checks sizes always and
re-hashes any file whose record differs (so a byte changed in place is never reused on its size), and
every file for sources or with `verify`; a stage reading its inputs checks their sha256 on the bytes
it parses. One writer per key: two runs sharing a store take a file lock per key, so the
second waits for the first and reuses its artifact instead of computing it again.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from csk import compute
from csk.compute import host_record, sha256_file
from csk.params import portable_name, portable_params, resolve_settings, setting_value
from csk.progress import stage_label
from csk.artifacts import (MANIFEST, REJECTED_LEAD, ArtifactRef, canonical_json, check_artifact, file_stat, manifest_bytes,
                           to_parquet_bytes)
from csk.codehash import code_version
from csk.contracts import check_columns, validate_contract
from csk.errors import ConservationError, ContractError, CskError, InputError, IntegrityError
from csk.runtime import StageContext, StageOutput, StageRun

if TYPE_CHECKING:
    from csk.pipeline import Stage

log = logging.getLogger("csk")


@dataclass
class Plan:
    """Everything known about a stage run before it computes: validated params, hashed inputs, key."""

    pipeline: str
    stage: "Stage"
    params: Any  # the stage's params model instance
    params_json: dict
    inputs: list[ArtifactRef]  # the inputs given, in the stage function's parameter order
    input_hashes: list[str]
    files: list[dict]
    models: list[dict]
    key: str
    resolved: dict = field(default_factory=dict)  # Device / Precision settings as this machine resolves them
    input_names: list[str] = field(default_factory=list)  # the stage function's parameter of each input
    threads: dict = field(default_factory=dict)  # the count it computes with, whether its key holds it, why
    portable: dict = field(default_factory=dict)  # each read file's path here -> its name in keys and rows

    @property
    def parent_count(self) -> int:
        """How many of the given inputs hold parents: those among the stage's first `parent_inputs`
        declared inputs (a prefix of the given ones, which are in declared order)."""
        declared = {n for n, _ in self.stage.inputs[:self.stage.parent_inputs]}
        return sum(n in declared for n in self.input_names)


@dataclass
class Computed:
    data: pd.DataFrame
    rejected: pd.DataFrame | None
    rows_in: int
    out: StageOutput
    ctx: StageContext
    started: datetime
    seconds: float
    primary: pd.DataFrame | None = None  # the parent input(s), for lineage checks


def hash_inputs(params_model, values: dict, cache: Path | None = None) -> tuple[list[dict], list[dict]]:
    """sha256 of every file behind an InputPath and of every ModelDir's weights, by setting name.
    A configured path that does not exist is an InputError naming the setting."""
    from csk.models import PICKLE_WARNING, model_identity, weights_format
    from csk.params import typed_inputs, unused

    files, models = [], []
    for setting, kind, value in typed_inputs(params_model, values):
        if unused(value):
            continue
        if kind == "model":
            path, sha = model_identity(str(value), setting, cache)
            entry = {"param": setting, "spec": str(value), "path": str(path), "sha256": sha}
            if path.is_dir():  # (a split model not unpacked yet is safetensors: checked when unpacked)
                entry["weights"] = weights_format(path)
                if entry["weights"] == "pickle":
                    entry["warning"] = PICKLE_WARNING
            models.append(entry)
            continue
        path = Path(str(value))
        if path.is_dir():
            found = sorted(f for f in path.rglob("*") if f.is_file())
        elif path.is_file():
            found = [path]
        else:
            raise InputError(str(path), None, f"not found (setting {setting}); fix the path in pipelines.toml or --set")
        files += [{"param": setting, "path": str(f), "sha256": sha256_file(f)} for f in found]
    return files, models


def bind_inputs(stage: "Stage", inputs) -> tuple[list[str], list[ArtifactRef]]:
    """(parameter names, artifacts) of the inputs given, in the function's order; a missing required
    input, an unknown name or too many inputs is an error naming the stage and its inputs."""
    declared = stage.inputs
    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - {n for n, _ in declared})
        if unknown:
            raise CskError(f"stage {stage.name!r} has no input {unknown}; its inputs: "
                           f"{', '.join(n for n, _ in declared) or 'none'}")
        given = {k: v for k, v in inputs.items() if v is not None}
    else:
        if len(inputs) > len(declared):
            raise CskError(f"stage {stage.name!r} takes {len(declared)} inputs, got {len(inputs)}")
        given = dict(zip((n for n, _ in declared), inputs))
    missing = [n for n, required in declared if required and n not in given]
    if missing:
        raise CskError(f"stage {stage.name!r} needs input {missing} (bind it by name: run.stage({stage.name!r}, "
                       f"{missing[0]}=...))")
    names = [n for n, _ in declared if n in given]
    return names, [given[n] for n in names]


class Store:
    """Artifact store: `<root>/<pipeline>/<stage>/<key>/{data,rejected}.parquet + manifest.json`."""

    def __init__(self, root: str | Path = "artifacts", verify: bool = False):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._tmp = self.root / ".tmp"
        self.verify = verify  # content-check every reused artifact, not only its sizes

    @property
    def tmp_dir(self) -> Path:
        """Work in progress (`<pid>-<id>` directories, removed by the next run once that pid is gone)."""
        return self._tmp

    def artifact_dir(self, pipeline: str, stage: str, key: str) -> Path:
        return self.root / pipeline / stage / key

    def find(self, pipeline: str, stage: str, key: str) -> ArtifactRef | None:
        d = self.artifact_dir(pipeline, stage, key)
        if (d / MANIFEST).exists():
            return ArtifactRef(pipeline, stage, key, str(d))
        return None

    def reusable(self, plan: Plan) -> ArtifactRef | None:
        """The plan's artifact if the store has it, checked against its manifest: sizes always, content
        (sha256) for a source stage (its bytes were never read by a run) or when `verify` is set."""
        found = self.find(plan.pipeline, plan.stage.name, plan.key)
        if found is not None:
            problems = check_artifact(found.path, content=self.verify or not plan.inputs)
            if problems:
                raise IntegrityError([f"stage {plan.stage.name!r}: {p}" for p in problems])
        return found

    def lock(self, pipeline: str, stage: str, key: str):
        """The per-key lock a run holds while it computes and writes that key."""
        from filelock import FileLock

        path = self.root / ".locks" / pipeline / stage / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(path)

    def local_file(self, sha256: str) -> Path | None:
        """A file this store's runs read whose bytes have `sha256` and that is still there (rows name a file
        by its portable name; this finds it on this machine by its content)."""
        for manifest in self.root.glob("*/*/*/" + MANIFEST):
            try:
                files = json.loads(manifest.read_text()).get("files", [])
            except (OSError, ValueError):
                continue
            for f in files:
                if f.get("sha256") == sha256 and Path(f["path"]).is_file():
                    return Path(f["path"])
        return None

    def quarantine(self, path: str | Path) -> Path:
        """Move a damaged artifact directory aside (`_quarantine/...`), so a rerun recomputes its key."""
        src = Path(path)
        rel = src.relative_to(self.root)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        dst = self.root / "_quarantine" / rel.parent / f"{rel.name}-{stamp}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dst)
        return dst

    def clean_stale_tmp(self) -> None:
        """Remove temporary directories left by killed runs (their pid is gone)."""
        if not self._tmp.exists():
            return
        for d in self._tmp.iterdir():
            pid = d.name.split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)

    # -- step 1: plan
    def plan(self, pipeline: str, stage: "Stage", params: dict,
             inputs: "dict[str, ArtifactRef | None] | list[ArtifactRef]") -> Plan:
        """Validate params, hash inputs and compute the key (nothing is computed or written). `inputs`:
        by the stage function's parameter names (an optional one None or left out), or a list in the
        order of its parameters."""
        from pydantic import ValidationError

        names, inputs = bind_inputs(stage, inputs)
        try:
            model = stage.params_model.model_validate(params)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise CskError(f"stage {stage.name!r}: invalid parameters: {problems}") from None
        params_json = model.model_dump(mode="json")
        files, models = hash_inputs(stage.params_model, params_json, self.root / "_cache")
        input_hashes = [r.data_sha256 for r in inputs]
        # A key holds content, never a path (Bazel's portable cache): the files read by their names relative to
        # their setting and their sha256, the settings that name them by their last component. The same data
        # in another checkout, on another machine, gives the same key.
        portable = {f["path"]: portable_name(f["path"], setting_value(params_json, f["param"])) for f in files}
        material = {
            "pipeline": pipeline, "stage": stage.name, "version": stage.version, "code": stage.code_hash(),
            "packages": stage.packages(), "params": portable_params(stage.params_model, params_json),
            "inputs": [list(x) for x in zip(names, input_hashes)],
            "files": [(f["param"], portable[f["path"]], f["sha256"]) for f in files],
            "models": [(m["param"], m["sha256"]) for m in models],
        }
        resolved = resolve_settings(stage.params_model, params_json, models, self.root / "_cache")
        if resolved:  # "auto" precision and device as decided here: another decision, another key
            material["resolved"] = resolved
        # Every stage computes with the machine's thread count (`compute.training_threads`), whatever the runner
        # or OMP_NUM_THREADS set. A bf16 matrix product on one thread is not the bytes of one on two (seen on
        # the embedder), and a model trained with another count is another model: for such stages the count
        # is in the key. A stage whose code runs no threaded float kernel gives the same bytes on any count,
        # so its key leaves it out and a store built on another machine is reused (`Stage.threads_matter`).
        count, why = compute.training_threads(), stage.threads_matter
        if why:
            material["threads"] = count
        threads = {"count": count, "in_key": bool(why),
                   "why": why or stage.thread_count_free}
        key = hashlib.sha256(canonical_json(material).encode()).hexdigest()[:24]
        return Plan(pipeline, stage, model, params_json, list(inputs), input_hashes, files, models, key, resolved,
                    names, threads, portable)

    def key(self, pipeline: str, stage: "Stage", params: dict, inputs) -> str:
        return self.plan(pipeline, stage, params, inputs).key

    # -- step 2: compute
    def compute(self, plan: Plan) -> Computed:
        started = datetime.now(timezone.utc)
        t0 = time.perf_counter()
        try:
            frames = [r.load(verify=True) for r in plan.inputs]
        except IntegrityError as exc:
            raise IntegrityError([f"stage {plan.stage.name!r}: {p}" for p in exc.problems]) from None
        ctx = StageContext(self, plan.pipeline, plan.stage.name, plan.key)
        kwargs = {name: getattr(plan.params, name) for name in type(plan.params).model_fields}
        if "ctx" in inspect.signature(plan.stage.fn).parameters:
            kwargs["ctx"] = ctx
        kwargs.update(zip(plan.input_names, frames))
        with stage_label(plan.stage.name), compute.fixed_threads(compute.training_threads()):
            out = plan.stage.fn(**kwargs)
        if not isinstance(out, StageOutput):
            raise TypeError(f"stage {plan.stage.name!r} must return a StageOutput, got {type(out).__name__}")
        # rows name the files they were read from as the key does: portable, not this machine's folders
        data = portable_rows(out.data.reset_index(drop=True), plan.portable)
        rejected = portable_rows(out.rejected.reset_index(drop=True), plan.portable) \
            if out.rejected is not None and len(out.rejected) else None
        n_rejected = 0 if rejected is None else len(rejected)
        rows_in = out.rows_in if out.rows_in is not None else (len(frames[0]) if frames else len(data) + n_rejected)
        parents = frames[:plan.parent_count]  # rows of these inputs may be parents (the primary first)
        primary = (parents[0] if len(parents) == 1 else pd.concat([f[["id"]] for f in parents], ignore_index=True)) \
            if parents else None
        return Computed(data, rejected, int(rows_in), out, ctx, started, round(time.perf_counter() - t0, 3), primary)

    # -- step 3: check
    def check(self, plan: Plan, c: Computed) -> None:
        stage, what = plan.stage, f"stage {plan.stage.name!r}"
        if not len(c.data):  # an empty artifact still has the contract's columns and dtypes
            from data_contracts import conform_empty

            c.data = conform_empty(c.data, stage.contract)
        c.data = validate_contract(what, stage.contract, c.data, stage.contract_name)
        check_columns(what, c.data)
        if c.rejected is not None:
            c.rejected = self._rejected_shape(stage, c.rejected, c.primary)
            validate_contract(f"{what} (rejected rows)", "common.Rejected", c.rejected)
            check_columns(f"{what} (rejected rows)", c.rejected)
        n_rejected = 0 if c.rejected is None else len(c.rejected)
        if stage.conserves_rows and c.rows_in != len(c.data) + n_rejected:
            raise ConservationError(
                f"{what}: {c.rows_in} rows in but {len(c.data)} out + {n_rejected} rejected; "
                "every dropped row must be returned as rejected with a reason")
        if stage.parent_column is not None and plan.inputs:
            self._check_parents(stage, c.data, c.primary)

    @staticmethod
    def _rejected_shape(stage: "Stage", rejected: pd.DataFrame, primary: pd.DataFrame | None) -> pd.DataFrame:
        """One shape everywhere: id, parent_id, reason_code (categorical), reason, then the row's own columns."""
        for col in ("id", "reason_code", "reason"):
            if col not in rejected.columns:
                raise ContractError(f"stage {stage.name!r}: rejected rows need a {col!r} column "
                                    "(reason_code: a short snake_case category; reason: the sentence with the numbers)")
        df = rejected.copy()
        df["id"] = df["id"].astype(str)
        if "parent_id" not in df.columns:
            pc = stage.parent_column
            if pc and pc != "id" and pc in df.columns:
                df["parent_id"] = df[pc].astype(object)
            elif primary is not None and "id" in primary.columns:
                known = set(primary["id"].astype(str))
                df["parent_id"] = [i if i in known else None for i in df["id"]]
            else:
                df["parent_id"] = None  # a source record: its provenance columns say where it came from
        df["parent_id"] = df["parent_id"].map(lambda v: None if v is None or (isinstance(v, float) and pd.isna(v))
                                              else str(v)).astype(object)
        df["reason_code"] = pd.Categorical(df["reason_code"].astype(str))
        return df[REJECTED_LEAD + [c for c in df.columns if c not in REJECTED_LEAD]]

    @staticmethod
    def _check_parents(stage: "Stage", data: pd.DataFrame, parent: pd.DataFrame | None) -> None:
        col = stage.parent_column
        if col not in data.columns:
            raise ContractError(f"stage {stage.name!r}: lineage column {col!r} missing from output")
        if parent is None or "id" not in parent.columns or not len(data):
            return
        missing = data[col].notna() & ~data[col].isin(set(parent["id"]))  # null: row has its own provenance
        if missing.any():
            bad = data.loc[missing, col].astype(str).head(3).tolist()
            raise ContractError(f"stage {stage.name!r}: lineage column {col!r} names rows not in its input: {bad}")

    # -- step 4: write
    def write(self, plan: Plan, c: Computed) -> ArtifactRef:
        data_bytes = to_parquet_bytes(c.data)
        n_rejected = 0 if c.rejected is None else len(c.rejected)
        manifest = {
            "pipeline": plan.pipeline, "stage": plan.stage.name, "key": plan.key,
            "stage_version": plan.stage.version, "stage_code": plan.stage.code_hash(),
            "inputs": [{"name": n, "stage": r.stage, "key": r.key, "path": r.path, "data_sha256": h}
                       for n, r, h in zip(plan.input_names, plan.inputs, plan.input_hashes)],
            "parent_column": plan.stage.parent_column,
            "parent_inputs": plan.parent_count,  # the first this many of `inputs` (lineage reads them)
            "params": plan.params_json,
            "resolved": plan.resolved,
            "threads": plan.threads,
            "machine": host_record(),
            "files": plan.files,
            "models": _merge_models(plan.models, c.ctx.models),
            "code_version": code_version(),
            "packages": plan.stage.packages(),
            "rows": {"in": c.rows_in, "out": int(len(c.data)), "rejected": int(n_rejected)},
            "rejected_reasons": (c.rejected["reason_code"].astype(str).value_counts().sort_index().to_dict()
                                 if n_rejected else {}),
            "contract": plan.stage.contract_name,
            "data_sha256": hashlib.sha256(data_bytes).hexdigest(),
            "notes": c.out.notes,
            # work a killed run had finished and this one took from the stage's checkpoint, not recomputed
            **({"resumed": c.ctx.resumed} if c.ctx.resumed else {}),
            "outputs": sorted(c.out.files),
            "started": c.started.isoformat(),
            "ended": datetime.now(timezone.utc).isoformat(),
            "seconds": c.seconds,
        }
        files = {"data.parquet": data_bytes}
        if n_rejected:
            files["rejected.parquet"] = to_parquet_bytes(c.rejected)
        files.update(c.out.files)
        return self._commit(plan.pipeline, plan.stage.name, plan.key, files, manifest)

    # -- all steps
    def run(self, pipeline: str, stage: "Stage", params: dict, inputs) -> StageRun:
        """Reuse the stage's artifact when its key exists; else compute, check and write it, holding the
        key's lock (another run computing the same key is waited for, then its artifact reused)."""
        from filelock import Timeout

        plan = self.plan(pipeline, stage, params, inputs)
        found = self.reusable(plan)
        if found is None:
            lock = self.lock(pipeline, stage.name, plan.key)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                log.info("%s/%s: another run is computing key %s; waiting for it", pipeline, stage.name, plan.key)
                lock.acquire()
            try:
                found = self.reusable(plan)
                if found is None:
                    computed = self.compute(plan)
                    self.check(plan, computed)
                    ref = self.write(plan, computed)
                    # the work in progress is the artifact now: its checkpoints go
                    shutil.rmtree(self.root / "_checkpoints" / pipeline / stage.name / plan.key, ignore_errors=True)
                    return StageRun(ref, False, computed.out.tables)
            finally:
                lock.release()
        log.debug("%s/%s: reused artifact %s", pipeline, stage.name, plan.key)
        return StageRun(found, True)

    def _commit(self, pipeline: str, stage: str, key: str, files: dict[str, bytes], manifest: dict) -> ArtifactRef:
        """Write the files, then the manifest holding each file's size, sha256 and stat as written (the
        directory is renamed into place: the files keep their inode and times), atomically."""
        final = self.artifact_dir(pipeline, stage, key)
        tmp = self._tmp / f"{os.getpid()}-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            checksums = {}
            for name, payload in sorted(files.items()):
                target = tmp / name
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_file(target, payload)
                checksums[name] = {"bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest(),
                                   "stat": file_stat(target)}
            _write_file(tmp / MANIFEST, manifest_bytes({**manifest, "checksums": checksums}))
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists() and not (final / MANIFEST).exists():
                moved = self.quarantine(final)  # not written by csk (renames are atomic): keep it for a look
                log.warning("%s/%s: %s had no manifest; moved to %s", pipeline, stage, final, moved)
            try:
                os.rename(tmp, final)  # atomic on one filesystem; the manifest is inside
            except OSError:
                if not (final / MANIFEST).exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another run wrote the same key first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return ArtifactRef(pipeline, stage, key, str(final))

    # -- runs
    def runs_dir(self, pipeline: str) -> Path:
        return self.root / pipeline / "_runs"

    def record_run(self, pipeline: str, run_id: str, stages: list[dict], covered: dict | None = None,
                   flow: str | None = None) -> Path:
        """The run record; `covered`: a partial run's selection (`until` or `only`, and its stages);
        `flow`: which of the pipeline's flows ran (None: its main flow). Only a full run of the main
        flow becomes `latest.json`, the run the reading commands use by default; the others are listed
        by `csk runs` and read with `--run`."""
        record = {"pipeline": pipeline, "run_id": run_id, "flow": flow or pipeline,
                  "finished": datetime.now(timezone.utc).isoformat(), "stages": stages}
        if covered is not None:
            record["covered"] = covered
        d = self.runs_dir(pipeline)
        d.mkdir(parents=True, exist_ok=True)
        payload = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
        path = d / f"{run_id}.json"
        main = covered is None and flow in (None, pipeline)
        for target in (path,) + ((d / "latest.json",) if main else ()):
            tmp = target.with_suffix(f".tmp{os.getpid()}")
            _write_file(tmp, payload)
            os.replace(tmp, target)
        return path

    def latest_run(self, pipeline: str, required: bool = True) -> dict | None:
        """The latest full run of the pipeline's main flow (`csk run PIPELINE`)."""
        p = self.runs_dir(pipeline) / "latest.json"
        if not p.exists():
            if not required:
                return None
            others = sorted(self.runs_dir(pipeline).glob("*.json")) if self.runs_dir(pipeline).is_dir() else []
            hint = (f"; the store has {len(others)} other run(s) of it (partial runs or other flows): "
                    f"`csk runs {pipeline}` lists them, `--run -1` reads the last" if others else "")
            raise CskError(f"no finished run of {pipeline!r} in {self.root} (run `csk run {pipeline}` first){hint}")
        return json.loads(p.read_text())

    def ref_from_manifest_entry(self, pipeline: str, entry: dict) -> ArtifactRef:
        return ArtifactRef(pipeline, entry["stage"], entry["key"],
                           str(self.artifact_dir(pipeline, entry["stage"], entry["key"])))


def _merge_models(hashed: list[dict], used: list[dict]) -> list[dict]:
    """The runtime's entries (setting, path, sha256) with what the stage recorded about their use."""
    out = [dict(m) for m in hashed]
    for u in used:
        same = next((m for m in out if m.get("path") == u.get("path")), None)
        if same is not None:
            same.update({k: v for k, v in u.items() if k != "path" and v is not None})
        else:
            out.append(dict(u))
    return out


PATH_COLUMNS = ("source_file",)  # row fields (top level, or inside a list of records such as `evidence`)


def portable_rows(df: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """The rows with every read file's path (`source_file`, at the top or in a list of records) replaced by
    its portable name (`names`: this stage's files)."""
    if not names or not len(df):
        return df

    def fix(v):
        if isinstance(v, dict):
            return {k: (names.get(x, x) if k in PATH_COLUMNS and isinstance(x, str) else fix(x)) for k, x in v.items()}
        if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and getattr(v, "ndim", 0) == 1):
            items = list(v)
            return [fix(x) for x in items] if any(isinstance(x, dict) for x in items) else v
        return v

    out = df
    for col in df.columns:
        if col in PATH_COLUMNS:
            if df[col].map(lambda x: isinstance(x, str) and x in names).any():
                out = out.assign(**{col: df[col].map(lambda x: names.get(x, x) if isinstance(x, str) else x)})
        elif df[col].dtype == object and df[col].map(lambda x: isinstance(x, (list, tuple, dict)) or
                                                     (hasattr(x, "ndim") and getattr(x, "ndim", 0) == 1)).any():
            fixed = df[col].map(fix)
            if any(a is not b for a, b in zip(fixed, df[col])):
                out = out.assign(**{col: fixed})
    return out


def _write_file(path: Path, payload: bytes) -> None:
    with open(path, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
