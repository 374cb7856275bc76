"""The sentence embedder's precision ladder: fp32, bf16 (autocast), int8 (dynamic quantization).

`precision = "auto"` in an `embed` table resolves, per machine and model, to the fastest rung that is
allowed here, never to one slower than fp32:

* fp32 is always allowed (the reference);
* bf16 where the machine's one decision takes it (`csk.precision`: bf16 at least 1.2x fp32 at the
  embedder's linear-layer shapes) and the whole model, timed here, is not slower than fp32; each stage
  still probes its own texts against fp32 (`tasks.embed.Embedder.calibrate`);
* int8 (PyTorch's dynamic quantization of the Linear layers, CPU only) where the whole model is at
  least `MIN_SPEEDUP` x fp32 here AND, on the fixed calibration sample (`tasks/data/embed_calibration.json`,
  texts of the bundled sample corpora and near-duplicate variants of them), the decisions that depend
  on the vectors stay as fp32 makes them: near-duplicate pairs at the dedup threshold, TextRank
  targets and candidate-filter verdicts, each at least its `BARS` share. Cosine alone does not decide:
  a vector may move while every decision stays (or the reverse).

The speed of each rung: texts of the sample that fill whole passes of the embedder's plan (`speed_subset`),
encoded in alternating rounds, timed twice a round: on one intra-op thread by its CPU time (as the machine decision
is timed, so other processes do not move it) and on every thread by wall time (as the stages run it).
bf16 is judged by the first (it runs fp32's packed passes); int8 by the smaller of the two median
ratios (its single-row passes scale poorly over threads). A packed pass whose rows are not independent in a rung
(activation scales per pass make a row depend on its neighbours) is timed as the single-row passes it
would run in.

Measured once per machine, model (its files: weights, tokenizer, config), calibration sample, library
versions and code (`identity`), cached beside the machine decision (`<cache>/precision/embedder/`), readable without importing torch (so the key of a fully cached run
is computed in milliseconds); the figures go into the manifest with the embedder's record, and the
resolved rung into every embedding stage's key.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import typer

from csk.precision import MIN_SPEEDUP, cache_dir, fingerprint_id, machine_material
from tasks.encoder import int8_engine, quantize_int8  # noqa: F401  (the ladder's int8 rung)

# What the ladder measures (on any thread count) reaches a stage only as the rung it decides, and that rung
# is in the stage's key (`Resolved`): the stage's bytes depend on it, not on the count it was timed with.
THREAD_COUNT_FREE = "its only output is the precision rung, resolved into the key"

METHOD = 6  # how the ladder is measured (2: int8 per channel; 3: every thread too; 4: whole passes; 5: bf16 one thread; 6: generic ranking decisions); a new method measures again
BARS = {"dedup_pairs": 0.995, "textrank_targets": 0.99, "candidate_verdicts": 0.995}
"""least share of decisions identical to fp32 for int8 to be taken (issue 28)"""
ROUNDS = 3
SPEED_TEXTS = 128  # about this many texts, in whole passes, a timing trial encodes
CALIBRATION = Path(__file__).resolve().parent / "data" / "embed_calibration.json"
RUNGS = ("fp32", "bf16", "int8")

_DECISIONS: dict[tuple[str, str, str, str], dict] = {}  # (model sha256, its files, device kind, machine decision) -> ladder


# ------------------------------------------------------------------ the sample and its decisions
# The cosine thresholds at which int8's decisions are compared with fp32's: the paper's near-duplicate
# threshold (dedup's `threshold`) and the candidate filter's paraphrase bar (its `max_similarity`). Declared
# here, not read from those stages: the ladder is shared code and knows no consumer (an edit to the
# distractor engine must not recompute the embedder); tests/shared/test_embed_precision.py checks they
# still equal those stages' defaults.
THRESHOLDS = {"dedup_threshold": 0.87, "max_similarity": 0.9}


def calibration(thresholds: dict[str, float] | None = None) -> dict:
    """The fixed calibration sample: dialogues (and a near-duplicate of each: its last utterance left
    out), and (choice, correct answer) pairs (and the answer against itself without its last word, a
    near-paraphrase), with the thresholds the decisions are compared at (default `THRESHOLDS`)."""
    raw = json.loads(CALIBRATION.read_text())
    dialogues = [list(map(str, d)) for d in raw["dialogues"]]
    variants = [d[:-1] for d in dialogues if len(d) >= 3]
    pairs = [tuple(map(str, p)) for p in raw["pairs"]]
    answers = list(dict.fromkeys(b for _, b in pairs))
    pairs += [(a, a.rsplit(" ", 1)[0]) for a in answers if " " in a]
    return {"dialogues": dialogues, "joined": [" ".join(d) for d in dialogues + variants], "pairs": pairs,
            **THRESHOLDS, **(thresholds or {}), "sha256": hashlib.sha256(CALIBRATION.read_bytes()).hexdigest()}


def texts_of(sample: dict) -> list[str]:
    return list(dict.fromkeys([u for d in sample["dialogues"] for u in d] + sample["joined"]
                              + [t for p in sample["pairs"] for t in p]))


def decisions(vector: dict[str, np.ndarray], sample: dict) -> dict:
    """What stages decide from these vectors: near-duplicate pairs (dedup), the top-ranked utterances of
    each dialogue by TextRank (a third of them, at least 2, over its two halves: the kind of choice CICERO's
    targets make, stated here without any dataset's rule), and the paraphrase verdict of each pair
    (candidate filter)."""
    from tasks.textrank import select_x1, textrank_batch

    joined = np.stack([vector[t] for t in sample["joined"]])
    sims = joined @ joined.T
    dup = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(sims >= sample["dedup_threshold"], 1)))}
    blocks = [np.stack([vector[u] for u in d]) for d in sample["dialogues"]]
    picks = []
    for d, scores in zip(sample["dialogues"], textrank_batch(blocks)):
        n = len(d)
        picks.append(tuple(select_x1(scores, max(2, n // 3), 2)))
    verdicts = [float(vector[a] @ vector[b]) >= sample["max_similarity"] for a, b in sample["pairs"]]
    return {"dedup_pairs": dup, "textrank_targets": picks, "candidate_verdicts": verdicts}


def agreement(ref: dict, got: dict) -> dict:
    """Share of each decision identical to the reference's (near-duplicate pairs: Jaccard of the pair
    sets, 1.0 when neither has any), with how many decisions it counts."""
    union = ref["dedup_pairs"] | got["dedup_pairs"]
    return {"dedup_pairs": len(ref["dedup_pairs"] & got["dedup_pairs"]) / len(union) if union else 1.0,
            "textrank_targets": float(np.mean([a == b for a, b in zip(ref["textrank_targets"], got["textrank_targets"])])),
            "candidate_verdicts": float(np.mean([a == b for a, b in zip(ref["candidate_verdicts"], got["candidate_verdicts"])])),
            "counted": {"dedup_pairs": len(union), "textrank_targets": len(ref["textrank_targets"]),
                        "candidate_verdicts": len(ref["candidate_verdicts"])}}


# ------------------------------------------------------------------ the rule
def choose(machine_precision: str, speedup: dict[str, float], agree: dict[str, dict] | None = None) -> dict:
    """The rung `auto` takes, from the machine decision ("fp32"/"bf16") and this model's measurements:
    `speedup` (rung -> speed vs fp32, whole model) and `agree` (rung -> `agreement` figures). The
    fastest allowed rung; fp32 when nothing else is allowed, so never one slower than fp32."""
    agree = agree or {}
    allowed, why = {"fp32": 1.0}, []
    if machine_precision == "bf16":
        s = speedup.get("bf16")
        if s is None or s >= 1.0:
            allowed["bf16"] = s if s is not None else MIN_SPEEDUP
        else:
            why.append(f"bf16 not taken: the whole model ran {s:.2f}x fp32 here")
    if "int8" in speedup:
        s, a = speedup["int8"], agree.get("int8")
        failed = [f"{k} {a[k]:.4f} < {bar}" for k, bar in BARS.items() if a is not None and a[k] < bar]
        if s < MIN_SPEEDUP:
            why.append(f"int8 not taken: {s:.2f}x fp32, below {MIN_SPEEDUP}x")
        elif a is None:
            why.append("int8 not taken: its decisions were not compared with fp32")
        elif failed:
            why.append(f"int8 not taken: {s:.2f}x fp32 but decisions differ from fp32 ({', '.join(failed)})")
        else:
            allowed["int8"] = s
    best = max(allowed, key=lambda r: (allowed[r], -RUNGS.index(r)))
    taken = f"{best}: {allowed[best]:.2f}x fp32" if best != "fp32" else "fp32"
    return {"precision": best, "why": "; ".join([taken] + why)}


# ------------------------------------------------------------------ int8
# ------------------------------------------------------------------ measurement
def speed_subset(lengths: np.ndarray, batch_tokens: int, texts: int = SPEED_TEXTS) -> list[int]:
    """Texts that fill whole packed passes (the fp32 plan's full passes, spread over the lengths): at
    scale nearly every pass is full, and a pass padded out with filler rows would charge the packed
    rungs for work a real run does not do (48 length-spread texts read int8 3.2x fp32 where the whole
    sample reads 1.0x)."""
    from tasks.encoder import plan_passes

    by_shape: dict[int, list[np.ndarray]] = {}
    for rows, padded, sel in plan_passes(lengths, batch_tokens, 256):
        if len(sel) == rows:
            by_shape.setdefault(padded, []).append(sel)
    if not by_shape:
        return list(range(len(lengths)))
    shapes = sorted(by_shape)
    spread = [shapes[i] for i in dict.fromkeys(int(x) for x in np.linspace(0, len(shapes) - 1, len(shapes)).round())]
    spread = [x for pair in zip(spread, spread[::-1]) for x in pair][:len(spread)]  # shortest, longest, ...
    chosen: list[int] = []
    for padded in spread:  # one full pass of each shape, short and long alternately, until enough texts
        chosen += by_shape[padded][0].tolist()
        if len(chosen) >= texts:
            break
    return sorted(chosen)


def measure(model, device: str, machine_precision: str, rounds: int = ROUNDS) -> dict:
    """Time every candidate rung against fp32 on the calibration sample and compare the decisions its
    vectors give (no cache). `model`: the loaded sentence-transformers model."""
    import torch

    from tasks.encoder import BATCH_TOKENS, encode_pass, packing_check, plan_passes, token_lengths

    rungs = ["fp32"] + (["bf16"] if machine_precision == "bf16" else [])
    if device == "cpu" and int8_engine():
        rungs.append("int8")
    sample = calibration()
    out: dict[str, Any] = {"rungs": rungs, "calibration_sha256": sample["sha256"], "bars": BARS,
                           "min_speedup": MIN_SPEEDUP}
    if rungs == ["fp32"]:
        return {**out, **choose(machine_precision, {})}
    models = {r: (quantize_int8(model) if r == "int8" else model) for r in rungs}
    run_as = {r: ("fp32" if r == "int8" else r) for r in rungs}  # int8 runs without autocast
    batch_tokens = BATCH_TOKENS.get(device.split(":")[0], BATCH_TOKENS["cpu"])
    texts = texts_of(sample)
    lengths = token_lengths(model, texts)

    def encode(r: str, idx: list[int]) -> np.ndarray:
        packed = packing_check(models[r], device, run_as[r], batch_tokens, 256)["packed"]
        vecs = np.zeros((len(idx), model.get_embedding_dimension()), np.float32)
        for rows, padded, sel in plan_passes(lengths[idx], batch_tokens, 256, packed=packed):
            vecs[sel] = encode_pass(models[r], [texts[idx[i]] for i in sel], rows, padded, run_as[r], device)
        return vecs

    speed_idx = speed_subset(lengths, batch_tokens)
    threads = torch.get_num_threads()
    for r in rungs:
        encode(r, speed_idx[:8])  # warm-up: kernel selection, the quantized copy's first call
    one: dict[str, list[float]] = {r: [] for r in rungs}
    wall: dict[str, list[float]] = {r: [] for r in rungs}
    for k in range(rounds):
        for r in (rungs if k % 2 == 0 else rungs[::-1]):
            torch.set_num_threads(1)  # one thread, its own CPU time: other processes do not move it
            try:
                t0 = time.thread_time()
                encode(r, speed_idx)
                one[r].append(time.thread_time() - t0)
            finally:
                torch.set_num_threads(threads)
            t0 = time.perf_counter()  # and as the stages run it: every thread, wall time
            encode(r, speed_idx)
            wall[r].append(time.perf_counter() - t0)
    ratio = lambda t, r: statistics.median(t["fp32"]) / statistics.median(t[r])  # noqa: E731
    # int8: the smaller of the two. One thread shows the kernels without the machine's load, all threads
    # what a pass costs as the stages run it, and int8's single-row passes scale poorly over threads (on a
    # 2-core Sapphire Rapids 0.60x fp32 on one thread, 0.36x on two); under load this can only refuse it.
    # bf16 runs the same packed passes as fp32: one thread, as the machine decision is timed, so a busy
    # machine cannot turn AMX's bf16 down for good (with both cores busy, wall time read it 0.48x).
    speedup = {r: round(ratio(one, r) if r == "bf16" else min(ratio(one, r), ratio(wall, r)), 3) for r in rungs[1:]}
    out.update({"seconds": {r: [round(s, 4) for s in v] for r, v in one.items()},
                "wall_seconds": {r: [round(s, 4) for s in v] for r, v in wall.items()},
                "speedup_one_thread": {r: round(ratio(one, r), 3) for r in rungs[1:]},
                "speedup_all_threads": {r: round(ratio(wall, r), 3) for r in rungs[1:]},
                "speedup": speedup, "speed_texts": len(speed_idx), "threads": threads,
                "timed": "bf16: one thread, its CPU time; int8: the smaller speed-up of that and all threads' wall time"})
    everything = list(range(len(texts)))
    vectors = {r: dict(zip(texts, encode(r, everything))) for r in rungs}
    ref = decisions(vectors["fp32"], sample)
    agree = {}
    for r in rungs[1:]:
        agree[r] = agreement(ref, decisions(vectors[r], sample))
        got = np.stack([vectors[r][t] for t in texts])
        agree[r]["min_cosine"] = round(float(np.min(np.sum(got * np.stack([vectors["fp32"][t] for t in texts]), axis=1))), 5)
    out["agreement"] = agree
    out["calibration_texts"] = len(texts)
    return {**out, **choose(machine_precision, speedup, agree)}


# ------------------------------------------------------------------ the decision, once per machine and model
LIBRARIES = ("torch", "transformers", "tokenizers", "sentence-transformers")
"""the libraries that load, tokenize, quantize and run the model the ladder times"""


def identity(model_sha: str, dev: str, machine_id: str, files: str = "") -> dict:
    """Everything the ladder's answer depends on: what the machine decision's torch-free key holds (CPU, flags,
    torch version, usable CPUs, thread variables, its code), the machine decision itself, the model (its
    weights' sha256 and `files`: the sha256 of every file of its folder, tokenizer and config included,
    `model_files`), the calibration sample, the libraries that run the model and the code that measures
    and decides (this module and the project modules it imports: the encoder's passes, TextRank, ...)."""
    from importlib import metadata

    from csk import codehash

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"ladder": METHOD, "machine": machine_material(dev), "decision": machine_id, "model": model_sha,
            "files": files, "calibration": hashlib.sha256(CALIBRATION.read_bytes()).hexdigest(),
            "libraries": {d: version(d) for d in LIBRARIES}, "code": codehash.code_hash((__name__,))}


def model_files(spec: str = "", path=None) -> str:
    """The ladder's part of a model's identity beyond its weights' sha256: the sha256 of its folder's files
    (`csk.models.model_files_hash`: config.json, the tokenizer's, the pooling's). A split model's sha256 is
    the whole zip's (its every file): "" (its folder may not be unpacked when a key is planned); as for no
    folder given."""
    from csk.models import model_files_hash

    if not path or str(spec).startswith("split-package:") or not Path(path).is_dir():
        return ""
    return model_files_hash(path)


def cache_path(model_sha: str, dev: str, machine_id: str, files: str = "") -> Path:
    """Where the ladder of this model on this machine is filed: under a hash of its `identity`."""
    return cache_dir() / "precision" / "embedder" / f"{fingerprint_id(identity(model_sha, dev, machine_id, files))}.json"


def decision(model_sha: str, dev: str, load, refresh: bool = False, *, spec: str = "", path=None) -> dict:
    """The ladder's answer for the model of this sha256 (its folder `path`, configured as `spec`) on this
    machine: from this process's memory, else the cache, else measured (one process at a time) on the model
    `load()` returns."""
    from csk.precision import decision as machine_decision
    from csk.precision import kind

    machine = machine_decision(dev)  # (`csk precision --refresh` measured it again first)
    files = model_files(spec, path)
    key = (model_sha, files, kind(dev), machine["id"])
    if key in _DECISIONS and not refresh:
        return _DECISIONS[key]
    if kind(dev) != "cpu":  # int8 dynamic quantization is CPU-only: the machine decision is the ladder
        found = {"precision": machine["precision"], "why": machine["why"], "rungs": ["fp32", "bf16"],
                 "machine_decision": machine["id"]}
        _DECISIONS[key] = found
        return found
    path = cache_path(model_sha, dev, machine["id"], files)
    found = None if refresh else _read(path, machine)
    if found is None:
        from filelock import FileLock

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            found = None if refresh else _read(path, machine)
            if found is None:
                import logging

                logging.getLogger("csk").info("measuring the embedder's precision ladder (fp32, bf16, int8) on "
                                              "this machine (once; cached in %s)", path)
                found = {"model_sha256": model_sha, "model_files": files, "machine_decision": machine["id"],
                         "machine_precision": machine["precision"], "method": METHOD,
                         "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         **measure(load(), dev, machine["precision"])}
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
                os.replace(tmp, path)
    _DECISIONS[key] = found
    return found


def _read(path: Path, machine: dict) -> dict | None:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("precision") not in RUNGS or found.get("machine_decision") != machine.get("id"):
        return None  # the machine decision was measured again: so is the ladder
    return found


def forget() -> None:
    """Drop this process's remembered ladders (tests; `csk precision --refresh`)."""
    _DECISIONS.clear()


# ------------------------------------------------------------------ the command (`csk precision`)
def precision_command(device: str = typer.Option("auto", "--device", help="cpu, cuda[:i], or auto (CUDA when visible)"),
                      refresh: bool = typer.Option(False, "--refresh", help="measure again and replace the cached answer"),
                      as_json: bool = typer.Option(False, "--json", help="print the cached records as JSON"),
                      model: str = typer.Option(None, "--model", help="the sentence embedder whose precision ladder "
                                                "(fp32 / bf16 / int8) to show (default: the embed tables' default)")) -> None:
    """This machine's precision decision (bf16 or fp32, for every `precision = "auto"` setting): measured
    once at the embedder's shapes, cached per CPU model, flags, thread count and torch version; and the
    sentence embedder's ladder (int8 too, where it is faster and the stages' decisions agree)."""
    from rich.markup import escape

    from csk import compute
    from csk.cli import console
    from csk.models import model_identity, resolve_model
    from csk.precision import cache_path, decision
    from tasks import embed_precision
    from tasks.encoder import DEFAULT_MODEL, load_sentence_model

    dev = compute.device(device)
    d = decision(dev, refresh=refresh)
    model = model or DEFAULT_MODEL
    where, sha = model_identity(model, "--model")  # a CskError is reported by the command line, not raised
    ladder = embed_precision.decision(sha, dev, lambda: load_sentence_model(
        resolve_model(model, "sentence embedder", "--model"), dev), refresh=refresh, spec=model, path=where)
    if as_json:
        print(json.dumps({"machine": d, "embedder": ladder}, indent=2, sort_keys=True))
        return
    fp = d["fingerprint"]
    console.print(f"[bold]{d['precision']}[/]: {escape(d['why'])}", highlight=False, soft_wrap=True)
    console.print(f"machine: {escape(fp['cpu'])} ({fp['cpu_capability']}; {', '.join(f for f in fp['flags'] if 'bf16' in f or 'amx' in f or f in ('avx2', 'avx512f')) or 'no AVX2'}), "
                  f"{fp['threads']} threads, torch {fp['torch']}" + (f", {fp['gpu']}" if fp.get("gpu") else ""),
                  highlight=False, soft_wrap=True)
    if "gflops" in d:
        console.print(f"at the plan's shapes, one thread: fp32 {d['gflops']['fp32']} GFLOP/s, bf16 {d['gflops']['bf16']} GFLOP/s; "
                      f"speed-up per round {d['speedups']} (median {d['speedup']}, needs {d['min_speedup']})",
                      highlight=False, soft_wrap=True)
    else:
        console.print(f"quick screen: bf16 {d['screen_speedup']}x fp32", highlight=False)
    console.print(f"measured {d['measured']}; cached in {cache_path(fp)} (--refresh measures again)",
                  highlight=False, soft_wrap=True)
    console.print(f"embedder {escape(model)}: [bold]{ladder['precision']}[/] ({escape(ladder['why'])})",
                  highlight=False, soft_wrap=True)
    for rung, s in (ladder.get("speedup") or {}).items():
        a = (ladder.get("agreement") or {}).get(rung, {})
        same = ", ".join(f"{k.replace('_', ' ')} {a[k]:.2%} (of {a['counted'][k]})" for k in embed_precision.BARS if k in a)
        one, every = (ladder.get("speedup_one_thread") or {}).get(rung), (ladder.get("speedup_all_threads") or {}).get(rung)
        console.print(f"  {rung}: {s}x fp32 (whole passes: {one}x on one thread, {every}x on {ladder.get('threads')}); "
                      f"decisions as fp32: {same}; min cosine {a.get('min_cosine')}",
                      highlight=False, soft_wrap=True)
