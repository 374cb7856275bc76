"""The words the engine's rules share, declared once: who a dialogue's answers speak of, and the nouns too
general to be a thing of one dialogue. A rule that needs "the people" reads them here, so two rules never
disagree on who counts (the distractor engine's fluency, lexical, grounded and grounding rules, and
CoreQuisite's answer quality).

Nouns are lemmas; a rule that matches surface words asks `forms` for every form (lemminflect's plurals,
never a hand-written list)."""

from __future__ import annotations

from functools import lru_cache

# CICERO's answers name the two people of a dialogue so ("The speaker thanks the listener").
CONVERSATION_ROLES = ("speaker", "listener")
# One person each: the people an answer may speak of.
PERSON_NOUNS = frozenset({*CONVERSATION_ROLES, "person", "man", "woman", "boy", "girl", "friend", "father", "mother",
                          "dad", "mom", "mum", "son", "daughter", "husband", "wife", "brother", "sister", "parent",
                          "child", "kid", "baby", "boss", "customer", "clerk", "doctor", "patient", "teacher",
                          "student", "colleague", "guest", "waiter", "manager", "lover", "boyfriend", "girlfriend",
                          "adult", "human", "worker", "player"})
# Nouns that stand for people, one or many, or for anyone.
PEOPLE = PERSON_NOUNS | {"people", "family", "everyone", "someone", "anyone", "nobody", "somebody"}
# Nouns any dialogue's answer may use without naming a thing of another conversation: the two roles, a
# person or people in general, and the most general things.
GENERIC_NOUNS = frozenset({*CONVERSATION_ROLES, "person", "people", "man", "woman", "friend", "thing", "something",
                           "time", "way", "day", "lot", "kind", "bit", "one", "other", "others"})
# Too general to be a thing of one dialogue ("the thing", "a lot", "the day").
GENERAL_NOUNS = frozenset({"thing", "something", "anything", "nothing", "everything", "time", "way", "lot", "kind",
                           "bit", "one", "sort", "day", "today", "tomorrow", "yesterday", "moment", "minute", "while",
                           "idea", "problem", "question", "answer", "matter", "fact", "reason", "point", "case"})


@lru_cache(maxsize=None)
def forms(nouns: frozenset[str]) -> frozenset[str]:
    """Every surface form of these nouns (the lemma and lemminflect's plurals)."""
    from lemminflect import getInflection

    return frozenset(nouns | {f for n in nouns for f in getInflection(n, "NNS")})
