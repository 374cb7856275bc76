"""Fluency checks of rule-based rewrites: a distractor that breaks grammar is easy for any fluent reader
and for a fine-tuned model, even when a linear probe on sentence embeddings cannot tell it apart.

Every rewrite of `tasks.distractors.lexical` is compared with the answer it came from; a check fails
only on a problem the rewrite introduced (an answer that was already ungrammatical does not condemn its
rewrites), except that a rewrite of an answer that is already broken is left out (`broken_answer`). The
checks, each a rule with its reason:

* `fixed_phrase`: a word inside a fixed expression was rewritten ("as soon as possible" -> "as soon as
  impossible", "of course" -> "of courses"): the lexicon below, written for this project;
* `number_agreement` (spaCy's parser): a numeral and the noun it counts disagree ("four trip", "one
  days"), a subject and its finite verb disagree ("the men is", "she have"), or a modal or "do" comes
  before an inflected verb ("would shows") (`AGREEMENT_RULES`);
* (no rewrite check of articles: a rewrite chooses its indefinite article again by the new word's sound,
  inflect's "an hour", "a one-way ticket"; the check fired on none of 2,956 rewrites of the real CICERO
  sample; `article_problems` still reads people's answers: "a opened room");
* `broken_answer`: the answer being rewritten is itself broken English (the parser's agreement checks,
  or a misspelt word: `misspellings`): its rewrites read as broken English (two blind readers marked them);
* `misspelt`: a human-written candidate (this dialogue's or another's answer) with a word English does not
  have (not a function word, unknown to lemminflect's lexicon, not a word of the dialogue);
* `construction` (spaCy's parser, `construction_problems`): a construction English does not have: a
  participle as a clause's only verb ("the clerk given us"), an article before an adjective with no noun,
  two determiners in a row, a that-clause with a to-infinitive or a question's word order, a
  to-infinitive after a verb that takes "-ing" or none, a hearer without "to" after "explain" or "say",
  an article before a verb with its object, a sentence, a name or a month in lower case, one of the two
  people as both subject and object of one verb, "as many" without its second "as" (`CONSTRUCTION_RULES`);
  in a human answer, a name of its dialogue in lower case (`names_in_lower_case`);
* `part_of_speech` (spaCy's tagger): a word replaced one for one is read as another part of speech in the
  rewrite ("all the help" -> "all the hinder": a verb where a noun was);
* `complement` (spaCy's parser, `COMPLEMENTS`): a word replaced one for one that does not take a complement
  the old word had: a particle ("catch up" -> "miss up"), an object ("leave the house" -> "stay the house"),
  a to-infinitive ("excited to try" -> "bored to try"), a gerund, a that-clause, a preposition;
* `role_collapse`: two people of the answer became one ("the speaker ... the listener's" -> "the
  speaker ... the speaker's");
* `compound_modifier`: a word replaced inside a compound ("a full time teacher" -> "an empty time teacher");
* `coordination` (spaCy's parser, VADER's valence): an adjective turned round beside one of the same strong
  valence it was joined to by "and" ("happy and satisfied" -> "sad and satisfied": the two say one thing);
* `name_part` (spaCy's parser): a word replaced that heads a proper noun before it ("niagara falls" ->
  "niagara rises").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from tasks.vocabulary import CONVERSATION_ROLES, PERSON_NOUNS, forms

# Written for this project: fixed expressions of everyday English whose words cannot be swapped one by one.
FIXED_PHRASES = tuple(sorted({
    "as soon as possible", "as far as", "as long as", "as well as", "as well", "as usual", "as a matter of fact",
    "at least", "at most", "at all", "at first", "at last", "at once", "at the same time", "at the moment",
    "all right", "all the same", "after all", "first of all", "in the end", "in the long run", "in a hurry",
    "of course", "by the way", "no longer", "no doubt", "no way", "more or less", "sooner or later", "once more",
    "once again", "never again", "right away", "right now", "for good", "for sure", "for free", "in general", "in time",
    "on time", "on purpose", "up to date", "out of date", "make sure", "take care", "take place", "never mind",
    "good night", "good morning", "good evening", "good luck", "how come", "little by little", "day by day",
    "face to face", "side by side", "up and down", "back and forth", "here and there", "now and then",
    "every now and then", "soon after", "give up", "pick up", "look forward to", "get along", "so far", "had better",
    "would rather", "thank you", "you're welcome", "excuse me", "long time no see", "make up one's mind",
    "make a living", "keep in touch", "in front of", "in spite of", "on the other hand", "fall in love",
    "a single", "every single", "full time", "part time", "look after", "take after",
}, key=lambda p: (-len(p), p)))  # (dates such as "last night" are the entity swap's to exchange, not fixed)
# Every check's name: the rewrite checks (FLUENCY_RULES) and `misspelt`, the check of human-written candidates
CHECKS = ("broken_answer", "misspelt", "fixed_phrase", "number_agreement", "construction", "part_of_speech",
          "complement", "role_collapse", "compound_modifier", "coordination", "name_part")
# The people an answer talks about: a rewrite that leaves one where the answer had two ("The speaker
# agrees with the listener's decision" -> "The speaker agrees with the speaker's decision") is nonsense.
ROLE_NOUNS = re.compile(r"(?<![\w'’])(" + "|".join(sorted(forms(PERSON_NOUNS), key=lambda w: (-len(w), w))) + r")(?![\w])",
                        re.I)


def _inflected(phrase: str) -> str:
    """A fixed phrase as a pattern: a phrase that starts with a verb matches every form of it ("fell in love",
    "looks forward to"; the forms are lemminflect's)."""
    from lemminflect import getAllInflections

    first, _, rest = phrase.partition(" ")
    forms = sorted({first} | {f for fs in getAllInflections(first, upos="VERB").values() for f in fs}, key=len,
                   reverse=True) if rest else [first]
    return "(?:" + "|".join(re.escape(f) for f in forms) + ")" + (re.escape(" " + rest) if rest else "")


_PHRASE = {p: re.compile(rf"(?<![\w'’]){_inflected(p)}(?![\w'’])", re.I) for p in FIXED_PHRASES}
SINGULAR_NUMERALS = {"one", "1", "a", "an", "single"}
SINGULAR_VERBS = {"is", "was", "has", "does"}
PLURAL_VERBS = {"are", "were", "have", "do"}


def fixed_phrases(text: str) -> dict[str, int]:
    """Fixed expressions of the text, with how often each occurs."""
    return {p: n for p, rx in _PHRASE.items() if (n := len(rx.findall(text)))}


@lru_cache(maxsize=1)
def _inflect():
    import inflect

    return inflect.engine()


def _plural_subject(tok) -> bool | None:
    """Is this subject plural (coordinated subjects are), None when its number is not marked."""
    if any(c.dep_ == "conj" for c in tok.children) and any(c.dep_ == "cc" and c.lower_ == "and" for c in tok.children):
        return True
    number = tok.morph.get("Number")
    if tok.tag_ in ("NNS", "NNPS") or number == ["Plur"]:
        return True
    if tok.tag_ in ("NN", "NNP") or number == ["Sing"]:
        return False
    if tok.lower_ in ("he", "she", "it", "this", "that"):
        return False
    if tok.lower_ in ("we", "they", "these", "those"):
        return True
    return None


# Nouns English also agrees in the plural ("the police arrive", "the couple are").
COLLECTIVE = frozenset({"police", "family", "staff", "team", "couple", "crew", "government", "class", "audience",
                        "committee", "public", "pair", "majority", "group", "band", "company", "cattle", "management"})
SUBJUNCTIVE_HEADS = frozenset({"suggest", "insist", "demand", "recommend", "require", "propose", "request", "ask",
                               "urge", "advise", "prefer"})


def _finite(verb) -> bool:
    """A present-tense verb of its own clause, no auxiliary before it, and not the subjunctive of a
    that-clause after "suggest", "insist" ... ("she suggests that the speaker go")."""
    if any(c.dep_ in ("aux", "auxpass") for c in verb.children) or verb.dep_ == "xcomp":
        return False
    return not (verb.dep_ == "ccomp" and verb.head.lemma_ in SUBJUNCTIVE_HEADS)


@dataclass(frozen=True)
class GrammarRule:
    """One rule of English grammar read off a parse: its name, what it catches, and its function (the
    text's tokens, the index of one) -> what is wrong at that token, or None. `agreement_problems` and
    `construction_problems` ask their rules token by token, in order."""

    name: str
    catches: str
    find: Callable[[list, int], str | None]


# Each rule declared once, by its function (the decorators below), in the order `grammar` asks them.
AGREEMENT_RULES: list[GrammarRule] = []
# Constructions English does not have: writers' slips of the release's answers that two blind readers
# marked broken (draws D-G), and what a word-for-word rewrite can make of a correct answer. Each a rule of
# English grammar, not a list of sentences.
CONSTRUCTION_RULES: list[GrammarRule] = []


def _declares(rules: list[GrammarRule]):
    def declare(name: str, catches: str):
        def register(find: Callable[[list, int], str | None]):
            rules.append(GrammarRule(name, catches, find))
            return find
        return register
    return declare


agreement_rule, construction_rule = _declares(AGREEMENT_RULES), _declares(CONSTRUCTION_RULES)


@agreement_rule("numeral_noun", "a numeral and the noun it counts that disagree ('four trip', 'one days')")
def _numeral_noun(toks: list, k: int) -> str | None:
    """A numeral counting the noun after it ("four trip"); one after its noun names it ("room 11", "storm 11")."""
    tok = toks[k]
    if tok.dep_ == "nummod" and tok.head.pos_ in ("NOUN", "PROPN") and tok.like_num and tok.i < tok.head.i:
        # "zero" counts a mass noun in the singular ("zero interest"); a numeral joined by a hyphen is part of
        # a word ("eighty-second", "two-year"); a counted noun that modifies another noun stays singular ("a
        # two year course")
        if tok.lower_ in ("zero", "0") or (k + 1 < len(toks) and toks[k + 1].text == "-") or \
                (tok.head.dep_ in ("compound", "nmod", "amod") and tok.head.head.pos_ == "NOUN"
                 and tok.head.head.i > tok.head.i):
            return None
        singular = tok.lower_ in SINGULAR_NUMERALS
        if singular and tok.head.tag_ in ("NNS", "NNPS") and tok.head.lower_ not in ("people", "times"):
            return f"'{tok.text} {tok.head.text}': one of a plural noun"
        if not singular and tok.head.tag_ in ("NN", "NNP") and tok.head.lower_ not in ("percent", "o'clock", "dollar"):
            return f"'{tok.text} ... {tok.head.text}': {tok.text} of a singular noun"
    return None


@agreement_rule("subject_verb", "a subject and its finite verb that disagree ('the men is', 'she have')")
def _subject_verb(toks: list, k: int) -> str | None:
    """A subject and its finite verb (or finite auxiliary) that disagree in number."""
    tok = toks[k]
    if tok.dep_ != "nsubj":
        return None
    verb = tok.head if tok.head.tag_ in ("VBZ", "VBP", "VBD") else None
    for child in tok.head.children:  # the finite auxiliary, when there is one
        if child.dep_ in ("aux", "auxpass") and child.tag_ in ("VBZ", "VBP", "VBD"):
            verb = child
            break
    plural = _plural_subject(tok)
    if verb is None or plural is None or tok.lower_ in ("i", "you"):
        return None
    v = verb.lower_
    if plural and (v in SINGULAR_VERBS or verb.tag_ == "VBZ"):
        return f"'{tok.text} ... {verb.text}': a plural subject with a singular verb"
    if not plural and (v in ("are", "were") or (verb.tag_ == "VBP" and (
            v in PLURAL_VERBS or (verb.i == tok.head.i and tok.pos_ in ("NOUN", "PROPN") and tok.lower_ not in COLLECTIVE
                                  and _finite(verb) and not _also_past(verb))))):
        return f"'{tok.text} ... {verb.text}': a singular subject with a plural verb"
    return None


def _also_past(verb) -> bool:
    """May the verb be a past form: its present is also its past ("The dress fit her": "fit", "put", "cut"),
    or the lexicon does not know it as a present form at all ("snuck", which the parser may tag VBP)?"""
    from lemminflect import getAllLemmas, getInflection

    word = verb.lower_
    lemmas = set(getAllLemmas(word).get("VERB", ())) | {verb.lemma_.lower()}
    present = {f.lower() for lemma in lemmas for f in getInflection(lemma, tag="VBP") or ()}
    past = {f.lower() for lemma in lemmas for f in getInflection(lemma, tag="VBD") or ()}
    return word in past or word not in present


@agreement_rule("modal_before_inflected", "a modal or 'do' before an inflected verb ('would shows')")
def _modal_before_inflected(toks: list, k: int) -> str | None:
    """A modal or do-support before an inflected verb ("would shows", "did not went")."""
    tok = toks[k]
    if tok.dep_ == "aux" and (tok.tag_ == "MD" or tok.lower_ in ("do", "does", "did")) and \
            tok.head.tag_ in ("VBZ", "VBD") and tok.head.i > tok.i:
        return f"'{tok.text} ... {tok.head.text}': a {'modal' if tok.tag_ == 'MD' else 'do'} before an inflected verb"
    return None


def grammar(rules, doc) -> list[str]:
    """What each rule finds, token by token, in order."""
    toks = list(doc)
    return [found for k in range(len(toks)) for rule in rules if (found := rule.find(toks, k))]


def agreement_problems(doc) -> list[str]:
    """Number disagreements the parser sees in one parsed text (AGREEMENT_RULES)."""
    return grammar(AGREEMENT_RULES, doc)


# Verbs whose complement is a gerund, never a to-infinitive ("denied coming", not "denied to come"); and
# verbs whose "to" is a preposition ("resorted to following", "looks forward to seeing"). Written for this
# project from English grammars' lists, the verbs that cannot also take an object before "to".
GERUND_VERBS = frozenset({"deny", "enjoy", "avoid", "finish", "mind", "quit", "risk", "postpone", "delay",
                          "resist", "practise", "practice", "dislike", "detest", "suggest", "recommend", "consider",
                          "keep", "miss", "imagine", "regret"})
PREPOSITION_TO = frozenset({"resort", "object", "accustom", "devote", "dedicate", "commit", "confess"})
# Verbs whose hearer comes after "to" ("explained to the speaker that", never "explained the speaker that").
TO_HEARER = frozenset({"explain", "describe", "say", "announce", "mention", "report", "repeat", "admit", "confess",
                       "introduce"})
DETERMINERS = frozenset({"a", "an", "the", "some", "another", "this", "these", "those", "my", "your", "its", "our",
                         "their", "any", "each", "every"})
ARTICLES = frozenset({"a", "an", "the", "another"})
TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "mr.", "mrs.", "ms.", "dr.", "prof", "prof."})
# Month and day names English always capitalises (May, March and August are also common words).
CALENDAR = frozenset({"january", "february", "april", "june", "july", "september", "october", "november",
                      "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"})
