"""The stage registry: each construction step bound to its function, contract and lineage link."""

from __future__ import annotations

from csk.runtime import Stage
from data_contracts import cicero as cc
from tasks.cicero.length_filter import length_filter
from tasks.cicero.sources import sources, sources_fingerprint

CICERO = {
    s.name: s
    for s in (
        Stage("sources", sources, cc.Dialogues, parent_column=None, fingerprint=sources_fingerprint),
        Stage("length_filter", length_filter, cc.FilteredDialogues),
    )
}

PIPELINE_STAGES = {"cicero": CICERO}
