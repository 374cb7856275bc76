"""ACCENT's COMET queries: the `compatibility` stage's batched generation (distinct queries once,
`--batch` queries per `generate` call) against ACCENT's released loop (one `generate` call per tuple,
repeated queries generated again), side by side in one process, at growing numbers of tuples.

The model is BART-base shaped (COMET-ATOMIC 2020 is BART-large; no COMET is on PyPI) with random
weights: cost depends on the shapes, not the values, and random weights never emit EOS, so every
beam runs to `--max-length` (the worst case). Tuples repeat heads as DECO's do (`--repeat`).
Prints the CPU / GPU, the machine's fp32 and bf16 GEMM rate, and the precision decision.

    python bench/bench_deco_compatibility.py [--tuples 16 32 64] [--batch 16] [--max-length 32]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from csk import compute
from tasks import seq2seq
from tasks.deco.compatibility import query

RELATIONS = ["xNeed", "xAttr", "xReact", "xEffect", "xWant", "xIntent", "oEffect", "oReact", "oWant", "isAfter"]


def build_model(out: Path, vocab: int = 50265) -> Path:
    """BART-base shapes (768 wide, 6 + 6 layers, 50,265 tokens), random weights, a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BartConfig, BartForConditionalGeneration, PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    words = {t: i for i, t in enumerate(specials + [f"w{i}" for i in range(vocab - len(specials))])}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(out)
    cfg = BartConfig(vocab_size=vocab, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                     decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, pad_token_id=0,
                     bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2)
    BartForConditionalGeneration(cfg).save_pretrained(out)
    return out


def tuples(n: int, repeat: float) -> list[tuple[str, str]]:
    distinct = max(1, round(n * (1 - repeat)))
    return [(f"w{10 + i % distinct} w{500 + i % distinct} w{900 + i % distinct % 7}", RELATIONS[i % distinct % len(RELATIONS)])
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tuples", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--beams", type=int, default=10)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--repeat", type=float, default=0.25, help="share of tuples whose query repeats another's")
    args = ap.parse_args()
    import torch

    dev = compute.device()
    decision = compute.precision("auto", dev)
    print(f"machine: {compute.machine()}")
    print(f"GEMM GFLOP/s: {compute.matmul_rates(dev)}; precision: {decision['precision']} ({decision['why']})")
    kw = dict(num_return=args.beams, num_beams=args.beams, max_length=args.max_length, no_repeat_ngram_size=2,
              early_stopping=True, precision=decision["precision"], device=dev)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp) / "bart")
        seq2seq.generate(["w1 w2 xNeed [GEN]"], path, batch_size=1, **kw)  # load + warm up
        print(f"{'tuples':>7} {'distinct':>8} {'ACCENT loop s':>14} {'batched s':>10} {'speed-up':>9} {'ms/tuple':>9}")
        for n in args.tuples:
            qs = [query(h, r) for h, r in tuples(n, args.repeat)]
            t0 = time.perf_counter()
            for q in qs:  # ACCENT: one generate call per tuple
                seq2seq.generate([q], path, batch_size=1, **kw)
            loop = time.perf_counter() - t0
            t0 = time.perf_counter()
            distinct = list(dict.fromkeys(qs))
            seq2seq.generate(distinct, path, batch_size=args.batch, **kw)
            batched = time.perf_counter() - t0
            print(f"{n:>7} {len(distinct):>8} {loop:>14.2f} {batched:>10.2f} {loop / batched:>8.1f}x "
                  f"{1000 * batched / n:>9.1f}")
            if dev == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
