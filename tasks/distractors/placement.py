"""How far from its item's dialogue a candidate was written: the order AF starts an item and swaps in by.

A careful reader dismisses an answer about another conversation at a glance, and reads a rewrite of a
correct answer, or an answer its own dialogue's annotators wrote to the same type of question, as in place.
Tiers, nearest first:
* `generated`: what a generator wrote for this item (t5, file, server): the paper's pipeline (T5
  counterfactuals of the item -> the filters -> AF over them); a user who brings a generator expects its
  candidates kept, and the offline tiers only to fill the slots it leaves short;
* `rewrite`: a correct answer of the item rewritten by the offline rules (lexical, grounded);
* `dialogue`: an answer written for the same dialogue about another target, to a question of the same type;
* `retrieved`: an answer written for another dialogue that names only things this one names;
* `foreign`: one that names a thing this dialogue and its correct answers do not (offered only when
  `counterfactuals.retrieval_foreign` allows it).

The order AF prefers (`PREFERENCE`, declared once): a generator's candidates for the item before every
offline tier (AF never trades one for an offline candidate: `GENERATED`); then the contrary predicates of a
correct answer, a negation after them; then this dialogue's answers to other targets rewritten into a
contrary statement; then a role flip (the act given to the other person); then one word of a correct answer
for its antonym (read broken English more often than a flip: 14 of 50 antonym readings against 2 of 78 flip
readings, draws W, X and Y in bench/results/readings_history.md); then this dialogue's answers as written
(events chain from turn to turn: readers judge more of them correct for the item than of the contrary
rewrites), then a word swapped for the dialogue's;
then answers of other dialogues, those naming a thing of this dialogue first.
"""

from __future__ import annotations

TIERS = ("generated", "rewrite", "dialogue", "retrieved", "foreign")
IN_PLACE = frozenset({"generated", "rewrite", "dialogue"})
REWRITES = frozenset({"lexical", "grounded"})  # rewrites of the item's own correct answers
GENERATED = frozenset({"t5", "file", "server"})  # generators that write candidates for the item itself
NEGATIONS = frozenset({"negation", "predicate_negation"})  # the rewrite rules that add or remove a negation
SLOTS = 4  # distractors of an item that states no number of its own (CICERO's: five choices, one correct)

# (name, tier, mark): the order AF starts an item and swaps in by, first preferred. A mark sets a candidate behind the
# rest of its tier. Among rewrites of a correct answer: the contrary predicates first (a verb that denies the event,
# an emotion of the other polarity: 88-100% read good by blind readers), then a negation of the predicate's verb, then
# the lexical rules' rewrites (`word`: an antonym 67-74% good, a fifth of them read as broken English in draws N and
# O; a negation at the first auxiliary 78-87%), then a role flip (the act given to the other person: a near-copy of
# the answer, which an ending alone tells), and a word swapped for the dialogue's own (an event, a thing, a place:
# `grounded.SWAPS`) after this dialogue's answers. This dialogue's answers to other targets rewritten into a contrary
# statement (`contrary`: the dialogue rules them out, and they say something other than the correct answer, as the
# released distractors do) before those answers as written (blind readers of draws L to O judged 16-23% of them
# correct for the item: events chain from turn to turn). A generator's candidate that echoes a correct answer (another
# item's of this dialogue, or one of its own with only a negation changed: `counterfactuals.echo`) behind its others,
# an unanchored answer (naming no thing of this dialogue) among retrieved ones; a reserve answer (naming a thing this
# dialogue lacks, not allowed) only to fill an item that cannot be filled otherwise, never swapped in.
PREFERENCE = (("generated", "generated", ""), ("echo", "generated", "echo"), ("rewrite", "rewrite", ""),
              ("negation", "rewrite", "negation"), ("contrary", "dialogue", "contrary"), ("flip", "rewrite", "flip"),
              ("word", "rewrite", "word"), ("dialogue", "dialogue", ""), ("swap", "rewrite", "swap"),
              ("retrieved", "retrieved", ""), ("unanchored", "retrieved", "unanchored"),
              ("foreign", "foreign", ""), ("reserve", "foreign", "reserve"))


