"""Contracts of the CICERO pipeline's artifacts."""

from __future__ import annotations

import pandera.pandas as pa
from pandera.typing import Series

from data_contracts.common import Contract, Provenance

SOURCES = ["dailydialog", "mutual", "dream", "cicero"]


def _turns_ok(turns) -> bool:
    return turns is not None and len(turns) > 0 and all(
        isinstance(t, dict) and t.get("speaker") and isinstance(t.get("text"), str) and t["text"].strip()
        for t in turns)


class Dialogues(Provenance):
    """One row per source dialogue: `turns` is a list of {speaker, text, raw_speaker}."""

    id: Series[str] = pa.Field(unique=True, str_matches=r"^(dailydialog|mutual|dream|cicero)-\S+$")
    source: Series[str] = pa.Field(isin=SOURCES)
    turns: Series[object]

    @pa.check("turns", name="turns_are_nonempty_speaker_text_lists")
    def turns_well_formed(cls, turns):
        return turns.map(_turns_ok)


class FilteredDialogues(Dialogues):
    """Dialogues that passed the length filter, with the counts the rule used."""

    n_utterances: Series[int] = pa.Field(ge=1)
    n_words: Series[int] = pa.Field(ge=1)
    avg_words: Series[float] = pa.Field(gt=0)
