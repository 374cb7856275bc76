"""What every pipeline's flow test checks of `csk card` and `csk export` on its store."""

from __future__ import annotations

import hashlib
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
    return by_duckdb
