"""The stage's own adversarial filtering at CICERO's size and the paper's settings on a GPU, with the
counterfactual generator and the NLI filter beside it: model FLOPs utilisation of each.

    python bench/af_gpu.py --out DIR [--small] [--instances 53000] [--measure N]
        [--af-cap 240] [--t5-cap 75] [--nli-cap 60] [--peak-tflops P]

Sections, each in a child process killed at its cap (seconds), each writing DIR/<section>.json as soon as
it has a figure (its stderr, progress bars included, in DIR/<section>.log), all gathered in DIR/af_gpu.json
and echoed as JSON lines:

* `af`: a roberta-large-shaped multiple-choice model (24 layers, hidden 1024, 16 heads, intermediate 4096,
  vocab 50265; random weights, saved to a directory as a pretrained model is) fine-tuned and scored by the
  project's `af_loop` and `make_discriminator_factory("transformer", ...)` (imported, the stage's own code)
  at the paper's settings: 5 choices (gold + 4 distractors), 3 epochs, AdamW lr 1e-5, effective batch 4,
  256 tokens per (context, choice) pair, about 13 candidates per instance (the CICERO v2 sample's 3,984 for
  300 items), 9 instances per dialogue. A whole round (fit + score) is measured at --instances when the
  calibration says it fits the cap, else on the largest subset that does, and projected to --instances by
  its steps and scored pairs (linear: the fit's model load counted in every step, an upper bound).
  Reported: fit and score MFU, peak GPU memory, the round and 14 rounds (CICERO converged after 14).
* `t5`: a T5-large-shaped generator (random weights) through `tasks.distractors.counterfactuals.t5_generate`
  (the stage's beam search: 8 beams, 8 returned, 48 new tokens, batch 16), beside its forward-pass bound:
  one teacher-forced forward pass of the same batch (encoder + decoder over the generated length), which
  any decoder must at least spend, and the FLOP bound at the GPU's peak.
* `nli`: a roberta-large-shaped sequence classifier through `tasks.distractors.candidate_filter.nli_scores`
  (the stage's NLI filter, its batch 32) beside its forward-pass bound: the same pairs in length-sorted passes
  of 64K padded tokens straight through the model, and the FLOP bound at the GPU's peak.

MFU = model FLOPs / seconds / the GPU's bf16 dense peak (H100 / H200: 989 TFLOP/s). Model FLOPs count real
tokens only (no padding, no padding choices): training 6 N t + 12 l d t^2 per sequence of t tokens,
inference 2 N t + 4 l d t^2 (N the non-embedding parameters, l layers, d hidden; PaLM's accounting).
Texts are random words of a word-level tokenizer built here (one token a word), so lengths are exact.
* `parts` (only when named in --sections): where a fit step's and a score's time goes: scoring by
  tokenisation chunk beside tokenising alone and the forward passes alone; fit steps under CUDA graphs at
  length buckets of 64 and 32, op by op, and with torch.compile before capture; the kernels of 8 eager
  steps (torch.profiler).
`--small` runs tiny models on a few hundred instances (under a minute on a CPU) to test the script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tasks.distractors.discriminators import AF_PRESETS  # noqa: E402

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "GH200": 989.0, "A100": 312.0, "L40S": 362.0}
PAPER = AF_PRESETS["paper"]  # the stage's preset of the paper's AF
CHOICES, EPOCHS, BATCH = PAPER["n_distractors"] + 1, PAPER["epochs"], PAPER["batch_size"]
MAX_LENGTH, LR = PAPER["max_length"], PAPER["lr"]
POOL, PER_DIALOGUE = 13, 9  # candidates per instance (CICERO v2 sample: 3,984 / 300), instances per dialogue
SECTIONS = ("af", "t5", "nli")  # and "parts", asked for by name


# ------------------------------------------------------------------ shared
class Report:
    """Results of one section: DIR/<section>.json rewritten on every `put`, and echoed."""

    def __init__(self, out: Path, section: str):
        self.path, self.section, self.data = out / f"{section}.json", section, {}

    def put(self, **values) -> None:
        self.data.update(values)
        self.path.write_text(json.dumps(self.data, indent=1, default=str))
        print(json.dumps({self.section: values}, default=str), flush=True)


def device_info(peak_override: float | None) -> dict:
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        peak = peak_override or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
        return {"device": "cuda", "gpu": name, "peak_bf16_tflops": peak, "torch": torch.__version__}
    return {"device": "cpu", "gpu": None, "peak_bf16_tflops": peak_override, "torch": torch.__version__,
            "threads": torch.get_num_threads()}


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_gib() -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None


def word_tokenizer(out: Path, vocab_size: int, seq2seq: bool = False):
    """A word-level tokenizer of `vocab_size` ids ("w<i>" words), RoBERTa's special tokens and pair template
    (T5's for a seq2seq model), saved to `out`: lengths in tokens are the texts' word counts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"] if seq2seq else ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if seq2seq:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                           special_tokens=[("</s>", vocab["</s>"])])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="</s>")
    else:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                       eos_token="</s>", cls_token="<s>", sep_token="</s>")
    fast.save_pretrained(out)
    return fast


