"""Fluency checks of rule-based rewrites: a distractor that breaks grammar is easy for any fluent reader
and for a fine-tuned model, even when a linear probe on sentence embeddings cannot tell it apart.

Every rewrite of `tasks.distractors.lexical` is compared with the answer it came from; a check fails
only on a problem the rewrite introduced (an answer that was already ungrammatical does not condemn its
rewrites), except that a rewrite of an answer that is already broken is left out (`broken_answer`). The
checks, each a rule with its reason:

* `fixed_phrase`: a word inside a fixed expression was rewritten ("as soon as possible" -> "as soon as
  impossible", "of course" -> "of courses"): the lexicon below, written for this project;
* `number_agreement` (spaCy's parser): a numeral and the noun it counts disagree ("four trip", "one
  days"), a subject and its finite verb disagree ("the men is", "she have"), or an existential "there
  is" / "there are" disagrees with what follows ("there is only four trips");
* `article`: an indefinite article before a word that takes the other one ("a opened room"; inflect
  decides a / an by sound: "an hour", "a one-way ticket");
* `broken_answer`: the answer being rewritten is itself broken English (the parser's agreement checks,
  or a misspelt word: `misspellings`): its rewrites read as broken English (two blind readers marked them);
* `misspelt`: a human-written candidate (this dialogue's or another's answer) with a word English does not
  have (not a function word, unknown to lemminflect's lexicon, not a word of the dialogue);
* `part_of_speech` (spaCy's tagger): a word replaced one for one is read as another part of speech in the
  rewrite ("all the help" -> "all the hinder": a verb where a noun was);
* `role_collapse`: two people of the answer became one ("the speaker ... the listener's" -> "the
  speaker ... the speaker's").
"""

from __future__ import annotations

import re
from functools import lru_cache

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
    "every now and then", "give up", "pick up", "look forward to", "get along", "so far", "had better",
    "would rather", "thank you", "you're welcome", "excuse me", "long time no see", "make up one's mind",
    "make a living", "keep in touch", "in front of", "in spite of", "on the other hand", "fall in love",
    "falls in love", "falling in love", "fell in love", "fallen in love",
}, key=lambda p: (-len(p), p)))  # (dates such as "last night" are the entity swap's to exchange, not fixed)
CHECKS = ("broken_answer", "misspelt", "fixed_phrase", "number_agreement", "part_of_speech", "article", "role_collapse")
# The people an answer talks about: a rewrite that leaves one where the answer had two ("The speaker
# agrees with the listener's decision" -> "The speaker agrees with the speaker's decision") is nonsense.
ROLE_NOUNS = re.compile(r"(?<![\w'’])(speaker|listener|man|woman|boy|girl|husband|wife|customer|clerk|doctor|patient)"
                        r"(?![\w])", re.I)
_PHRASE = {p: re.compile(rf"(?<![\w'’]){re.escape(p)}(?![\w'’])", re.I) for p in FIXED_PHRASES}
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


def agreement_problems(doc) -> list[str]:
    """Number disagreements the parser sees in one parsed text."""
    out = []
    for tok in doc:
        # a numeral counting the noun after it ("four trip"); one after its noun names it ("room 11", "storm 11")
        if tok.dep_ == "nummod" and tok.head.pos_ in ("NOUN", "PROPN") and tok.like_num and tok.i < tok.head.i:
            singular = tok.lower_ in SINGULAR_NUMERALS
            if singular and tok.head.tag_ in ("NNS", "NNPS") and tok.head.lower_ not in ("people", "times"):
                out.append(f"'{tok.text} {tok.head.text}': one of a plural noun")
            elif not singular and tok.head.tag_ in ("NN", "NNP") and tok.head.lower_ not in ("percent", "o'clock", "dollar"):
                out.append(f"'{tok.text} ... {tok.head.text}': {tok.text} of a singular noun")
        if tok.dep_ == "nsubj":
            verb = tok.head if tok.head.tag_ in ("VBZ", "VBP", "VBD") else None
            for child in tok.head.children:  # the finite auxiliary, when there is one
                if child.dep_ in ("aux", "auxpass") and child.tag_ in ("VBZ", "VBP", "VBD"):
                    verb = child
                    break
            plural = _plural_subject(tok)
            if verb is None or plural is None or tok.lower_ in ("i", "you"):
                continue
            v = verb.lower_
            if plural and (v in SINGULAR_VERBS or verb.tag_ == "VBZ"):
                out.append(f"'{tok.text} ... {verb.text}': a plural subject with a singular verb")
            elif not plural and (v in ("are", "were") or (verb.tag_ == "VBP" and (
                    v in PLURAL_VERBS or (verb.i == tok.head.i and tok.pos_ in ("NOUN", "PROPN") and tok.lower_ not in COLLECTIVE
                     and _finite(verb))))):
                out.append(f"'{tok.text} ... {verb.text}': a singular subject with a plural verb")
        # a modal or do-support before an inflected verb ("would shows", "did not went")
        if tok.dep_ == "aux" and (tok.tag_ == "MD" or tok.lower_ in ("do", "does", "did")) and \
                tok.head.tag_ in ("VBZ", "VBD") and tok.head.i > tok.i:
            out.append(f"'{tok.text} ... {tok.head.text}': a {'modal' if tok.tag_ == 'MD' else 'do'} before an "
                       "inflected verb")
        if tok.dep_ == "expl" and tok.lower_ == "there" and tok.head.lemma_ == "be":
            be = tok.head
            attr = next((c for c in be.children if c.dep_ in ("attr", "nsubj") and c.pos_ in ("NOUN", "PROPN")), None)
            if attr is not None:
                counted = next((c for c in attr.children if c.dep_ == "nummod" and c.like_num), None)
                plural = _plural_subject(attr) or (counted is not None and counted.lower_ not in SINGULAR_NUMERALS)
                if plural and be.lower_ in SINGULAR_VERBS:
                    out.append(f"'there {be.text} ... {attr.text}': 'there {be.text}' with a plural")
                elif not plural and be.lower_ in ("are", "were"):
                    out.append(f"'there {be.text} ... {attr.text}': 'there {be.text}' with a singular")
    return out


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