TWO_PEOPLE = frozenset(CONVERSATION_ROLES)
def _lemmas(word: str) -> dict:
    from lemminflect import getAllLemmas

    return getAllLemmas(word)


def _participle_only(tok) -> bool:
    """A past participle that is not also the past tense ("given", "taken", "gone"; not "played")."""
    from lemminflect import getInflection

    if not tok.text.islower() or tok.lower_ == tok.lemma_:  # "become", "come": also the present tense
        return False
    participles = getInflection(tok.lemma_, tag="VBN") or ()
    pasts = getInflection(tok.lemma_, tag="VBD") or ()
    return tok.lower_ in participles and tok.lower_ not in pasts


@construction_rule("participle_alone", "a past participle as a clause's only verb")
def _participle_alone(toks: list, k: int) -> str | None:
    """A clause of its own whose only verb is a past participle ("The clerk given us the keys"; not "had
    his wallet stolen", where the participle is what happened to it)."""
    tok = toks[k]
    deps = {c.dep_ for c in tok.children}
    if "nsubj" in deps and not deps & {"aux", "auxpass"} and tok.pos_ in ("VERB", "AUX") and \
            tok.dep_ in ("ROOT", "conj", "relcl", "advcl") and _participle_only(tok):
        return f"'{tok.text}': a past participle with no auxiliary (a clause needs 'has {tok.text}' or its past tense)"
    return None


