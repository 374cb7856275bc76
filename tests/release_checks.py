"""What every pipeline's flow test checks of `csk card` and `csk export` on its store."""

from __future__ import annotations

import hashlib
import re
import sys
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from csk.cli import app


def check_release(pipeline: str, store: Path, out: Path) -> dict:
    """The card names every stage of the run and its splits; the export holds Parquet splits that
    `datasets` and DuckDB read with the same counts, the card, and checksums that hold."""
    import datasets
    import duckdb

    runner = CliRunner()
    card = runner.invoke(app, ["card", pipeline, "--store", str(store)])
    assert card.exit_code == 0, card.output
    assert card.output.startswith("---\n") and "## Construction steps" in card.output and "## Splits" in card.output
    result = runner.invoke(app, ["export", pipeline, "--to", str(out), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["export", pipeline, "--to", str(out), "--store", str(store)]).exit_code != 0  # not empty
    ds = datasets.load_dataset("parquet", data_dir=str(out))
    by_duckdb = dict(duckdb.sql(f"select split, count(*) from read_parquet('{out}/data/*.parquet') group by split")
                     .fetchall())
    assert {k: v.num_rows for k, v in ds.items()} == by_duckdb and sum(by_duckdb.values()) > 0
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    assert (out / "README.md").read_text(encoding="utf-8").strip() == card.output.strip()  # the same card
    _no_local_paths(card.output, out, store)
    assert not re.search(r"^### `\w+`: *$", card.output, re.M), "a construction step without a description"
    for line in (out / "SHA256SUMS").read_text().splitlines():  # release/<stage>/<stage>/...: a doubled folder
        parts = line.split("  ", 1)[1].split("/")
        assert not (parts[0] == "release" and len(parts) > 3 and parts[1] == parts[2]), line
    return by_duckdb


def _no_local_paths(card: str, out: Path, store: Path) -> None:
    """Neither the card nor any exported column names a folder of this machine: the checkout, the
    store, the Python environment, a home or temporary directory."""
    import pandas as pd

    local = {str(Path(__file__).resolve().parent.parent), str(Path(store).resolve()), sys.prefix,
             str(Path.home()), tempfile.gettempdir()}
    for folder in local:
        assert folder not in card, f"the card names the local folder {folder}"
    for part in sorted((out / "data").glob("*.parquet")):
        df = pd.read_parquet(part)
        for col in df.columns:
            text = df[col].astype(str)
            for folder in local:
                assert not text.str.contains(folder, regex=False).any(), f"{part.name}: column {col} names {folder}"
        if "source_file" in df.columns:
            assert not df["source_file"].astype(str).str.startswith("/").any(), part.name
            assert df["source_sha256"].dropna().str.fullmatch(r"[0-9a-f]{64}").all(), part.name
