"""Rule-based counterfactual rewrites: make an answer false while keeping it fluent.

The offline default generator (no model). Each rule returns (rule name, rewritten text) for
every place it applies; the generator also chains two rules for a larger pool:
* antonym substitution: the project's antonym lexicon below, plus ConceptNet Antonym /
  DistinctFrom edges when a ConceptNet database is configured;
* negation flip: add or remove "not" at the first auxiliary;
* quantity change: numbers and number words;
* role swap: speaker <-> listener, he <-> she, man <-> woman ...;
* entity swap: a named entity of the answer (spaCy NER) replaced by another entity of the same
  type from the same dialogue (a person for a person, a date for a date).
Every replacement re-chooses the indefinite article before the new word (inflect: "an opened
room", "a closed door").

Only antonyms, negation and quantity changes make a rewrite contradict its answer (`CONTRADICTING`): a
name swapped for another name, or the speaker for the listener where the dialogue does not fix who did
what, says something as true as the answer itself ("Jenny stockpiles food" -> "Dad stockpiles food"),
so the distractor generator chains only contradicting rules (`rewrite_all(..., kinds=CONTRADICTING)`),
and each rewrite carries its evidence: the rule and the words it changed (`evidence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

from tasks.vocabulary import CONVERSATION_ROLES

# Written for this project: common English antonyms that appear in everyday dialogue answers. Words that are
# as often another part of speech are left out ("the patient" is no adjective: "the impatient" is nonsense;
# "kind" is a sort, "present" a gift, "well" an adverb, "light" a lamp); and pairs whose words take other
# complements ("invites him to go" -> "ignores him to go", "near the market" -> "far the market", "arrived
# at London" -> "left at London", "curious to know" -> "indifferent to know") or read oddly as opposites
# ("finds a car" -> "loses a car", "gains experience" -> "loses experience", "new to the city" -> "old to
# the city", "agree that" -> "refuse that", "ask for" -> "answer for"), and "same" (it takes "the" where
# "different" takes "a": "the different evening"): two blind readers marked them. "come" / "go" name one
# motion from two places ("invite her to come eat" is "to go eat"). No nouns: a thing for its opposite thing
# says no contrary of the predicate, and readers of draw P marked most of them ("asks further answers",
# "heard from an enemy", "the following night" for "day"). A word's complements are
# checked after the rewrite (`fluency.COMPLEMENTS`: "leave the house" -> "stay the house" is left out).
# Declared as lemma pairs by part of speech; every form of a verb is lemminflect's (Penn tags: a past tense for
# a past tense), never written by hand. Adjectives and adverbs are
# taken as declared: their degree forms in lemminflect's lexicon are not all English ("freeer"), and the
# few an answer uses are words of their own ("better", "earlier").
ANTONYM_LEMMAS = {
    "VERB": """
love hate; like dislike; accept reject; win lose; buy sell; give take; open close; start finish; begin end;
enter exit; remember forget; pass fail; succeed fail; stay leave; increase decrease; rise fall;
borrow lend; teach learn; push pull; laugh cry; smile frown; wake sleep; allow forbid; save spend;
agree disagree; join leave; praise criticize; attend skip; cancel confirm; include exclude; receive send;
catch miss; hire fire; marry divorce; trust distrust; approve disapprove; admit deny; believe doubt;
continue stop; reduce increase; expand shrink; welcome reject
""",
    "ADJ": """
happy sad; pleased annoyed; glad sorry; excited bored; calm angry; relaxed nervous; early late;
earlier later; first last; many few; much little; big small; large small; long short; tall short; high low;
heavy light; hot cold; warm cool; fast slow; young old; rich poor; cheap expensive; easy difficult;
hard easy; good bad; better worse; best worst; right wrong; true false; safe dangerous; healthy sick;
clean dirty; full empty; busy free; quiet noisy; strong weak; friendly rude; polite rude; honest dishonest;
careful careless; possible impossible; interested uninterested; satisfied dissatisfied;
comfortable uncomfortable; lucky unlucky; awake asleep; surprised unsurprised; worried relieved;
anxious relaxed; grateful ungrateful; proud ashamed; confident insecure; disappointed satisfied;
impressed unimpressed; amused annoyed; hopeful hopeless; shocked unsurprised; upset pleased;
frustrated content; thankful resentful; eager reluctant; tired energetic; hungry full; available unavailable;
important unimportant; necessary unnecessary; correct incorrect; complete incomplete; legal illegal;
responsible irresponsible; successful unsuccessful; familiar unfamiliar; crowded deserted; fresh stale;
ready unprepared; alive dead; sure unsure; certain uncertain; able unable; willing unwilling; guilty innocent;
single married; loud quiet; bright dim; wet dry; thick thin; wide narrow; deep shallow; sweet bitter;
public private; local foreign; modern ancient; simple complicated; married divorced
""",
    "ADV": """