@construction_rule("article_before_adjective", "an article before an adjective with no noun")
def _article_before_adjective(toks: list, k: int) -> str | None:
    """An article before an adjective with no noun ("was a worried about"; "a local", "a senior": adjectives
    English also has as nouns)."""
    tok = toks[k]
    if tok.lower_ in ("a", "an") and tok.dep_ == "det" and tok.head.tag_ in ("JJ", "VBN") and \
            tok.head.dep_ in ("acomp", "attr", "ROOT") and "NOUN" not in _lemmas(tok.head.lower_):
        return f"'{tok.text} {tok.head.text}': an article before an adjective with no noun"
    return None


@construction_rule("two_determiners", "two determiners in a row")
def _two_determiners(toks: list, k: int) -> str | None:
    """Two determiners in a row ("some another time")."""
    tok, nxt = toks[k], toks[k + 1] if k + 1 < len(toks) else None
    if nxt is not None and tok.lower_ in DETERMINERS and tok.tag_ in ("DT", "PRP$") and nxt.lower_ in ARTICLES \
            and nxt.tag_ == "DT":
        return f"'{tok.text} {nxt.text}': two determiners in a row"
    return None


@construction_rule("that_to_infinitive", "a that-clause with a to-infinitive")
def _that_to_infinitive(toks: list, k: int) -> str | None:
    """A that-clause with a to-infinitive ("asks that the waiter to bring")."""
    tok = toks[k]
    if tok.dep_ == "mark" and tok.lower_ == "that":
        clause = tok.head
        if any(c.dep_ == "aux" and c.tag_ == "TO" for c in clause.children) and \
                "nsubj" in {c.dep_ for c in clause.children}:
            return f"'that ... to {clause.text}': a that-clause with a to-infinitive"
    return None