def tier(generator: str | None, rule: str | None) -> str:
    """The tier of a candidate (see TIERS) from its generator and rule."""
    if generator in GENERATED:
        return "generated"
    if generator == "retrieval":
        return "foreign" if ":foreign:" in str(rule or "") else "retrieved"
    return "dialogue" if generator == "dialogue" else "rewrite"


def placement(generator: str | None, rule: str | None) -> int:
    """The tier's rank (0 nearest; see TIERS)."""
    return TIERS.index(tier(generator, rule))


def negation(generator: str | None, rule: str | None) -> bool:
    """Is the candidate a rewrite whose rules (a chain `kind:words+kind:words`) add or remove a negation?"""
    return generator in REWRITES and any(p.split(":")[0] in NEGATIONS for p in str(rule or "").split("+"))


def mark(generator: str | None, rule: str | None) -> str:
    """"word" for a rewrite of a correct answer by the lexical rules (a word for its antonym, a negation at the
    first auxiliary), "negation" for a grounded rewrite that adds or removes a negation, "swap" for a grounded
    word swap, "flip" for a role flip ("The listener failed the test"), "contrary" for this
    dialogue's answer rewritten into a contrary statement, "unanchored" for a retrieved answer naming no thing
    of this dialogue, "reserve" for one naming a thing it lacks kept only to fill an item that cannot be
    filled otherwise; else ""."""
    if generator == "lexical":  # its negation too: at the first auxiliary, wherever the clause ("... thus they
        return "word"           # have not yet to leave"), where the grounded one negates the predicate's own verb
    if negation(generator, rule):
        return "negation"
    if generator == "grounded" and str(rule or "").startswith("swap_"):
        return "swap"
    if generator == "grounded" and str(rule or "").startswith("role_flip:"):
        return "flip"  # the act given to the other person: one word from the answer, and as often as not true
    if generator == "dialogue":
        return "contrary" if contrary(rule) else ""
    if generator != "retrieval":
        return ""
    return next((m for m in ("unanchored", "reserve") if f":{m}:" in str(rule or "")), "")


def contrary(rule: str | None) -> bool:
    """Is a dialogue candidate's rule a contrary rewrite of the answer it names (`rule:words+dialogue:id`) or of
    what the answer's subject says in an utterance (`rule:words+utterance:n`)?"""
    return "+dialogue:" in str(rule or "") or "+utterance:" in str(rule or "")


def kind(generator: str | None, rule: str | None) -> str:
    """The kind of change a rewrite makes (its first rule: "antonym", "contrary_verb", "role_flip", ...; a
    negation's two rules one kind), of a correct answer or of this dialogue's answer to another target; ""
    for a candidate that is no rewrite. An item holds one rewrite of each kind: two rewrites of one kind of
    a correct answer are one distractor said twice, and an ending alone would tell two negations. The other
    contrary rules of this dialogue's answers are kinds of their own ("dialogue:contrary_verb"): "refuses to
    show the photos", said of another event, is no copy of "forgets to pay the bill"."""
    if generator not in REWRITES and not (generator == "dialogue" and contrary(rule)):
        return ""
    first = str(rule or "").split("+")[0].split(":")[0]
    if first in NEGATIONS:
        return "negation"
    return f"dialogue:{first}" if generator == "dialogue" else first


def preference(generator: str | None, rule: str | None) -> int:
    """The rank AF starts an item and swaps in by (lower first; see PREFERENCE)."""
    key = (tier(generator, rule), mark(generator, rule))
    return next(k for k, (_, t, m) in enumerate(PREFERENCE) if (t, m) == key)


def named(name: str) -> int:
    """The preference rank of a PREFERENCE entry by its name."""
    return next(k for k, (n, _, _) in enumerate(PREFERENCE) if n == name)


# the ranks of the tier AF never trades for another: what a generator wrote for the item
GENERATED_RANKS = frozenset(k for k, (_, t, _) in enumerate(PREFERENCE) if t == "generated")


# the last rank of what was written for the item or its dialogue: answers of other dialogues come after it
LAST_WRITTEN = named("swap")
