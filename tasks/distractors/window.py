"""The dialogue window a model reads with each choice: question, target, then the utterances nearest the
target, in dialogue order, as many as fit the model's token budget (far ones are cut first).

A CICERO context written whole ("question + target + dialogue") and cut at 64 tokens shows a model the
question, the target and the first few words of the dialogue (on the real v2 sample the whole context
has a median of 236 tokens): it cannot learn that an answer is about another conversation. A window
around the target shows it the turns an answer has to fit. Each model counts with its own tokenizer
and its own budget (its `max_length` less the longest choice of the item and the special tokens), so
the window is built per model; `coverage` says how much of each dialogue that model saw.

Where an item's target is not found in its passage (a file without a target field, a layout whose
context is no dialogue) the context is kept as given and the model cuts it at the end, as before.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

TAG = re.compile(r"^\s*[A-Z][a-z]?\s*:\s*")  # a speaker tag ("A: ", "B: ", "M: ")


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def locate(target, passage) -> int | None:
    """Index of the utterance a target is in its passage (speaker tags and case ignored), or None."""
    key = _norm(target) if target is not None else ""
    if not key or passage is None or not len(passage):
        return None
    turns = [_norm(TAG.sub("", str(u))) for u in passage]
    exact = [i for i, t in enumerate(turns) if t == key]
    if exact:
        return exact[0]
    within = [i for i, t in enumerate(turns) if key in t or (t and t in key)]
    return within[0] if within else None


def nearest_first(position: int, n: int) -> list[int]:
    """Utterance indices by distance from `position`, the earlier one first at equal distance."""
    order = [position]
    for d in range(1, n):
        order += [k for k in (position - d, position + d) if 0 <= k < n]
    return order


def window(question: str, target: str, passage, budget: int, count: Callable[[str], int]) -> tuple[str, dict] | None:
    """(context, what it holds) for one item, or None where the target is not found in the passage.

    The window grows from the target's utterance outward, nearest first; an utterance that does not fit
    ends its side (the window stays one contiguous stretch of the dialogue) while the other side may
    still grow."""
    at = locate(target, passage)
    if at is None:
        return None
    head = f"{str(question).strip()} {str(target).strip()}".strip()
    sizes = [count(" " + str(u)) for u in passage]
    left = budget - count(head)
    lo = hi = None  # the stretch taken so far, [lo, hi]
    blocked = {"before": False, "after": False}
    for k in nearest_first(at, len(passage)):
        side = "before" if k < at else "after"
        if k != at and blocked[side]:
            continue
        if sizes[k] > left:
            if k == at:  # not even the target's utterance fits: question and target alone
                break
            blocked[side] = True
            if all(blocked.values()):
                break
            continue
        left -= sizes[k]
        lo, hi = (k, k) if lo is None else (min(lo, k), max(hi, k))
    taken = list(range(lo, hi + 1)) if lo is not None else []
    text = head + "".join(" " + str(passage[k]) for k in taken)
    neighbours = [k for k in (at - 1, at, at + 1) if 0 <= k < len(passage)]
    return text, {"utterances": len(taken), "of": len(passage),
                  "dialogue_tokens_seen": sum(sizes[k] for k in taken), "dialogue_tokens": sum(sizes),
                  "neighbourhood_seen": sum(sizes[k] for k in neighbours if k in taken),
                  "neighbourhood": sum(sizes[k] for k in neighbours)}


def fit_contexts(questions, targets, passages, contexts, budgets, count: Callable[[str], int]) -> tuple[list[str], list[dict | None]]:
    """Every item's window (its own budget); an item whose target is not located keeps its context."""
    out, seen = [], []
    for q, t, p, c, b in zip(questions, targets, passages, contexts, budgets):
        w = window(q, t, p, int(b), count) if t is not None and p is not None else None
        out.append(c if w is None else w[0])
        seen.append(None if w is None else w[1])
    return out, seen


