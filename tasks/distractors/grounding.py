"""What makes a reader place an answer in another conversation: the things (noun lemmas) it names that its
dialogue and correct answers do not. Used by the retrieval generator (to leave such answers out) and by
the grounding figure of `distractor_quality`; AF's placement tiers (placement.py) need no parser."""

from __future__ import annotations

from tasks.vocabulary import GENERIC_NOUNS


def foreign_nouns(candidate: str, here: list[str]) -> frozenset[str]:
    """The things (spaCy noun lemmas) a candidate names that none of the texts `here` (its dialogue and
    correct answers) names, generic nouns aside: what makes a reader place it in another conversation."""
    from tasks.english import nouns

    return nouns([candidate]) - nouns(here) - GENERIC_NOUNS
