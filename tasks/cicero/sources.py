"""CICERO's source dialogues: DailyDialog, MuTual and DREAM in their release formats."""

from __future__ import annotations

from csk.params import InputFile, InputPath
from csk.runtime import StageOutput
from readers.cicero import read_cicero_dialogues
from readers.dailydialog import read_dailydialog
from readers.dream import read_dream
from readers.mutual import read_mutual
from tasks.sources import MAX_REJECTED_SHARE, Share, read_sources

READERS = {"dailydialog": read_dailydialog, "mutual": read_mutual, "dream": read_dream, "cicero": read_cicero_dialogues}


def sources(*, dailydialog: InputFile = None, mutual: InputPath = None, dream: InputFile = None,
            cicero: InputPath = None, lenient: bool = True, dyadic_only: bool = True,
            max_rejected_share: Share = MAX_REJECTED_SHARE) -> StageOutput:
    """One dialogues table from the three corpora, as CICERO built its dialogues: DailyDialog
    speakers alternate from A; MuTual turns split into sentences, m -> A, f -> B; DREAM speakers
    lettered in order of appearance.

    Args:
        dailydialog: DailyDialog dialogues_text.txt (one dialogue per line, utterances ending in __eou__)
        mutual: directory of MuTual dialogues (one JSON object per file)
        dream: DREAM JSON file (a list of [turns, questions, id])
        cicero: a CICERO release file whose dialogues are taken as they were released (to rebuild targets
            on exactly those dialogues and compare with the release)
        lenient: reject a malformed record with its reason and go on (real corpora have some); false:
            stop at the first one, naming file and record
        dyadic_only: reject dialogues without exactly two speakers (CICERO's sources are dyadic)
        max_rejected_share: a source file more of whose records than this cannot be read (or that gives
            no row) stops the run, named: lenient reading is for irregular records, not for a wrong file
    """
    return read_sources(READERS, {"dailydialog": dailydialog, "mutual": mutual, "dream": dream, "cicero": cicero},
                        lenient, dyadic_only, max_rejected_share, "cicero.sources")