def encoder_config(small: bool, **kw):
    from transformers import RobertaConfig

    shape = (dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
             if small else dict(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                intermediate_size=4096))
    return RobertaConfig(**shape, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2, **kw)


def save_model(model, out: Path, dtype: str = "float32") -> int:
    """Saved as a downloaded checkpoint is (fp32: the stage's loaders that name no dtype get what the file
    holds); returns the non-embedding parameters (the N of model FLOPs)."""
    import torch

    n = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name and "shared" not in name
            and "lm_head" not in name)
    model.to(device="cpu", dtype=getattr(torch, dtype)).save_pretrained(out)  # built on the GPU: written from host memory
    return n


def words(rng, n: int, vocab_size: int, first: int = 4) -> str:
    return " ".join(f"w{i}" for i in rng.integers(first, vocab_size, n))


def train_flops(n: int, layers: int, d: int, lengths: np.ndarray) -> float:
    t = lengths.astype(np.float64)
    return float((6 * n * t + 12 * layers * d * t * t).sum())


def infer_flops(n: int, layers: int, d: int, lengths: np.ndarray) -> float:
    t = lengths.astype(np.float64)
    return float((2 * n * t + 4 * layers * d * t * t).sum())


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    return round(flops / seconds / (peak * 1e12), 4) if peak and seconds > 0 else None


# ------------------------------------------------------------------ AF
def build_mc(args, work: Path):
    """What both AF sections start from: the device's facts, the multiple-choice model they run (a
    roberta-large shape, tiny with --small, random weights, saved in bf16: half the bytes; TransformerMC
    loads fp32 master weights) with its word tokenizer, and the numbers its model FLOPs need."""
    import torch
    from transformers import AutoTokenizer, RobertaForMultipleChoice

    info = device_info(args.peak_tflops)
    cfg = encoder_config(args.small)
    model_dir = work / "mc"
    word_tokenizer(model_dir, cfg.vocab_size)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = RobertaForMultipleChoice(cfg)
    return SimpleNamespace(info=info, peak=info["peak_bf16_tflops"], max_length=32 if args.small else MAX_LENGTH,
                           cfg=cfg, model_dir=model_dir, n_params=save_model(model, model_dir, "bfloat16"),
                           layers=cfg.num_hidden_layers, d=cfg.hidden_size, tok=AutoTokenizer.from_pretrained(model_dir))