happily sadly; quickly slowly; before after; always never; often rarely; more less; most least;
together alone; inside outside; above below
""",
}
# The forms a pair is inflected to, each tag's first form the one written (lemminflect lists a spelling's
# variants after it: "canceled", "cancelled"); every variant is read. A form shared by two tags maps as the
# earlier tag's ("allowed" -> "forbade", the past tense before the participle).
INFLECTED_TAGS = {"VERB": ("VB", "VBP", "VBZ", "VBD", "VBN", "VBG")}


def _antonym_forms() -> dict[str, str]:
    """Every form of every declared pair, both ways; a word already mapped keeps its first antonym (the
    parts of speech in the order declared: a verb's forms before the adjectives')."""
    from lemminflect import getInflection

    out: dict[str, str] = {}
    for pos, pairs in ANTONYM_LEMMAS.items():
        for pair in pairs.replace("\n", " ").split(";"):
            if len(pair.split()) != 2:
                continue
            a, b = pair.split()
            forms = [((a,), b), ((b,), a)]
            for tag in INFLECTED_TAGS.get(pos, ()):  # the lexicon's forms, its rules where it lists none
                fa, fb = getInflection(a, tag), getInflection(b, tag)
                if fa and fb:
                    forms += [(fa, fb[0]), (fb, fa[0])]
            for sources, target in forms:
                for w in sources:
                    out.setdefault(w, target)
    return out


def _participles() -> dict[str, str]:
    """A verb form that is its verb's past participle -> the antonym's past participle, where that differs
    from the form ANTONYMS gives ("remembered" -> "forgotten", not "forgot", after "has")."""
    from lemminflect import getInflection

    out: dict[str, str] = {}
    for pair in ANTONYM_LEMMAS["VERB"].replace("\n", " ").split(";"):
        if len(pair.split()) != 2:
            continue
        a, b = pair.split()
        fa, fb = getInflection(a, "VBN"), getInflection(b, "VBN")
        for sources, target in ((fa, fb[0] if fb else None), (fb, fa[0] if fa else None)):
            for w in sources if target else ():
                out.setdefault(w, target)
    return {w: t for w, t in out.items() if antonyms().get(w) != t}


@lru_cache(maxsize=1)
def antonyms() -> dict[str, str]:
    """Every form of every declared pair, both ways (built on first use: lemminflect loads spaCy, 1.3 s, which
    a command that rewrites nothing should not pay)."""
    return _antonym_forms()


@lru_cache(maxsize=1)
def participles() -> dict[str, str]:
    """The past participle each verb form's antonym takes after "has" / "had" (built on first use)."""
    return _participles()


def __getattr__(name: str):  # ANTONYMS and PARTICIPLES, read as before, built when first read
    if name == "ANTONYMS":
        return antonyms()
    if name == "PARTICIPLES":
        return participles()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
# A participle follows a form of "have" (the perfect) or "be" / "get" (the passive), adverbs between.
_BEFORE_PARTICIPLE = re.compile(r"\b(?:have|has|had|having|is|are|was|were|be|been|being|am|get|gets|got|gotten)"
                                r"(?:\s+(?:just|already|never|not|always|ever|been|recently|finally|also|being))*\s+$",
                                re.I)

ROLE_SWAPS = {CONVERSATION_ROLES[0]: CONVERSATION_ROLES[1], CONVERSATION_ROLES[1]: CONVERSATION_ROLES[0], "he": "she", "she": "he", "him": "her",
              "his": "her", "man": "woman", "woman": "man", "men": "women", "women": "men",
              "boy": "girl", "girl": "boy", "mr": "mrs", "mrs": "mr"}
AUXILIARIES = ("is", "are", "was", "were", "can", "could", "will", "would", "should", "must", "has", "have",
               "had", "does", "do", "did", "may", "might")
NEGATED = {"cannot": "can", "can't": "can", "won't": "will", "don't": "do", "doesn't": "does", "didn't": "did",
           "isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "shouldn't": "should",
           "wouldn't": "would", "couldn't": "could", "hasn't": "has", "haven't": "have"}
NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+(?:[.,]\d+)?")