@construction_rule("that_question_order", "a that-clause in a question's word order")
def _that_question_order(toks: list, k: int) -> str | None:
    """A that-clause in a question's word order ("asked that why did she")."""
    tok, nxt = toks[k], toks[k + 1] if k + 1 < len(toks) else None
    if tok.dep_ == "mark" and tok.lower_ == "that" and nxt is not None and nxt.tag_ in ("WRB", "WP") and \
            k + 3 < len(toks) and toks[k + 2].tag_ in ("VBD", "VBZ", "VBP", "MD") and toks[k + 3].dep_ == "nsubj":
        return f"'that {nxt.text} {toks[k + 2].text} {toks[k + 3].text}': a question's word order after 'that'"
    return None


# Verbs that take a question for their object ("asked whether", "wondered if"): an indirect question has no "that".
ASKING = frozenset({"ask", "inquire", "enquire", "wonder", "query", "question"})


@construction_rule("that_whether", "'that' before 'whether' or 'if' after a verb of asking")
def _that_whether(toks: list, k: int) -> str | None:
    """An indirect question opened by two complementizers ("inquired his friend that whether he had"): a verb of
    asking takes "whether" or "if" alone."""
    tok, nxt = toks[k], toks[k + 1] if k + 1 < len(toks) else None
    if tok.lower_ != "that" or nxt is None or nxt.lower_ not in ("whether", "if"):
        return None
    verb = next((t for t in reversed(toks[:k]) if t.pos_ in ("VERB", "AUX")), None)
    if verb is not None and verb.lemma_.lower() in ASKING:
        return f"'{verb.text} ... that {nxt.text}': a verb of asking takes '{nxt.text}' alone"
    return None


@construction_rule("infinitive_for_gerund", "a to-infinitive after a verb that takes '-ing'")
def _infinitive_for_gerund(toks: list, k: int) -> str | None:
    """A to-infinitive after a verb that takes a gerund or whose "to" is a preposition ("denied to pay",
    "resorted to call", "looks forward to see")."""
    tok = toks[k]
    if tok.dep_ == "xcomp" and tok.tag_ == "VB" and any(c.dep_ == "aux" and c.tag_ == "TO" for c in tok.children):
        head = tok.head
        objects = any(c.dep_ in ("dobj", "dative") and c.i < tok.i for c in head.children)
        if not objects and (head.lemma_ in GERUND_VERBS or head.lemma_ in PREPOSITION_TO or (
                head.lemma_ == "look" and any(c.lower_ == "forward" for c in head.children))):
            return f"'{head.text} to {tok.text}': '{head.lemma_}' takes '-ing', not a to-infinitive"
    return None


@construction_rule("hearer_without_to", "a hearer without 'to' after 'explain', 'say' ...")
def _hearer_without_to(toks: list, k: int) -> str | None:
    """A hearer without "to" after "explain", "say" ... ("explained the tourists that")."""
    tok = toks[k]
    if not (tok.lemma_ in TO_HEARER and tok.pos_ == "VERB"):
        return None
    children = list(tok.children)
    clause = next((c for c in children if c.dep_ == "ccomp" and c.i > tok.i), None)
    hearer = next((c for c in children if c.dep_ in ("dobj", "dative") and c.i > tok.i), None)
    subjects = [c for c in clause.children if c.dep_ in ("nsubj", "nsubjpass")] if clause is not None else []
    that = hearer is not None and hearer.i + 1 < len(toks) and toks[hearer.i + 1].lower_ == "that" and \
        toks[hearer.i + 1].dep_ == "mark"
    if (hearer is not None and clause is not None and hearer.i < clause.i) or len(subjects) >= 2 or that:
        return f"'{tok.text} the ...': '{tok.lemma_}' names its hearer after 'to'"
    return None


@construction_rule("article_before_verb", "an article before a verb with its object")
def _article_before_verb(toks: list, k: int) -> str | None:
    """An article before a verb with its object ("the showing the tourists")."""
    tok = toks[k]
    if tok.dep_ == "det" and tok.lower_ in ("the", "a", "an") and tok.head.lower_.endswith("ing") and \
            any(c.dep_ == "dobj" for c in tok.head.children):
        return f"'{tok.text} {tok.head.text} ...': an article before a verb with its object"
    return None


@construction_rule("as_many_alone", "'as many' / 'as much' without its second 'as'")
def _as_many_alone(toks: list, k: int) -> str | None:
    """"as many" / "as much" without its second "as"."""
    tok, nxt = toks[k], toks[k + 1] if k + 1 < len(toks) else None
    if tok.lower_ == "as" and tok.tag_ == "RB" and nxt is not None and nxt.lower_ in ("many", "much") and \
            not any(t.lower_ == "as" for t in toks[k + 2:]):
        return f"'as {nxt.text}': a comparison without its second 'as'"
    return None


@construction_rule("sentence_in_lower_case", "a sentence that starts in lower case")
def _sentence_in_lower_case(toks: list, k: int) -> str | None:
    tok = toks[k]
    if tok.is_sent_start and k > 0 and tok.is_alpha and tok.text[:1].islower() and toks[k - 1].text in (".", "!", "?"):
        return f"'{tok.text}': a sentence that starts in lower case"
    return None


@construction_rule("name_in_lower_case", "a month, a day or a name in lower case")
def _name_in_lower_case(toks: list, k: int) -> str | None:
    """A month, a day or a name in lower case ("Mrs. jones", "a june wedding")."""
    tok = toks[k]
    if tok.text.islower() and tok.is_alpha and (tok.lower_ in CALENDAR or (
            tok.tag_ == "NNP" and k > 0 and (toks[k - 1].lower_ in TITLES or (
                toks[k - 1].tag_ == "NNP" and toks[k - 1].text.istitle() and toks[k - 1].dep_ == "compound")))):
        return f"'{tok.text}': a name in lower case"
    return None