def af_data(n: int, vocab: int, seed: int, max_length: int):
    """`n` CICERO-shaped instances: a context of 60-110% of max_length words (the window that holds the
    question, target and nearest utterances is filled near its budget; the pair is cut to max_length), a gold
    and 13 candidates of 6-24 words, 9 instances per dialogue."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows, pools = [], {}
    for i in range(n):
        iid = f"i{i}"
        rows.append({"id": iid, "group_id": f"d{i // PER_DIALOGUE}",
                     "context": words(rng, int(rng.integers(int(0.6 * max_length), int(1.1 * max_length))), vocab),
                     "gold": words(rng, int(rng.integers(6, 25)), vocab)})
        pools[iid] = [(f"{iid}c{k}", words(rng, int(rng.integers(6, 25)), vocab)) for k in range(POOL)]
    return pd.DataFrame(rows), pools


class Timed:
    """The stage's discriminator, its fit and score timed (device work finished) and their real tokens counted
    (outside the timed spans) for the model FLOPs."""

    def __init__(self, disc, tokenizer, log: dict):
        self.disc, self.tok, self.log = disc, tokenizer, log
        log["discriminator"] = disc  # the round's, for the scoring comparison after it

    def _lengths(self, contexts, choices) -> np.ndarray:
        from tasks.distractors.discriminators import TokenRows

        t0 = time.perf_counter()
        rows = TokenRows(self.tok, [c for c, ch in zip(contexts, choices) for _ in ch],
                         [x for ch in choices for x in ch], self.disc.max_length)
        self.log["counting_s"] = self.log.get("counting_s", 0.0) + time.perf_counter() - t0
        return rows.lengths

    def fit(self, contexts, choices, gold):
        lengths = self._lengths(contexts, choices)
        sync()
        t0 = time.perf_counter()
        self.disc.fit(contexts, choices, gold)
        sync()
        self.log.update(fit_s=time.perf_counter() - t0, train_instances=len(contexts), train_pairs=len(lengths),
                        train_tokens=int(lengths.sum()), train_lengths=lengths)
        return self

    def score(self, contexts, choices):
        lengths = self._lengths(contexts, choices)
        sync()
        t0 = time.perf_counter()
        out = self.disc.score(contexts, choices)
        sync()
        self.log.update(score_s=time.perf_counter() - t0, held_instances=len(contexts), score_pairs=len(lengths),
                        score_tokens=int(lengths.sum()), score_lengths=lengths)
        return out


def section_af(args, rep: Report, work: Path) -> None:
    import torch
    from tasks.distractors.adversarial import AFRules, af_loop, make_discriminator_factory
    from tasks.distractors.discriminators import TokenRows

    start = time.perf_counter()
    m = build_mc(args, work)
    info, peak, max_length, cfg, model_dir, n_params = m.info, m.peak, m.max_length, m.cfg, m.model_dir, m.n_params
    layers, d, tok = m.layers, m.d, m.tok
    rep.put(**info, model="roberta-large shape" if not args.small else "tiny roberta", non_embedding_params=n_params,
            settings={"choices": CHOICES, "epochs": EPOCHS, "effective_batch": BATCH, "lr": LR,
                      "max_length": max_length, "pool": POOL, "instances_target": args.instances},
            build_s=round(time.perf_counter() - start, 1))

    def factory():
        # the stage's own factory and discriminator; its model directory is the one built above
        return make_discriminator_factory(PAPER["discriminator"], model=str(model_dir), epochs=EPOCHS, lr=LR, batch_size=BATCH,
                                          seed=0, max_length=max_length)

    # calibration: short fits of one epoch (the slope is a step; the rest is loading), to size the round
    view, pools = af_data(BATCH * 24, cfg.vocab_size, 1, max_length)
    calib = view.head(BATCH * 24)
    contexts = calib["context"].tolist()
    choices = [[g] + [t for _, t in pools[i][:CHOICES - 1]] for g, i in zip(calib["gold"], calib["id"])]
    times = []
    few, more = (2, 8) if args.small else (4, 24)
    # one step's fit first, discarded: the first fit also pays CUDA's and the kernels' start-up, which would
    # make the slope read low and the measured round outgrow the cap
    for n in (BATCH, BATCH * few, BATCH * more):  # steps of one epoch: the slope is a step, the rest loading
        disc = factory()(0)
        disc.epochs = 1
        sync()
        t0 = time.perf_counter()
        disc.fit(contexts[:n], choices[:n], [0] * n)
        sync()
        times.append(time.perf_counter() - t0)
        graphs = {"cuda_graphs": disc.cuda_graphs, "graph_failure": disc.graph_failure}
        del disc
    eager = []  # the same fits with every step run op by op (the stage before CUDA graphs)
    for n in (BATCH * few, BATCH * more):
        disc = factory()(0)
        disc.epochs, disc.cuda_graphs = 1, False
        sync()
        t0 = time.perf_counter()
        disc.fit(contexts[:n], choices[:n], [0] * n)
        sync()
        eager.append(time.perf_counter() - t0)
        del disc
    eager_step_s = max((eager[1] - eager[0]) / (more - few), 1e-9)
    times = times[1:]
    slope = (times[1] - times[0]) / (more - few)
    step_s = slope if slope > 0 else times[1] / more  # a noisy machine: the longer fit's mean, an upper bound
    load_s = max(times[0] - few * step_s, 0.0)
    # the calibration's own fit rate: a step's model FLOPs (its instances' real tokens) over the slope
    last = BATCH * more
    calib_lengths = TokenRows(tok, [c for c, ch in zip(contexts[:last], choices[:last]) for _ in ch],
                              [x for ch in choices[:last] for x in ch], max_length).lengths
    step_flops = train_flops(n_params, layers, d, calib_lengths) / more
    used = time.perf_counter() - start
    budget = max(args.af_cap - used - 30, 10)  # room for data building, scoring and the report
    # a round: load + epochs x train/4 steps (train = 80% of instances) + scoring 20% x 14 pairs (~1/10 of a
    # step's time per pair at 3x fewer FLOPs per token, generously)
    per_instance = EPOCHS * 0.8 / BATCH * step_s + 0.2 * (1 + POOL) * step_s / (BATCH * CHOICES) / 2
    fits = int((budget * 0.7 - load_s) / per_instance)
    measure = args.measure or max(min(args.instances, fits // PER_DIALOGUE * PER_DIALOGUE), 10 * PER_DIALOGUE)
    rep.put(calibration={f"fit_s_{few}_steps": round(times[0], 2), f"fit_s_{more}_steps": round(times[1], 2),
                         "step_s": round(step_s, 4), "load_s": round(load_s, 2),
                         "fit_mfu_from_slope": mfu(step_flops, step_s, peak), **graphs,
                         "eager": {f"fit_s_{few}_steps": round(eager[0], 2), f"fit_s_{more}_steps": round(eager[1], 2),
                                   "step_s": round(eager_step_s, 4),
                                   "fit_mfu_from_slope": mfu(step_flops, eager_step_s, peak),
                                   "graphs_speedup": round(eager_step_s / step_s, 2)}},
            measured_instances=measure, whole_size_measured=measure >= args.instances)

    view, pools = af_data(measure, cfg.vocab_size, 0, max_length)
    log: dict = {}
    make = factory()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    state, history = af_loop(view, pools, lambda round_seed=0: Timed(make(round_seed), tok, log), AFRules(n_distractors=CHOICES - 1, max_iterations=1, window=2, seed=0))
    round_s = time.perf_counter() - t0 - log.get("counting_s", 0.0)
    fit_flops = EPOCHS * train_flops(n_params, layers, d, log["train_lengths"])
    score_flops = infer_flops(n_params, layers, d, log["score_lengths"])
    # projected to --instances: steps and scored pairs scale with the instances (same mix of lengths)
    scale = args.instances / measure
    fit_53, score_53 = log["fit_s"] * scale, log["score_s"] * scale
    other = round_s - log["fit_s"] - log["score_s"]  # af_loop's own bookkeeping (choices, swaps)
    round_53 = fit_53 + score_53 + other * scale
    rep.put(round={"instances": measure, "train_instances": log["train_instances"],
                   "held_out_instances": log["held_instances"], "fit_steps": EPOCHS * -(-log["train_instances"] // BATCH),
                   "train_pairs": log["train_pairs"], "train_tokens": log["train_tokens"],
                   "score_pairs": log["score_pairs"], "score_tokens": log["score_tokens"],
                   "fit_s": round(log["fit_s"], 2), "score_s": round(log["score_s"], 2),
                   "af_loop_other_s": round(other, 2), "round_s": round(round_s, 2),
                   "fit_tflops": round(fit_flops / log["fit_s"] / 1e12, 1),
                   "score_tflops": round(score_flops / log["score_s"] / 1e12, 1),
                   "fit_mfu": mfu(fit_flops, log["fit_s"], peak), "score_mfu": mfu(score_flops, log["score_s"], peak),
                   "score_pairs_per_s": round(log["score_pairs"] / log["score_s"], 1),
                   "fit_ms_per_step": round(1000 * log["fit_s"] / (EPOCHS * -(-log["train_instances"] // BATCH)), 2),
                   "peak_gpu_gib": peak_gib(), "held_out_accuracy": history[0]["held_out_accuracy"],
                   "swaps": history[0]["swaps"], "cuda_graphs": log["discriminator"].cuda_graphs,
                   "graph_failure": log["discriminator"].graph_failure},
            projected={"instances": args.instances, "from": "measured" if scale == 1 else f"{measure} measured x {scale:.2f}",
                       "fit_s": round(fit_53, 1), "score_s": round(score_53, 1), "round_s": round(round_53, 1),
                       "rounds_14_h": round(14 * round_53 / 3600, 2)},
            seconds=round(time.perf_counter() - start, 1))
    rep.put(scoring=score_variants(log["discriminator"], view, pools, args, peak, n_params, layers, d, tok),
            seconds=round(time.perf_counter() - start, 1))


def score_variants(disc, view, pools, args, peak, n_params, layers, d, tok) -> dict:
    """The round's fitted discriminator scoring the same pairs (up to 1,000 instances x gold + pool) each way:
    under autocast over the fp32 weights (the stage before), then with the weights cast to bf16 (the stage's
    CUDA default). Each the mean of two timings after a warm-up; autocast first (the cast is in place)."""
    from tasks.distractors.discriminators import TokenRows

    part = view.head(min(len(view), 60 if args.small else 1000))
    contexts = part["context"].tolist()
    choices = [[g] + [t for _, t in pools[i]] for g, i in zip(part["gold"], part["id"])]
    lengths = TokenRows(tok, [c for c, ch in zip(contexts, choices) for _ in ch],
                        [x for ch in choices for x in ch], disc.max_length).lengths
    flops = infer_flops(n_params, layers, d, lengths)
    out = {"instances": len(part), "pairs": int(len(lengths)), "tokens": int(lengths.sum())}
    reference = None
    for name, bf16 in (("autocast", False), ("bf16_weights (stage)", True)):
        disc.bf16_scoring = bf16
        disc.score(contexts[:50], choices[:50])  # warm-up (and the bf16 cast)
        secs = []
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            scores = disc.score(contexts, choices)
            sync()
            secs.append(time.perf_counter() - t0)
        flat = np.concatenate(scores)
        reference = flat if reference is None else reference
        s_ = float(np.mean(secs))
        out[name] = {"s": round(s_, 3), "pairs_per_s": round(len(lengths) / s_, 1), "mfu": mfu(flops, s_, peak),
                     # against the first variant's scores, over their spread (a random model's scores lie close)
                     "max_diff_over_spread": round(float(np.abs(flat - reference).max() / max(np.ptp(reference), 1e-9)),
                                                   4)}
        print(json.dumps({"scoring": {name: out[name]}}), flush=True)
    disc.bf16_scoring = None
    return out


# ------------------------------------------------------------------ parts
def section_parts(args, rep: Report, work: Path) -> None:
    """Where a fit step's and a score's time goes, on the af section's model and data: scoring by chunk size
    (the stage's bf16 weights), beside tokenising alone and the forward passes alone; fit steps under CUDA graphs at two length buckets and with
    torch.compile before capture (each the slope of a 8- and a 48-step fit, its intercept the load, captures
    and compile); the kernels of eager steps (torch.profiler, top 15 by device time)."""
    import torch
    from tasks.distractors import discriminators
    from tasks.distractors.discriminators import TokenRows, TransformerMC

    start = time.perf_counter()
    m = build_mc(args, work)
    info, peak, max_length, cfg, model_dir, n_params = m.info, m.peak, m.max_length, m.cfg, m.model_dir, m.n_params
    layers, d, tok = m.layers, m.d, m.tok
    rep.put(**info, non_embedding_params=n_params)
    few, more = (2, 6) if args.small else (8, 48)
    view, pools = af_data(BATCH * more, cfg.vocab_size, 1, max_length)
    contexts = view["context"].tolist()
    fit_choices = [[g] + [t for _, t in pools[i][:CHOICES - 1]] for g, i in zip(view["gold"], view["id"])]
    step_lengths = TokenRows(tok, [c for c, ch in zip(contexts, fit_choices) for _ in ch],
                             [x for ch in fit_choices for x in ch], max_length).lengths
    step_flops = train_flops(n_params, layers, d, step_lengths) / more

    def disc(**kw):
        return TransformerMC(str(model_dir), epochs=1, lr=LR, batch_size=BATCH, max_length=max_length, **kw)

    # scoring: one short fit, then the same 1,000 instances x (gold + pool) each way
    scorer = disc().fit(contexts[:BATCH * few], fit_choices[:BATCH * few], [0] * (BATCH * few))
    sview, spools = af_data(60 if args.small else 1000, cfg.vocab_size, 2, max_length)
    s_ctx = sview["context"].tolist()
    s_ch = [[g] + [t for _, t in spools[i]] for g, i in zip(sview["gold"], sview["id"])]
    s_len = TokenRows(tok, [c for c, ch in zip(s_ctx, s_ch) for _ in ch], [x for ch in s_ch for x in ch],
                      max_length).lengths
    s_flops = infer_flops(n_params, layers, d, s_len)
    scoring = {"pairs": int(len(s_len))}
    scorer.score(s_ctx[:50], s_ch[:50])  # warm-up and the bf16 cast
    for chunk in (16384, 4096, 1024):
        scorer.score_chunk = chunk
        secs = []
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            scorer.score(s_ctx, s_ch)
            sync()
            secs.append(time.perf_counter() - t0)
        scoring[f"chunk{chunk}"] = {"s": round(min(secs), 3), "mfu": mfu(s_flops, min(secs), peak)}
        rep.put(scoring=scoring)
    t0 = time.perf_counter()
    TokenRows(tok, [c for c, ch in zip(s_ctx, s_ch) for _ in ch], [x for ch in s_ch for x in ch], max_length)
    scoring["tokenise_alone_s"] = round(time.perf_counter() - t0, 3)
    with torch.inference_mode():  # the forward alone: pre-tokenised, the stage's passes, no tokeniser in the way
        rows = TokenRows(tok, [c for c, ch in zip(s_ctx, s_ch) for _ in ch], [x for ch in s_ch for x in ch], max_length)
        multiple = 8 if scorer.device.startswith("cuda") else 1
        passes = discriminators.length_passes(rows.lengths, scorer.batch_tokens, multiple)
        encs = [{k: torch.from_numpy(v[None]).to(scorer.device)
                 for k, v in rows.batch(p, -(-int(rows.lengths[p].max()) // multiple) * multiple).items()}
                for p in passes]
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            for enc in encs:
                scorer.model(**enc)
            sync()
        scoring["forward_alone"] = {"s": round(time.perf_counter() - t0, 3),
                                    "mfu": mfu(s_flops, time.perf_counter() - t0, peak)}
    rep.put(scoring=scoring)
    del scorer

    def fit_slope(name, **kw):
        times = []
        for n in (BATCH, BATCH * few, BATCH * more):  # the first (one step) discarded: start-up
            m = disc(**kw)
            sync()
            t0 = time.perf_counter()
            m.fit(contexts[:n], fit_choices[:n], [0] * n)
            sync()
            times.append(time.perf_counter() - t0)
            failure = m.graph_failure
            del m
        slope = (times[2] - times[1]) / (more - few)
        return {"step_s": round(slope, 4), "mfu": mfu(step_flops, slope, peak), "first_fit_s": round(times[0], 2),
                f"fit_s_{more}_steps": round(times[2], 2), "graph_failure": failure}

    fits = {}
    for name, bucket, kw in (("graphs_bucket64", 64, {}), ("graphs_bucket32", 32, {}), ("eager", 64, {"cuda_graphs": False})):
        discriminators.GRAPH_BUCKET = bucket
        fits[name] = fit_slope(name, **kw)
        rep.put(fit=fits)
    discriminators.GRAPH_BUCKET = 64
    if torch.cuda.is_available():  # the kernels of 8 eager steps
        from torch.profiler import ProfilerActivity, profile

        m = disc(cuda_graphs=False)
        m.fit(contexts[:BATCH], fit_choices[:BATCH], [0] * BATCH)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            m.fit(contexts[:BATCH * 8], fit_choices[:BATCH * 8], [0] * (BATCH * 8))
            sync()
        events = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:15]
        total = sum(e.device_time_total for e in prof.key_averages())
        rep.put(eager_kernels={"device_ms_per_step": round(total / 1000 / 8, 2),
                               "top": [{"name": e.key[:90], "ms_per_step": round(e.device_time_total / 1000 / 8, 2),
                                        "calls_per_step": e.count / 8} for e in events]})
        del m
    try:  # torch.compile before capture (dynamic shapes): compile time is in first_fit_s
        fits["compile_graphs"] = fit_slope("compile_graphs", compile_steps=True)
    except Exception as exc:  # an experiment: its failure is a figure too
        fits["compile_graphs"] = {"failed": f"{type(exc).__name__}: {str(exc)[:300]}"}
    rep.put(fit=fits, step_flops=step_flops, seconds=round(time.perf_counter() - start, 1))


# ------------------------------------------------------------------ T5
def section_t5(args, rep: Report, work: Path) -> None:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration
    from transformers.modeling_outputs import BaseModelOutput

    from tasks.distractors.counterfactuals import PREFIX, t5_generate

    start = time.perf_counter()
    info = device_info(args.peak_tflops)
    peak = info["peak_bf16_tflops"]
    vocab = 1000 if args.small else 32128
    path = work / "t5"
    tok = word_tokenizer(path, vocab, seq2seq=True)
    shape = (dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4) if args.small else
             dict(d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16))
    cfg = T5Config(vocab_size=vocab, **shape, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = T5ForConditionalGeneration(cfg)
    n_params = save_model(model, path)
    del model
    batch, beams, new = (4, 2, 8) if args.small else (16, 8, 48)
    texts_n = batch * (2 if args.small else 4)
    rng = np.random.default_rng(0)
    texts = [words(rng, int(rng.integers(12, 30)), vocab, 3) for _ in range(texts_n)]  # a gold answer
    rep.put(**info, model="T5-large shape" if not args.small else "tiny T5", non_embedding_params=n_params,
            settings={"batch": batch, "beams": beams, "returned": beams, "max_new_tokens": new})
    t5_generate(texts[:batch], path, num_return=beams, num_beams=beams, max_new_tokens=new, batch_size=batch)  # warm
    sync()
    t0 = time.perf_counter()
    outs = t5_generate(texts, path, num_return=beams, num_beams=beams, max_new_tokens=new, batch_size=batch)
    sync()
    gen_s = time.perf_counter() - t0
    out_len = float(np.mean([len(o.split()) + 1 for os_ in outs for o in os_]))  # + </s>
    src = np.asarray([len(tok(PREFIX + t)["input_ids"]) for t in texts])
    # the bound: one teacher-forced forward of every beam's whole output (encoder once per text)
    from tasks.seq2seq import load_seq2seq

    device = "cuda" if torch.cuda.is_available() else "cpu"
    _, model = load_seq2seq(str(path), device)
    enc_ids = torch.randint(3, vocab, (batch, int(src.max())), device=device)
    dec_ids = torch.randint(3, vocab, (batch * beams, int(round(out_len))), device=device)
    with torch.inference_mode(), torch.autocast(device.split(":")[0], dtype=torch.bfloat16,
                                                enabled=device == "cuda"):
        def forward():
            hidden = model.encoder(input_ids=enc_ids).last_hidden_state.repeat_interleave(beams, 0)
            return model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), decoder_input_ids=dec_ids).logits
        forward()
        sync()
        t1 = time.perf_counter()
        reps = 3
        for _ in range(reps):
            forward()
        sync()
    fwd_s = (time.perf_counter() - t1) / reps * (texts_n / batch)
    half = n_params / 2  # encoder and decoder stacks of one size (the decoder's cross-attention a little more)
    flops = float(texts_n * (2 * half * src.mean() + beams * 2 * (half + cfg.vocab_size * cfg.d_model) * out_len))
    rep.put(texts=texts_n, generated_tokens_per_sequence=round(out_len, 1), source_tokens=round(float(src.mean()), 1),
            generate_s=round(gen_s, 2), texts_per_s=round(texts_n / gen_s, 1),
            sequences_per_s=round(texts_n * beams / gen_s, 1),
            tokens_per_s=round(texts_n * beams * out_len / gen_s, 0),
            forward_bound_s=round(fwd_s, 3), generation_vs_forward=round(gen_s / fwd_s, 1),
            flop_bound_s=round(flops / (peak * 1e12), 4) if peak else None, mfu=mfu(flops, gen_s, peak),
            peak_gpu_gib=peak_gib(), seconds=round(time.perf_counter() - start, 1))


# ------------------------------------------------------------------ NLI
def section_nli(args, rep: Report, work: Path) -> None:
    import torch
    from transformers import RobertaForSequenceClassification

    from tasks.distractors.candidate_filter import nli_scores
    from tasks.distractors.discriminators import TokenRows, length_passes

    start = time.perf_counter()
    info = device_info(args.peak_tflops)
    peak = info["peak_bf16_tflops"]
    cfg = encoder_config(args.small, num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                         label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    path = work / "nli"
    tok = word_tokenizer(path, cfg.vocab_size)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = RobertaForSequenceClassification(cfg)
    n_params = save_model(model, path)
    del model
    pairs = 128 if args.small else 16384
    rng = np.random.default_rng(0)
    # the filter's pairs: (gold answer, candidate), both answer-length
    premises = [words(rng, int(rng.integers(6, 25)), cfg.vocab_size) for _ in range(pairs)]
    hypotheses = [words(rng, int(rng.integers(6, 25)), cfg.vocab_size) for _ in range(pairs)]
    lengths = TokenRows(tok, premises, hypotheses, 256).lengths
    flops = infer_flops(n_params, cfg.num_hidden_layers, cfg.hidden_size, lengths)
    rep.put(**info, model="roberta-large shape" if not args.small else "tiny roberta", non_embedding_params=n_params,
            pairs=pairs, mean_tokens=round(float(lengths.mean()), 1))
    nli_scores(premises[:64], hypotheses[:64], path, 32)  # warm-up (and the model load)
    sync()
    t0 = time.perf_counter()
    nli_scores(premises, hypotheses, path, 32)
    sync()
    stage_s = time.perf_counter() - t0
    rep.put(stage_s=round(stage_s, 2), stage_pairs_per_s=round(pairs / stage_s, 1), stage_mfu=mfu(flops, stage_s, peak))
    # the bound: the same pairs, tokenised once, length-sorted passes of 64K padded tokens, bf16 weights
    from transformers import AutoModelForSequenceClassification

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.bfloat16).to(device).eval()
    rows = TokenRows(tok, premises, hypotheses, 256)
    passes = length_passes(rows.lengths, 65536 if device == "cuda" else 4096, 8)
    with torch.inference_mode():
        def run():
            for part in passes:
                enc = {k: torch.from_numpy(v).to(device) for k, v in rows.batch(part, -(-int(rows.lengths[part].max())
                                                                                       // 8) * 8).items()}
                model(**enc)
        run()
        sync()
        t1 = time.perf_counter()
        run()
        sync()
    fwd_s = time.perf_counter() - t1
    rep.put(forward_bound_s=round(fwd_s, 3), forward_pairs_per_s=round(pairs / fwd_s, 1),
            forward_mfu=mfu(flops, fwd_s, peak), stage_vs_forward=round(stage_s / fwd_s, 1),
            flop_bound_s=round(flops / (peak * 1e12), 4) if peak else None, peak_gpu_gib=peak_gib(),
            seconds=round(time.perf_counter() - start, 1))


# ------------------------------------------------------------------ driver
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory of the JSON results (e.g. $OUT)")
    ap.add_argument("--small", action="store_true", help="tiny models, a few hundred instances: a CPU test")
    ap.add_argument("--instances", type=int, default=53000, help="AF instances projected to (CICERO's 53K)")
    ap.add_argument("--measure", type=int, default=0, help="instances of the measured round (0: what fits the cap)")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--af-cap", type=float, default=240.0, help="seconds")
    ap.add_argument("--t5-cap", type=float, default=75.0, help="seconds")
    ap.add_argument("--nli-cap", type=float, default=60.0, help="seconds")
    ap.add_argument("--parts-cap", type=float, default=300.0, help="seconds")
    ap.add_argument("--peak-tflops", type=float, default=None, help="bf16 dense peak (default: by the GPU's name)")
    ap.add_argument("--section", default=None, help=argparse.SUPPRESS)  # a child's one section
    args = ap.parse_args()
    if args.small and args.instances == 53000:
        args.instances = 180
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.section:  # a child: one section, in its own scratch directory
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if args.small:  # one thread: two spinning threads of tiny kernels wait on each other on a busy 2-core CPU
            import torch

            torch.set_num_threads(1)
        rep = Report(out, args.section)
        with tempfile.TemporaryDirectory(prefix=f"af-gpu-{args.section}-") as work:
            {"af": section_af, "t5": section_t5, "nli": section_nli, "parts": section_parts}[args.section](
                args, rep, Path(work))
        return
    summary = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv[1:]}
    total = time.perf_counter()
    for section in args.sections.split(","):
        cap = getattr(args, f"{section}_cap")
        t0 = time.perf_counter()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--section", section, *sys.argv[1:]]
        try:  # progress bars and warnings to a log beside the results: stdout stays the JSON lines
            with open(out / f"{section}.log", "w") as log:
                proc = subprocess.run(cmd, timeout=cap, stderr=log)
            status = "done" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
        except subprocess.TimeoutExpired:  # the child is killed; what it wrote so far stays
            status = f"stopped at its cap ({cap:.0f} s)"
        part = out / f"{section}.json"
        summary[section] = {"status": status, "wall_s": round(time.perf_counter() - t0, 1),
                            **(json.loads(part.read_text()) if part.exists() else {})}
        (out / "af_gpu.json").write_text(json.dumps(summary, indent=1, default=str))
        print(json.dumps({section: {"status": status, "wall_s": summary[section]["wall_s"]}}), flush=True)
    summary["total_s"] = round(time.perf_counter() - total, 1)
    (out / "af_gpu.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({"total_s": summary["total_s"], "results": str(out / "af_gpu.json")}), flush=True)


if __name__ == "__main__":
    main()
