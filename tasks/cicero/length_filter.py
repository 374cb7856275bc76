"""CICERO's length filter (docs/method.md 1.1).

Words are whitespace tokens of the utterance text without its speaker tag: the released
CICERO dialogues obey exactly these bounds counted that way (minimum average 6.0).
"""

from __future__ import annotations

import pandas as pd

from csk.runtime import StageOutput


def dialogue_lengths(turns) -> tuple[int, int]:
    n_utt = len(turns)
    n_words = sum(len(str(t["text"]).split()) for t in turns)
    return n_utt, n_words


def length_rules(n_utt: int, n_words: int, *, min_utterances: int, max_utterances: int, min_avg_words: float,
                 max_total_words: int) -> list[tuple[str, str]]:
    """(reason_code, reason) of every bound the dialogue breaks; empty when it passes."""
    reasons = []
    if n_utt < min_utterances:
        reasons.append(("too_few_utterances", f"fewer than {min_utterances} utterances ({n_utt})"))
    if n_utt > max_utterances:
        reasons.append(("too_many_utterances", f"more than {max_utterances} utterances ({n_utt})"))
    if n_utt and n_words / n_utt < min_avg_words:
        reasons.append(("utterances_too_short",
                        f"fewer than {min_avg_words:g} words per utterance on average ({n_words / n_utt:.2f})"))
    if n_words > max_total_words:
        reasons.append(("too_many_words", f"more than {max_total_words} words in total ({n_words})"))
    return reasons


def length_rule(n_utt: int, n_words: int, **bounds) -> str | None:
    """The reason a dialogue fails the filter, or None when it passes."""
    return "; ".join(r for _, r in length_rules(n_utt, n_words, **bounds)) or None


def length_filter(dialogues: pd.DataFrame, *, min_utterances: int = 5, max_utterances: int = 15,
                  min_avg_words: float = 6.0, max_total_words: int = 275) -> StageOutput:
    """Keep dialogues within the paper's length bounds (docs/method.md 1.1).

    Args:
        min_utterances: fewest utterances a dialogue may have
        max_utterances: most utterances a dialogue may have
        min_avg_words: fewest whitespace words per utterance on average
        max_total_words: most words in the whole dialogue
    """
    lengths = [dialogue_lengths(t) for t in dialogues["turns"]]
    df = dialogues.assign(n_utterances=[n for n, _ in lengths], n_words=[w for _, w in lengths])
    df["avg_words"] = df["n_words"] / df["n_utterances"]
    broken = [length_rules(n, w, min_utterances=min_utterances, max_utterances=max_utterances,
                           min_avg_words=min_avg_words, max_total_words=max_total_words) for n, w in lengths]
    failed = pd.Series([bool(b) for b in broken], index=df.index)
    rejected = df[failed].assign(reason_code=[b[0][0] for b in broken if b],
                                 reason=["; ".join(r for _, r in b) for b in broken if b])
    return StageOutput(data=df[~failed], rejected=rejected)
