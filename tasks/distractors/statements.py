"""The dialogue's own events as statements about its people: what one person says of themselves, in the third
person, for the person a correct answer names or the other one ("B: i 'm ready for the exam ." -> "The speaker is
ready for the exam.").

Said contrary by the grounded rules (`counterfactuals.contrary_answers`: "The speaker is not ready for the exam"),
such a statement is the released distractors' commonest kind: a contrary predicate for the answer's own subject,
built from this dialogue's events, objects and places, changed as a whole rather than one word of the correct
answer (beside "The speaker was worried about the exam": "The speaker had finished the exam early"). A rewrite of
the correct answer changes one word of it, so a set of them is the answer and its near-copies, which an ending
alone gives away.

Rules of English, read off spaCy's parse of each utterance:
* a declarative clause whose subject is "I" (no question, no clause before the subject but a discourse word:
  "well", "oh", "but"), cut at its first comma or at a coordinated clause with a subject of its own;
* "I" becomes the answer's subject ("The speaker"), and the first finite verb agrees with it ("am" -> "is",
  "have" -> "has", "go" -> "goes", lemminflect), in the answer's tense where the answer speaks of the past;
  what the other person says of themselves becomes a statement for them (the roles flipped: "The listener");
* "you" becomes the other person, "your" theirs ("the listener's"); "me", "my", "myself" the subject's own
  pronoun where the dialogue's answers give it ("her", "his"), else the clause is not used;
* a clause with a name or a bare singular noun after "be" ("i'm bell in room 908") or a word of address ("i'm
  sorry sir") is not used: the predicate names a person, not an event;
* a clause naming anyone or anything the reader cannot resolve (he, she, they, it, this, that, we) is not used:
  "The speaker does not like it" says nothing a reader can check;
* a clause already negated gives the statement without its negation ("i have n't paid my rent" -> "The
  speaker has paid her rent"), the contrary by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tasks.distractors.window import TAG, locate

# the person each side of a conversation is to the target's speaker, as CICERO's answers name them
ROLES = ("the speaker", "the listener")
FIRST = frozenset({"i", "me", "my", "mine", "myself"})
SECOND = {"you": "{other}", "your": "{other}'s", "yours": "{other}'s"}
# pronouns a reader cannot resolve out of their utterance, and demonstratives standing for a thing said before;
# and "only", "even", "ever", which bind to what they focus, so that a negation changes what ("has not only been in
# a boat once"): a clause holding one is left out
UNRESOLVED = frozenset({"only", "even", "ever", "he", "she", "him", "her", "his", "hers", "himself", "herself", "they",
                        "them", "their", "theirs", "themselves", "it", "its", "itself", "this", "that", "these",
                        "those", "we", "us", "our", "ours", "ourselves", "yourself", "yourselves", "one", "here",
                        "there"})
# the subject's own pronouns by the gender the answers give it
OWN = {"he": {"me": "him", "my": "his", "mine": "his", "myself": "himself"},
       "she": {"me": "her", "my": "her", "mine": "hers", "myself": "herself"}}
GENDERED = {"he": {"he", "him", "his", "himself"}, "she": {"she", "her", "hers", "herself"}}
# contracted verbs as the tokenizer leaves them ("ca n't", "wo n't", "i 'm")
SPELT = {"ca": "can", "wo": "will", "'m": "am", "'ve": "have", "'ll": "will", "'re": "are", "’m": "am",
         "’ve": "have", "’ll": "will", "’re": "are", "n't": "not", "n’t": "not"}
AGREE = {"am": ("is", "was"), "are": ("is", "was"), "have": ("has", "had"), "do": ("does", "did"),
         "was": ("was", "was"), "were": ("was", "was")}
DISCOURSE = frozenset({"well", "oh", "so", "and", "but", "yes", "yeah", "no", "ok", "okay", "now", "actually",
                       "really", "anyway", "sure", "ah", "hey", "um", "uh", "hmm", "then", "also"})
# opinion frames whose clause the speaker asserts as theirs ("i think i left my keys", "i mean i didn't do a lot"):
# that clause is a statement (`clauses`); a hope or a wish asserts nothing ("i hope i pass")
ASSERTING = frozenset({"think", "guess", "believe", "mean", "know", "bet", "reckon"})
# an opinion or a report frames a clause of its own ("i think we should go"): the frame is no event
FRAMES = frozenset({"think", "guess", "suppose", "believe", "mean", "wonder", "hope", "know", "say", "tell",
                    "bet", "wish", "see", "hear", "afraid", "sure", "feel", "reckon", "understand"})
MIN_WORDS, MAX_WORDS = 3, 14  # the predicate's words: an answer's length
# adverbs that focus or grade a predicate, left out of a statement (`_focus`)
FOCUS = frozenset({"just", "really", "also", "actually", "so", "still", "already", "pretty", "quite", "certainly",
                   "definitely", "probably", "very", "totally", "simply", "truly"})
# words that end a clause whose event another utterance holds ("i hope not", "i try not to", "i think so")
ELLIPTIC = frozenset({"not", "n't", "n’t", "to", "so", "too", "either", "do", "did", "am", "have", "can", "will",
                      "would"})


@dataclass(frozen=True)
class StatementRule:
    """One rule of this module as the rules registry lists it: its name, what it makes, and which of a
    `statements` triple shows it fired for an item whose correct answer is `answer`
    (`fired(statement, contrary, answer) -> bool`)."""

    name: str
    changes: str
    fired: Callable[[str, str | None, str], bool]


STATEMENT_RULES = (
    StatementRule("first_person", "a clause a person says of themselves, as a statement for the answer's subject "
                  "(\"i'm ready for the exam\" -> \"The speaker is ready for the exam\")",
                  lambda said, contrary, answer: _opening(said) == _opening(answer)),
    StatementRule("other_person", "a clause the other person says of themselves, as a statement for them: the "
                  "answer's roles flipped (\"B: i'm ready\" -> \"The listener is ready\" for an answer about the "
                  "speaker)", lambda said, contrary, answer: _opening(said) != _opening(answer)),
    StatementRule("negation_dropped", "a negated clause's contrary: the statement without its negation "
                  "(\"i don't like the manager\" -> \"The speaker likes the manager\")",
                  lambda said, contrary, answer: contrary is not None),
)


def _opening(text: str) -> str:
    """A sentence's first two words, lower-cased: the role a statement or an answer opens with."""
    return " ".join(str(text).lower().split()[:2])


