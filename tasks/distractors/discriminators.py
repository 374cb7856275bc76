"""Discriminators for adversarial filtering: score every (context, choice) pair.

* `LinearProbe`: frozen sentence embeddings of the context (question + target + dialogue) and
  the choice, features [c*e, e, |c-e|], scikit-learn logistic regression (gold vs not). The
  fast CPU default, also the probe of the distractor-quality measurement.
* `TransformerMC`: a transformers multiple-choice head on a configured encoder (the paper: a
  fresh roberta-large every iteration, 3 epochs), re-initialised from the pretrained weights
  on every `fit`, bf16 autocast on CUDA. It runs unchanged on a GPU machine.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from csk import compute
from csk.models import pretrained_kwargs


class LinearProbe:
    name = "linear-probe"

    def __init__(self, vector: Callable[[str], np.ndarray], C: float = 1.0, seed: int = 0, max_iter: int = 2000):
        self.vector = vector
        self.C = C
        self.seed = seed
        self.max_iter = max_iter
        self.model = None

    def _features(self, context: str, choices: list[str]) -> np.ndarray:
        c = self.vector(context)
        e = np.stack([self.vector(x) for x in choices])
        return np.concatenate([e * c, e, np.abs(e - c)], axis=1)

    def fit(self, contexts: list[str], choices: list[list[str]], gold: list[int]) -> "LinearProbe":
        from sklearn.linear_model import LogisticRegression

        X = np.concatenate([self._features(c, ch) for c, ch in zip(contexts, choices)])
        y = np.concatenate([[1 if j == g else 0 for j in range(len(ch))] for ch, g in zip(choices, gold)])
        self.model = LogisticRegression(C=self.C, max_iter=self.max_iter, class_weight="balanced",
                                        random_state=self.seed)
        self.model.fit(X, y)
        return self

    def score(self, contexts: list[str], choices: list[list[str]]) -> list[np.ndarray]:
        return [self.model.decision_function(self._features(c, ch)) for c, ch in zip(contexts, choices)]


class TransformerMC:
    name = "transformer"

    def __init__(self, model_dir: str, epochs: int = 3, lr: float = 1e-5, batch_size: int = 8, max_length: int = 256,
                 seed: int = 0, device: str | None = None, weight_decay: float = 0.01, warmup: float = 0.1):

        self.model_dir = str(model_dir)
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.max_length = max_length
        self.seed = seed
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.device = device or compute.device()
        self.model = None
        self.tokenizer = None
        self.fits = 0

    @property
    def precision(self) -> str:
        """bf16 autocast on CUDA, and on a CPU where bf16 matmul is measured faster (AMX); else fp32."""
        if self.device.startswith("cuda"):
            return "bf16"
        return "bf16" if compute.bf16_faster("cpu")[0] else "fp32"

    def _autocast(self):
        return compute.autocast(self.precision, self.device)

    def _encode(self, contexts: list[str], choices: list[list[str]]):
        width = max(len(ch) for ch in choices)
        first, second, mask = [], [], []
        for c, ch in zip(contexts, choices):
            padded = list(ch) + [""] * (width - len(ch))
            first += [c] * width
            second += padded
            mask.append([1] * len(ch) + [0] * (width - len(ch)))
        enc = self.tokenizer(first, second, truncation=True, max_length=self.max_length, padding=True,
                             return_tensors="pt")
        enc = {k: v.view(len(contexts), width, -1).to(self.device) for k, v in enc.items()}
        import torch

        return enc, torch.tensor(mask, dtype=torch.bool, device=self.device)

    def fit(self, contexts: list[str], choices: list[list[str]], gold: list[int]) -> "TransformerMC":
        import torch
        from transformers import AutoModelForMultipleChoice, AutoTokenizer, get_linear_schedule_with_warmup

        torch.manual_seed(self.seed + self.fits)
        self.fits += 1
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
        # A fresh discriminator from the pretrained weights every iteration (Zellers et al. 2018).
        self.model = AutoModelForMultipleChoice.from_pretrained(
            self.model_dir, **pretrained_kwargs(self.model_dir), dtype=torch.float32).to(self.device)  # fp32 master weights
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        steps = self.epochs * ((len(contexts) + self.batch_size - 1) // self.batch_size)
        sched = get_linear_schedule_with_warmup(opt, int(self.warmup * steps), max(steps, 1))
        rng = compute.rng(self.seed, "mc-batches", self.fits)
        self.model.train()
        from csk.progress import Progress

        bar = Progress(steps, f"AF discriminator (fit {self.fits})", unit="steps", disable=steps < 50)
        for _ in range(self.epochs):
            order = rng.permutation(len(contexts))
            for s in range(0, len(order), self.batch_size):
                idx = order[s:s + self.batch_size]
                enc, mask = self._encode([contexts[i] for i in idx], [choices[i] for i in idx])
                labels = torch.tensor([gold[i] for i in idx], device=self.device)
                with self._autocast():
                    logits = self.model(**enc).logits.float()
                logits = logits.masked_fill(~mask, -1e4)
                loss = torch.nn.functional.cross_entropy(logits, labels)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
                bar.update(1)
        bar.close()
        self.model.eval()
        return self

    def score(self, contexts: list[str], choices: list[list[str]], chunk: int = 8) -> list[np.ndarray]:
        import torch

        out = []
        with torch.inference_mode():
            for c, ch in zip(contexts, choices):
                parts = []
                for s in range(0, len(ch), chunk):  # choices are scored independently by the MC head
                    enc, _ = self._encode([c], [list(ch[s:s + chunk])])
                    with self._autocast():
                        parts.append(self.model(**enc).logits.float()[0, :len(ch[s:s + chunk])].cpu().numpy())
                out.append(np.concatenate(parts) if parts else np.zeros(0))
        return out
