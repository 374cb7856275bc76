"""CICERO's source dialogues: DailyDialog, MuTual and DREAM in their release formats."""

from __future__ import annotations

from csk.params import InputPath
from csk.runtime import StageOutput
from readers import read_dailydialog, read_dream, read_mutual
from tasks.sources import read_sources

READERS = {"dailydialog": read_dailydialog, "mutual": read_mutual, "dream": read_dream}


def sources(*, dailydialog: InputPath = None, mutual: InputPath = None, dream: InputPath = None,
            lenient: bool = False) -> StageOutput:
    """One dialogues table from the three corpora; speakers relabelled A, B in order of appearance.

    Args:
        dailydialog: DailyDialog dialogues_text.txt (one dialogue per line, utterances ending in __eou__)
        mutual: directory of MuTual dialogues (one JSON object per file)
        dream: DREAM JSON file (a list of [turns, questions, id])
        lenient: reject malformed records with a reason instead of stopping at the first one
    """
    return read_sources(READERS, {"dailydialog": dailydialog, "mutual": mutual, "dream": dream}, lenient)
