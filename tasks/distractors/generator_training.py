"""Fine-tuning the counterfactual generator as the paper did: a seq2seq model trained to
rewrite a statement into one that cannot be true with it.

Pairs: SNLI JSON Lines (`sentence1` -> `sentence2` where `gold_label` is contradiction) and
TimeTravel JSON Lines (`original_ending` -> `edited_ending`, and `initial` -> `counterfactual`).
"""

from __future__ import annotations

from pathlib import Path

from csk.errors import InputError
from readers.base import iter_json_lines
from tasks.seq2seq import fine_tune
from tasks.distractors.counterfactuals import PREFIX


def _text(v) -> str:
    return " ".join(str(x).strip() for x in v) if isinstance(v, list) else str(v or "").strip()


def read_pairs(snli: list[Path], timetravel: list[Path]) -> list[tuple[str, str, str]]:
    pairs = []
    for path in snli:
        for n, obj in iter_json_lines(path):
            try:
                if not isinstance(obj["gold_label"], str):
                    raise TypeError(f"gold_label is {type(obj['gold_label']).__name__}, not a string")
                if obj["gold_label"] == "contradiction":
                    pairs.append((obj["sentence1"].strip(), obj["sentence2"].strip(), "snli"))
            except (KeyError, TypeError, AttributeError) as exc:
                raise InputError(str(path), f"line {n}",
                                 f"expected SNLI JSON (sentence1, sentence2, gold_label): missing {exc}") from None
    for path in timetravel:
        for n, obj in iter_json_lines(path):
            found = False
            for a, b in (("original_ending", "edited_ending"), ("initial", "counterfactual")):
                if obj.get(a) and obj.get(b) and _text(obj[a]) != _text(obj[b]):
                    pairs.append((_text(obj[a]), _text(obj[b]), "timetravel"))
                    found = True
            if not found:
                raise InputError(str(path), f"line {n}", "expected TimeTravel fields original_ending/edited_ending "
                                 "or initial/counterfactual")
    if not pairs:
        raise InputError(",".join(map(str, list(snli) + list(timetravel))) or "(none)", None,
                         "no training pairs: give --snli and/or --timetravel files")
    return pairs


def train(base: str | Path, out: str | Path, pairs: list[tuple[str, str, str]], *, epochs: int = 1,
          lr: float = 3e-4, batch_size: int = 16, max_steps: int = 0, seed: int = 0) -> dict:
    """Fine-tune `base` on the pairs (the task prefix added to each source)."""
    sources = {s: sum(1 for *_, k in pairs if k == s) for s in ("snli", "timetravel")}
    return fine_tune(base, out, [(PREFIX + a, b) for a, b, _ in pairs], epochs=epochs, lr=lr, batch_size=batch_size,
                     max_steps=max_steps, seed=seed, max_source_length=128, max_target_length=64,
                     desc="train generator", info={"sources": sources})