@dataclass(frozen=True)
class Person:
    """Who an answer's subject is in the dialogue: its words ("The speaker"), the utterances' tag ("B"),
    how the other person is named ("the listener") and the subject's pronoun ("she"; "" unknown)."""

    subject: str
    tag: str
    other: str
    pronoun: str
    cased: dict  # lower-cased word -> its spelling inside the answers ("spanish" -> "Spanish")


def tags(passage) -> list[str]:
    """The speaker tag of each utterance ("A", "B"; "" where untagged)."""
    out = []
    for u in passage:
        m = TAG.match(str(u))
        out.append(m.group(0).strip().rstrip(":").strip() if m else "")
    return out


def subject(answer: str):
    """The answer's subject words where it opens with one of the conversation's roles ("The speaker", "The
    listener"), with the role; else None (a name, a thing: no utterance says "I" for them)."""
    words = str(answer).strip().split()
    if len(words) < 3 or words[2].lower() in ("and", "&", "or", "nor"):
        return None  # "The speaker and the listener": both, whom no one utterance's "I" is
    head = " ".join(words[:2]).lower()
    return (" ".join(words[:2]), head) if head in ROLES else None


def people(passage, target, answers: list[str]) -> dict[str, Person]:
    """Each role the item's answers open with, and the other role, -> the Person it is: the target's speaker is
    "the speaker", the other tag "the listener". Only where the dialogue has exactly two speakers and the target
    is found."""
    at, said = locate(target, passage), tags(passage)
    sides = sorted({t for t in said if t})
    if at is None or len(sides) != 2 or not said[at]:
        return {}
    by_role = {"the speaker": said[at], "the listener": next(t for t in sides if t != said[at])}
    out = {}
    for a in answers:
        found = subject(a)
        if found is None or found[1] in out:
            continue
        words, role = found
        other = next(r for r in ROLES if r != role)
        out[role] = Person(words, by_role[role], other, pronoun(answers, words), spelling(answers))
    # The roles flipped (14% of the released distractors put the other person where the answer's subject was):
    # what the other person says of themselves is a statement for them, spelt as the answers spell the roles.
    # Their pronoun only where an answer opening with them gives it.
    for role, person in list(out.items()):
        other = next(r for r in ROLES if r != role)
        if other not in out:
            words = f"{person.subject.split()[0]} {other.split()[1]}"
            out[other] = Person(words, by_role[other], role, pronoun(answers, words), person.cased)
    return out


