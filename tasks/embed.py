"""Sentence embeddings, shared by every pipeline, cached by (model, precision, text).

The cache is an LMDB database in the artifact store
(`_cache/embeddings/<model>-<precision>-<pass shapes>`), so a text is embedded once across stages
and runs. That is sound because a text's vector depends on the text alone: each text is computed in a
forward pass whose shape is fixed by its own token count (`pass_shape`), never padded to whichever
longer text happened to share its batch; so a stage's output is the same bytes however warm the cache
(a stage re-run after a crash, other stages having cached some of its texts). Precision "auto" climbs
the embedder's ladder (`tasks.embed_precision`, measured once per machine and model, resolved into the
stage's key): int8 (dynamic quantization of the Linear layers) only where it is clearly faster than
fp32 here AND the decisions the stages take from the vectors stay the same on a fixed calibration
sample; bf16 autocast only where this machine's one decision takes it (`csk.precision`) AND a
length-spread probe of the stage's own texts agrees with fp32 to cosine >= `min_agreement`; else
fp32. The decision and its figures go into the manifest.

Every pass runs on one intra-op thread (`tasks.encoder.encode_passes`), so the vectors, the cache and
the stages that embed are the same bytes on any thread count.

Use it as a context manager: `with open_embedder(spec, ctx) as emb: vectors = emb.encode(texts)`.
"""

from __future__ import annotations

import hashlib
import json
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Literal

import numpy as np
import pandas as pd

from csk import compute

from csk.models import model_identity, resolve_model
from csk.errors import ConfigError
from csk.params import Device, ModelDir, Params, Resolved
from csk.progress import progress
from csk.runtime import StageContext, StageOutput
from csk.shards import map_shards
from tasks.encoder import (BATCH_TOKENS, DEFAULT_MODEL, PAD_MULTIPLE, PAD_MULTIPLES, encode_pass, encode_passes, load_sentence_model,  # noqa: F401  (the embedder's API)
                           packing_check, pass_shape, plan_passes, token_lengths)

THREAD_COUNT_FREE = "its forward passes run in tasks.encoder.encode_passes, one intra-op thread each"
PROBE_SIZE = 32


def ladder_precision(settings: dict, device: str, model: dict | None, cache: Path | None) -> str:
    """What `precision = "auto"` of an embed table resolves to here: the ladder's rung for its model
    (`tasks.embed_precision.decision`), for the stage's key."""
    from tasks.embed_precision import decision

    if model is None:  # no model configured: the stage fails on it later; key by the machine decision
        from csk.precision import decision as machine_decision

        return machine_decision(device)["precision"]
    load = lambda: load_sentence_model(resolve_model(model["spec"], "sentence embedding model", model["param"],  # noqa: E731
                                                     cache=cache), device)
    return decision(model["sha256"], device, load, spec=model["spec"], path=model.get("path"))["precision"]


EmbedPrecision = Annotated[Literal["auto", "fp32", "bf16", "int8"], Resolved("precision", decide=ladder_precision)]


class EmbedSpec(Params):
    """The sentence-embedding service: which model, and how it runs."""

    model: ModelDir = DEFAULT_MODEL
    """package:NAME (an installed package shipping a sentence-transformers model), split-package:NAME
    (one split over several wheels, e.g. all-mpnet-base-v2), or a local directory"""
    batch_tokens: int | None = None
    """tokens (padded) per forward pass: a text of n tokens is padded to n rounded up to `pad_multiple`
    and computed in a pass of batch_tokens // that many rows (filled with empty texts when fewer, unless
    this machine's kernels give a row the same bytes in a pass of fewer rows), so its vector depends on
    its own text only. None: 1024 on CPU (bench/bench_embed_dedup.py), 16384 on CUDA"""
    batch_size: int = 256
    """most texts per forward pass"""
    pad_multiple: int | None = None
    """a text's tokens are padded up to a multiple of this: fewer pass shapes (fuller passes) against
    more padding. None: 1 on CPU (no padding), 8 on CUDA"""
    precision: EmbedPrecision = "auto"
    """auto: the fastest rung of fp32 / bf16 / int8 allowed here (`csk precision`): int8 only where at
    least 1.2x fp32 and the stages' decisions agree on the calibration sample, bf16 only where this
    machine's decision takes it and the stage's texts agree with fp32 to min_agreement. int8: CPU only"""
    min_agreement: float = 0.999
    """lowest cosine between bf16 and fp32 embeddings of the probe texts for bf16 to be used"""
    device: Device = "auto"
    """auto: CUDA when a GPU is visible, else CPU"""


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:20]



