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

from functools import lru_cache, partial

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from tasks.distractors.window import TAG, locate, nearest_first
from tasks.vocabulary import CONVERSATION_ROLES, PEOPLE
from tasks.vocabulary import GENERAL_NOUNS as GENERAL

@dataclass(frozen=True)
class GroundedRule:
    """One grounded rewrite rule: its name (the `rule` a candidate row carries, before the words it
    changed), what it changes, and its function (parsed answer, the answer, the dialogue's words by slot,
    the lemmas no rewrite may bring back, at most how many per slot) -> [(position, rule:old->new, text)].
    The position orders a rule's rewrites among the others' (a token's index; dates and times after the
    words, people last), so the rules may be asked in any order."""

    name: str
    changes: str
    find: Callable[[object, str, dict, set, int], list[tuple[tuple, str, str]]]


# The rules whose rewrites read as sentences: who did what to whom (two blind readers), and a contrary
# predicate for the answer's own subject (its negation, or its event under a verb that denies it), the
# released distractors' commonest kinds (issue 71: negation 30%, role flip 14%, negative verbs 7%). A place or a time
# swapped for the dialogue's ("the speaker's universities", "puts up posters the year": 4 of 8 marked
# broken on the real sample) and a verb, an object or an adjective swapped word for word ("thanked the
# photos", "a many photographer") are asked for by name only.
FLUENT = ("role_flip", "predicate_negation", "contrary_verb", "emotion_swap", "feeling_alone")
# A thing or a place of the main event for the dialogue's ("at the office" -> "at the airport"; a thing only in
# a slot that selects nothing else of it: `_object_options`, `_of_the_predicate`), placed behind the contrary
# predicates and this dialogue's answers (placement "swap"): an item takes one only where nothing else written
# for it is left, before an answer of another dialogue. A verb swapped read as broken English in 15 of 16
# readings ("miss up on", "desires to stretch"): asked for by name only.
SWAPS = ("swap_object", "swap_place")
DEFAULT = FLUENT + SWAPS
# The rules that say the contrary of any answer for its own subject: this dialogue's answers to other targets
# are offered rewritten by them (`counterfactuals.contrary_answers`); a role flip of another target's answer
# is as often true as not.
CONTRARY = ("predicate_negation", "contrary_verb", "emotion_swap")
PLACE_PREPOSITIONS = frozenset({"in", "at", "to", "from", "into", "near", "inside", "outside", "across", "around"})
# Verbs too general to carry an event (swapping "get" for "have" says nothing new) and the auxiliaries.
LIGHT_VERBS = frozenset({"be", "have", "do", "get", "make", "let", "go", "come", "say", "tell", "think", "know",
                         "want", "see", "will", "would", "can", "could", "shall", "should", "may", "might", "must",
                         "need", "try", "seem", "like", "mean", "guess", "suppose", "wonder", "hope", "ask", "talk"})
# Nouns that stand for people (PEOPLE) or are too general to be a thing of the dialogue (GENERAL): tasks/vocabulary.py.
ROLE_PAIRS = (CONVERSATION_ROLES,)
# A target whose subject is "we" ("we still have 40 minutes", "let's go") says the pair (or a group) does it,
# so the dialogue does not tell which of the two did what an answer says; "for both of us" keeps the act the
# speaker's.
WE_SUBJECT = frozenset({"we", "'s", "’s"})


def _we_subjects(target) -> list[str]:
    """The target's subjects in the first person plural: "we", and the "us" of "let's"."""
    d = doc(TAG.sub("", str(target or "")))
    return sorted({t.lower_ for t in d if t.dep_ in ("nsubj", "nsubjpass") and t.lower_ in WE_SUBJECT and
                   (t.lower_ == "we" or t.i > 0 and d[t.i - 1].lower_ == "let")})


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


def inflect(lemma: str, tag: str) -> str | None:
    """The first form lemminflect gives the lemma for a Penn tag ("go", "VBZ" -> "goes"); None where it has none."""
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
    direct object), direct objects, place objects (with their preposition), dates and times, adjectives;
    and under "shared" the target's first person plural subjects ("we"), by which it speaks for both people."""
    turns = [TAG.sub("", str(u)) for u in passage]
    at = locate(target, passage)
    order = nearest_first(at, len(turns)) if at is not None else list(range(len(turns)))
    out: dict[str, list] = {"verb": [], "object": [], "place": [], "time": [], "attribute": [],
                            "shared": _we_subjects(target)}
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
                add("place", (lemma, tok.head.lower_), (lemma, tok.head.lower_))
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
        return inflect(lemma, "NNS") or lemma
    return lemma