def spelling(answers: list[str]) -> dict[str, str]:
    """The capitalized words inside the answers (not their first word), by their lower-cased form: how the
    answers' writers spell the names a lower-cased dialogue holds."""
    out = {}
    for a in answers:
        for w in re.findall(r"(?<=\s)([A-Z][\w'’-]*)", str(a)):
            if w.lower() not in ("i", "a") and not w.isupper():
                out.setdefault(w.lower(), w)
    return out


def pronoun(answers: list[str], words: str) -> str:
    """The subject's pronoun as the answers opening with `words` give it: the possessive or reflexive pronouns
    they use ("The speaker was worried about her exam" -> "she"); "" where they give none or both."""
    seen = set()
    for a in answers:
        if not str(a).lower().startswith(words.lower()):
            continue
        found = set(re.findall(r"[a-z]+", str(a).lower()[len(words):]))
        seen |= {g for g, forms in GENDERED.items() if found & (forms - {"he", "she", "him"})}
    return seen.pop() if len(seen) == 1 else ""


def statements(passage, target, answers: list[str]) -> list[tuple[int, str, str | None]]:
    """(utterance index, statement, its contrary or None) for each clause the answers' subjects said of
    themselves, for that subject, in the dialogue's order: the contrary is the statement without its negation
    where the clause was negated; an affirmed one is left for the contrary rules to negate."""
    from tasks.distractors import grounded

    who = people(passage, target, answers)
    if not who:
        return []
    said = tags(passage)
    turns = [_joined(TAG.sub("", str(u))) for u in passage]
    past = _past(answers[0])
    grounded.parse([t for t in turns if t.strip()])
    out: list[tuple[int, str, str | None]] = []
    for k, (tag, text) in enumerate(zip(said, turns)):
        person = next((p for p in who.values() if p.tag == tag), None)
        if person is None or not text.strip():
            continue
        for sent in grounded.doc(text).sents:
            for root in clauses(sent):
                made = statement(sent, person, past, root)
                if made and made[0] not in (s for _, s, _ in out):
                    out.append((k, *made))
    return out


def clauses(sent) -> list:
    """The roots of a sentence's clauses that may hold a statement: its main verb; the clause an opinion frame
    asserts, where the frame's subject is "I" ("i mean i didn't do a lot": "i didn't do a lot"); and a clause
    coordinated with the main one that has a subject of its own ("..., but i bought a computer")."""
    root, out = sent.root, [sent.root]
    me = _first_person(root)
    # the frame itself opens its sentence ("if i think i ..." asserts nothing)
    frame = root.lemma_.lower() in ASSERTING and me is not None and _opens_clean(sent[:me.i - sent.start])
    out += [c for c in root.children if c.pos_ in ("VERB", "AUX") and _first_person(c) is not None and
            (c.dep_ == "ccomp" and frame or c.dep_ == "conj")]
    return out


def _opens_clean(words) -> bool:
    """Are the words before a clause's subject only discourse words, punctuation, a conjunction or "that"? Else a
    clause comes before it ("if i ...", "when i ...") or the clause is a question ("do i ...")."""
    return all(t.lower_ in DISCOURSE or t.pos_ in ("INTJ", "PUNCT", "CCONJ") or t.dep_ == "mark" and t.lower_ == "that"
               for t in words)


def _first_person(verb):
    """The verb's subject where it is "I", else None."""
    return next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass") and c.lower_ == "i"), None)


CLITIC = re.compile(r"\s+(n['’]t|['’](?:m|re|s|ve|ll|d))\b", re.IGNORECASE)


def _joined(text: str) -> str:
    """A tokenized utterance ("i 'm sure they do n't") with its clitics joined back ("i'm sure they don't"): the
    parser reads a contraction as one, and a clitic on its own as a quote and a letter."""
    text = re.sub(r"(\w)n\s*['’]\s*t\b", r"\1n't", text.replace("’", "'"))  # "don ’ t": one word, straight
    return CLITIC.sub(r"\1", text)


