"""Readers for the original release formats. Each returns plain rows with provenance.

Strict by default: a malformed record raises `InputError` naming the file and record.
With `lenient=True` the record is returned among `rejected` with its reason instead.
"""

from importlib import import_module

# Each reader by the module holding it. Loaded on first use (PEP 562), never all at once: a stage's
# key hashes every module it can import, and `import readers.x` runs this file, so importing every
# reader here made each stage's key hash every dataset's reader (an edit to DECO's reader recomputed
# CICERO). Project code imports the reader's own module (`from readers.cicero import ...`, checked by
# tests/kernel/test_layering.py); `from readers import read_x` is for tests, benchmarks and notebooks.
_WHERE = {
    "ReadResult": "readers.base",
    "read_cicero_dialogues": "readers.cicero", "read_cicero_release": "readers.cicero",
    "read_conceptnet_assertions": "readers.conceptnet",
    "read_corecode": "readers.corecode", "read_corecode_annotations": "readers.corecode",
    "read_corecode_dialogues": "readers.corecode",
    "read_dailydialog": "readers.dailydialog",
    "read_conture": "readers.deco", "read_deco": "readers.deco",
    "read_dream": "readers.dream",
    "read_dulemon": "readers.dulemon",
    "read_mutual": "readers.mutual",
    "read_naturalconv": "readers.naturalconv",
    "read_personachat": "readers.personachat",
    "read_topicalchat": "readers.topicalchat",
    "read_paco_gen": "readers.paco", "read_paco_nli": "readers.paco",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'readers' has no attribute {name!r}")
