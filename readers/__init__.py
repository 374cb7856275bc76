"""Readers for the original release formats. Each returns plain rows with provenance.

Strict by default: a malformed record raises `InputError` naming the file and record.
With `lenient=True` the record is returned among `rejected` with its reason instead.
"""

from readers.base import ReadResult
from readers.cicero import read_cicero_dialogues, read_cicero_release
from readers.conceptnet import read_conceptnet_assertions
from readers.corecode import read_corecode, read_corecode_annotations, read_corecode_dialogues
from readers.dailydialog import read_dailydialog
from readers.deco import read_conture, read_deco
from readers.dream import read_dream
from readers.dulemon import read_dulemon
from readers.mutual import read_mutual
from readers.naturalconv import read_naturalconv
from readers.personachat import read_personachat
from readers.topicalchat import read_topicalchat
from readers.paco import read_paco_gen, read_paco_nli

__all__ = ["ReadResult", "read_cicero_dialogues", "read_cicero_release", "read_conceptnet_assertions", "read_corecode", "read_corecode_annotations", "read_corecode_dialogues", "read_dailydialog",
           "read_conture", "read_deco", "read_dream", "read_dulemon", "read_mutual", "read_naturalconv", "read_paco_gen", "read_paco_nli", "read_personachat",
           "read_topicalchat"]