def feeling(text: str) -> bool:
    """Does the statement say how its subject feels: a linking verb ("is", "feels", "gets") with an adjective of
    feeling (VADER valence of at least `grounded.EMOTION_VALENCE` either way)? An emotional reaction's
    distractor is another feeling: an event offered as a reaction is out of place at a glance."""
    from tasks.distractors import grounded

    lexicon = grounded.valence()
    return any(t.dep_ in ("acomp", "oprd") and t.head.lemma_.lower() in grounded.LINKING and
               abs(lexicon.get(t.lower_, 0.0)) >= grounded.EMOTION_VALENCE for t in grounded.doc(text))


def _past(answer: str) -> bool:
    """Does the answer speak of the past (its main verb or first auxiliary in the past tense)?"""
    from tasks.distractors import grounded

    d = grounded.doc(str(answer))
    root = next((t for t in d if t.dep_ == "ROOT"), None)
    if root is None:
        return False
    aux = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
    return (aux[0] if aux else root).tag_ == "VBD"


def statement(sent, person: Person, past: bool = False, root=None) -> tuple[str, str | None] | None:
    """One clause said by `person` of themselves (the sentence's main clause, or the clause `root` heads: see
    `clauses`), as a statement for their subject words: (what the clause says, its contrary where the clause was
    negated: the statement without its negation); None where the clause is no first person declarative statement
    a reader can resolve (see the module's rules)."""
    main = root is None or root.i == sent.root.i
    root = sent.root if root is None else root
    if root.pos_ not in ("VERB", "AUX") or any(t.text in ("?", "!") for t in sent):
        return None
    me = _first_person(root)
    if me is None or root.lemma_.lower() in FRAMES and any(c.dep_ in ("ccomp", "xcomp", "acomp") for c in root.children):
        return None
    # before the subject only discourse words: else a clause before it ("if i ...", "when i ...") or an inversion
    # ("do i ..."); an asserted or coordinated clause's own words before its subject ("that", "but")
    if not _opens_clean(sent[:me.i - sent.start] if main else [t for t in root.subtree if t.i < me.i]):
        return None
    words = _predicate(sent, root, me)
    if words is None or not MIN_WORDS <= len(words) <= MAX_WORDS or words[-1].lower_ in ELLIPTIC or \
            words[-1].pos_ == "AUX" or words[-1].i == root.i and words[-1].lemma_.lower() in ("be", "have", "do"):
        return None  # "i hope not", "i try not to", "i've always been": the event is in another utterance
    if root.lemma_.lower() == "be" and any(c.dep_ == "attr" and (c.pos_ == "PROPN" or c.ent_type_ == "PERSON" or
                                                                 c.tag_ == "NN" and not _determined(c))
                                           for c in root.children):
        # "i'm lynn": a name, no event, and its contrary no statement of the dialogue; a singular common noun takes
        # a determiner as the complement of "be" ("i'm a nurse"), so a bare one is a name the lower-cased dialogue
        # hides ("i'm bell in room 908") or a word of address ("i'm ready mom")
        return None
    if any(t.dep_ == "npadvmod" and t.pos_ in ("NOUN", "PROPN") and not any(True for _ in t.children) and
           t.ent_type_ not in ("DATE", "TIME") for t in sent if t.head.i == root.i):
        return None  # a word of address ("i'm sorry sir"): it names the other person, no part of the event
    finite = [t for t in words if t.tag_ in ("VBP", "VBD", "VBZ", "MD")]
    # "was worried something else is broken": one tense changed, not two; "was hungry now": a time of the present
    past = past and len(finite) == 1 and not any(t.lower_ in PRESENT_TIME for t in words)
    if any(t.lower_ in UNRESOLVED and t.pos_ in ("PRON", "DET", "ADV") for t in words) or \
            any(t.lower_ in INFORMAL for t in words):
        return None
    if any(t.lower_ in ("better", "best") and t.dep_ == "advmod" and t.head.pos_ in ("VERB", "AUX") and t.i < t.head.i
           for t in words):
        return None  # "(had) better ask": a modal idiom, which neither agrees nor takes a negation inside
    if any(t.is_alpha and len(t.text) == 1 and t.lower_ != "a" for t in words):
        return None  # a letter on its own: an abbreviation the tokenizer split ("t. v.")
    if any(t.lower_ == "you" and t.dep_ == "nsubj" and len(list(t.head.children)) == 1 for t in words):
        return None  # "you know", "you see": an aside to the other person, no part of the event
    # a duty or a chance ("i must go", "i could help"), said contrary, is a prohibition or no English ("must not go",
    # "must fail to write"); "will" is an event to come, "can" an ability
    if any(t.tag_ == "MD" and SPELT.get(t.lower_, t.lower_) not in ("will", "can", "ca") for t in words):
        return None
    own = OWN.get(person.pronoun, {})
    if any(t.lower_ in FIRST and t.lower_ not in own for t in words):
        return None
    negated = [t for t in words if t.dep_ == "neg"]
    if len(negated) > 1 or negated and _polarity_bound(words):
        return None
    if not negated and any(t.tag_ == "MD" and SPELT.get(t.lower_, t.lower_) != "will" for t in words):
        return None  # "can go" said contrary is "cannot go", "fails to can": only its negation drops
    said = _render(words, root, person, own, past, keep_negation=True)
    if said is None or not negated:
        return None if said is None else (said, None)
    contrary = _render(words, root, person, own, past, keep_negation=False)
    if contrary is None or len(contrary.split()) - len(person.subject.split()) < MIN_WORDS:
        return None  # "i didn't know" -> "The listener knew": the event is in another utterance
    return said, contrary