@construction_rule("one_person_both_roles", "one of the two people as both subject and object")
def _one_person_both_roles(toks: list, k: int) -> str | None:
    """One of the two people as both the doer and the one done to ("the listener thanks the listener"; the
    tagger may read the verb as a noun: "thanks")."""
    tok = toks[k]
    children = list(tok.children)
    if {c.dep_ for c in children} >= {"nsubj", "dobj"}:
        subj = {c.lower_ for c in children if c.dep_ == "nsubj"} & TWO_PEOPLE
        obj = {c.lower_ for c in children if c.dep_ == "dobj"} & TWO_PEOPLE
        if subj & obj:
            who = next(iter(subj & obj))
            return f"'the {who} ... the {who}': one person as both the subject and the object of '{tok.lemma_}'"
    return None


def construction_problems(doc) -> list[str]:
    """Constructions English does not have, read off one parsed text (CONSTRUCTION_RULES, token by token)."""
    return grammar(CONSTRUCTION_RULES, doc)


def names_in_lower_case(doc, names: frozenset[str]) -> list[str]:
    """Words a human answer writes in lower case that its dialogue writes only capitalised and the lexicon
    (lemminflect) does not know: a name ("to catch james" where the dialogue has James). A name that is
    also a word ("Bill", "May") is left alone."""
    from lemminflect import getAllLemmas

    return [t.text for t in doc if t.is_alpha and len(t.text) >= 2 and t.text.islower() and t.lower_ in names and not t.is_stop
            and t.lower_ not in ABBREVIATIONS and not getAllLemmas(t.lower_)]


def article_problems(text: str) -> list[str]:
    """Indefinite articles before a word that takes the other one."""
    out = []
    for m in re.finditer(r"(?<![\w'’])(a|an)\s+([A-Za-z][\w'’-]*)", text, re.I):
        chosen = _inflect().a(m.group(2)).split(" ", 1)[0]
        if chosen.lower() != m.group(1).lower():
            out.append(f"'{m.group(1)} {m.group(2)}': takes '{chosen}'")
    return out


def _new(before: list[str], after: list[str]) -> list[str]:
    """Problems of `after` beyond those `before` already had (as a multiset)."""
    left = list(before)
    out = []
    for p in after:
        if p in left:
            left.remove(p)
        else:
            out.append(p)
    return out


# Written for this project: short forms everyday English writes in lower case that no lexicon lists.
ABBREVIATIONS = frozenset({"ok", "tv", "pm", "am", "mr", "mrs", "ms", "dr", "hi", "oh", "id", "etc", "vs"})


# Prefixes English derives words with productively ("demotivation", "overjoyed", "unavailability"): a
# known word behind one is a word, though no dictionary lists the derivation.
PREFIXES = ("anti", "counter", "de", "dis", "in", "inter", "mis", "non", "out", "over", "post", "pre", "re",
            "self", "sub", "super", "un", "under")


@lru_cache(maxsize=1)
def _dictionary():
    """pyspellchecker's English word list (word frequencies of subtitles and the web): everyday words that
    lemminflect's lexicon of inflections lacks ("pub", "halal", "snuck", "playful")."""
    from spellchecker import SpellChecker

    return SpellChecker(language="en", distance=1)


def is_word(word: str) -> bool:
    """Does English have this lower-case word: in lemminflect's lexicon or pyspellchecker's list, a known
    prefix before a word (`PREFIXES`), or two words of three letters or more written as one ("playlist",
    "neverending")? A typo ("univeristy", "officals", "thes") is none of these."""
    from lemminflect import getAllLemmas

    def known(w: str) -> bool:
        return bool(getAllLemmas(w)) or w in _dictionary()

    if known(word):
        return True
    if any(word.startswith(p) and len(word) - len(p) >= 4 and known(word[len(p):]) for p in PREFIXES):
        return True
    return any(known(word[:k]) and known(word[k:]) for k in range(3, len(word) - 2))


def misspellings(doc, known: frozenset[str] = frozenset()) -> list[str]:
    """Lower-case words of a parsed text that English does not have: neither a function word (spaCy's stop
    list, a clitic's part as "wo" of "won't") nor a word (`is_word`), nor one of `known` (the dialogue's own
    words: its names and slang). Human-written answers carry typos ("necessory", "attatch", "speeaker"): as
    distractors they read as broken English (two blind readers marked them so). Capitalised words are
    names and are left alone."""
    return [t.text for t in doc if t.is_alpha and t.lower_ not in ABBREVIATIONS and t.text.islower() and len(t.text) >= 2
            and not t.is_stop and t.lower_ not in known and not _clitic_part(t) and not is_word(t.lower_)]


def _clitic_part(tok) -> bool:
    """The first part of a contraction the tokenizer split ("wo" n't, "ca" n't, "sha" n't)."""
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return nxt is not None and nxt.lower_ in ("n't", "n’t") and not tok.whitespace_


def pos_changes(before, after) -> list[str]:
    """Words a rewrite replaced one for one that change part of speech: the parser reads the new word as
    another part of speech than the old one, or as one the lexicon (lemminflect) does not give the word
    (an antonym that exists only as a verb put where the answer had a noun: "all the help" -> "all the
    hinder")."""
    import difflib

    from lemminflect import getAllLemmas

    a, b = [t for t in before if not t.is_punct], [t for t in after if not t.is_punct]
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, [t.lower_ for t in a], [t.lower_ for t in b],
                                                      autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            for x, y in zip(a[i1:i2], b[j1:j2]):
                coarse = lambda t: {"AUX": "VERB", "PROPN": "NOUN"}.get(t.pos_, t.pos_)  # noqa: E731
                # a participle and an adjective in one role are one part of speech here: "feels worried" ->
                # "feels relieved", "a crowded bus" -> "a deserted bus" (the parser tags such words either way)
                if {x.tag_, y.tag_} <= {"JJ", "VBN"} and x.dep_ == y.dep_ and x.dep_ in ("acomp", "oprd", "conj", "amod"):
                    continue
                if coarse(x) != coarse(y) and {coarse(x), coarse(y)} & {"NOUN", "VERB", "ADJ"}:
                    out.append(f"'{x.text}' ({x.pos_}) became '{y.text}' ({y.pos_})")
                    continue
                lexicon = getAllLemmas(y.lower_)
                if coarse(y) in ("NOUN", "VERB", "ADJ") and y.pos_ != "PROPN" and lexicon and coarse(y) not in lexicon:
                    out.append(f"'{y.text}' stands as a {y.pos_.lower()} where English has it only as "
                               f"{' / '.join(sorted(k.lower() for k in lexicon))}")
    return out