def _match_case(new: str, old: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


ARTICLE = re.compile(r"\b(a|an|A|An|AN)(\s+)$")


def _replace_span(text: str, start: int, end: int, new: str) -> str:
    """`text` with [start, end) replaced by `new`, and an indefinite article right before it chosen
    again for the new word ("a closed room" -> "an opened room", never "a opened room")."""
    head = text[:start]
    article = ARTICLE.search(head)
    if article is not None and new:
        chosen = _engine().a(new).split(" ", 1)[0]  # inflect: "an" before a vowel sound ("an hour", "a one")
        chosen = _match_case(chosen, article.group(1)) if article.group(1) != "AN" else chosen.upper()
        head = head[:article.start(1)] + chosen + article.group(2)
    return head + new + text[end:]


@lru_cache(maxsize=1)
def _engine():
    import inflect

    return inflect.engine()


def _words(text: str) -> list[re.Match]:
    return list(WORD.finditer(text))


# English's light verbs: their meaning is their object's ("take him home", "make a good impression", "have a
# look"), so an antonym of the verb alone breaks the phrase ("give him home", "stay a good impression")
LIGHT_VERBS = ("take", "give", "make", "get", "have", "do", "put", "keep")


@lru_cache(maxsize=1)
def _light_verb_forms() -> frozenset[str]:
    from lemminflect import getAllInflections

    return frozenset(f for v in LIGHT_VERBS for forms in getAllInflections(v, upos="VERB").values() for f in forms) | \
        frozenset(LIGHT_VERBS)


# a word right after a negation, or after "not be" ("did not like", "was not able", "will never be happy"): the
# contrary of such a predicate drops its negation (`negation_rewrites`); an antonym under it says the answer again
# as a double negative or a litotes
NEGATED_BEFORE = re.compile(r"(?:\bnot|n't|n’t|\bnever|\bcannot)\s+(?:(?:be|been|being)\s+)?$", re.I)


def antonym_rewrites(text: str, lookup: Callable[[str], Iterable[str]] | None = None) -> list[tuple[str, str]]:
    out = []
    for m in _words(text):
        w = m.group().lower()
        if m.start() > 0 and m.group()[:1].isupper():
            continue  # a name or a title inside the sentence ("Miss Brown" is no "Catch Brown")
        if w in _light_verb_forms():
            continue
        if NEGATED_BEFORE.search(text[:m.start()]):
            continue  # under a negation the antonym makes a double negative ("was not able" -> "was not unable")
        options = []
        if w in antonyms():  # a participle for a participle ("has remembered" -> "has forgotten")
            participle = w in participles() and _BEFORE_PARTICIPLE.search(text[:m.start()]) is not None
            options.append((participles()[w] if participle else antonyms()[w], "antonym:lexicon"))
        if lookup is not None:
            options += [(a, "antonym:conceptnet") for a in lookup(w) if a != w]
        seen = set()
        for new, rule in options:
            # an antonym the sentence already says ("what's good and bad" -> "bad and bad") says it twice
            if new in seen or re.search(rf"\b{re.escape(new)}\b", text, re.I):
                continue
            seen.add(new)
            start, case = m.start(), m.group()
            quantifier = re.search(r"\b(a)\s+$", text[:start], re.I) if w in ("few", "little") else None
            if quantifier:  # "a few" is one quantifier: its antonym "many" takes no article ("a many options")
                start, case = quantifier.start(), quantifier.group(1) + m.group()[1:]
            out.append((rule, _replace_span(text, start, m.end(), _match_case(new, case))))
    return out


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return {"have": "has", "be": "is"}.get(verb, verb + "s")


def negation_rewrites(text: str) -> list[tuple[str, str]]:
    """Flip the polarity at the first auxiliary: "is" <-> "is not"; "does not know" -> "knows"."""
    if re.search(r"\b(never|no|no longer|nobody|nothing|none|nowhere)\b", text, re.I):  # "was not no electricity"
        return []  # already negative in another way: adding "not" would make a double negative
    for m in _words(text):
        w = m.group().lower().replace("’", "'")
        after = text[m.end():]
        if w in {"do", "does", "don't", "doesn't"}:
            nm = re.match(r"(\s+not)?\s+([a-z]+)\b", after) if w in {"do", "does"} else re.match(r"\s+([a-z]+)\b", after)
            negative = w in {"don't", "doesn't"} or (nm is not None and nm.group(1) is not None)
            if negative and nm is not None:  # "does not know" -> "knows"; "do not know" -> "know"
                verb = nm.group(nm.lastindex)
                new = _third_person(verb) if w.startswith("does") else verb
                return [("negation:remove", text[:m.start()] + _match_case(new, m.group()) + after[nm.end():])]
            if not negative:
                return [("negation:add", text[:m.end()] + " not" + after)]
            return []
        if w in NEGATED:
            return [("negation:remove", _some(_replace_span(text, m.start(), m.end(),
                                                           _match_case(NEGATED[w], m.group())), m.start()))]
        if w in AUXILIARIES:
            if re.search(r"\bto\s+$", text[:m.start()], re.I):
                continue  # an infinitive ("to have her lunch"): no do-support, and "not to" changes the sense
            nm = re.match(r"\s+not\b\s*", after)
            if nm:  # "is not" -> "is"
                return [("negation:remove", _some(text[:m.end()] + " " + after[nm.end():], m.start()))]
            if w in ("has", "have", "had") and not _participle_follows(after):
                # "have" as the main verb takes do-support: "has a meeting" -> "does not have a meeting"
                do = {"has": "does", "have": "do", "had": "did"}[w]
                return [("negation:add", text[:m.start()] + _match_case(do, m.group()) + " not have" + after)]
            return [("negation:add", text[:m.end()] + " not" + after)]
    return []


# After "has" / "have" / "had": an adverb of the perfect or "been" (the auxiliary), else the next word decides
_PERFECT_ADVERB = re.compile(r"\s+(?:just|already|never|not|always|ever|been|recently|finally|also)\b", re.I)


def _participle_follows(after: str) -> bool:
    """Is the word after "has" / "have" / "had" a past participle (the perfect's auxiliary, no do-support)?
    Asked of lemminflect's lexicon and rules: a form of some verb whose past participle it is ("had put",
    "has cut", "has finished"; a blind reader found "did not have put"), never guessed from its ending
    ("He has ten dollars", "gold coins", "red hair", "good news" hold no participle). A word the lexicon
    does not know as any part of speech and that ends in -ed is read as one."""
    if _PERFECT_ADVERB.match(after):
        return True
    m = re.match(r"\s+([a-z]+)\b", after, re.I)
    if m is None:
        return False
    from lemminflect import getAllLemmas, getInflection

    word = m.group(1).lower()
    lemmas = getAllLemmas(word, upos="VERB").get("VERB", ())
    if any(word in getInflection(lemma, tag="VBN") for lemma in lemmas):
        return True
    known = any(getAllLemmas(word, upos=pos) for pos in ("NOUN", "ADJ", "VERB", "ADV"))
    return not known and word.endswith("ed")


def _some(text: str, start: int) -> str:
    """A negation removed: a negative-polarity "any" after it becomes "some" ("had not received any news"
    -> "had received some news"), a closing "yet" "already" ("has not paid yet" -> "has paid already")."""
    m = re.compile(r"\bany\b", re.I).search(text, start)
    text = text if m is None else text[:m.start()] + _match_case("some", m.group()) + text[m.end():]
    m = re.compile(r"\byet\b(?=\W*$)", re.I).search(text, start)  # "had not read it yet" -> "had read it already"
    return text if m is None else text[:m.start()] + _match_case("already", m.group()) + text[m.end():]


def quantity_rewrites(text: str) -> list[tuple[str, str]]:
    out = []
    for m in _words(text):
        w = m.group().lower()
        if w.isdigit():
            n = int(w)
            new = str(n * 2 if n < 10 else n + 10 * (1 + n // 100))
            out.append(("quantity", _replace_span(text, m.start(), m.end(), new)))
        elif w in NUMBER_WORDS:
            i = NUMBER_WORDS.index(w)
            new = NUMBER_WORDS[(i + 3) % len(NUMBER_WORDS)]
            out.append(("quantity", _replace_span(text, m.start(), m.end(), _match_case(new, m.group()))))
    return out


def role_rewrites(text: str) -> list[tuple[str, str]]:
    # "the speaker and the listener" swapped is the same statement
    roles = "|".join(CONVERSATION_ROLES)
    if re.search(rf"\b({roles})\b(\s+\w+){{0,2}}?\s+and\s+(the\s+)?({roles})\b", text, re.I):
        return []
    words = _words(text)
    hits = [m for m in words if m.group().lower() in ROLE_SWAPS]
    if not hits:
        return []
    out, pos = [], 0
    for m in hits:  # swap every role word at once: "the speaker asks the listener" stays consistent
        out.append(text[pos:m.start()] + _match_case(ROLE_SWAPS[m.group().lower()], m.group()))
        pos = m.end()
    return [("role_swap", "".join(out) + text[pos:])]


def entity_rewrites(text: str, dialogue_entities: dict[str, str]) -> list[tuple[str, str]]:
    """Swap a named entity of the text for another entity of the same type in the dialogue (spaCy NER:
    a person for a person, a date for a date); text that is no entity ("Oh . My God !") is left alone."""
    out = []
    for name, label in dialogue_entities.items():
        for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            for other, other_label in dialogue_entities.items():
                if other_label == label and other != name and other not in name and name not in other:
                    out.append((f"entity_swap:{label}", _replace_span(text, m.start(), m.end(), other)))
    return out


def chain_rewrites(text: str, singles: Callable[[str], list[tuple[str, str]]], depth: int,
                   polarity: frozenset[str]) -> list[tuple[str, str]]:
    """Single-rule rewrites, then chains of up to `depth` rules of different kinds (further from the gold,
    so more of them pass the similarity filter), de-duplicated, never the input itself. Two `polarity`
    kinds (an antonym and a negation) are never chained: they cancel out into a paraphrase."""
    out: dict[str, str] = {}
    frontier = [("", text)]
    for _ in range(depth):
        nxt = []
        for chain, t in frontier:
            used = {r.split(":")[0] for r in chain.split("+") if r}
            for rule, t2 in singles(t):
                kind = rule.split(":")[0]
                if kind in used or (kind in polarity and used & polarity):
                    continue
                name = f"{chain}+{rule}" if chain else rule
                if t2 != text and t2.strip() and t2 not in out:
                    out[t2] = name
                    nxt.append((name, t2))
        frontier = nxt
    return [(rule, t) for t, rule in out.items()]


@dataclass(frozen=True)
class RewriteRule:
    """One rewrite rule of the lexical generator: its name (the `rule` a candidate row carries, before the
    words it changed), what it changes, whether its rewrite contradicts the answer it came from, and its
    function (text, the dialogue's entities, a ConceptNet antonym lookup) -> [(rule, rewrite)]."""

    name: str
    changes: str
    contradicts: bool
    rewrite: Callable[[str, dict[str, str], Callable | None], list[tuple[str, str]]]


# The lexical generator's rules, in the order it applies them. Role and entity swaps keep the proposition as
# often as not (another person doing the same thing is just as plausible): they do not contradict.
REWRITE_RULES = (
    RewriteRule("antonym", "a word for its antonym (the lexicon above; ConceptNet's with a database)", True,
                lambda t, ents, lookup: antonym_rewrites(t, lookup)),
    RewriteRule("negation", "the polarity at the first auxiliary", True, lambda t, ents, lookup: negation_rewrites(t)),
    RewriteRule("quantity", "a number or a number word", True, lambda t, ents, lookup: quantity_rewrites(t)),
    RewriteRule("role_swap", "speaker for listener, he for she, man for woman", False,
                lambda t, ents, lookup: role_rewrites(t)),
    RewriteRule("entity_swap", "a named entity for another of the dialogue's, of the same type", False,
                lambda t, ents, lookup: entity_rewrites(t, ents)),
)
RULE_KINDS = tuple(r.name for r in REWRITE_RULES)
CONTRADICTING = tuple(r.name for r in REWRITE_RULES if r.contradicts)


def rewrite_all(text: str, dialogue_entities: dict[str, str], lookup: Callable[[str], Iterable[str]] | None = None,
                depth: int = 3, kinds: Iterable[str] = RULE_KINDS) -> list[tuple[str, str]]:
    """Every rule's rewrites of an English answer, chained (`chain_rewrites`), by the rule `kinds` named."""
    kinds = set(kinds)
    unknown = kinds - set(RULE_KINDS)
    if unknown:
        raise ValueError(f"unknown rewrite rule kind(s) {sorted(unknown)}; the kinds are {', '.join(RULE_KINDS)}")
    rules = [r for r in REWRITE_RULES if r.name in kinds]

    def singles(t: str) -> list[tuple[str, str]]:
        return [out for r in rules for out in r.rewrite(t, dialogue_entities, lookup)]

    return chain_rewrites(text, singles, depth, frozenset({"antonym", "negation"}))


def evidence(original: str, rewrite: str) -> str:
    """The words a rewrite changed, as `old -> new` edits joined by "; " ("happy -> sad; + not"): what a
    reviewer checks to see that the rewrite contradicts the answer."""
    import difflib

    a, b = [m.group() for m in _words(original)], [m.group() for m in _words(rewrite)]
    edits = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, [w.lower() for w in a], [w.lower() for w in b],
                                                      autojunk=False).get_opcodes():
        if op == "replace":
            edits.append(f"{' '.join(a[i1:i2])} -> {' '.join(b[j1:j2])}")
        elif op == "delete":
            edits.append(f"- {' '.join(a[i1:i2])}")
        elif op == "insert":
            edits.append(f"+ {' '.join(b[j1:j2])}")
    return "; ".join(edits)