def _render(words, root, person: Person, own: dict, past: bool, keep_negation: bool) -> str | None:
    """The clause's words for a third person subject: the first finite verb agreeing with it, "you" the other
    person, "my" the subject's pronoun; without its negation (and the do-support that carried it) unless
    `keep_negation`."""
    out, finite_done, support = [], False, None
    for t in words:
        if t.dep_ == "neg" and not keep_negation:
            continue  # the contrary of a negated clause
        low = SPELT.get(t.lower_, t.lower_)
        if low == "can" and keep_negation and t.i + 1 < len(t.doc) and t.nbor(1).dep_ == "neg":
            low = "cannot"  # "ca n't": one word in English
        if t.dep_ == "neg" and out and out[-1][0] == "cannot":
            continue
        if not finite_done and t.tag_ in ("VBP", "VBD", "VBZ", "MD") and (t.i == root.i or t.head.i == root.i):
            finite_done = True
            if not keep_negation and t.lemma_.lower() == "do" and t.dep_ == "aux":
                support = "VBD" if past or t.tag_ == "VBD" else "VBZ"  # "don't like" -> "likes": do goes with "not"
                continue
            low = _agree(t, low, past) if low != "cannot" else low
            if low is None:
                return None
        elif t.tag_ in ("VBP", "VBD") and _said_of_you(t):
            low = _agree(t, low, False) if t.tag_ == "VBP" else AGREE.get(low, (low, low))[1]  # "you were" -> "was"
            if low is None:
                return None
        elif low in own:
            low = own[low]
        elif low in SECOND:
            low = SECOND[low].format(other=person.other)
        out.append((low, t.i))
    if support is not None:
        from tasks.distractors import grounded

        if any(c.dep_ == "conj" and c.pos_ == "VERB" for c in root.children):
            return None  # "didn't go and look": each verb would take the tense
        form = grounded.inflect(root.lemma_.lower(), support)
        if form is None:
            return None
        out = [(form if i == root.i else w, i) for w, i in out]
    text = _detokenize(out, root.doc, person.cased)
    return f"{person.subject} {text}." if text else None


# the spoken "gonna", "wanna", "gotta", split by the tokenizer: no written English
INFORMAL = frozenset({"gon", "wan", "ta", "na"})
# times said from the moment of speaking, which a statement in the past contradicts ("was hungry now")
PRESENT_TIME = frozenset({"now", "today", "tonight", "tomorrow", "currently", "soon", "yet", "still"})


# words that need a negation to be English ("has not called anyone yet": "has called anyone yet" is none), and a
# stretch of time a negation runs over ("has not heard from her for 2 weeks": "has heard from her for 2 weeks")
NEGATIVE_POLARITY = frozenset({"any", "anything", "anyone", "anybody", "anywhere", "yet", "anymore", "either",
                               "ever", "until", "till", "at all", "much", "since"})