# Written for this project from English grammars' valency lists: the complements each verb and adjective of
# the antonym lexicon (`lexical.ANTONYM_LEMMAS`) and of the feelings (`grounded.EMOTIONS`) takes beyond standing
# alone: a direct object ("obj"), a to-infinitive ("to"), a gerund ("ing"), a that-clause ("that"), a
# preposition ("prep:at"). A word replaced one for one must take every complement the old word had in the
# answer: "leave the house" -> "stay the house", "stays at" -> "leaves at", "begins preparing" -> "ends
# preparing", "excited to try" -> "bored to try" are no English (two blind readers marked them). A word
# missing here takes none; a negative prefix of a word listed takes its complements ("able to" -> "unable to").
_COMPLEMENTS = """
love: obj to ing; hate: obj to ing; like: obj to ing; dislike: obj ing; accept: obj that; reject: obj;
win: obj; lose: obj; buy: obj prep:for; sell: obj prep:to prep:for; open: obj; close: obj; start: obj to ing;
finish: obj ing; begin: obj to ing; end: obj prep:with; come: prep:to prep:from prep:with prep:into;
go: prep:to prep:from prep:with prep:into; enter: obj; exit: obj; remember: obj to ing that prep:about;
forget: obj to ing that prep:about; pass: obj; fail: obj to; succeed: prep:in; stay: prep:at prep:in prep:with
prep:for; leave: obj prep:for; increase: obj prep:by prep:to; decrease: obj prep:by prep:to; rise: prep:by prep:to;
fall: prep:by prep:to; borrow: obj prep:from; lend: obj prep:to; teach: obj to prep:about; learn: obj to
prep:about prep:from; push: obj; pull: obj; laugh: prep:at prep:about; cry: prep:about prep:over prep:for;
smile: prep:at; frown: prep:at; allow: obj to; forbid: obj to; save: obj prep:for; spend: obj prep:on;
agree: to that prep:with prep:on prep:about; disagree: that prep:with prep:on prep:about; praise: obj prep:for;
criticize: obj prep:for; attend: obj; skip: obj; cancel: obj; confirm: obj that; include: obj; exclude: obj
prep:from; receive: obj prep:from; send: obj prep:to; catch: obj; miss: obj ing; hire: obj; fire: obj;
marry: obj; divorce: obj; trust: obj to prep:with; distrust: obj; approve: obj prep:of; disapprove: prep:of;
admit: obj ing that prep:to; deny: obj ing that; believe: obj that prep:in; doubt: obj that; continue: obj to
ing prep:with; stop: obj ing; reduce: obj prep:by prep:to; expand: obj; shrink: prep:by prep:to; welcome: obj;
join: obj;
happy: to that prep:with prep:about prep:for; sad: to that prep:about; pleased: to that prep:with prep:about;
annoyed: that prep:with prep:at prep:about prep:by; glad: to that prep:about prep:of; sorry: to that
prep:about prep:for; excited: to that prep:about prep:for prep:by; bored: prep:with prep:by; calm: prep:about;
angry: that prep:with prep:at prep:about; relaxed: prep:about; nervous: prep:about; early: prep:for;
late: prep:for; first: to; last: to; easy: to prep:for; difficult: to prep:for; hard: to prep:for prep:on;
good: prep:at prep:for prep:to prep:with; bad: prep:at prep:for; better: prep:at prep:for;
worse: prep:at prep:for; right: prep:about prep:to; wrong: prep:about prep:with; safe: to prep:for
prep:from; dangerous: to prep:for; healthy: prep:for; sick: prep:of prep:with; full: prep:of; empty: prep:of;
busy: prep:with; free: to prep:of prep:from prep:for; friendly: prep:with prep:to; rude: prep:to; polite:
prep:to; honest: prep:with prep:about; careful: to prep:with prep:about; careless: prep:with prep:about;
possible: to prep:for; interested: to prep:in; satisfied: that prep:with; comfortable: prep:with;
lucky: to; surprised: to that prep:by prep:at; worried: that prep:about prep:by; relieved: to that
prep:about; anxious: to that prep:about; grateful: prep:for prep:to; proud: to that prep:of; ashamed: to
that prep:of; confident: that prep:about prep:of prep:in; insecure: prep:about; disappointed: to that
prep:with prep:by prep:in; impressed: prep:by prep:with; amused: prep:by prep:at; hopeful: that prep:about
prep:of prep:for; hopeless: prep:at; shocked: to that prep:by prep:at; upset: that prep:about prep:with
prep:by; frustrated: prep:with prep:by prep:about; content: to prep:with; thankful: that prep:for prep:to;
resentful: prep:of; eager: to prep:for; reluctant: to; tired: prep:of; hungry: prep:for; available:
prep:for prep:to; important: to prep:for prep:to; necessary: to prep:for; correct: prep:about prep:in;
responsible: prep:for; irresponsible: ; successful: prep:in prep:at; familiar: prep:with prep:to;
crowded: prep:with; ready: to prep:for; unprepared: prep:for; sure: to that prep:about prep:of;
unsure: prep:about prep:of; certain: to that prep:about prep:of; uncertain: prep:about prep:of; able: to;
unable: to; willing: to; unwilling: to; guilty: prep:of prep:about; innocent: prep:of; married: prep:to;
divorced: prep:from; rich: prep:in; poor: prep:in; true: prep:to; false: prep:to; foreign: prep:to;
different: prep:from; similar: prep:to
"""
COMPLEMENTS = {w.strip(): frozenset(fs.split()) for entry in _COMPLEMENTS.replace("\n", " ").split(";")
               if entry.strip() for w, _, fs in [entry.partition(":")]}
NEGATIVE_PREFIXES = ("un", "in", "im", "ir", "il", "dis", "non")
# English's particles: prepositional adverbs that make a phrasal verb with the verb before them ("pass by",
# "stay up"); the parser reads some of them as adverbs
PARTICLES = frozenset({"up", "down", "out", "off", "away", "back", "over", "by", "in", "on", "around", "along",
                       "through", "behind", "ahead", "apart", "aside", "forward", "together"})


