"""Fine-tuning the counterfactual generator as the paper did: a seq2seq model trained to
rewrite a statement into one that cannot be true with it.

Pairs: SNLI JSON Lines (`sentence1` -> `sentence2` where `gold_label` is contradiction) and
TimeTravel JSON Lines (`original_ending` -> `edited_ending`, and `initial` -> `counterfactual`).
"""

from __future__ import annotations

import json
from pathlib import Path


from csk import compute
from csk.errors import InputError
from csk.models import resolve_model
from readers.base import iter_json_lines
from tasks.distractors.counterfactuals import PREFIX


def _text(v) -> str:
    return " ".join(str(x).strip() for x in v) if isinstance(v, list) else str(v or "").strip()


def read_pairs(snli: list[Path], timetravel: list[Path]) -> list[tuple[str, str, str]]:
    pairs = []
    for path in snli:
        for n, obj in iter_json_lines(path):
            try:
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
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    path = resolve_model(str(base), "generator base model", "--base")
    device = compute.device()
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True, dtype=torch.float32).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = compute.rng(seed, "generator-training")
    total = epochs * ((len(pairs) + batch_size - 1) // batch_size)
    if max_steps:
        total = min(total, max_steps)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    step, loss_value = 0, float("nan")
    model.train()
    with tqdm(total=total, desc="train generator") as bar:
        for _ in range(epochs):
            for s in range(0, len(pairs), batch_size):
                if step >= total:
                    break
                batch = [pairs[i] for i in rng.permutation(len(pairs))[s:s + batch_size]]
                enc = tok([PREFIX + a for a, _, _ in batch], return_tensors="pt", padding=True, truncation=True,
                          max_length=128).to(device)
                labels = tok([b for _, b, _ in batch], return_tensors="pt", padding=True, truncation=True,
                             max_length=64).input_ids.to(device)
                labels[labels == tok.pad_token_id] = -100
                with autocast:
                    loss = model(**enc, labels=labels).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                loss_value = float(loss.detach())
                step += 1
                bar.update(1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"pairs": len(pairs), "steps": step, "loss": loss_value, "base": str(path),
            "sources": {s: sum(1 for *_, k in pairs if k == s) for s in ("snli", "timetravel")}}
    (out / "csk_training.json").write_text(json.dumps(info, indent=2))
    return info