def _polarity_bound(words) -> bool:
    """Does the negated clause hold a word that needs its negation (NEGATIVE_POLARITY) or a stretch of time
    after "for"?"""
    return any(t.lower_ in NEGATIVE_POLARITY or t.lower_ == "for" and t.nbor(1).ent_type_ == "DATE"
               for t in words if t.i + 1 < len(t.doc))


def _predicate(sent, root, me) -> list | None:
    """The clause's words after its subject: the root's subtree, cut before its first comma and before a
    coordinated clause with a subject of its own ("i called but she was out"); the final punctuation dropped."""
    span = [t for t in root.subtree if t.i > me.i and sent.start <= t.i < sent.end]
    if not span or any(t.i < me.i and t.dep_ in ("aux", "auxpass") for t in root.children):
        return None
    # a second predicate or clause ("i stayed home and watched tv", "i called but she was out") is a second
    # statement: the first is kept
    stop = next((t.i for t in span if t.text in (",", ";", ":", "--", "-", "...") or t.dep_ == "cc" and t.head.i == root.i
                 or t.dep_ == "cc" and any(c.dep_ == "conj" and any(x.dep_ in ("nsubj", "nsubjpass") for x in c.children)
                                           for c in t.head.children)), None)
    span = [t for t in span if (stop is None or t.i < stop) and not _focus(t)]
    while span and (span[-1].is_punct or span[-1].dep_ == "cc"):
        span.pop()
    if not span or any(b.i - a.i > 1 and not all(_focus(x) for x in a.doc[a.i + 1:b.i]) for a, b in zip(span, span[1:])):
        return None  # the clause's words are one stretch of the utterance (but the focusing adverbs left out)
    return span


def _determined(noun) -> bool:
    """Does the noun have a determiner, a possessive or a number before it ("a nurse", "your doctor", "two")?"""
    return any(c.dep_ in ("det", "poss", "nummod") for c in noun.children)


def _said_of_you(tok) -> bool:
    """Is the verb the finite verb of a clause whose subject is "you" (its own subject, or its main verb's where it
    is that verb's first auxiliary: "you've done")?"""
    def you(v) -> bool:
        return any(c.dep_ in ("nsubj", "nsubjpass") and c.lower_ == "you" for c in v.children)

    if you(tok):
        return True
    first = next((c for c in tok.head.children if c.dep_ in ("aux", "auxpass")), None)
    return tok.dep_ in ("aux", "auxpass") and first is not None and first.i == tok.i and you(tok.head)


def _focus(tok) -> bool:
    """Is the word an adverb that focuses or grades the predicate ("i've only been", "i'm so tired", "i just
    need")? Said contrary, "has not only been", "was not just kidding" read as another statement; left out, the
    event stays."""
    return tok.dep_ == "advmod" and tok.lower_ in FOCUS and not any(True for _ in tok.children)


def _agree(tok, low: str, past: bool) -> str | None:
    """The first finite verb of a clause whose subject was "I", for a third person singular subject (in the
    past where `past` and the verb is present)."""
    from tasks.distractors import grounded

    if tok.tag_ == "MD":
        return low if low != "'d" else None  # "'d": had or would, the parse cannot tell
    if low in AGREE:
        return AGREE[low][past]
    if tok.tag_ == "VBD":
        return low
    form = grounded.inflect(tok.lemma_.lower(), "VBD" if past else "VBZ")
    return form


def _detokenize(words: list[tuple[str, int]], doc, cased: dict[str, str]) -> str:
    """The words with the utterance's spacing, the tokenizer's split clitics joined back ("anna 's" ->
    "anna's"), names spelt as names: as the answers spell them (`cased`: lower-cased word -> its spelling
    inside an answer), else capitalized where the parse finds a name or a day, a month or a feast."""
    parts = []
    for k, (w, i) in enumerate(words):
        tok = doc[i]
        if w in cased:
            w = cased[w]
        elif tok.pos_ == "PROPN" or tok.ent_type_ in ("PERSON", "GPE", "ORG", "NORP", "LOC", "FAC") or \
                w in _CALENDAR:
            w = w[:1].upper() + w[1:]
        glue = k > 0 and (w in ("'s", "’s", "%") or tok.is_punct and w in (".", ",", "'", "’", ")"))
        parts.append(w if k == 0 or glue else " " + w)
    return "".join(parts).strip()


_CALENDAR = frozenset({"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
                       "february", "march", "april", "june", "july", "august", "september", "october", "november",
                       "december", "christmas", "easter"})
