"""Seq2seq models (T5, BART, COMET) shared by every pipeline: load from a directory, generate in
batches, fine-tune on (source, target) pairs. Dataset code states its prompts; this module knows none.

Generation runs several inputs per `generate` call (padding with an attention mask does not change
a beam's scores), on CUDA when there is one, in bf16 where the caller's precision decision says so.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from csk import compute
from csk.models import pretrained_kwargs, resolve_model
from csk.progress import progress, track
from csk.shards import map_shards, spans


@lru_cache(maxsize=4)
def load_seq2seq(path: str, device: str):
    """(tokenizer, model in eval mode) of a local directory; cached per process."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(path, **pretrained_kwargs(path)).to(device).eval()
    return tok, model


def generate(texts: Sequence[str], path: str | Path, *, num_return: int = 1, num_beams: int = 1,
             batch_size: int = 16, max_input_length: int = 512, precision: str = "fp32", device: str = "auto",
             seed: int = 0, desc: str = "generate", **kwargs: Any) -> list[list[str]]:
    """`num_return` decoded outputs for each text, best first. `kwargs` go to `model.generate`
    (max_length or max_new_tokens, no_repeat_ngram_size, do_sample, top_p, early_stopping ...).
    Each batch is seeded by its position, so its outputs do not depend on the batches before it:
    on a Dask cluster, shards of whole batches give the same outputs."""
    dev = compute.device(device)
    settings = {"path": str(path), "num_return": num_return, "num_beams": num_beams, "batch_size": batch_size,
                "max_input_length": max_input_length, "precision": precision, "device": dev, "seed": seed,
                "kwargs": kwargs}
    shards = spans(len(texts), align=batch_size)
    if len(shards) > 1:
        frames = [pd.DataFrame({"text": list(texts[a:b]), "position": range(a, b)}) for a, b in shards]
        return [list(o) for f in map_shards(generate_shard, frames, **settings) for o in f["outputs"]]
    return _generate(list(texts), 0, desc=desc, **settings)


def generate_shard(frame: pd.DataFrame, **settings: Any) -> pd.DataFrame:
    """A shard of whole batches, on a worker (the model loaded once per worker process)."""
    start = int(frame["position"].iloc[0]) if len(frame) else 0
    return pd.DataFrame({"outputs": _generate(frame["text"].astype(str).tolist(), start, desc="generate", **settings)})


def _generate(texts: list[str], offset: int, *, path: str, num_return: int, num_beams: int, batch_size: int,
              max_input_length: int, precision: str, device: str, seed: int, kwargs: dict, desc: str) -> list[list[str]]:
    import torch

    tok, model = load_seq2seq(path, device)
    out: list[list[str]] = []
    kwargs = {"num_return_sequences": num_return, **kwargs}
    if not kwargs.get("do_sample"):
        kwargs["num_beams"] = max(num_beams, num_return)
    for start in track(range(0, len(texts), batch_size), len(texts), desc, unit="texts", step=batch_size,
                       disable=len(texts) <= 4 * batch_size):
        torch.manual_seed(seed * 1_000_003 + offset + start)  # the batch's own seed (sampling only)
        batch = texts[start:start + batch_size]
        enc = tok(batch, return_tensors="pt", padding=True, truncation=True, max_length=max_input_length).to(device)
        with torch.inference_mode(), compute.autocast(precision, device):
            gen = model.generate(**enc, **kwargs)
        decoded = tok.batch_decode(gen, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        out.extend([d.strip() for d in decoded[i * num_return:(i + 1) * num_return]] for i in range(len(batch)))
    return out


def fine_tune(base: str | Path, out: str | Path, pairs: Sequence[tuple[str, str]], *, epochs: int = 1,
              lr: float = 3e-4, batch_size: int = 16, max_steps: int = 0, seed: int = 0,
              max_source_length: int = 256, max_target_length: int = 128, desc: str = "fine-tune",
              info: dict | None = None) -> dict:
    """Teacher-forced cross-entropy on (source, target) pairs with AdamW, shuffled each epoch by a
    seeded generator; saves model + tokenizer + `csk_training.json` (what it was trained on) to `out`."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    path = resolve_model(str(base), "base model", "--base")
    device = compute.device()
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), **pretrained_kwargs(path), dtype=torch.float32).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    per_epoch = (len(pairs) + batch_size - 1) // batch_size
    total = min(epochs * per_epoch, max_steps) if max_steps else epochs * per_epoch
    autocast = compute.autocast("bf16" if device == "cuda" else "fp32", device)
    step, loss_value = 0, float("nan")
    model.train()
    threads = compute.training_threads()  # another thread count sums gradients in another order: another model
    with progress(total, desc, unit="steps") as bar, compute.fixed_threads(threads):
        for epoch in range(epochs):
            order = compute.rng(seed, "fine-tune", epoch).permutation(len(pairs))
            for s in range(0, len(pairs), batch_size):
                if step >= total:
                    break
                batch = [pairs[i] for i in order[s:s + batch_size]]
                enc = tok([a for a, _ in batch], return_tensors="pt", padding=True, truncation=True,
                          max_length=max_source_length).to(device)
                labels = tok([b for _, b in batch], return_tensors="pt", padding=True, truncation=True,
                             max_length=max_target_length).input_ids.to(device)
                labels[labels == tok.pad_token_id] = -100
                with autocast:
                    loss = model(**enc, labels=labels).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                loss_value = float(loss.detach())
                step += 1
                bar.update(1, epoch=f"{epoch + 1} of {epochs}", loss=f"{loss_value:.4f}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    record = {"pairs": len(pairs), "steps": step, "epochs": epochs, "lr": lr, "batch_size": batch_size, "seed": seed,
              "loss": loss_value, "base": str(path), "device": device, "threads": threads, **(info or {})}
    (out / "csk_training.json").write_text(json.dumps(record, indent=2))
    return record
