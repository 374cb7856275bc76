"""Readers for the original release formats. Each returns plain rows with provenance.

Strict by default: a malformed record raises `InputError` naming the file and record.
With `lenient=True` the record is returned among `rejected` with its reason instead.
"""

from readers.base import ReadResult
from readers.cicero import read_cicero_release
from readers.dailydialog import read_dailydialog
from readers.dream import read_dream
from readers.mutual import read_mutual

__all__ = ["ReadResult", "read_cicero_release", "read_dailydialog", "read_dream", "read_mutual"]