def _takes(lemma: str) -> frozenset[str] | None:
    """The complements a word takes (COMPLEMENTS); a word with a negative prefix not listed takes those of
    the word it negates; None for a word unknown either way."""
    if lemma in COMPLEMENTS:
        return COMPLEMENTS[lemma]
    base = next((lemma[len(p):] for p in NEGATIVE_PREFIXES if lemma.startswith(p) and lemma[len(p):] in COMPLEMENTS),
                None)
    return COMPLEMENTS.get(base) if base else None


def _feeling(word: str) -> bool:
    """An adjective of feeling: an -ed participle, or a word of the antonym lexicon's feeling pairs."""
    from tasks.distractors import grounded

    return grounded.participle(word) or word in grounded.feeling_words()


def _word_lemmas(tok) -> set[str]:
    """The lemmas a word may have: the parser's, the word itself, and lemminflect's of its part of speech
    (the parser reads "hates" as "hat")."""
    return {tok.lemma_.lower(), tok.lower_} | {w for ws in _lemmas(tok.lower_).values() for w in ws}


def complements(tok) -> list[str]:
    """The complements a verb or an adjective has in its sentence: a particle ("catch up": the verb and its
    particle are one word, never replaced alone), a direct object, a to-infinitive, a gerund, a that-clause,
    a preposition right after it (an adjective's wherever it stands: "happy with the result")."""
    if tok.pos_ not in ("VERB", "ADJ"):
        return []
    out = []
    for c in tok.children:
        if c.dep_ == "prt" or (c.dep_ == "advmod" and c.lower_ in PARTICLES and c.i == tok.i + 1):
            out.append("particle")
        elif c.dep_ == "dobj" and tok.pos_ == "VERB":
            out.append("obj")
        elif c.dep_ == "xcomp" and any(g.dep_ == "aux" and g.tag_ == "TO" for g in c.children):
            out.append("to")
        elif c.dep_ == "xcomp" and c.tag_ == "VBG":
            out.append("ing")
        elif c.dep_ == "ccomp" and c.i > tok.i:
            out.append("that")
        elif c.dep_ == "prep" and c.lower_ != "than" and (tok.pos_ == "ADJ" or c.i == tok.i + 1):
            out.append(f"prep:{c.lower_}")
    return out


def complement_changes(before, after) -> list[str]:
    """Words replaced one for one whose new word does not take a complement the old one had in the answer
    (COMPLEMENTS): "leave the house" -> "stay the house", "pass by" -> "fail by"."""
    import difflib

    a, b = [t for t in before if not t.is_punct], [t for t in after if not t.is_punct]
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, [t.lower_ for t in a], [t.lower_ for t in b],
                                                      autojunk=False).get_opcodes():
        if op != "replace" or i2 - i1 != j2 - j1:
            continue
        for x, y in zip(a[i1:i2], b[j1:j2]):
            used = complements(x) if not _word_lemmas(x) & _word_lemmas(y) else []  # another form of one word
            takes = frozenset().union(*(_takes(w) or () for w in _word_lemmas(y)))
            if _feeling(y.lower_):  # "about" goes with every feeling ("worried / relieved about the house")
                takes |= {"prep:about"}
            missing = [c for c in used if c not in takes]
            if missing:
                out.append(f"'{x.text}' -> '{y.text}': '{y.text}' does not take the {missing[0]} complement "
                           f"'{x.text}' had")
    return out


@dataclass(frozen=True)
class FluencyRule:
    """One fluency check of a rewrite: its name (the rejected row's `fluency_<name>` reason code), what it
    catches, and its function (original, rewrite, parsed texts, the dialogue's known words) -> the reason
    the rewrite fails it, or None."""

    name: str
    catches: str
    find: Callable[[str, str, dict, frozenset], str | None]


