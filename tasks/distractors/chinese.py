"""Rule-based counterfactual rewrites of Chinese answers (the `lexical` generator's rules for "zh").

The English rules (antonym lexicon, auxiliaries, inflect articles, spaCy NER) do not apply to
Chinese. These rules make CORECODE-style conflict phrases, "a minimal edit of one or two words"
(docs/method.md 3.4), with jieba's part-of-speech tagger (its dictionary ships with it: offline):
* `zh_swap`: a content word of the answer (noun, verb, adjective: jieba flags n*, v*, a*)
  replaced by a word of the same part of speech from the dialogue (the passage) that the answer
  does not already use: the answer now says something the dialogue did not;
* `zh_antonym`: a word replaced by a ConceptNet Antonym / DistinctFrom of it, when a ConceptNet
  database with Chinese edges is configured;
* `zh_negation`: 不 / 没 removed where the answer has one, else 不 put before its first verb.
Two rules chain for a larger pool. No fluency check is made (the parser checks are English).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Callable, Iterable

from tasks.chinese import STOP_WORDS
from tasks.distractors.lexical import chain_rewrites

CONTENT = ("n", "v", "a")
NEGATIONS = ("不", "没")


@lru_cache(maxsize=200_000)
def words(text: str) -> tuple[tuple[str, str], ...]:
    """(word, jieba flag) of a text, the HMM off (deterministic on the shipped dictionary)."""
    import jieba
    import jieba.posseg as pseg

    jieba.setLogLevel(logging.WARNING)
    return tuple((p.word, p.flag) for p in pseg.cut(text, HMM=False))


def _content(word: str, flag: str) -> bool:
    return flag[:1] in CONTENT and word not in STOP_WORDS and len(word.strip()) > 0 and not word.isdigit()


def swap_rewrites(text: str, passage: list[str]) -> list[tuple[str, str]]:
    tokens = words(text)
    own = {w for w, _ in tokens}
    stock: dict[str, list[str]] = {}
    for utterance in passage:
        for w, f in words(utterance):
            if _content(w, f) and w not in own and w not in stock.setdefault(f[:1], []):
                stock[f[:1]].append(w)
    out = []
    for i, (w, f) in enumerate(tokens):
        if not _content(w, f):
            continue
        for new in stock.get(f[:1], [])[:4]:
            out.append((f"zh_swap:{w}->{new}", "".join(t if j != i else new for j, (t, _) in enumerate(tokens))))
    return out


def antonym_rewrites(text: str, lookup: Callable[[str], Iterable[str]] | None) -> list[tuple[str, str]]:
    if lookup is None:
        return []
    tokens = words(text)
    out = []
    for i, (w, f) in enumerate(tokens):
        if not _content(w, f):
            continue
        for new in list(lookup(w))[:3]:
            out.append((f"zh_antonym:{w}->{new}", "".join(t if j != i else new for j, (t, _) in enumerate(tokens))))
    return out


def negation_rewrites(text: str) -> list[tuple[str, str]]:
    for neg in NEGATIONS:
        at = text.find(neg)
        if at >= 0 and not text.startswith("不过", at) and not text.startswith("没事", at):
            return [(f"zh_negation:-{neg}", text[:at] + text[at + 1:])]
    tokens = words(text)
    for i, (_w, f) in enumerate(tokens):
        if f.startswith("v"):
            return [("zh_negation:+不", "".join(t for t, _ in tokens[:i]) + "不" + "".join(t for t, _ in tokens[i:]))]
    return []


def rewrite_all(text: str, passage: list[str], lookup: Callable[[str], Iterable[str]] | None = None,
                depth: int = 2) -> list[tuple[str, str]]:
    """Every rule's rewrites of a Chinese answer, chained as the English ones are (`chain_rewrites`)."""
    def singles(t: str) -> list[tuple[str, str]]:
        return swap_rewrites(t, passage) + antonym_rewrites(t, lookup) + negation_rewrites(t)

    return chain_rewrites(text, singles, depth, frozenset({"zh_antonym", "zh_negation"}))