def coverage(seen: list[dict | None]) -> dict:
    """How much of each dialogue a model saw: the share of items whose target was located, and over those
    the share of the dialogue's tokens and of the target's and its two neighbours' tokens in the window
    (median and 10th percentile per item, and over all tokens)."""
    located = [s for s in seen if s is not None]
    out = {"items": len(seen), "located": len(located)}
    if not located:
        return {**out, "note": "no target located in its passage: every context as given, cut at the end"}
    for name, part, whole in (("dialogue", "dialogue_tokens_seen", "dialogue_tokens"),
                              ("target_and_neighbours", "neighbourhood_seen", "neighbourhood")):
        shares = np.asarray([s[part] / s[whole] if s[whole] else 1.0 for s in located])
        out[name] = {"tokens_share": round(sum(s[part] for s in located) / max(1, sum(s[whole] for s in located)), 4),
                     "median_item_share": round(float(np.median(shares)), 4),
                     "p10_item_share": round(float(np.percentile(shares, 10)), 4),
                     "items_whole": int((shares >= 1.0).sum())}
    out["median_utterances"] = float(np.median([s["utterances"] for s in located]))
    return out


def tokenizer_counter(tokenizer) -> Callable[[str], int]:
    """Tokens of a text under a Hugging Face tokenizer, special tokens out (cached: utterances repeat)."""
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def budgets(choices: list[list[str]], max_length: int, count: Callable[[str], int], special: int = 4) -> list[int]:
    """Each item's context budget: `max_length` less its longest choice and the special tokens of a pair."""
    return [max_length - special - max((count(c) for c in ch), default=0) for ch in choices]


def contexts_for(view, choices: list[list[str]] | None, tokenizer, max_length: int) -> tuple[list[str], dict]:
    """The windows of every item of an instance table (question, target, passage, context) for one model:
    (contexts, coverage report). `choices`: each item's choices where the model reads context and choice
    as one pair (a cross-encoder: the longest choice is kept out of the budget); None where it reads the
    context alone (a sentence embedder). Without target or passage columns the contexts are as given."""
    contexts = view["context"].astype(str).tolist()
    if "target" not in view.columns or "passage" not in view.columns:
        return contexts, {"items": len(contexts), "located": 0, "max_length": max_length,
                          "note": "no target or passage: every context as given, cut at the end"}
    count = tokenizer_counter(tokenizer)
    special = tokenizer.num_special_tokens_to_add(pair=choices is not None)
    room = budgets(choices, max_length, count, special) if choices is not None else \
        [max_length - special] * len(contexts)
    out, seen = fit_contexts(view["question"].astype(str).tolist(), view["target"].tolist(), view["passage"].tolist(),
                             contexts, room, count)
    return out, {**coverage(seen), "max_length": max_length}


def reading_windows(view, choices: list[list[str]] | None, discriminator: str, *, model: str | None, embed,
                    max_length: int, ctx=None, setting: str) -> tuple[list[str], dict]:
    """Each item's context as one model reads it (`contexts_for`) under that model's tokenizer and budget,
    and how much of each dialogue the model saw (for the manifest). A cross-encoder (`model`, a
    multiple-choice encoder directory) reads context and choice as one pair of `max_length` tokens (the
    item's longest choice of `choices` is kept out of the context's budget); a linear probe's sentence
    embedder (`embed`) reads the context alone, up to its own max_seq_length."""
    if discriminator == "linear-probe":
        from tasks.embed import open_embedder

        with open_embedder(embed, ctx) as emb:
            tokenizer, length, choices = emb.model.tokenizer, int(emb.model.max_seq_length), None
    else:
        from transformers import AutoTokenizer

        from csk.models import resolve_model

        path = resolve_model(model, "multiple-choice encoder", setting)
        tokenizer, length = AutoTokenizer.from_pretrained(str(path), local_files_only=True), max_length
    return contexts_for(view, choices, tokenizer, length)