def encode_shard(frame: pd.DataFrame, *, model: str, device: str, precision: str) -> pd.DataFrame:
    """Whole passes of the plan, on a worker (the model loaded once per worker process)."""
    st = load_sentence_model(Path(model), device, precision)
    texts = frame["text"].astype(str).tolist()
    passes = [(int(g["rows"].iat[0]), int(g["padded"].iat[0]), np.flatnonzero(frame["pass"].to_numpy() == k))
              for k, g in frame.groupby("pass", sort=False)]
    return pd.DataFrame({"embedding": list(encode_passes(st, texts, passes, precision, device))})



class Embedder:
    """Normalised sentence embeddings with an on-disk cache; `encode(texts) -> float32 [n, d]`.

    A text's vector is a function of the text (and the model, precision and pass settings) alone,
    never of which texts it was encoded with (`pass_shape`), so a cached vector is exactly what a fresh
    encoding computes and any stage's output is the same bytes however warm the cache was."""

    def __init__(self, spec: EmbedSpec | dict, cache_dir: Path | None = None, progress: bool = True):
        spec = EmbedSpec.model_validate(spec)
        self.spec = spec
        self.path = resolve_model(spec.model, "sentence embedding model", "embed.model", cache=cache_dir)
        self.sha256 = model_identity(spec.model, "embed.model", cache_dir)[1]
        self.device = compute.device(spec.device)
        self.model = load_sentence_model(self.path, self.device)
        self.batch_size = spec.batch_size
        self.batch_tokens = spec.batch_tokens or BATCH_TOKENS.get(self.device.split(":")[0], BATCH_TOKENS["cpu"])
        self.pad_multiple = spec.pad_multiple or PAD_MULTIPLES.get(self.device.split(":")[0], PAD_MULTIPLE)
        self.cache_dir = cache_dir
        self.progress = progress
        self.decision: dict | None = None
        self.stats = {"texts": 0, "unique": 0, "cached": 0, "encoded": 0}
        self._env = None

    @property
    def precision(self) -> str | None:
        return self.decision["precision"] if self.decision else None

    def packing(self, precision: str | None = None) -> dict:
        """This machine's `packing_check` for the precision (default: the one decided)."""
        precision = precision or self.precision
        return packing_check(self.model_for(precision), self.device, precision, self.batch_tokens,
                             self.batch_size, self.pad_multiple)

    def model_for(self, precision: str):
        """The model a precision runs (int8: the quantized copy)."""
        return load_sentence_model(self.path, self.device, precision) if precision == "int8" else self.model

    def cache_identity(self) -> dict:
        """Everything a cached vector depends on besides its text: the model's files (weights, tokenizer,
        config, pooling: `csk.models.model_files_hash`), the precision and pass shapes (in the name too), the
        device and the kernels this machine picks (CPU model, ISA flags, torch's CPU capability; the GPU), the
        libraries that run the model and the code of the passes (`tasks.encoder` and what it imports). Not
        the thread count: each pass runs on one intra-op thread (`THREAD_COUNT_FREE`)."""
        from importlib import metadata

        import torch

        from csk import codehash
        from csk.models import model_files_hash
        from csk.precision import cpu_flags, cpu_model
        from tasks.embed_precision import LIBRARIES

        machine = {"cpu": cpu_model(), "flags": cpu_flags(), "capability": torch.backends.cpu.get_cpu_capability()}
        if self.device.startswith("cuda"):
            machine["gpu"] = torch.cuda.get_device_name(torch.device(self.device))
        return {"model": model_files_hash(self.path), "precision": self.precision, "shape": self._shape(),
                "device": self.device.split(":")[0], "machine": machine,
                "libraries": {d: metadata.version(d) for d in LIBRARIES},
                "code": codehash.code_hash(("tasks.encoder",))}

    def _shape(self) -> str:
        return (f"pass{self.pad_multiple}x{self.batch_tokens}x{self.batch_size}" if self.packing()["packed"]
                else f"single{self.pad_multiple}")

    @property
    def cache_name(self) -> str:
        """The cache's directory: model, precision and pass shapes (another shape, other bytes), then a hash of
        `cache_identity` (written in the folder's identity.json): another model file, library, code or
        machine starts another folder, never reads vectors computed otherwise."""
        identity = self.cache_identity()
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.sha256[:16]}-{self.precision}-{self._shape()}-{digest}"

    def plan(self, texts: list[str], precision: str | None = None) -> list[tuple[int, int, np.ndarray]]:
        packing = self.packing(precision)
        return plan_passes(token_lengths(self.model, texts), self.batch_tokens, self.batch_size,
                           self.pad_multiple, packing["packed"], fill=not packing["row_count_free"])

    # -- raw encoding
    def _encode_raw(self, texts: list[str], precision: str, bar=None) -> np.ndarray:
        return encode_passes(self.model_for(precision), texts, self.plan(texts, precision), precision, self.device,
                             bar)

    def _encode_chunks(self, texts: list[str]) -> np.ndarray:
        """Encode in the passes of `plan_passes`, with a progress bar labelled with the stage. On a Dask
        cluster, shards of whole passes (about `shard_rows` texts each) go to the workers: a pass has the
        same shape and texts either way, so the vectors are the same bytes."""
        from csk.shards import dask_runner, shard_rows

        if dask_runner() is not None and len(texts) > shard_rows():
            passes = self.plan(texts)
            frames, current = [], []
            for p in passes:
                current.append(p)
                if sum(len(c[2]) for c in current) >= shard_rows():
                    frames.append(current)
                    current = []
            frames += [current] if current else []
            shards = [pd.DataFrame({"text": [texts[i] for _, _, idx in fp for i in idx],
                                    "pass": np.concatenate([np.full(len(idx), k) for k, (_, _, idx) in enumerate(fp)]),
                                    "rows": np.concatenate([np.full(len(idx), r) for r, _, idx in fp]),
                                    "padded": np.concatenate([np.full(len(idx), n) for _, n, idx in fp])})
                      for fp in frames]
            out = map_shards(encode_shard, shards, model=str(self.path), device=self.device, precision=self.precision)
            vectors = np.zeros((len(texts), self.model.get_embedding_dimension()), np.float32)
            vectors[np.concatenate([idx for _, _, idx in passes])] = np.concatenate(
                [np.stack(f["embedding"].to_numpy()) for f in out])
            return vectors
        with progress(len(texts), f"encode ({Path(self.spec.model).name}, {self.precision})", unit="texts",
                      disable=not self.progress or len(texts) <= 512) as bar:
            return self._encode_raw(texts, self.precision, bar)

    def _agreement(self, texts: list[str]) -> float:
        """Min cosine between bf16 and fp32 embeddings of a probe evenly spaced over the length-sorted
        texts, the shortest and the longest included. The probe is a sixteenth of the texts, at least 2 and at
        most PROBE_SIZE: its fp32 pass is a fixed cost that must scale with the input (the machine and model's
        agreement is measured once, by the ladder; this checks only that these texts are not unlike its)."""
        ordered = sorted(set(texts), key=lambda t: (len(t), t))
        if not ordered:
            return 1.0
        size = min(PROBE_SIZE, max(2, math.ceil(len(ordered) / 16)), len(ordered))
        probe = [ordered[i] for i in sorted(set(np.linspace(0, len(ordered) - 1, size).round().astype(int)))]
        ref = self._encode_raw(probe, "fp32")
        low = self._encode_raw(probe, "bf16")
        cos = np.sum(ref * low, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(low, axis=1))
        return float(cos.min())

    def calibrate(self, texts: list[str]) -> str:
        """Decide the precision once (the same decision the stage's key was computed with, see
        `ladder_precision`); bf16 then also probes these texts against fp32."""
        if self.decision is None:
            requested = self.spec.precision
            if requested == "int8" and not self.device.startswith("cpu"):
                raise ConfigError(f"embed.precision = \"int8\": dynamic int8 quantization runs on CPU only, and this "
                                  f"embedder runs on {self.device}; set precision to \"auto\", \"bf16\" or \"fp32\"")
            if requested == "int8":
                self.decision = {"precision": "int8", "requested": "int8", "why": "set in the configuration",
                                 **compute.machine()}
            elif requested == "auto":
                from tasks.embed_precision import decision

                ladder = decision(self.sha256, self.device, lambda: self.model, spec=self.spec.model, path=self.path)
                if ladder["precision"] == "bf16":  # the machine decision takes bf16: the stage's texts must agree too
                    self.decision = {**compute.precision("auto", self.device, lambda: self._agreement(texts),
                                                         self.spec.min_agreement), "ladder": ladder}
                else:
                    self.decision = {"requested": "auto", "device": self.device, "precision": ladder["precision"],
                                     "why": ladder["why"], "machine_decision": ladder["machine_decision"],
                                     "ladder": ladder, **compute.machine()}
            else:
                self.decision = compute.precision(requested, self.device)
        return self.precision

    # -- cache
    def _open_cache(self):
        if self._env is None and self.cache_dir is not None:
            import lmdb

            d = Path(self.cache_dir) / "embeddings" / self.cache_name
            d.mkdir(parents=True, exist_ok=True)
            if not (d / "identity.json").exists():
                (d / "identity.json").write_text(json.dumps(self.cache_identity(), indent=2, sort_keys=True) + "\n")
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
        self.check_vocabulary(unique)
        return dict(zip(unique, self.encode(unique))).__getitem__

    def check_vocabulary(self, texts: list[str], sample: int = 512, limit: float = 0.05) -> float:
        """The share of the texts' tokens the model's tokenizer does not know (its unknown token), on a
        fixed sample; above `limit` (Chinese on an English model: 57% of the bundled CORECODE dialogues'
        tokens for all-MiniLM-L6-v2) the manifest and the log say the similarities are unreliable."""
        unk = getattr(self.model.tokenizer, "unk_token_id", None)
        if unk is None or not texts:
            return 0.0
        chosen = sorted(texts)[:: max(1, len(texts) // sample)][:sample]
        ids = self.model.tokenizer(chosen, add_special_tokens=False, truncation=True,
                                   max_length=self.model.max_seq_length)["input_ids"]
        total = sum(len(i) for i in ids)
        share = sum(t == unk for i in ids for t in i) / total if total else 0.0
        self.stats["unknown_token_share"] = max(round(share, 4), self.stats.get("unknown_token_share", 0.0))
        if share > limit and not self.stats.get("vocabulary_warning"):
            self.stats["vocabulary_warning"] = (
                f"{self.spec.model} does not know {share:.0%} of these texts' tokens (another language or script "
                "than the model's?): its similarities are unreliable here; set this stage's embedder model to a "
                "sentence-transformers model for the texts' language")
            import logging

            logging.getLogger("csk").warning(self.stats["vocabulary_warning"])
        return share

    def record(self, ctx: StageContext | None = None) -> dict:
        info = {"precision": self.precision, "precision_decision": self.decision, "device": self.device,
                "batch_tokens": self.batch_tokens, "batch_size": self.batch_size, "pad_multiple": self.pad_multiple,
                **({"packing": self.packing(), "cache": self.cache_name} if self.precision else {}), **self.stats}
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


def vector_lookup(texts: list[str], embed: EmbedSpec | dict, ctx: StageContext | None):
    """text -> frozen sentence embedding (the distractor engine's linear probes, CoreQuisite's MCQA
    retrieval): the embedder's own helper, so its users import no other stage's code."""
    with open_embedder(embed, ctx) as emb:
        return emb.lookup(texts)


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
