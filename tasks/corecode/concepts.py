"""docs/method.md 3.2 (first half): candidate concepts of every utterance are its nouns, verbs and adjectives,
found by part-of-speech tagging with jieba's posseg (its dictionary ships with it: offline)."""

from __future__ import annotations

import logging

import pandas as pd
from csk.progress import track

from csk.runtime import StageOutput
from tasks.chinese import STOP_WORDS

POS_NAMES = {"n": "nouns", "v": "verbs", "a": "adjectives"}


def tag(texts: list[str], pos: tuple[str, ...], stop: frozenset[str], hmm: bool) -> list[tuple[list[str], list[str]]]:
    """(concepts, their tags) of each text: words whose jieba flag starts with one of `pos`, not stop
    words, in order of first occurrence."""
    import jieba
    import jieba.posseg as pseg

    jieba.setLogLevel(logging.WARNING)
    out = []
    for text in track(texts, len(texts), "jieba posseg", unit="utterances", disable=len(texts) < 20000):
        seen: dict[str, str] = {}
        for word, flag in pseg.cut(text, HMM=hmm):
            w = word.strip()
            if w and flag[:1] in pos and w not in stop and w not in seen:
                seen[w] = flag
        out.append((list(seen), list(seen.values())))
    return out


def concepts(dialogues: pd.DataFrame, *, pos: list[str] = ["n", "v", "a"], stop_words: list[str] | None = None,
             hmm: bool = False) -> StageOutput:
    """One row per utterance with its concept set.

    Args:
        pos: jieba part-of-speech flags kept, by first letter (n: nouns incl. nr/ns/nz, v: verbs incl. vn,
            a: adjectives incl. ad/an)
        stop_words: words never taken as concepts; none: the built-in list (`tasks.chinese.STOP_WORDS`)
        hmm: let jieba's HMM find words outside its dictionary (names, new words). Off by default: it is
            about 30x slower (measured: 3.7 vs 0.12 ms per utterance), and a concept must be a ConceptNet
            label to match at all, which out-of-dictionary words rarely are
    """
    stop = frozenset(STOP_WORDS if stop_words is None else stop_words)
    rows = [(d, i, t["speaker"], t["text"]) for d, turns in zip(dialogues["id"], dialogues["turns"])
            for i, t in enumerate(turns)]
    tagged = tag([r[3] for r in rows], tuple(pos), stop, hmm)
    data = pd.DataFrame({"id": [f"{d}/{i}" for d, i, _, _ in rows], "dialogue_id": [r[0] for r in rows],
                         "utterance": [r[1] for r in rows], "speaker": [r[2] for r in rows],
                         "text": [r[3] for r in rows], "concepts": [c for c, _ in tagged],
                         "tags": [t for _, t in tagged]})
    n = data["concepts"].map(len)
    notes = {"utterances": len(data), "concepts_per_utterance": round(float(n.mean()), 2) if len(n) else 0.0,
             "distinct_concepts": len({c for cs in data["concepts"] for c in cs}),
             "utterances_without_concepts": int((n == 0).sum()), "hmm": hmm,
             "tagger": f"jieba.posseg {__import__('jieba').__version__}"}
    return StageOutput(data=data, rows_in=len(dialogues), notes=notes)