def rewrites(answer: str, words: dict[str, list], taken: set[str], per_rule: int = 2,
             rules: Iterable[str] = FLUENT) -> list[tuple[str, str]]:
    """The grounded rewrites of one answer: (rule:old->new, text), at most `per_rule` per rule and slot,
    using dialogue words not in `taken` (the lemmas of every correct answer), by the `rules` named."""
    rules = set(rules)
    unknown = rules - set(RULES)
    if unknown:
        raise ValueError(f"unknown grounded rule(s) {sorted(unknown)}; the rules are {', '.join(RULES)}")
    d = doc(answer)
    found = [((rule.name.startswith("swap_"),) + position, label, text) for rule in GROUNDED_RULES if rule.name in rules
             for position, label, text in rule.find(d, answer, words, taken, per_rule)]
    return [(label, text) for _, label, text in sorted(found, key=lambda hit: hit[0])]


def _token_rule(name: str, options: Callable[[object, dict, set], list[str]]):
    """A rule that replaces one word: `options(token, words, taken)` lists its replacements, nearest the
    target first; the first `per_rule` are made, each spelt with the old word's case."""
    def find(d, answer: str, words: dict, taken: set, per_rule: int) -> list[tuple[tuple, str, str]]:
        from tasks.distractors.lexical import _replace_span

        return [((0, tok.i), f"{name}:{tok.text}->{new}",
                 _replace_span(answer, tok.idx, tok.idx + len(tok.text), _case(new, tok.text)))
                for tok in d for new in options(tok, words, taken)[:per_rule]]
    return find


