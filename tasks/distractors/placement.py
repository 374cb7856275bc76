"""How far from its item's dialogue a candidate was written: the order AF starts an item and swaps in by.

A careful reader dismisses an answer about another conversation at a glance, and reads a rewrite of a
correct answer, or an answer its own dialogue's annotators wrote, as in place. Tiers, nearest first:
* 0 `rewrite`: a correct answer of the item rewritten (lexical, grounded) or a generator's output for
  this item (t5, file);
* 1 `dialogue`: an answer written for the same dialogue (about another target; then the same target asked
  about the other side of time, which a reader more often finds still true: `preference`);
* 2 `retrieved`: an answer written for another dialogue that names only things this one names;
* 3 `foreign`: one that names a thing this dialogue and its correct answers do not (offered only when
  `counterfactuals.retrieval_foreign` allows it).
"""

from __future__ import annotations

TIERS = ("rewrite", "dialogue", "retrieved", "foreign")
IN_PLACE = frozenset({"rewrite", "dialogue"})
REWRITES = frozenset({"lexical", "grounded"})  # rewrites of the item's own correct answers


def placement(generator: str | None, rule: str | None) -> int:
    """The tier of a candidate (0 nearest; see TIERS) from its generator and rule."""
    if generator == "retrieval":
        return 3 if ":foreign:" in str(rule or "") else 2
    if generator == "dialogue":
        return 1
    return 0


def tier(generator: str | None, rule: str | None) -> str:
    return TIERS[placement(generator, rule)]



def preference(generator: str | None, rule: str | None) -> int:
    """The order AF starts an item and swaps in by (lower first): the tier, and within `dialogue` the answers
    about other targets before those of the same target asked about the other side of time (a motivation
    offered as what follows often still holds: draw C's readers judged 7 of 44 of them correct)."""
    return 2 * placement(generator, rule) + (":opposite_time:" in str(rule or ""))


def in_place(preference_value: int) -> bool:
    """Is a candidate of this `preference` written in place (a rewrite or this dialogue's answer)?"""
    return TIERS[preference_value // 2] in IN_PLACE
