"""Data contracts (pandera models) for every artifact kind. `CONTRACTS` maps names to models."""

from data_contracts import cicero, common

CONTRACTS = {
    name: obj
    for module in (common, cicero)
    for name, obj in vars(module).items()
    if isinstance(obj, type) and issubclass(obj, common.Contract) and obj is not common.Contract
}


def get_contract(name: str):
    try:
        return CONTRACTS[name]
    except KeyError:
        from csk.errors import CskError

        raise CskError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}") from None