def _event_options(tok, words: dict, taken: set) -> list[str]:
    """The main verb: the dialogue's verbs that take an object where it does, in its form."""
    if not (tok.pos_ == "VERB" and tok.dep_ in ("ROOT", "conj", "xcomp") and tok.lemma_.lower() not in LIGHT_VERBS
            and tok.is_alpha and tok.tag_ in ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ")):
        return []
    transitive = any(c.dep_ == "dobj" for c in tok.children)
    return [form for new, takes_object in words["verb"] if new not in taken and takes_object == transitive
            for form in [inflect(new, tok.tag_)] if form]


# What a thing's slot selects beside its verb: a modifier chosen for the old noun ("live performance" -> "live
# piano"), a noun it is joined to ("consideration and care" -> "test and care"), a preposition of its own
# ("the library of paper"); readers marked 9 of 10 such swaps broken English (draws N and O).
SELECTED_BY = frozenset({"amod", "compound", "nummod", "prep", "conj", "cc", "acl", "relcl"})


def _object_options(tok, words: dict, taken: set) -> list[str]:
    """The thing done to: the dialogue's things, where the object stands alone after a verb of its own (not
    a light verb: "do the grade"), with no modifier, coordination or preposition chosen for it, and the
    verb no preposition after it that the object goes with ("blames their wallet on the listener"; a place
    preposition says where, whatever the thing: "wants a companion at home" -> "wants a dog at home")."""
    from tasks.distractors.lexical import LIGHT_VERBS as PHRASE_VERBS  # whose meaning is their object's

    if not (_is_thing(tok) and tok.dep_ == "dobj") or tok.head.lemma_.lower() in PHRASE_VERBS or \
            not _of_the_predicate(tok.head) or any(c.dep_ == "poss" for c in tok.children):
        return []
    if tok.tag_ == "NN" and not any(c.dep_ in ("det", "nummod") for c in tok.children):
        return []  # a bare singular is a mass noun ("brings food"); most things would need an article ("brings plan")
    if any(c.dep_ in SELECTED_BY and not (c.dep_ == "prep" and c.lower_ in PLACE_PREPOSITIONS) for c in tok.children) \
            or tok.dep_ == "conj" or \
            any(c.dep_ == "dative" or c.dep_ == "prep" and c.lower_ not in PLACE_PREPOSITIONS
                for c in tok.head.children if c.i > tok.i):
        return []  # where it happens ("wants a companion at home") goes with any thing; "blames X on" does not
    return [_noun_form(new, tok.tag_) for new, _ in words["object"] if new not in taken]


def _of_the_predicate(verb) -> bool:
    """Is `verb` the answer's main predicate (`_main_predicate`) or a to-infinitive it governs, active, with no
    particle? A thing or a place is swapped only in the main event: one of a clause inside it ("help him
    improve his grades" -> "his fees", "friends who can play softball" -> "play team"), of a passive ("is given
    the bill" -> "the mistake") or of a particle verb ("finishing up grandmother") reads as broken English."""
    main = _main_predicate(verb.doc) if verb is not None else None
    # the main verb, or a to-infinitive it governs ("wants to buy a guitar", "decides to visit the museum")
    while verb is not None and verb != main and verb.dep_ == "xcomp" and \
            any(c.dep_ == "aux" and c.lower_ == "to" for c in verb.children):
        if any(c.dep_ in ("auxpass", "prt") for c in verb.children):
            return False
        verb = verb.head
    return main is not None and verb == main and not any(c.dep_ in ("auxpass", "prt") for c in verb.children)


def _place_options(tok, words: dict, taken: set) -> list[str]:
    """The object of a place preposition with its determiner ("at the office"; a bare "at home" would take
    another noun bare: "at pool"), for the dialogue's."""
    if not (_is_thing(tok) and _place_object(tok)) or not any(c.dep_ in ("det", "poss") for c in tok.children) or \
            not _of_the_predicate(tok.head.head):
        return []
    # a place the dialogue names after the same preposition ("at the office" -> "at the airport"): a noun
    # after another one is seldom a place there ("in a dilemma" -> "in a government", "at home" -> "at pool")
    return [_noun_form(new, tok.tag_) for new, prep in words["place"] if new not in taken and prep == tok.head.lower_]


def _attribute_options(tok, words: dict, taken: set) -> list[str]:
    if not (tok.pos_ == "ADJ" and tok.dep_ in ADJECTIVE_DEPS and tok.is_alpha):
        return []
    return [new for new in words["attribute"] if new not in taken]


def _swap_time(d, answer: str, words: dict, taken: set, per_rule: int) -> list[tuple[tuple, str, str]]:
    """A date or a time (spaCy's entities): the dialogue's other ones of the same shape."""
    out = []
    for n, ent in enumerate(d.ents):
        if ent.label_ in ("DATE", "TIME") and ent.root.tag_ != "POS" and not ent.text.endswith("'s"):
            others = [t for t, shape in words["time"] if shape == _time_shape(ent) and t.lower() != ent.text.lower()
                      and t.lower() not in answer.lower()]
            out += [((1, n), f"swap_time:{ent.text}->{new}", answer[:ent.start_char] + new + answer[ent.end_char:])
                    for new in others[:per_rule]]
    return out


def _role_flip(d, answer: str, words: dict, taken: set, per_rule: int) -> list[tuple[tuple, str, str]]:
    return [((2, n), label, text) for n, (label, text) in
            enumerate(role_flips(answer, one_person=not words.get("shared")))]


def role_flips(answer: str, one_person: bool = True) -> list[tuple[str, str]]:
    """Who did what to whom, flipped, where the answer names both people (the speaker and the listener)
    and does not join them ("the speaker and the listener ..." flipped says the same); where it names one
    of them as the subject (or whose the subject is), the other one did it ("The speaker failed the driving
    test" -> "The listener failed ...": the released distractors flip the roles in 14%).

    Never flipped, as the flip says what the answer says:
    * two people where one is the other's companion ("the speaker dances with the listener"): "with"
      makes the act both people's;
    * one person who is not the subject nor whose it is ("John thanks the speaker", "meets the speaker's
      brother"): the act stays the subject's, and whom it concerns the dialogue mostly leaves open (blind
      readers found such flips correct in draws R and S);
    * one person where the target's subject is "we" or "let's" (`one_person=False`): it speaks for both.
    """
    out = []
    for a, b in ROLE_PAIRS:
        hits = list(re.finditer(rf"(?<![\w'’])({a}|{b})(?![\w])", answer, re.I))
        kinds = {m.group(1).lower() for m in hits}
        if not kinds or re.search(rf"\b({a}|{b})\b(\s+\w+){{0,2}}?\s+and\s+(the\s+)?({a}|{b})\b", answer, re.I):
            continue
        people = [tok for tok in doc(answer) if tok.lower_ in (a, b)]
        if len(kinds) == 2 and any(tok.dep_ == "pobj" and tok.head.lower_ == "with" for tok in people):
            continue
        if len(kinds) == 1 and not (one_person and len(people) == 1 and _names_the_subject(people[0])):
            continue
        text, pos = [], 0
        for m in hits:
            other = b if m.group(1).lower() == a else a
            text.append(answer[pos:m.start()] + _case(other, m.group(1)))
            pos = m.end()
        label = f"{a}<->{b}" if len(kinds) == 2 else f"{next(iter(kinds))}->{a if b in kinds else b}"
        out.append((f"role_flip:{label}", "".join(text) + answer[pos:]))
    return out


def _names_the_subject(tok) -> bool:
    """Is the person the subject, or whose the subject is ("the speaker's sister has a birthday")? Flipped,
    either says the act is another's."""
    if tok.dep_ == "poss" or any(c.dep_ == "case" for c in tok.children):
        tok = tok.head
    return tok.dep_ in ("nsubj", "nsubjpass")


# Verbs of state, from English grammars' lists of stative verbs: "refuses to know", "fails to like" are no
# English; such a predicate's contrary is its negation.
STATIVE = frozenset({"be", "have", "know", "believe", "think", "understand", "remember", "forget", "like", "love",
                     "hate", "dislike", "prefer", "want", "need", "wish", "seem", "appear", "belong", "own", "possess",
                     "contain", "consist", "cost", "mean", "matter", "deserve", "feel", "hear", "see", "smell", "taste",
                     "sound", "look", "realize", "realise", "recognize", "recognise", "suppose", "doubt", "agree",
                     "disagree", "care", "mind", "fit", "include", "involve", "lack", "weigh", "equal", "resemble",
                     "depend", "exist", "imagine", "hope", "expect", "envy", "fear", "adore", "appreciate", "enjoy",
                     "live",
                     "can", "could", "may", "might", "must", "shall", "should", "will", "would"})
# Verbs that say the predicate's event did not happen, by the subject's will or not: "refuses to go home",
# "fails to pay the bill", "forgets to call" (the released distractors' "negative verbs": cancels, refuses,
# forgets, fails).
CONTRARY_VERBS = ("refuse", "fail", "forget")
WILLED = frozenset({"refuse", "forget"})  # of these, the ones only a person does
# Verbs whose event is already a not-doing ("failed the test", "avoids the crowd"): "failed to fail" is no
# contrary; their negation is.
NEGATIVE_VERBS = frozenset(CONTRARY_VERBS) | {"avoid", "miss", "cancel", "deny", "lose", "quit", "stop", "decline",
                                             "neglect", "ignore", "reject", "skip", "omit", "abandon"}
DO_SUPPORT = {"VBZ": "does", "VBD": "did", "VBP": "do"}
# the forms a verb under "refuses / fails / forgets to" may have: the frame verb takes it ("will go" -> "will
# fail to go", "has paid" -> "has failed to pay", "is leaving" -> "is refusing to leave")
VERB_FORMS = frozenset(DO_SUPPORT) | {"VB", "VBN", "VBG"}


def _main_predicate(d):
    """The main clause's verb where the answer opens with its subject and no other verb stands between the
    two (an answer's predicate: "The speaker hurries to the station to catch the train"), else None: a parse
    whose root is a later verb ("... to catch") or a question inside the answer ("enquired since when does
    the speaker like") has no predicate a rule may rewrite as a whole."""
    root = next((t for t in d if t.dep_ == "ROOT"), None)
    if root is None or root.pos_ not in ("VERB", "AUX") or any(t.dep_ == "neg" for t in d):
        return None  # a second negation in one sentence ("did not find that it is not ...") reads as a puzzle
    if _broken(d):
        return None
    if root.pos_ == "VERB" and not _a_verb(root.lower_):
        return None  # a word English has as no verb read as one ("The speaker questions debbie about ...")
    subject = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass") and c.i < root.i), None)
    if subject is None or subject.left_edge.i != 0:
        return None
    # a misparse: a verb read into the subject ("The listener enquired since when does ...") or the root an
    # infinitive ("The listener hurries to the station to catch ...", "hurries" read as a noun)
    if any(t.pos_ in ("VERB", "AUX") and t.tag_ != "VBG" for t in subject.subtree) or \
            any(c.dep_ == "aux" and c.tag_ == "TO" for c in root.children):
        return None
    if any(t.head.i != root.i or t.dep_ not in ("aux", "auxpass", "advmod", "neg")
           for t in d[subject.right_edge.i + 1:root.i]):
        return None  # only the verb's auxiliaries and adverbs stand between it and its subject
    return root


# Verbs whose clause complement takes a bare infinitive ("lets the listener go", "helps her carry", "sees him
# leave"); after any other verb a subject and a bare verb ("mentions the listener join her") is no English.
# A verb of demand takes the mandative subjunctive, the same bare form ("suggested the speaker talk to his teacher").
BARE_INFINITIVE = frozenset({"let", "make", "have", "help", "see", "watch", "hear", "feel", "notice", "observe",
                             "bid", "suggest", "recommend", "insist", "demand", "request", "propose", "ask",
                             "require", "urge", "advise"})
FINITE = {"VBZ": "present", "VBP": "present", "VBD": "past"}


def _broken(d) -> bool:
    """Is the answer already broken English, so that a rewrite of its predicate is broken too? Rules of
    English grammar a parse shows: coordinated verbs sharing one subject share its tense ("suggests leaving
    the worries and spent time", "goes home and took a nap"); "and" joins words of one kind, never a bare
    verb to a finite verb or an adjective ("felt happy and relax"); and a bare infinitive with a subject of
    its own follows only the verbs that take one (BARE_INFINITIVE: "mentions the listener join her"). A state
    and an event may differ in tense ("is quite busy, but wanted to hear")."""
    for t in d:
        if t.dep_ == "conj" and t.pos_ in ("VERB", "AUX") and t.head.pos_ in ("VERB", "AUX") and \
                not any(c.dep_ in ("nsubj", "nsubjpass", "aux", "auxpass") for c in t.children):
            a, b = t.head.tag_, t.tag_
            if _tense_unmarked(t) or _tense_unmarked(t.head):
                continue  # "put", "read", "set": one form for the present and the past
            if b == "VB" and a in ("VBD", "VBZ"):
                return True  # a bare verb joined to a finite one: "felt happy and relax", "goes home and take"
            stative = "be" in (t.lemma_, t.head.lemma_)  # a state now and an event then: "is busy but wanted to"
            if "VBG" in (a, b) and (a in FINITE or b in FINITE) or \
                    not stative and a in FINITE and b in FINITE and FINITE[a] != FINITE[b]:
                return True
        if t.dep_ == "conj" and t.tag_ == "VB" and t.head.pos_ == "ADJ":
            return True  # "and" joins words of one kind: "felt happy and relax"
        if t.tag_ == "VB" and t.dep_ == "ccomp" and any(c.dep_ == "nsubj" for c in t.children) and \
                not any(c.dep_ in ("aux", "mark") for c in t.children) and t.head.lemma_.lower() not in BARE_INFINITIVE:
            return True
    return False


def _tense_unmarked(tok) -> bool:
    """Is the verb's form both a past and a present form of its verb ("put", "cut", "read")?"""
    from lemminflect import getInflection

    word = tok.lower_
    return word in getInflection(tok.lemma_.lower(), "VBD") and \
        word in getInflection(tok.lemma_.lower(), "VBP") + getInflection(tok.lemma_.lower(), "VBZ")


def _a_verb(word: str) -> bool:
    """Is the word a form of a verb in lemminflect's lexicon (its dictionary, not its rules for unknown
    words)?"""
    from lemminflect import getAllLemmas

    return bool(getAllLemmas(word, upos="VERB"))


def _coordinated(root) -> list:
    """The verbs coordinated with the main verb by "and" or "or" that share its subject and tense ("visits the
    shelter and chooses a dog"): under "does not" or "refuses to" they take the base form too."""
    return [c for c in root.subtree if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX") and c.head.i in
            ({root.i} | {x.i for x in root.subtree if x.dep_ == "conj"}) and c.tag_ == root.tag_ and
            not any(x.dep_ in ("nsubj", "nsubjpass", "aux") for x in c.children) and not _contrasted(c)]


def _contrasted(conj) -> bool:
    """Is the conjunct joined by "but" or "yet"? It says something of its own, outside the negation of the
    first ("does not have a plan but is unsure", not "but be unsure")."""
    cc = [x for x in conj.head.children if x.dep_ == "cc" and x.i < conj.i]
    return bool(cc) and cc[-1].lower_ in ("but", "yet")


def _base_forms(answer: str, root, new: str) -> str:
    """The answer with the main verb replaced by `new` and its coordinated verbs in the base form."""
    edits = sorted([(root, new)] + [(c, c.lemma_.lower()) for c in _coordinated(root)], key=lambda e: -e[0].idx)
    for tok, text in edits:  # from the end, so earlier offsets hold
        answer = _replace(answer, tok, text)
    return answer


def _predicate_negation(d, answer: str, words: dict, taken: set, per_rule: int) -> list[tuple[tuple, str, str]]:
    """The main predicate negated inside it: "not" after its first auxiliary or a copula ("is not
    interested in"), else do-support before the verb ("likes" -> "does not like", "went" -> "did not go")."""
    root = _main_predicate(d)
    if root is None:
        return []
    aux = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
    at = aux[0] if aux else root if root.lemma_ == "be" else None
    if at is not None and at.lemma_ not in ("be", "have", "do") and at.tag_ != "MD":
        return []  # "get married": "not" follows only be, have, do and the modals
    if at is not None:
        end = at.idx + len(at.text)
        return [((0, at.i), f"predicate_negation:{at.text}->{at.text} not", answer[:end] + " not" + answer[end:])]
    if root.tag_ not in DO_SUPPORT:
        return []
    # do-support takes every coordinated verb of the predicate to its base form ("does not go back and tell him")
    new = f"{DO_SUPPORT[root.tag_]} not {root.lemma_.lower()}"
    return [((0, root.i), f"predicate_negation:{root.text}->{new}", _base_forms(answer, root, new))]


def _contrary_verb(d, answer: str, words: dict, taken: set, per_rule: int) -> list[tuple[tuple, str, str]]:
    """An event the subject did not bring about: the main verb (of an event, not a state; active) under a
    verb that denies it, in its form ("goes home" -> "refuses to go home", "will pay" -> "will fail to pay");
    `per_rule` of CONTRARY_VERBS, chosen by the answer's content (items get different ones)."""
    root = _main_predicate(d)
    # a verb taking a to-infinitive ("tries to let", "decides to clean") would stack two: "fails to try to
    # let" (a gerund is no such verb: "failed to practise playing"); a passive ("was given") has no doer to refuse
    # nor a progressive: "is forgetting to organise", "is refusing to suffer" are no English for a contrary
    if root is None or root.lemma_.lower() in STATIVE | NEGATIVE_VERBS or root.tag_ not in VERB_FORMS or \
            root.tag_ == "VBG" or \
            any(c.dep_ == "auxpass" or c.dep_ == "xcomp" and any(x.lower_ == "to" for x in c.children)
                for c in root.children):
        return []
    import hashlib

    # one refuses or forgets by a will and a memory: a person ("the registration refused to start" is no English);
    # anything may fail to
    person = _a_person(next((c for c in root.children if c.dep_ == "nsubj"), None))
    ranked = sorted((v for v in CONTRARY_VERBS if person or v not in WILLED),
                    key=lambda v: hashlib.sha256(f"{v}\t{answer}".encode()).hexdigest())
    out = []
    for k, verb in enumerate(ranked[:per_rule]):
        form = inflect(verb, root.tag_)
        if form:
            new = f"{form} to {root.lemma_.lower()}"
            out.append(((0, root.i, k), f"contrary_verb:{root.text}->{new}", _base_forms(answer, root, new)))
    return out


# Verbs that link a subject to how it feels ("feels encouraged", "is upset", "gets angry").
LINKING = frozenset({"feel", "be", "become", "get", "seem", "look", "sound", "grow", "remain", "stay"})
EMOTION_VALENCE = 1.0  # VADER's valence (-4..4) from which an adjective carries a feeling of one polarity


@lru_cache(maxsize=1)
def valence() -> dict[str, float]:
    """VADER's lexicon of word valences (vaderSentiment, shipped with the package)."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return dict(SentimentIntensityAnalyzer().lexicon)


def participle(word: str) -> bool:
    """Is an adjective an -ed participle (English's adjectives of feeling: "annoyed", "relieved")?"""
    from lemminflect import getAllLemmas

    return word.endswith("ed") and "VERB" in getAllLemmas(word) or word == "upset"


@lru_cache(maxsize=1)
def feeling_words() -> tuple[str, ...]:
    """Adjectives of feeling from the lexical generator's antonym lexicon: the pairs of opposite valence
    (VADER) of which one word is a participle ("pleased / annoyed", "worried / relieved", "anxious /
    relaxed": English's adjectives of feeling are its -ed participles and their opposites; "legal / illegal",
    "rich / poor" are no feelings)."""
    from tasks.distractors.lexical import ANTONYM_LEMMAS

    lexicon = valence()
    strong = lambda w: abs(lexicon.get(w, 0.0)) >= EMOTION_VALENCE  # noqa: E731
    out = set()
    for pair in ANTONYM_LEMMAS["ADJ"].replace("\n", " ").split(";"):
        if len(pair.split()) == 2:
            a, b = pair.split()
            if strong(a) and strong(b) and (lexicon[a] > 0) != (lexicon[b] > 0) and (participle(a) or participle(b)):
                out |= {a, b}
    return tuple(sorted(out))


def _feels(tok) -> bool:
    """Is the one said to feel `tok` a person: a personal pronoun, a name, A / B, or a noun for people?"""
    head = tok
    while head.dep_ == "conj":
        head = head.head
    return _a_person(next((c for c in head.head.children if c.dep_ in ("nsubj", "nsubjpass")), None))


def _a_person(subject) -> bool:
    """Is the subject a person: a personal pronoun but "it" ("how difficult it is to ...": a thing's quality),
    a name, A / B, or a noun for people; no wh-word ("what was painful")?"""
    return subject is not None and (subject.tag_ == "PRP" and subject.lower_ != "it" or subject.pos_ == "PROPN" or
                                    subject.ent_type_ == "PERSON" or subject.lemma_.lower() in PEOPLE or
                                    subject.text in ("A", "B"))


def _emotion_swap(d, answer: str, words: dict, taken: set, per_rule: int, alone: bool = False
                  ) -> list[tuple[tuple, str, str]]:
    """A feeling of the other polarity: every adjective of feeling the subject is said to have ("feels
    encouraged and excited" -> "feels annoyed and bored") for ones of the opposite valence (VADER's
    lexicon), the dialogue's own adjectives first, then the antonym lexicon's; `per_rule` such rewrites.
    `alone`: the answer cut after its first feeling, which becomes one of the other polarity ("is happy to
    know the reason for ..." -> "is annoyed"), the adjectives after those the swap takes first."""
    import hashlib

    lexicon = valence()
    felt = [t for t in d if t.pos_ in ("ADJ", "VERB") and t.tag_ in ("JJ", "VBN") and t.is_alpha and
            abs(lexicon.get(t.lower_, 0.0)) >= EMOTION_VALENCE and
            (t.dep_ in ("acomp", "oprd") and t.head.lemma_.lower() in LINKING or
             t.dep_ == "conj" and t.head.dep_ in ("acomp", "oprd"))]
    if alone:
        # the first feeling of a clause that opens with its subject and linking verb: what follows it goes
        felt = felt[:1] if felt and felt[0].dep_ in ("acomp", "oprd") and felt[0].head.i < felt[0].i and \
            felt[0].head.head.i == felt[0].head.i else []
    # a feeling is a person's ("the working conditions are bad" is no feeling), of a word of its own (not the
    # end of "self-satisfied"), with no clause or preposition of its own to keep agreeing ("hopeful that she
    # might join", "interested in", "grateful for": "annoyed in the plan" is no English); "about" goes with
    # every feeling ("worried / relieved about the house"). Said alone, a feeling keeps none of them.
    if _broken(d) or any(not _feels(t) or t.idx > 0 and d.text[t.idx - 1] == "-" or
           not alone and any(c.dep_ in ("ccomp", "xcomp") or c.dep_ == "prep" and c.lower_ != "about"
                             for c in t.children)
           for t in felt):
        return []
    if not felt or len({lexicon[t.lower_] > 0 for t in felt}) > 1:
        return []  # no feeling, or feelings of both polarities: no one opposite
    positive = lexicon[felt[0].lower_] > 0
    opposite = lambda w: abs(lexicon.get(w, 0.0)) >= EMOTION_VALENCE and (lexicon[w] > 0) != positive  # noqa: E731
    # the dialogue's own adjectives only where they are feelings: "ridiculous", "awful" describe a thing
    own = [w for w in words.get("attribute", []) if opposite(w) and (w in feeling_words() or participle(w))]
    lexicon = sorted((w for w in feeling_words() if opposite(w) and w not in own),
                     key=lambda w: hashlib.sha256(f"{w}\t{answer}".encode()).hexdigest())
    # an -ing adjective says what causes a feeling ("boring"), the -ed one who has it ("bored")
    options = [w for w in own + lexicon if w not in taken and not w.endswith("ing")]
    out = []
    if alone:  # other adjectives than the swap's, so that the two are no near-copies of each other; said alone,
        # only an -ed participle names a feeling without its cause ("is annoyed"; "is energetic" is no reaction)
        options = [w for w in options[per_rule:] or options if participle(w)]
        for k, new in enumerate(options[:per_rule]):
            text = f"{answer[:felt[0].idx].rstrip()} {new}."
            out.append(((0, felt[0].i, k), f"feeling_alone:{felt[0].text}->{new}", text))
        return out
    for k in range(per_rule):
        chosen = options[k * len(felt):(k + 1) * len(felt)]
        if len(chosen) < len(felt):
            break
        text = answer
        for tok, new in sorted(zip(felt, chosen), key=lambda e: -e[0].idx):
            text = _replace(text, tok, new)
        out.append(((0, felt[0].i, k), f"emotion_swap:{'+'.join(t.text for t in felt)}->{'+'.join(chosen)}", text))
    return out


# The rules in the order their rewrites used to be listed for one word (a word fits one slot at most).
GROUNDED_RULES = (
    GroundedRule("swap_event", "the main verb for another verb of the dialogue, transitive for transitive",
                 _token_rule("swap_event", _event_options)),
    GroundedRule("swap_object", "a direct object for another thing of the dialogue",
                 _token_rule("swap_object", _object_options)),
    GroundedRule("swap_place", "a place after a preposition of place for another place of the dialogue",
                 _token_rule("swap_place", _place_options)),
    GroundedRule("swap_time", "a date or a time for another of the dialogue's of the same shape", _swap_time),
    GroundedRule("swap_attribute", "an adjective for another adjective of the dialogue",
                 _token_rule("swap_attribute", _attribute_options)),
    GroundedRule("role_flip", "who did what to whom: the speaker and the listener exchanged", _role_flip),
    GroundedRule("predicate_negation", "the main predicate negated inside it (do-support, or after its auxiliary)",
                 _predicate_negation),
    GroundedRule("contrary_verb", "the main event under a verb that denies it (refuses to, fails to, forgets to)",
                 _contrary_verb),
    GroundedRule("emotion_swap", "a feeling for one of the other polarity (VADER's valence)", _emotion_swap),
    GroundedRule("feeling_alone", "a feeling of the other polarity said alone, its complement left out (\"is happy "
                 "to hear about the trip\" -> \"is annoyed\")", partial(_emotion_swap, alone=True)),
)
RULES = tuple(r.name for r in GROUNDED_RULES)


def lemmas(texts: Iterable[str]) -> set[str]:
    """Lower-cased lemmas of the texts' words (what a rewrite may not bring back)."""
    return {t.lemma_.lower() for x in texts if x for t in doc(x) if t.is_alpha}
