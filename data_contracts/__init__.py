"""Data contracts (pandera models), named by module: `cicero.Dialogues`, `distractors.Instances`,
`common.Rejected`. A dataset's contracts live in `data_contracts/<dataset>.py`; contracts of
shared stages in `common.py` and `distractors.py`. Names are qualified, so two datasets may
both have a `Dialogues` without one replacing the other."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=None)
def contracts() -> dict[str, type]:
    """Every contract of every module of this package, by qualified name."""
    import data_contracts
    from data_contracts.common import Contract

    out = {}
    for m in pkgutil.iter_modules(data_contracts.__path__):
        module = importlib.import_module(f"data_contracts.{m.name}")
        for name, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, Contract) and obj is not Contract
                    and obj.__module__ == module.__name__):
                out[f"{m.name}.{name}"] = obj
    return out


def get_contract(name: str):
    """A contract by qualified name ("cicero.Dialogues"); extra modules may register with `register`."""
    known = {**contracts(), **_EXTRA}
    try:
        return known[name]
    except KeyError:
        from csk.errors import CskError

        raise CskError(f"unknown contract {name!r}; known: {', '.join(sorted(known))}") from None


_EXTRA: dict[str, type] = {}


def register(name: str, contract: type) -> None:
    """Add a contract defined outside this package (a pipeline slice kept elsewhere, a test)."""
    _EXTRA[name] = contract


def contract_name(contract: type) -> str:
    """The qualified name of a contract class (the inverse of `get_contract`)."""
    for name, obj in {**contracts(), **_EXTRA}.items():
        if obj is contract:
            return name
    return f"{contract.__module__}.{contract.__qualname__}"


def conform_empty(df, contract, add_missing: bool = True):
    """`df` with no rows, its columns given `contract`'s dtypes (a class or qualified name); with
    `add_missing`, the contract's columns it lacks are added. An empty artifact then reads like a full
    one (same columns, same types) for every reader and stage. Parquet cannot keep the dtype of a
    column without values (an empty `object` column is read back as strings), so readers of an empty
    artifact conform it again. Columns the contract does not name are kept as they are."""
    import pandas as pd

    if isinstance(contract, str):
        contract = get_contract(contract)
    columns = {}
    for name, col in contract.to_schema().columns.items():
        if name not in df.columns and not add_missing:
            continue
        dtype = getattr(col.dtype, "type", None) if col.dtype is not None else None
        try:
            columns[name] = pd.Series([], dtype=dtype if dtype is not None else object)
        except TypeError:
            columns[name] = pd.Series([], dtype=object)
    for name in df.columns:
        if name not in columns:
            columns[name] = df[name].iloc[:0].reset_index(drop=True)
    order = [c for c in df.columns] + [c for c in columns if c not in df.columns]
    return pd.DataFrame(columns)[order]
