"""Rewrites of a correct answer grounded in its own dialogue: in place by construction.

A careful reader dismisses at a glance an answer about another conversation (a blind reading of the
rebuilt CICERO v2 choices found a third to a half of them out of place, nearly all answers retrieved from
other dialogues). A rewrite that changes one thing of a correct answer for another thing of the same
dialogue names only what the dialogue names, and says something the dialogue does not:

* `swap_event`: the answer's main verb for another verb of the dialogue, inflected to the same form
  (lemminflect), transitive for transitive ("Anna accepts the ring" -> "Anna wears the ring");
* `swap_object`: the thing done to (a direct object) for another thing the dialogue has done to;
* `swap_place`: the object of a place preposition (in, at, to, from, ...) for another such object of
  the dialogue ("at the office" -> "at the airport");
* `swap_time`: a date or time of the answer (spaCy NER) for another date or time of the dialogue;
* `swap_attribute`: an adjective describing something for another adjective of the dialogue;
* `role_flip`: who did what to whom, where the answer names both people ("the speaker asks the
  listener" -> "the listener asks the speaker"). A single person
  swapped for another ("Jenny stockpiles food" -> "Dad stockpiles food") is as true as not, and is
  never made.

Replacements are the dialogue's words nearest the target first, never a word any correct answer uses
(a rewrite must change the answer), never a person for a thing. Each rewrite keeps its rule and the words
it changed (`rule:old->new`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from tasks.distractors.window import TAG, locate, nearest_first
from tasks.vocabulary import CONVERSATION_ROLES, PEOPLE
from tasks.vocabulary import GENERAL_NOUNS as GENERAL

@dataclass(frozen=True)
class GroundedRule:
    """One grounded rewrite rule: its name (the `rule` a candidate row carries, before the words it
    changed) and what it changes; the rules share one pass over the parse (`_all_rewrites`)."""

    name: str
    changes: str


GROUNDED_RULES = (
    GroundedRule("swap_event", "the main verb for another verb of the dialogue, transitive for transitive"),
    GroundedRule("swap_object", "a direct object for another thing of the dialogue"),
    GroundedRule("swap_place", "a place after a preposition of place for another place of the dialogue"),
    GroundedRule("swap_time", "a date or a time for another of the dialogue's of the same shape"),
    GroundedRule("swap_attribute", "an adjective for another adjective of the dialogue"),
    GroundedRule("role_flip", "who did what to whom: the speaker and the listener exchanged"),
)
RULES = tuple(r.name for r in GROUNDED_RULES)
# The rule whose rewrites read as sentences to two blind readers: who did what to whom. A place or a time
# swapped for the dialogue's ("the speaker's universities", "puts up posters the year": 4 of 8 marked
# broken on the real sample) and a verb, an object or an adjective swapped word for word ("thanked the
# photos", "a many photographer") are asked for by name only.
FLUENT = ("role_flip",)
PLACE_PREPOSITIONS = frozenset({"in", "at", "to", "from", "into", "near", "inside", "outside", "across", "around"})
# Verbs too general to carry an event (swapping "get" for "have" says nothing new) and the auxiliaries.
LIGHT_VERBS = frozenset({"be", "have", "do", "get", "make", "let", "go", "come", "say", "tell", "think", "know",
                         "want", "see", "will", "would", "can", "could", "shall", "should", "may", "might", "must",
                         "need", "try", "seem", "like", "mean", "guess", "suppose", "wonder", "hope", "ask", "talk"})
# Nouns that stand for people (PEOPLE) or are too general to be a thing of the dialogue (GENERAL): tasks/vocabulary.py.
ROLE_PAIRS = (CONVERSATION_ROLES,)
ADJECTIVE_DEPS = frozenset({"amod", "acomp"})


def parse(texts: Iterable[str]) -> None:
    """Parse texts in batches ahead of use (each once per process)."""
    from tasks.english import english

    missing = [t for t in dict.fromkeys(texts) if t not in _PARSED]
    for t, doc in zip(missing, english().pipe(missing, batch_size=256)):
        _PARSED[t] = doc


_PARSED: dict = {}


def doc(text: str):
    """The spaCy parse of a text (parsed once per process)."""
    if text not in _PARSED:
        parse([text])
    return _PARSED[text]


def _inflect(lemma: str, tag: str) -> str | None:
    from lemminflect import getInflection

    forms = getInflection(lemma, tag=tag)
    return forms[0] if forms else None


def _case(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _place_object(tok) -> bool:
    return tok.dep_ == "pobj" and tok.head.lower_ in PLACE_PREPOSITIONS


def _is_thing(tok) -> bool:
    return tok.pos_ == "NOUN" and tok.lemma_.lower() not in PEOPLE and tok.lemma_.lower() not in GENERAL \
        and tok.ent_type_ not in ("PERSON", "NORP", "DATE", "TIME") and tok.is_alpha and len(tok.text) > 2


def dialogue_words(passage, target) -> dict[str, list]:
    """The dialogue's swappable words by slot, nearest the target first: verbs (with whether they take a
    direct object), direct objects, place objects, dates and times, adjectives. Each as (lemma, text)."""
    turns = [TAG.sub("", str(u)) for u in passage]
    at = locate(target, passage)
    order = nearest_first(at, len(turns)) if at is not None else list(range(len(turns)))
    out: dict[str, list] = {"verb": [], "object": [], "place": [], "time": [], "attribute": []}
    seen: dict[str, set] = {k: set() for k in out}

    def add(slot, key, value):
        if key not in seen[slot]:
            seen[slot].add(key)
            out[slot].append(value)

    for k in order:
        d = doc(turns[k])
        for ent in d.ents:
            # a date or time phrase of its own ("next monday", "a week"), never one glued to other words
            if ent.label_ in ("DATE", "TIME") and len(ent) <= 3 and ent[0].pos_ in ("DET", "NUM", "ADJ", "NOUN", "PROPN"):
                add("time", ent.text.lower(), (ent.text, _time_shape(ent)))
        for tok in d:
            lemma = tok.lemma_.lower()
            if tok.pos_ == "VERB" and lemma not in LIGHT_VERBS and tok.is_alpha:
                add("verb", lemma, (lemma, any(c.dep_ == "dobj" for c in tok.children)))
            elif _is_thing(tok) and tok.dep_ == "dobj":
                add("object", lemma, (lemma, tok.tag_))
            elif _is_thing(tok) and _place_object(tok):
                add("place", lemma, (lemma, tok.tag_))
            elif tok.pos_ == "ADJ" and tok.dep_ in ADJECTIVE_DEPS and tok.is_alpha and len(tok.text) > 2:
                add("attribute", lemma, lemma)
    return out


def _time_shape(ent) -> tuple[str, bool]:
    """What a time phrase can stand in for: its first word's class and whether it counts back ("ago"):
    "next friday" for "the following week", never "three years ago" after "in"."""
    first = ent[0]
    kind = "det" if first.pos_ == "DET" or first.lower_ in ("next", "last", "this", "every", "following") else \
        "num" if first.pos_ == "NUM" else "bare"
    return kind, ent[-1].lower_ == "ago"


def _replace(text: str, tok, new: str) -> str:
    return text[:tok.idx] + _case(new, tok.text) + text[tok.idx + len(tok.text):]


def _noun_form(lemma: str, tag: str) -> str:
    if tag == "NNS":
        return _inflect(lemma, "NNS") or lemma
    return lemma


def rewrites(answer: str, words: dict[str, list], taken: set[str], per_rule: int = 2,
             rules: Iterable[str] = FLUENT) -> list[tuple[str, str]]:
    """The grounded rewrites of one answer: (rule:old->new, text), at most `per_rule` per rule and slot,
    using dialogue words not in `taken` (the lemmas of every correct answer), by the `rules` named."""
    rules = set(rules)
    unknown = rules - set(RULES)
    if unknown:
        raise ValueError(f"unknown grounded rule(s) {sorted(unknown)}; the rules are {', '.join(RULES)}")
    return [(r, t) for r, t in _all_rewrites(answer, words, taken, per_rule) if r.split(":")[0] in rules]


def _all_rewrites(answer: str, words: dict[str, list], taken: set[str], per_rule: int) -> list[tuple[str, str]]:
    from tasks.distractors.lexical import _replace_span

    d = doc(answer)
    out: list[tuple[str, str]] = []
    for tok in d:
        lemma = tok.lemma_.lower()
        options: list[tuple[str, str]] = []
        if tok.pos_ == "VERB" and tok.dep_ in ("ROOT", "conj", "xcomp") and lemma not in LIGHT_VERBS and tok.is_alpha:
            transitive = any(c.dep_ == "dobj" for c in tok.children)
            for new, takes_object in words["verb"]:
                if new in taken or takes_object != transitive:
                    continue
                form = _inflect(new, tok.tag_) if tok.tag_ in ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ") else None
                if form:
                    options.append(("swap_event", form))
        elif _is_thing(tok) and tok.dep_ == "dobj":
            options = [("swap_object", _noun_form(new, tok.tag_)) for new, _ in words["object"] if new not in taken]
        elif _is_thing(tok) and _place_object(tok):
            options = [("swap_place", _noun_form(new, tok.tag_)) for new, _ in words["place"] if new not in taken]
        elif tok.pos_ == "ADJ" and tok.dep_ in ADJECTIVE_DEPS and tok.is_alpha:
            options = [("swap_attribute", new) for new in words["attribute"] if new not in taken]
        for rule, new in options[:per_rule]:
            out.append((f"{rule}:{tok.text}->{new}", _replace_span(answer, tok.idx, tok.idx + len(tok.text),
                                                                   _case(new, tok.text))))
    for ent in d.ents:  # a date or a time: the dialogue's other ones of the same shape
        if ent.label_ in ("DATE", "TIME") and ent.root.tag_ != "POS" and not ent.text.endswith("'s"):
            others = [t for t, shape in words["time"] if shape == _time_shape(ent) and t.lower() != ent.text.lower()
                      and t.lower() not in answer.lower()]
            for new in others[:per_rule]:
                out.append((f"swap_time:{ent.text}->{new}", answer[:ent.start_char] + new + answer[ent.end_char:]))
    out += role_flips(answer)
    return out


def role_flips(answer: str) -> list[tuple[str, str]]:
    """Who did what to whom, flipped, where the answer names both people (the speaker and the listener)
    and does not join them ("the speaker and the listener ..." flipped says
    the same)."""
    out = []
    for a, b in ROLE_PAIRS:
        hits = list(re.finditer(rf"(?<![\w'’])({a}|{b})(?![\w])", answer, re.I))
        kinds = {m.group(1).lower() for m in hits}
        if len(kinds) < 2 or re.search(rf"\b({a}|{b})\b(\s+\w+){{0,2}}?\s+and\s+(the\s+)?({a}|{b})\b", answer, re.I):
            continue
        text, pos = [], 0
        for m in hits:
            other = b if m.group(1).lower() == a else a
            text.append(answer[pos:m.start()] + _case(other, m.group(1)))
            pos = m.end()
        out.append((f"role_flip:{a}<->{b}", "".join(text) + answer[pos:]))
    return out


def lemmas(texts: Iterable[str]) -> set[str]:
    """Lower-cased lemmas of the texts' words (what a rewrite may not bring back)."""
    return {t.lemma_.lower() for x in texts if x for t in doc(x) if t.is_alpha}
