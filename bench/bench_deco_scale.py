"""ACCENT's scoring of DECO at growing numbers of samples, up to the published size (300), on CPU: the two
model-heavy stages as the pipeline runs them, each beside its floor, side by side in one process.

- `extract` (tasks/deco/extract.py) on the `extraction_tasks` of the samples: 12 relation prompts per sample,
  with pipelines.toml's [deco.extract] decoding (beam 10, 1 sequence, max_length 64, no_repeat_ngram_size 2,
  one sample's 12 prompts per `generate` call). Floor: the same model's `model.generate` called directly
  with the same settings, one call per sample's 12 prompts (ACCENT's released decoding), tokenising and
  decoding included: the library doing the same work with none of the stage's code around it.
- `compatibility` (tasks/deco/compatibility.py) with [deco.compatibility]'s settings: COMET tails (beam 10,
  10 returns, max_length 64, distinct queries 16 a call) and the Sentence-BERT cosine. Floor: the same
  COMET's `model.generate` on the distinct queries, 16 a call, then `SentenceTransformer.encode` of the
  tails and generated tails (the embedder's precision) and the max cosine per tuple.

Each with its seconds and peak memory (bench.PeakMemory: RssAnon while the call runs, MiB; the models
loaded once before are in it, the growth over the call's start is beside it). A floor whose cost at a size
would pass --floor-budget seconds (judged from the stage's own time per sample) is timed on the first
samples only and projected linearly (samples for extract, tuples for compatibility); its line says so.
Then the growth exponent x of time ~ samples^x between the smallest and the largest size.

Models: no hub access, so random weights built from configs in a temporary directory: the extractor
T5-base shaped (768 wide, 12 + 12 layers, 3072 feed-forward, 12 heads, 32,128 tokens; ACCENT fine-tunes
t5-base), COMET BART-base shaped (bench_deco_compatibility.build_model; COMET-ATOMIC 2020 is BART-large, so
the real one costs about 3x per token), both with a word-level tokenizer. Cost depends on the shapes, not
the values; random weights never emit EOS, so every beam runs to max_length: the worst case (a trained
extractor answers `None` or a short tuple, COMET a few words). The garbage tails are max_length words long,
so the embedding part is the worst case too. Samples are synthetic, in the stages' real format (a history
of up to 4 utterances, padded in front as DECO pads it, a response of 6-24 words; checked against
data_contracts/deco.py). Random outputs hold no parseable tuple, so the compatibility stage gets synthetic
tuples at DECO's rate (774 tuples over 300 samples, about 2.6 a sample), heads and tails taken from the
responses; the output says which it used. Prints the CPU, the machine's fp32 and bf16 GEMM rate and the
precision decision first.

    python bench/bench_deco_scale.py --samples 30 100 300 [--floor-budget 300] [--out results.txt]
    python bench/bench_deco_scale.py --small --samples 2 4      # tiny models (2 layers, 64 wide): a smoke test
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench import PeakMemory, machine_line, reporter, rss_gib  # noqa: E402
from bench.bench_deco_compatibility import build_model  # noqa: E402
from csk import compute  # noqa: E402
from data_contracts import deco as contracts  # noqa: E402
from readers.deco import RELATIONS, WINDOW  # noqa: E402
from tasks import seq2seq  # noqa: E402
from tasks.deco.compatibility import compatibility, query  # noqa: E402
from tasks.deco.extract import TUPLE_COLUMNS, extract, extraction_tasks  # noqa: E402
from tasks.deco.extraction import target  # noqa: E402
from tasks.embed import EmbedSpec, Embedder, load_sentence_model  # noqa: E402

DECO_TUPLES, DECO_SAMPLES = 774, 300  # the release: 307 train + 467 test tuples over 200 + 100 samples
SMALL_VOCAB = 2048
WORDS = (10, 2000)  # synthetic words w10 .. w1999: known to both tokenizers, the small ones too
SMALL = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 256}


def build_extractor(out: Path, small: bool = False) -> Path:
    """T5-base shapes (768 wide, 12 + 12 layers, 3072 feed-forward, 12 heads, 32,128 tokens), random weights, a
    word-level tokenizer as build_model's; `small`: 2 + 2 layers, 64 wide, 2,048 tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    vocab = SMALL_VOCAB if small else 32128
    specials = ["<pad>", "</s>", "<unk>"]
    words = {t: i for i, t in enumerate(specials + [f"w{i}" for i in range(vocab - len(specials))])}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>").save_pretrained(out)
    d, layers, heads, ffn = ((SMALL["d_model"], SMALL["layers"], SMALL["heads"], SMALL["ffn"]) if small
                             else (768, 12, 12, 3072))
    cfg = T5Config(vocab_size=vocab, d_model=d, d_kv=d // heads, d_ff=ffn, num_layers=layers, num_decoder_layers=layers,
                   num_heads=heads, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    T5ForConditionalGeneration(cfg).save_pretrained(out)
    return out


def build_comet(out: Path, small: bool = False) -> Path:
    """build_model's BART-base COMET; `small`: its tokenizer and token ids, the model cut to 2 + 2 layers, 64 wide."""
    build_model(out, vocab=SMALL_VOCAB if small else 50265)
    if small:
        from transformers import BartConfig, BartForConditionalGeneration

        cfg = BartConfig.from_pretrained(out)
        cfg.update({"d_model": SMALL["d_model"], "encoder_layers": SMALL["layers"], "decoder_layers": SMALL["layers"],
                    "encoder_attention_heads": SMALL["heads"], "decoder_attention_heads": SMALL["heads"],
                    "encoder_ffn_dim": SMALL["ffn"], "decoder_ffn_dim": SMALL["ffn"]})
        BartForConditionalGeneration(cfg).save_pretrained(out)
    return out


def synthetic_samples(n: int, seed: int = 0) -> pd.DataFrame:
    """n DECO samples as the `sample` stage passes them on (data_contracts.deco.Sampled): a history of 1-4
    utterances padded in front to 4 slots, a response of 6-24 words; 2 in 3 train, 40 in 300 dev."""
    rng = np.random.default_rng(seed)

    def words(k: int) -> str:
        return " ".join(f"w{i}" for i in rng.integers(*WORDS, size=k))

    rows = []
    for i in range(n):
        turns = int(rng.integers(1, WINDOW + 1))
        history = [""] * (WINDOW - turns) + [words(int(rng.integers(6, 20))) for _ in range(turns)]
        response = words(int(rng.integers(6, 25)))
        raw = [int(x) for x in rng.integers(1, 6, size=3)]
        split = "test" if i % 3 == 2 else "train"
        dev = split == "train" and i % 5 == 0
        rows.append({"id": f"syn-{i}", "history": history, "response": response,
                     "corpus": ("DailyDialog", "PersonaChat", "TopicalChat")[i % 3],
                     "system": ("Human", "PLATO-2", "DiSCoL", "DialoGPT")[i % 4], "guid": None,
                     "history_id": f"syn-dialogue-{i}@{turns}", "event_cs_raw": raw, "event_cs": float(np.mean(raw)),
                     "general_cs_raw": raw, "general_cs": float(np.mean(raw)), "overall_impression": np.nan,
                     "tuples_single": [], "tuples_pair": [], "for_dev": dev, "split": split, "dev": dev,
                     "selection": "sampled", "words": len(response.split()), "statements": [response],
                     "source_file": "synthetic", "source_record": i, "source_locator": f"sample {i}", "evidence": []})
    return pd.DataFrame(rows).astype({"system": "str", "split": "str", "history_id": "str", "source_record": int})


def synthetic_tuples(samples: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Tuples at DECO's rate (774 over 300 samples), spread evenly, each of a distinct relation within its sample;
    head (3-6 words) and tail (2-5 words) taken from the response, as the extractor's would be."""
    rng = np.random.default_rng(seed)
    n = len(samples)
    counts = np.diff(np.round(np.arange(n + 1) * DECO_TUPLES / DECO_SAMPLES).astype(int))
    rows = []
    for sid, response, k in zip(samples["id"], samples["response"], counts):
        words = response.split()
        for rel in rng.choice(RELATIONS, size=int(k), replace=False):
            a, la, lb = int(rng.integers(0, len(words) - 2)), int(rng.integers(3, 7)), int(rng.integers(2, 6))
            head = " ".join(words[a:a + la])
            b = int(rng.integers(0, len(words) - 1))
            tail = " ".join(words[b:b + lb])
            rows.append({"id": f"{sid}:{rel}", "task_id": f"{sid}:{rel}", "sample_id": sid, "relation": str(rel),
                         "head": head, "tail": tail, "setting": None, "origin": "extractor",
                         "output": target(head, tail)})
    return pd.DataFrame(rows, columns=list(TUPLE_COLUMNS)).astype(dict.fromkeys(TUPLE_COLUMNS, "str"))


def extract_floor(texts: list[str], path: Path, dev: str, precision: str, s: dict) -> list[str]:
    """The library alone: tokenise, `model.generate`, decode, one sample's 12 prompts a call."""
    import torch

    tok, model = seq2seq.load_seq2seq(str(path), dev)  # the stage's model, already loaded
    per_call = len(RELATIONS) * s["samples_per_batch"]
    out = []
    for a in range(0, len(texts), per_call):
        enc = tok(texts[a:a + per_call], return_tensors="pt", padding=True, truncation=True, max_length=512).to(dev)
        with torch.inference_mode(), compute.autocast(precision, dev):
            gen = model.generate(**enc, num_beams=s["num_beams"], num_return_sequences=1, max_length=s["max_length"],
                                 no_repeat_ngram_size=s["no_repeat_ngram_size"], early_stopping=True)
        out += tok.batch_decode(gen, skip_special_tokens=True)
    return out


def compatibility_floor(tuples: pd.DataFrame, path: Path, dev: str, precision: str, s: dict, st,
                        emb_precision: str) -> pd.Series:
    """The library alone: `model.generate` on the distinct queries, `batch_size` a call, `encode` of the tails
    and generated tails, the max cosine of each tuple floored at 0, the mean per sample."""
    import torch

    tok, model = seq2seq.load_seq2seq(str(path), dev)
    qs = [query(h, r) for h, r in zip(tuples["head"], tuples["relation"])]
    distinct, k, generated = list(dict.fromkeys(qs)), s["num_return"], {}
    for a in range(0, len(distinct), s["batch_size"]):
        batch = distinct[a:a + s["batch_size"]]
        enc = tok(batch, return_tensors="pt", padding=True, truncation=True, max_length=512).to(dev)
        with torch.inference_mode(), compute.autocast(precision, dev):
            gen = model.generate(**enc, num_beams=max(s["num_beams"], k), num_return_sequences=k,
                                 max_length=s["max_length"], no_repeat_ngram_size=s["no_repeat_ngram_size"],
                                 early_stopping=True)
        decoded = tok.batch_decode(gen, skip_special_tokens=True)
        generated.update({q: [d.strip() for d in decoded[i * k:(i + 1) * k] if d.strip()] for i, q in enumerate(batch)})
    tails = tuples["tail"].tolist()
    gens = [generated[q] for q in qs]
    texts = list(dict.fromkeys(tails + [g for gs in gens for g in gs]))
    with torch.inference_mode(), compute.autocast(emb_precision, dev):
        vectors = st.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    row = {t: i for i, t in enumerate(texts)}
    scores = [max(0.0, float((vectors[[row[g] for g in gs]] @ vectors[row[t]]).max())) if gs else 0.0
              for t, gs in zip(tails, gens)]
    return pd.Series(scores).groupby(tuples["sample_id"].to_numpy()).mean()


def timed(fn, *a, **kw) -> tuple[object, float, PeakMemory, float]:
    """(result, seconds, peak memory, RssAnon at the start in GiB) of one call."""
    gc.collect()
    start = rss_gib()
    with PeakMemory() as peak:
        t0 = time.perf_counter()
        result = fn(*a, **kw)
        seconds = time.perf_counter() - t0
    return result, seconds, peak, start


def growth(sizes: list[int], seconds: list[float]) -> float:
    """x of seconds ~ samples^x between the smallest and the largest size."""
    return math.log(seconds[-1] / seconds[0]) / math.log(sizes[-1] / sizes[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[30, 100, 300])
    ap.add_argument("--small", action="store_true", help="tiny models (2 layers, 64 wide): a smoke test")
    ap.add_argument("--floor-budget", type=float, default=300.0,
                    help="seconds a floor may take at one size; beyond, timed on the first samples and projected")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the lines here (and the figures to its .json)")
    args = ap.parse_args()
    sizes = sorted(set(args.samples))
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # saving / loading bars; the stages' own progress (stderr) stays
    say, lines = reporter()
    dev = compute.device("cpu")
    decision = compute.precision("auto", dev)
    say(machine_line())
    say(f"GEMM GFLOP/s: {compute.matmul_rates(dev)}; precision: {decision['precision']} ({decision['why']})")
    deco = tomllib.loads((ROOT / "pipelines.toml").read_text())["deco"]
    ex = {k: v for k, v in deco["extract"].items() if k not in ("extractor", "validations")} | {"device": dev}
    co = {k: v for k, v in deco["compatibility"].items() if k not in ("comet", "embed")} | {"device": dev}
    spec = EmbedSpec(**{**deco["compatibility"].get("embed", {}), "device": dev})
    say(f"pipelines.toml [deco.extract] {ex}; [deco.compatibility] {co}; embed {spec.model}")
    pool = synthetic_samples(max(sizes), args.seed)
    contracts.Sampled.validate(pool, lazy=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        t5, bart = build_extractor(Path(tmp) / "t5", args.small), build_comet(Path(tmp) / "bart", args.small)
        shape = "tiny (2 + 2 layers, 64 wide)" if args.small else "T5-base / BART-base shapes"
        say(f"models: {shape}, random weights, built in {time.perf_counter() - t0:.1f} s")
        # load + warm up both stages and the embedder (its precision decision, its packing check) on one sample
        warm = pool.head(1).reset_index(drop=True)
        extract(extraction_tasks(warm).data, extractor=str(t5), **ex)
        compatibility(warm, synthetic_tuples(warm, args.seed), comet=str(bart), embed=spec, **co)
        emb = Embedder(spec, progress=False)
        emb_precision = emb.calibrate(["warm up"])
        st = load_sentence_model(emb.path, dev, emb_precision)
        say(f"embedder {spec.model}: {emb_precision}; peak memory is RssAnon during the call (MiB), "
            f"+ its growth over the call's start; * floor timed on the first samples, projected linearly")
        say(f"{'samples':>7} {'stage':<13} {'inputs':>7} {'stage s':>9} {'peak MiB':>14} {'floor s':>9} "
            f"{'floor MiB':>14} {'stage/floor':>11} {'s/sample':>9}")
        notes = []
        for n in sizes:
            samples = pool.head(n).reset_index(drop=True)
            tasks = extraction_tasks(samples).data
            contracts.ExtractionTasks.validate(tasks, lazy=True)
            out, ex_s, ex_mem, ex_start = timed(extract, tasks, extractor=str(t5), **ex)
            k = n if ex_s <= args.floor_budget else max(1, int(args.floor_budget / (ex_s / n)))
            sub = tasks[tasks["sample_id"].isin(samples["id"].head(k))]["input"].tolist()
            _, fx_s, fx_mem, fx_start = timed(extract_floor, sub, t5, dev, decision["precision"], ex)
            fx_s *= n / k
            if k < n:
                notes.append(f"  * {n} samples, extract floor: timed on {k} of {n} samples ({len(sub)} of "
                             f"{len(tasks)} prompts), projected x{n / k:.2f}")
            parsed = len(out.data)
            tuples = out.data if parsed else synthetic_tuples(samples, args.seed)
            contracts.Tuples.validate(tuples, lazy=True)
            src = (f"the extractor's {parsed} tuples" if parsed else f"{len(tuples)} synthetic tuples at DECO's rate "
                   f"({DECO_TUPLES}/{DECO_SAMPLES}): the random extractor's {len(tasks)} outputs parse to none")
            notes.append(f"  {n} samples, compatibility on {src}")
            scored, co_s, co_mem, co_start = timed(compatibility, samples, tuples, comet=str(bart), embed=spec, **co)
            contracts.Scores.validate(scored.data, lazy=True)
            queries = scored.notes["distinct_queries"]
            kc = n if co_s <= args.floor_budget else max(1, int(args.floor_budget / (co_s / n)))
            sub_t = tuples[tuples["sample_id"].isin(samples["id"].head(kc))]
            _, fc_s, fc_mem, fc_start = timed(compatibility_floor, sub_t, bart, dev, decision["precision"], co, st,
                                              emb_precision)
            fc_s *= len(tuples) / max(1, len(sub_t))
            if kc < n:
                notes.append(f"  * {n} samples, compatibility floor: timed on {kc} of {n} samples ({len(sub_t)} of "
                             f"{len(tuples)} tuples), projected x{len(tuples) / max(1, len(sub_t)):.2f}")
            for name, inputs, s, mem, start, f, fmem, fstart, star in (
                    ("extract", len(tasks), ex_s, ex_mem, ex_start, fx_s, fx_mem, fx_start, k < n),
                    ("compatibility", queries, co_s, co_mem, co_start, fc_s, fc_mem, fc_start, kc < n)):
                say(f"{n:>7} {name:<13} {inputs:>7} {s:>9.2f} {mem.mib:>7.0f} (+{(mem.gib - start) * 1024:>4.0f}) "
                    f"{f:>8.2f}{'*' if star else ' '} {fmem.mib:>7.0f} (+{(fmem.gib - fstart) * 1024:>4.0f}) "
                    f"{s / f:>10.2f}x {s / n:>9.3f}")
                results.append({"samples": n, "stage": name, "inputs": inputs, "seconds": s, "peak_mib": mem.mib,
                                "grown_mib": (mem.gib - start) * 1024, "floor_seconds": f, "floor_peak_mib": fmem.mib,
                                "floor_projected": bool(star), "tuples": len(tuples) if name != "extract" else None,
                                "tuples_synthetic": not parsed})
        say("inputs: extract prompts (12 a sample); compatibility distinct COMET queries")
        for note in notes:
            say(note)
        if len(sizes) > 1:
            parts = []
            for name in ("extract", "compatibility"):
                rows = [r for r in results if r["stage"] == name]
                parts.append(f"{name} {growth(sizes, [r['seconds'] for r in rows]):.2f} (floor "
                             f"{growth(sizes, [r['floor_seconds'] for r in rows]):.2f}"
                             f"{', projected' if any(r['floor_projected'] for r in rows) else ''})")
            total = [sum(r["seconds"] for r in results if r["samples"] == n) for n in sizes]
            say(f"growth exponent (time ~ samples^x), {sizes[0]} -> {sizes[-1]} samples: {'; '.join(parts)}; "
                f"both stages {growth(sizes, total):.2f}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"machine": compute.machine(), "precision": decision["precision"], "embed_precision": emb_precision,
             "small": args.small, "settings": {"extract": ex, "compatibility": co, "embed": spec.model},
             "results": results}, indent=2))


if __name__ == "__main__":
    main()
