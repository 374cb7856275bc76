"""The stage runtime: content-addressed Parquet artifacts with manifests, contracts and lineage.

A stage in `tasks/` states only its rule: it takes DataFrames and parameters and returns a
`StageOutput` (kept rows, rejected rows with a `reason`). Everything else lives here:

* the artifact key, a hash of (pipeline, stage, stage version, stage code, params, input keys);
* reuse: an existing key is never recomputed;
* atomic writes: an artifact directory appears by rename, complete, or not at all;
* the data contract check on the output (and the generic one on rejected rows);
* row conservation: rows in = rows out + rows rejected;
* `manifest.json`: inputs, params, code and package versions, models, counts, times;
* lineage: every row has an `id`; `parent_column` names the column holding the id of the
  row of the primary input it came from, so any row can be walked back to a source record.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from csk.errors import ConservationError, ContractError, CskError

log = logging.getLogger("csk")

KEY_PACKAGES = (
    "csk", "pandas", "pyarrow", "numpy", "torch", "transformers", "sentence-transformers",
    "scikit-learn", "networkx", "faiss-cpu", "pandera", "prefect", "spacy", "jieba",
)
PROJECT_ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ data types
@dataclass
class StageOutput:
    """What a stage function returns."""

    data: pd.DataFrame
    rejected: pd.DataFrame | None = None  # dropped rows, with `id` and `reason`
    rows_in: int | None = None  # default: rows of the primary input
    notes: dict[str, Any] = field(default_factory=dict)  # algorithm choices etc., into the manifest
    files: dict[str, bytes] = field(default_factory=dict)  # extra files (CSV, JSONL, PNG) beside the data
    tables: dict[str, list[dict]] = field(default_factory=dict)  # extra Prefect table artifacts


@dataclass(frozen=True)
class Stage:
    """A pipeline step: a pure function from input DataFrames + params to a StageOutput."""

    name: str
    fn: Callable[..., StageOutput]
    contract: Any  # a pandera DataFrameModel class
    parent_column: str | None = "id"  # column holding the primary input row's id (None: a source)
    version: str = "1"  # bump when the meaning of the output changes without a code change
    conserves_rows: bool = True  # rows in == out + rejected (False for 1 -> many stages)
    fingerprint: Callable[[dict], dict] | None = None  # extra key material (e.g. source file hashes)

    def code_hash(self) -> str:
        """Hash of the sources of the stage function's module and every project module it uses,
        directly or not (helpers, readers, the runtime): an edit anywhere there recomputes."""
        module = inspect.getmodule(self.fn)
        if module is None:
            return hashlib.sha256(self.fn.__qualname__.encode()).hexdigest()[:16]
        return _modules_hash(module.__name__)


@dataclass(frozen=True)
class ArtifactRef:
    pipeline: str
    stage: str
    key: str
    path: str  # artifact directory

    @property
    def data_path(self) -> Path:
        return Path(self.path) / "data.parquet"

    @property
    def rejected_path(self) -> Path:
        return Path(self.path) / "rejected.parquet"

    def manifest(self) -> dict:
        return json.loads((Path(self.path) / "manifest.json").read_text())

    def load(self) -> pd.DataFrame:
        return read_parquet(self.data_path)

    def load_rejected(self) -> pd.DataFrame:
        p = self.rejected_path
        return read_parquet(p) if p.exists() else pd.DataFrame({"id": [], "reason": []})


@dataclass
class StageRun:
    ref: ArtifactRef
    reused: bool
    tables: dict[str, list[dict]] = field(default_factory=dict)


class StageContext:
    """Handed to stage functions that declare a `ctx` parameter: store access and model records."""

    def __init__(self, store: "Store", pipeline: str, stage: str):
        self.store = store
        self.pipeline = pipeline
        self.stage = stage
        self.models: list[dict] = []

    def record_model(self, name: str, path: str | None, sha256: str | None, **extra: Any) -> None:
        self.models.append({"name": name, "path": path, "sha256": sha256, **extra})

    @property
    def cache_dir(self) -> Path:
        return self.store.root / "_cache"


# ------------------------------------------------------------------ helpers
def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_parquet(path: str | Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


def to_parquet_bytes(df: pd.DataFrame) -> bytes:
    """Deterministic Parquet: no index, fixed compression, no per-write timestamps."""
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", compression_level=3, write_statistics=True)
    return buf.getvalue()


PROJECT_PACKAGES = {"csk", "readers", "tasks", "data_contracts"}
_MODULE_HASHES: dict[str, str] = {}


def _project_deps(module) -> set[str]:
    deps = set()
    for value in vars(module).values():
        name = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.split(".")[0] in PROJECT_PACKAGES:
            deps.add(name)
    return deps


def module_closure(root: str) -> set[str]:
    """The project modules `root` uses, directly or through other project modules."""
    import sys

    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in sys.modules:
            continue
        seen.add(name)
        todo += sorted(_project_deps(sys.modules[name]))
    return seen


def _modules_hash(root: str) -> str:
    import sys

    if root not in _MODULE_HASHES:
        seen = module_closure(root)
        h = hashlib.sha256()
        for name in sorted(seen):
            try:
                h.update(name.encode() + b"\0" + inspect.getsource(sys.modules[name]).encode())
            except (OSError, TypeError):
                h.update(name.encode())
        _MODULE_HASHES[root] = h.hexdigest()[:16]
    return _MODULE_HASHES[root]


_CODE_VERSION: dict | None = None


def code_version() -> dict:
    global _CODE_VERSION
    if _CODE_VERSION is None:
        info: dict[str, Any] = {"commit": None, "dirty": None}
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                    text=True, timeout=10)
            if commit.returncode == 0:
                info["commit"] = commit.stdout.strip()
                status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
                info["dirty"] = bool(status.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
        _CODE_VERSION = info
    return _CODE_VERSION


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def format_contract_error(what: str, contract_name: str, exc: Exception, df: pd.DataFrame) -> str:
    """`what`: the artifact checked, e.g. "stage 'dedup'" or a file path."""
    failures = getattr(exc, "failure_cases", None)
    lines = [f"{what}: violates data contract {contract_name}"]
    if failures is not None and len(failures):
        missing = failures[failures["check"] == "column_in_dataframe"]["failure_case"].astype(str).tolist()
        if missing:
            lines.append(f"  missing columns {missing}")
            failures = failures[failures["check"] != "column_in_dataframe"]
        for (column, check), group in failures.groupby(["column", "check"], dropna=False, sort=False):
            if missing and str(column) == contract_name:
                continue  # dataframe-level checks that could not run without the missing columns
            idx = [i for i in group["index"].tolist() if i is not None][:3]
            rows = ""
            if idx and "id" in df.columns:
                ids = [str(df["id"].iloc[int(i)]) for i in idx if str(i).isdigit() and int(i) < len(df)]
                rows = f"; rows {ids}" if ids else ""
            values = group["failure_case"].astype(str).tolist()[:3]
            lines.append(f"  column {column!r} fails {check}: values {values}{rows}")
    else:
        lines.append(f"  {exc}")
    return "\n".join(lines)


def validate_contract(what: str, contract: Any, df: pd.DataFrame) -> pd.DataFrame:
    import pandera.errors as pe

    try:
        return contract.validate(df, lazy=True)
    except (pe.SchemaErrors, pe.SchemaError) as exc:
        raise ContractError(format_contract_error(what, contract.__name__, exc, df)) from None


# ------------------------------------------------------------------ the store
class Store:
    """Artifact store: `<root>/<pipeline>/<stage>/<key>/{data,rejected}.parquet + manifest.json`."""

    def __init__(self, root: str | Path = "artifacts"):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._tmp = self.root / ".tmp"

    # -- keys
    def key(self, pipeline: str, stage: Stage, params: dict, inputs: list[ArtifactRef],
            fingerprint: dict | None = None) -> str:
        """`fingerprint`: the stage's fingerprint(params) when the caller already computed it."""
        material = {
            "pipeline": pipeline,
            "stage": stage.name,
            "version": stage.version,
            "code": stage.code_hash(),
            "params": params,
            "inputs": [r.key for r in inputs],
        }
        if stage.fingerprint is not None:
            material["fingerprint"] = fingerprint if fingerprint is not None else stage.fingerprint(params)
        return hashlib.sha256(canonical_json(material).encode()).hexdigest()[:24]

    def artifact_dir(self, pipeline: str, stage: str, key: str) -> Path:
        return self.root / pipeline / stage / key

    def find(self, pipeline: str, stage: str, key: str) -> ArtifactRef | None:
        d = self.artifact_dir(pipeline, stage, key)
        if (d / "manifest.json").exists():
            return ArtifactRef(pipeline, stage, key, str(d))
        return None

    def clean_stale_tmp(self) -> None:
        """Remove temporary directories left by killed runs (their pid is gone)."""
        if not self._tmp.exists():
            return
        for d in self._tmp.iterdir():
            pid = d.name.split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)

    # -- running a stage
    def run(self, pipeline: str, stage: Stage, params: dict, inputs: list[ArtifactRef]) -> "StageRun":
        """Compute, check and write a stage's artifact, or reuse it when its key exists."""
        fingerprint = stage.fingerprint(params) if stage.fingerprint else None  # hashes files once
        key = self.key(pipeline, stage, params, inputs, fingerprint)
        found = self.find(pipeline, stage.name, key)
        if found is not None:
            log.debug("%s/%s: reused artifact %s", pipeline, stage.name, key)
            return StageRun(found, True)

        started = datetime.now(timezone.utc)
        t0 = time.perf_counter()
        frames = [r.load() for r in inputs]
        ctx = StageContext(self, pipeline, stage.name)
        kwargs = dict(params)
        if "ctx" in inspect.signature(stage.fn).parameters:
            kwargs["ctx"] = ctx
        out = stage.fn(*frames, **kwargs)
        if not isinstance(out, StageOutput):
            raise TypeError(f"stage {stage.name!r} must return a StageOutput, got {type(out).__name__}")
        data = out.data.reset_index(drop=True)
        rejected = out.rejected.reset_index(drop=True) if out.rejected is not None else None

        data = validate_contract(f"stage {stage.name!r}", stage.contract, data)
        if rejected is not None and len(rejected):
            from data_contracts.common import Rejected

            rejected = validate_contract(f"stage {stage.name!r} (rejected rows)", Rejected, rejected)
        n_rejected = 0 if rejected is None else len(rejected)
        rows_in = out.rows_in if out.rows_in is not None else (len(frames[0]) if frames else len(data) + n_rejected)
        if stage.conserves_rows and rows_in != len(data) + n_rejected:
            raise ConservationError(
                f"stage {stage.name!r}: {rows_in} rows in but {len(data)} out + {n_rejected} rejected; "
                "every dropped row must be returned as rejected with a reason")
        if stage.parent_column is not None and inputs:
            self._check_parents(stage, data, frames[0])

        manifest = {
            "pipeline": pipeline,
            "stage": stage.name,
            "key": key,
            "stage_version": stage.version,
            "stage_code": stage.code_hash(),
            "inputs": [{"stage": r.stage, "key": r.key, "path": r.path} for r in inputs],
            "parent_column": stage.parent_column,
            "params": params,
            "fingerprint": fingerprint,
            "code_version": code_version(),
            "packages": package_versions(),
            "models": ctx.models,
            "rows": {"in": int(rows_in), "out": int(len(data)), "rejected": int(n_rejected)},
            "contract": stage.contract.__name__,
            "notes": out.notes,
            "files": sorted(out.files),
            "started": started.isoformat(),
            "ended": datetime.now(timezone.utc).isoformat(),
            "seconds": round(time.perf_counter() - t0, 3),
        }
        files = {"data.parquet": to_parquet_bytes(data)}
        if rejected is not None and len(rejected):
            files["rejected.parquet"] = to_parquet_bytes(rejected)
        files.update(out.files)
        files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n").encode()
        ref = self._commit(pipeline, stage.name, key, files)
        log.debug("%s/%s: wrote artifact %s (%d in, %d out, %d rejected)", pipeline, stage.name, key,
                 rows_in, len(data), n_rejected)
        return StageRun(ref, False, out.tables)

    def _check_parents(self, stage: Stage, data: pd.DataFrame, parent: pd.DataFrame) -> None:
        col = stage.parent_column
        if col not in data.columns:
            raise ContractError(f"stage {stage.name!r}: lineage column {col!r} missing from output")
        if "id" not in parent.columns or not len(data):
            return
        missing = data[col].notna() & ~data[col].isin(set(parent["id"]))  # null: row has its own provenance
        if missing.any():
            bad = data.loc[missing, col].astype(str).head(3).tolist()
            raise ContractError(f"stage {stage.name!r}: lineage column {col!r} names rows not in its input: {bad}")

    def _commit(self, pipeline: str, stage: str, key: str, files: dict[str, bytes]) -> ArtifactRef:
        final = self.artifact_dir(pipeline, stage, key)
        tmp = self._tmp / f"{os.getpid()}-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            for name, payload in files.items():
                target = tmp / name
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_file(target, payload)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, final)  # atomic on one filesystem; the manifest is inside
            except OSError:
                if not (final / "manifest.json").exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another run wrote the same key first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return ArtifactRef(pipeline, stage, key, str(final))

    # -- runs
    def runs_dir(self, pipeline: str) -> Path:
        return self.root / pipeline / "_runs"

    def record_run(self, pipeline: str, run_id: str, stages: list[dict]) -> Path:
        record = {"pipeline": pipeline, "run_id": run_id,
                  "finished": datetime.now(timezone.utc).isoformat(), "stages": stages}
        d = self.runs_dir(pipeline)
        d.mkdir(parents=True, exist_ok=True)
        payload = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
        path = d / f"{run_id}.json"
        for target in (path, d / "latest.json"):
            tmp = target.with_suffix(f".tmp{os.getpid()}")
            _write_file(tmp, payload)
            os.replace(tmp, target)
        return path

    def latest_run(self, pipeline: str) -> dict:
        p = self.runs_dir(pipeline) / "latest.json"
        if not p.exists():
            raise CskError(f"no finished run of {pipeline!r} in {self.root} (run `csk run {pipeline}` first)")
        return json.loads(p.read_text())

    def ref_from_manifest_entry(self, pipeline: str, entry: dict) -> ArtifactRef:
        return ArtifactRef(pipeline, entry["stage"], entry["key"],
                           str(self.artifact_dir(pipeline, entry["stage"], entry["key"])))


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
