"""Data contracts (pandera models), named by module: `cicero.Dialogues`, `distractors.Instances`,
`common.Rejected`. A dataset's contracts live in `data_contracts/<dataset>.py`; contracts of
shared stages in `common.py` and `distractors.py`. Names are qualified, so two datasets may
both have a `Dialogues` without one replacing the other."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=None)
def module_contracts(module: str) -> dict[str, type]:
    """The contracts defined in `data_contracts.<module>`, by qualified name (that module alone is
    imported: a run loads the contracts of its own pipeline only)."""
    from data_contracts.common import Contract

    found = importlib.import_module(f"{__name__}.{module}")
    return {f"{module}.{name}": obj for name, obj in vars(found).items()
            if isinstance(obj, type) and issubclass(obj, Contract) and obj is not Contract
            and obj.__module__ == found.__name__}


def contracts() -> dict[str, type]:
    """Every contract of every module of this package, by qualified name (listings and error messages)."""
    import data_contracts

    out: dict[str, type] = {}
    for m in pkgutil.iter_modules(data_contracts.__path__):
        out.update(module_contracts(m.name))
    return out


def get_contract(name: str):
    """A contract by qualified name ("cicero.Dialogues"); extra modules may register with `register`."""
    if name in _EXTRA:
        return _EXTRA[name]
    module, _, _ = name.rpartition(".")
    if module and importlib.util.find_spec(f"{__name__}.{module}") is not None:
        found = module_contracts(module).get(name)
        if found is not None:
            return found
    from csk.errors import CskError

    raise CskError(f"unknown contract {name!r}; known: {', '.join(sorted({**contracts(), **_EXTRA}))}") from None


_EXTRA: dict[str, type] = {}


def register(name: str, contract: type) -> None:
    """Add a contract defined outside this package (a pipeline slice kept elsewhere, a test)."""
    _EXTRA[name] = contract


def contract_name(contract: type) -> str:
    """The qualified name of a contract class (the inverse of `get_contract`), read from its module
    (no other contract module is imported)."""
    for name, obj in _EXTRA.items():
        if obj is contract:
            return name
    prefix = f"{__name__}."
    if contract.__module__.startswith(prefix):
        return f"{contract.__module__[len(prefix):]}.{contract.__qualname__}"
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
