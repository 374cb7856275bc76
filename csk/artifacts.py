"""The artifact on disk: a directory of Parquet files and a manifest that records every file's size and
sha256 and a sha256 of itself, so a changed byte anywhere is found (`check_artifact`).

`<store>/<pipeline>/<stage>/<key>/{data,rejected}.parquet + manifest.json (+ extra files)`; Parquet is
written deterministically (`to_parquet_bytes`): the same rows give the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from csk.compute import sha256_file
from csk.errors import IntegrityError

REJECTED_LEAD = ["id", "parent_id", "reason_code", "reason"]
MANIFEST = "manifest.json"


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
        return json.loads((Path(self.path) / MANIFEST).read_text())

    @property
    def data_sha256(self) -> str:
        """Content hash of the data (what downstream stages read): the early cut-off's key material."""
        return self.manifest().get("data_sha256") or sha256_file(self.data_path)

    def load(self, verify: bool = False) -> pd.DataFrame:
        """The data; with `verify`, its sha256 is checked on the very bytes parsed (a stage never
        computes from a damaged input)."""
        if not verify:
            return self._typed(read_parquet(self.data_path))
        raw = self.data_path.read_bytes()
        expected = self.manifest().get("data_sha256")
        found = hashlib.sha256(raw).hexdigest()
        if found != expected:
            raise IntegrityError([f"{self.data_path}: sha256 {found[:12]} differs from the manifest's "
                                  f"{str(expected)[:12]} (read as an input)"])
        return self._typed(pq.read_table(pa.BufferReader(raw)).to_pandas())

    def _typed(self, df: pd.DataFrame) -> pd.DataFrame:
        """An empty artifact with its contract's dtypes (Parquet cannot keep the dtype of a column
        without values): a stage reading it sees the columns and types a full one has."""
        if len(df):
            return df
        from data_contracts import conform_empty

        contract = self.manifest().get("contract")
        return conform_empty(df, contract, add_missing=False) if contract else df

    def load_rejected(self) -> pd.DataFrame:
        p = self.rejected_path
        return read_parquet(p) if p.exists() else pd.DataFrame({c: [] for c in REJECTED_LEAD})


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def read_parquet(path: str | Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


def manifest_bytes(manifest: dict) -> bytes:
    """The manifest as written: sorted, indented JSON carrying `manifest_sha256`, the sha256 of the
    same JSON without that field, so a changed byte anywhere in the manifest is found too."""
    body = json.loads(json_bytes({k: v for k, v in manifest.items() if k != "manifest_sha256"}))
    return json_bytes({**body, "manifest_sha256": hashlib.sha256(json_bytes(body)).hexdigest()})


def parse_manifest(raw: bytes) -> tuple[dict | None, str | None]:
    """(manifest, None), or (None, what is wrong with it)."""
    try:
        m = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(m, dict):
        return None, "not a JSON object"
    if "manifest_sha256" not in m:
        return None, "no manifest_sha256 (written by an older csk: cannot be verified; rerun to recompute)"
    if manifest_bytes(m) != raw:
        return None, "its content does not match its manifest_sha256 (edited or damaged)"
    return m, None


def file_stat(path: str | Path) -> dict[str, int]:
    """What changes when a file's bytes may have changed without its size changing: its modification
    and status-change times and its inode (a write sets both times; ctime cannot be set back, so a byte
    flipped and the mtime restored is still seen; a copy or a restore from a backup is a new inode)."""
    st = os.stat(path)
    return {"mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def check_artifact(path: str | Path, content: bool = True) -> list[str]:
    """What is wrong with an artifact directory, one line per damaged file naming it (empty: intact).
    Sizes are always compared with the manifest's record; sha256 too with `content`, and without it for
    every file whose modification time, status-change time or inode differs from the manifest's record
    (`file_stat`), or that has no such record: a file that may have changed is re-hashed, never
    reused on its size alone."""
    d = Path(path)
    try:
        raw = (d / MANIFEST).read_bytes()
    except OSError as exc:
        return [f"{d / MANIFEST}: cannot be read ({exc.strerror or exc})"]
    m, problem = parse_manifest(raw)
    if problem:
        return [f"{d / MANIFEST}: {problem}"]
    checksums = m.get("checksums") or {}
    problems = []
    for name, rec in sorted(checksums.items()):
        f = d / name
        try:
            size = f.stat().st_size
            unchanged = rec.get("stat") is not None and rec["stat"] == file_stat(f)
        except OSError:
            problems.append(f"{f}: missing")
            continue
        if size != rec["bytes"]:
            problems.append(f"{f}: {size} bytes, the manifest recorded {rec['bytes']}")
        elif content or not unchanged:
            found = sha256_file(f)
            if found != rec["sha256"]:
                problems.append(f"{f}: sha256 {found} differs from the manifest's {rec['sha256']}")
    if content:
        extra = sorted(str(f.relative_to(d)) for f in d.rglob("*")
                       if f.is_file() and f.name != MANIFEST and str(f.relative_to(d)) not in checksums)
        problems += [f"{d / name}: not a file of this artifact (not in its manifest)" for name in extra]
    return problems


def to_parquet_bytes(df: pd.DataFrame) -> bytes:
    """Deterministic Parquet: no index, fixed compression, no per-write timestamps. A column with no
    value at all is written as a string column, never Arrow's null type (DuckDB and Spark choke on it)."""
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    for i, f in enumerate(table.schema):
        if pa.types.is_null(f.type):
            table = table.set_column(i, pa.field(f.name, pa.string()), table.column(i).cast(pa.string()))
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", compression_level=3, write_statistics=True)
    return buf.getvalue()