def _broken_answer(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    problems = agreement_problems(parsed[original]) + construction_problems(parsed[original])
    typos = misspellings(parsed[original], known)
    if problems or typos:  # a rewrite of a broken answer is a broken distractor (two readers marked them so)
        return f"the answer it rewrites is itself broken English ({(problems or typos)[0]})"
    return None


def _fixed_phrase(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    before, after = fixed_phrases(original), fixed_phrases(rewrite)
    broken = [p for p, n in before.items() if after.get(p, 0) < n]
    gained = [p for p, n in after.items() if before.get(p, 0) < n]
    if broken and not gained:  # one fixed expression for another ("at first" -> "at last") stays fluent
        return f"rewrites a word of the fixed expression '{broken[0]}'"
    return None


def _compound_modifier(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    """A word replaced one for one that modifies the first noun of a compound: the compound is one word of
    English ("a high school student", "a full time teacher": no "low school", no "empty time")."""
    before, after = parsed[original], parsed[rewrite]
    if len(before) != len(after):
        return None
    for old, new in zip(before, after):
        if old.lower_ != new.lower_ and old.dep_ == "amod" and old.head.dep_ == "compound":
            return f"'{old.text}' -> '{new.text}' inside the compound '{old.text} {old.head.text} {old.head.head.text}'"
    return None


def _replaced(before, after):
    """(old, new) token pairs of a rewrite that replaced words one for one (the same length)."""
    return [(o, n) for o, n in zip(before, after) if o.lower_ != n.lower_] if len(before) == len(after) else []


def _coordination(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    """An adjective replaced in an "and" coordination with another of the same strong valence (VADER's,
    as `grounded` reads feelings) that stays: the two say one thing ("happy and satisfied"), and one turned
    round contradicts the other ("sad and satisfied"). Adjectives of no or mixed valence may differ ("cheap
    and good" -> "expensive and good"); "but" and "yet" join contrasts."""
    from tasks.distractors.grounded import EMOTION_VALENCE, valence

    lexicon = valence()
    strong = lambda t: lexicon.get(t.lower_, 0.0) if abs(lexicon.get(t.lower_, 0.0)) >= EMOTION_VALENCE else 0.0  # noqa: E731
    before, after = parsed[original], parsed[rewrite]
    changed = {o.i for o, _ in _replaced(before, after)}
    for old, new in _replaced(before, after):
        if old.pos_ != "ADJ" or not strong(old):
            continue
        partners = [c for c in old.children if c.dep_ == "conj"] + ([old.head] if old.dep_ == "conj" else [])
        for other in partners:
            first = min(old, other, key=lambda t: t.i)
            joined_by = {c.lower_ for c in first.children if c.dep_ == "cc"}
            if other.pos_ == old.pos_ and strong(other) * strong(old) > 0 and other.i not in changed and joined_by \
                    and joined_by <= {"and", "&"}:
                return f"'{old.text}' -> '{new.text}' beside '{other.text}', which it was joined to by 'and'"
    return None


def _name_part(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    """A word replaced that heads a proper noun before it: the two are one name ("Niagara Falls", "Green
    Park"), whatever its case in the answer."""
    for old, new in _replaced(parsed[original], parsed[rewrite]):
        name = [c for c in old.children if c.dep_ == "compound" and c.pos_ == "PROPN" and c.i == old.i - 1]
        if name:
            return f"'{old.text}' -> '{new.text}' inside the name '{name[0].text} {old.text}'"
    return None


def _role_collapse(original: str, rewrite: str, parsed: dict, known: frozenset) -> str | None:
    roles_before = {m.lower() for m in ROLE_NOUNS.findall(original)}
    roles_after = {m.lower() for m in ROLE_NOUNS.findall(rewrite)}
    if len(roles_before) >= 2 and len(roles_after) < len(roles_before) and \
            len(ROLE_NOUNS.findall(rewrite)) >= len(ROLE_NOUNS.findall(original)):
        lost = sorted(roles_before - roles_after)
        return f"the {', the '.join(lost)} became someone already named: one person where there were two"
    return None


def _first(found: list[str]) -> str | None:
    return found[0] if found else None


# The checks of a rewrite, in the order `check` asks them (the first that fails names the reason). The
# original has no construction problem by then: a broken answer was left out first.
FLUENCY_RULES = (
    FluencyRule("broken_answer", "an answer that is itself broken English (agreement, construction, a typo)",
                _broken_answer),
    FluencyRule("fixed_phrase", "a word of a fixed expression rewritten", _fixed_phrase),
    FluencyRule("number_agreement", "a subject and verb or numeral and noun that no longer agree",
                lambda o, r, parsed, k: _first(_new(agreement_problems(parsed[o]), agreement_problems(parsed[r])))),
    FluencyRule("construction", "a construction English does not have (the module's list)",
                lambda o, r, parsed, k: _first(construction_problems(parsed[r]))),
    FluencyRule("part_of_speech", "a word replaced one for one read as another part of speech",
                lambda o, r, parsed, k: _first(pos_changes(parsed[o], parsed[r]))),
    FluencyRule("complement", "a word replaced one for one that does not take the old word's complement",
                lambda o, r, parsed, k: _first(complement_changes(parsed[o], parsed[r]))),
    FluencyRule("role_collapse", "two people of the answer became one", _role_collapse),
    FluencyRule("compound_modifier", "a word replaced one for one inside a compound ('high school student')",
                _compound_modifier),
    FluencyRule("coordination", "an adjective turned round beside one of the same valence it was joined to by "
                "'and' ('happy and satisfied' -> 'sad and satisfied')", _coordination),
    FluencyRule("name_part", "a word replaced that ends a name ('niagara falls' -> 'niagara rises')", _name_part),
)


@dataclass(frozen=True)
class WriterCheck:
    """One check of a human-written candidate (an answer of this or another dialogue): its name (the
    rejected row's `check`), what it catches, and its function (the text, its parse, the dialogue's known
    words, the dialogue's names) -> the reason it fails, or None."""

    name: str
    catches: str
    find: Callable[[str, object, frozenset, frozenset], str | None]


def _misspelt(text: str, doc, known: frozenset, names: frozenset) -> str | None:
    typos = misspellings(doc, known)
    return f"'{typos[0]}' is no English word (a typo)" if typos else None


def _writer_agreement(text: str, doc, known: frozenset, names: frozenset) -> str | None:
    slips = agreement_problems(doc)
    return f"{slips[0]} (a slip of the writer)" if slips else None


def _writer_construction(text: str, doc, known: frozenset, names: frozenset) -> str | None:
    odd = construction_problems(doc) + article_problems(text) + \
        [f"'{w}': a name of the dialogue in lower case" for w in names_in_lower_case(doc, names)]
    return f"{odd[0]} (a slip of the writer)" if odd else None


# The checks of a human-written candidate, in the order `writer_check` asks them: people's answers carry
# typos and slips that two blind readers marked broken (draws C-G).
WRITER_CHECKS = (
    WriterCheck("misspelt", "a word English does not have (a typo)", _misspelt),
    WriterCheck("number_agreement", "a subject and verb or numeral and noun that disagree", _writer_agreement),
    WriterCheck("construction", "a construction English does not have, an article before the wrong sound, a "
                "name of the dialogue in lower case", _writer_construction),
)


def writer_check(text: str, doc, known: frozenset[str] = frozenset(),
                 names: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(check, reason) of the first WRITER_CHECKS a human-written candidate fails, None when it passes."""
    for rule in WRITER_CHECKS:
        reason = rule.find(text, doc, known, names)
        if reason:
            return rule.name, reason
    return None


def check(original: str, rewrite: str, parsed: dict, known: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(check, reason) of the first fluency problem the rewrite introduced (FLUENCY_RULES in order), None
    when it has none. `parsed`: text -> spaCy Doc of both texts (parse in batches with `parse`); `known`:
    the dialogue's lower-cased words (not typos however rare)."""
    for rule in FLUENCY_RULES:
        reason = rule.find(original, rewrite, parsed, known)
        if reason:
            return rule.name, reason
    return None


def parse(texts) -> dict:
    """text -> spaCy Doc (the shared English pipeline, batched; named entities not needed)."""
    from tasks.english import english

    unique = list(dict.fromkeys(texts))
    return dict(zip(unique, english().pipe(unique, batch_size=256, disable=["ner"])))