def misspellings(doc, known: frozenset[str] = frozenset()) -> list[str]:
    """Lower-case words of a parsed text that English does not have: neither a function word (spaCy's stop
    list) nor a word lemminflect's lexicon knows, nor one of `known` (the dialogue's own words: its
    names and slang). Human-written answers carry typos ("necessory", "attatch", "speeaker"): as
    distractors they read as broken English (two blind readers marked them so). Capitalised words are
    names and are left alone."""
    from lemminflect import getAllLemmas

    return [t.text for t in doc if t.is_alpha and t.lower_ not in ABBREVIATIONS and t.text.islower() and len(t.text) >= 2 and not t.is_stop
            and t.lower_ not in known and not getAllLemmas(t.lower_)]


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
                if coarse(x) != coarse(y) and {coarse(x), coarse(y)} & {"NOUN", "VERB", "ADJ"}:
                    out.append(f"'{x.text}' ({x.pos_}) became '{y.text}' ({y.pos_})")
                    continue
                lexicon = getAllLemmas(y.lower_)
                if coarse(y) in ("NOUN", "VERB", "ADJ") and y.pos_ != "PROPN" and lexicon and coarse(y) not in lexicon:
                    out.append(f"'{y.text}' stands as a {y.pos_.lower()} where English has it only as "
                               f"{' / '.join(sorted(k.lower() for k in lexicon))}")
    return out


def check(original: str, rewrite: str, parsed: dict, known: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(check, reason) of the first fluency problem the rewrite introduced, None when it has none.
    `parsed`: text -> spaCy Doc of both texts (parse in batches with `parse`); `known`: the dialogue's
    lower-cased words (not typos however rare)."""
    problems = agreement_problems(parsed[original])
    typos = misspellings(parsed[original], known)
    if problems or typos:  # a rewrite of a broken answer is a broken distractor (two readers marked them so)
        return "broken_answer", f"the answer it rewrites is itself broken English ({(problems or typos)[0]})"
    before, after = fixed_phrases(original), fixed_phrases(rewrite)
    broken = [p for p, n in before.items() if after.get(p, 0) < n]
    gained = [p for p, n in after.items() if before.get(p, 0) < n]
    if broken and not gained:  # one fixed expression for another ("at first" -> "at last") stays fluent
        return "fixed_phrase", f"rewrites a word of the fixed expression '{broken[0]}'"
    new = _new(agreement_problems(parsed[original]), agreement_problems(parsed[rewrite]))
    if new:
        return "number_agreement", new[0]
    changed = pos_changes(parsed[original], parsed[rewrite])
    if changed:
        return "part_of_speech", changed[0]
    new = _new(article_problems(original), article_problems(rewrite))
    if new:
        return "article", new[0]
    roles_before = {m.lower() for m in ROLE_NOUNS.findall(original)}
    roles_after = {m.lower() for m in ROLE_NOUNS.findall(rewrite)}
    if len(roles_before) >= 2 and len(roles_after) < len(roles_before) and \
            len(ROLE_NOUNS.findall(rewrite)) >= len(ROLE_NOUNS.findall(original)):
        lost = sorted(roles_before - roles_after)
        return "role_collapse", f"the {', the '.join(lost)} became someone already named: one person where there were two"
    return None


def parse(texts) -> dict:
    """text -> spaCy Doc (the shared English pipeline, batched; named entities not needed)."""
    from tasks.english import english

    unique = list(dict.fromkeys(texts))
    return dict(zip(unique, english().pipe(unique, batch_size=256, disable=["ner"])))
