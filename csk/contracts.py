"""Data contracts at the artifact boundary: a stage's output checked against its pandera model, with an
error that names the artifact, the columns and the first failing rows; column names a query engine can use."""

from __future__ import annotations

from typing import Any

import pandas as pd

from csk.errors import ContractError


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
            if missing and str(column) in (contract_name, contract_name.rsplit(".", 1)[-1]):
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


def validate_contract(what: str, contract: Any, df: pd.DataFrame, name: str | None = None) -> pd.DataFrame:
    """Check `df` against a contract (a pandera model, or its qualified name such as "cicero.Dialogues")."""
    import pandera.errors as pe

    if isinstance(contract, str):
        from data_contracts import get_contract

        name, contract = contract, get_contract(contract)
    if not len(df):  # no values to type a column by (Parquet reads an empty object column as strings)
        from data_contracts import conform_empty

        df = conform_empty(df, contract, add_missing=False)
    try:
        return contract.validate(df, lazy=True)
    except (pe.SchemaErrors, pe.SchemaError) as exc:
        raise ContractError(format_contract_error(what, name or contract.__name__, exc, df)) from None


def check_columns(what: str, df: pd.DataFrame) -> None:
    """Column names a query engine can use: no two differing only in case (DuckDB folds case)."""
    seen: dict[str, str] = {}
    for c in map(str, df.columns):
        if c.lower() in seen:
            raise ContractError(f"{what}: columns {seen[c.lower()]!r} and {c!r} differ only in case; "
                                "release-format names belong in the release-format files")
        seen[c.lower()] = c
