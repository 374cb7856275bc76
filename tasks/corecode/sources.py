"""docs/method.md 3.1: CORECODE's source dialogues, NaturalConv and DuLeMon, in their release layouts (and the
dialogues of CORECODE's released task files, to screen exactly those)."""

from __future__ import annotations

from csk.params import InputFile, InputPath
from csk.runtime import StageOutput
from readers.corecode import read_corecode_dialogues
from readers.dulemon import read_dulemon
from readers.naturalconv import read_naturalconv
from tasks.sources import MAX_REJECTED_SHARE, Share, read_sources

READERS = {"naturalconv": read_naturalconv, "dulemon": read_dulemon, "corecode": read_corecode_dialogues}


def sources(*, naturalconv: InputFile = None, dulemon: InputPath = None, corecode: InputPath = None,
            lenient: bool = True, dyadic_only: bool = True,
            max_rejected_share: Share = MAX_REJECTED_SHARE) -> StageOutput:
    """One table of Chinese dialogues, speakers written A / B.

    Args:
        naturalconv: NaturalConv dialog_release.json (a JSON list of dialog_id, document_id, content)
        dulemon: a DuLeMon JSON Lines file, or a directory of them (self/ and both/ of the release)
        corecode: a CORECODE task file (JSON Lines) whose distinct dialogues are taken as released
        lenient: reject a malformed record with its reason and go on; false: stop at the first one, naming file
            and record
        dyadic_only: reject dialogues without exactly two speakers (CORECODE annotates dyadic dialogues)
        max_rejected_share: a source file more of whose records than this cannot be read (or that gives
            no row) stops the run, named: lenient reading is for irregular records, not for a wrong file
    """
    return read_sources(READERS, {"naturalconv": naturalconv, "dulemon": dulemon, "corecode": corecode},
                        lenient, dyadic_only, max_rejected_share, "corecode.sources")
