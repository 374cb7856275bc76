"""Sentence embeddings, shared by every pipeline, cached by (model, precision, text).

The cache is an LMDB database in the artifact store (`_cache/embeddings/<model>-<precision>`),
so a text is embedded once across stages and runs. bf16 autocast is used where it agrees
with fp32 on a probe of the actual texts to cosine >= `min_agreement` (on this project's
2-core AMX CPU: ~1.7x faster at cosine > 0.9998); the decision and the measured agreement
go into the manifest.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from csk.models import model_hash, resolve_model
from csk.runtime import StageContext, StageOutput

PROBE_SIZE = 32
_MODELS: dict[tuple[str, str], object] = {}


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:20]


def _device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_sentence_model(path: Path, device: str):
    from sentence_transformers import SentenceTransformer

    key = (str(path), device)
    if key not in _MODELS:
        _MODELS[key] = SentenceTransformer(str(path), device=device, local_files_only=True)
    return _MODELS[key]


class Embedder:
    """Normalised sentence embeddings with an on-disk cache; `encode(texts) -> float32 [n, d]`."""

    def __init__(self, model: str, cache_dir: Path | None, batch_size: int = 32, precision: str = "auto",
                 min_agreement: float = 0.999, device: str = "auto", progress: bool = True):
        self.spec = model
        self.path = resolve_model(model, "sentence embedding model", "embed.model")
        self.sha256 = model_hash(self.path)
        self.device = _device(device)
        self.model = load_sentence_model(self.path, self.device)
        self.batch_size = batch_size
        self.requested_precision = precision
        self.min_agreement = min_agreement
        self.cache_dir = cache_dir
        self.progress = progress
        self.precision: str | None = None if precision == "auto" else precision
        self.agreement: float | None = None
        self.stats = {"texts": 0, "unique": 0, "cached": 0, "encoded": 0}
        self._env = None

    # -- raw encoding
    def _autocast(self, precision: str):
        import torch

        if precision == "bf16":
            return torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16)
        return nullcontext()

    def _encode_raw(self, texts: list[str], precision: str, progress: bool = False) -> np.ndarray:
        import torch

        with torch.inference_mode(), self._autocast(precision):
            emb = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                                    normalize_embeddings=True, show_progress_bar=progress)
        return emb.float().cpu().numpy().astype(np.float32)

    def calibrate(self, texts: list[str]) -> str:
        """Choose bf16 when it agrees with fp32 on a probe of these texts, else fp32."""
        if self.precision is not None:
            return self.precision
        # Evenly spaced over the length-sorted texts, so long inputs are probed too.
        ordered = sorted(set(texts), key=lambda t: (len(t), t))
        step = max(1, len(ordered) // PROBE_SIZE)
        probe = ordered[::step][:PROBE_SIZE]
        if not probe:
            self.precision = "fp32"
            return self.precision
        ref = self._encode_raw(probe, "fp32")
        low = self._encode_raw(probe, "bf16")
        cos = np.sum(ref * low, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(low, axis=1))
        self.agreement = float(cos.min())
        self.precision = "bf16" if self.agreement >= self.min_agreement else "fp32"
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
            fresh = self._encode_raw(missing, self.precision, progress=self.progress and len(missing) > 256)
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
            return np.zeros((0, self.model.get_sentence_embedding_dimension()), dtype=np.float32)
        return np.stack([vectors[text_key(t)] for t in texts])

    def record(self, ctx: StageContext | None) -> dict:
        info = {"precision": self.precision, "bf16_min_cosine_vs_fp32": self.agreement,
                "device": self.device, **self.stats}
        if ctx is not None:
            ctx.record_model("sentence-embedder", str(self.path), self.sha256, spec=self.spec, **info)
        return info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def embedder_from_params(params: dict, ctx: StageContext | None) -> Embedder:
    return Embedder(model=params["model"], cache_dir=ctx.cache_dir if ctx else None,
                    batch_size=params.get("batch_size", 32), precision=params.get("precision", "auto"),
                    min_agreement=params.get("min_agreement", 0.999), device=params.get("device", "auto"))


def embed_fingerprint(params: dict) -> dict:
    """The model's weights are part of the key: a different model directory recomputes."""
    return {"model_sha256": model_hash(resolve_model(params["model"], "sentence embedding model", "embed.model"))}


def dialogue_text(turns) -> str:
    return " ".join(str(t["text"]) for t in turns)


def embed(dialogues: pd.DataFrame, *, model: str, batch_size: int = 32, precision: str = "auto",
          min_agreement: float = 0.999, device: str = "auto", ctx: StageContext | None = None) -> StageOutput:
    """One embedding per dialogue (its utterances joined, speaker tags left out)."""
    emb = embedder_from_params(dict(model=model, batch_size=batch_size, precision=precision,
                                    min_agreement=min_agreement, device=device), ctx)
    try:
        vectors = emb.encode([dialogue_text(t) for t in dialogues["turns"]])
        info = emb.record(ctx)
    finally:
        emb.close()
    data = pd.DataFrame({"id": dialogues["id"].astype(str), "embedding": list(vectors)})
    return StageOutput(data=data, notes={"embedder": info, "dimension": int(vectors.shape[1]) if len(vectors) else None},
                       tables={"embedding": [{"key": k, "value": json.dumps(v) if not isinstance(v, (int, float, str)) else v}
                                             for k, v in info.items()]})
