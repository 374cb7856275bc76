"""Adversarial filtering with each discriminator on the same instances and filtered pools, side by side.

    python bench/af_discriminators.py --instances I.parquet --candidates C.parquet --model MC_ENCODER_DIR \
        [--iterations 14] [--epochs 3] [--max-length 192] [--out report.json]

Inputs are the `instances` and `candidate_filter` artifacts of a CICERO run (e.g. `csk cicero
rebuild-distractors --release FILE`). For the linear probe (frozen sentence embeddings + logistic
regression) and for the transformer discriminator (a multiple-choice head on MC_ENCODER_DIR,
fine-tuned from the pretrained weights every iteration, bf16 autocast on CUDA), it prints the
held-out accuracy and seconds of every AF iteration, then the linear-probe accuracy of the
choices AF ended with (rebuilt) and of the published choices, on disjoint dialogues (lower =
harder). The CPU model / GPU name is printed first. `--mfu` adds the transformer discriminator's
training throughput on a RoBERTa-large configuration (random weights) as a share of the GPU's
bf16 peak (model FLOPs: 6 x parameters x tokens).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from csk import compute  # noqa: E402
from tasks.distractors.adversarial import AFRules, af_loop  # noqa: E402
from tasks.distractors.discriminators import LinearProbe, TransformerMC  # noqa: E402
from tasks.distractors.quality import probe_accuracy  # noqa: E402
from tasks.embed import Embedder  # noqa: E402

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def run_af(name, view, pools, factory, iterations, seed):
    times = []

    def log(msg):
        times.append(time.perf_counter())
        print(f"  [{name}] {msg} ({times[-1] - (times[-2] if len(times) > 1 else start):.1f}s)", flush=True)

    start = time.perf_counter()
    state, history = af_loop(view, pools, factory, AFRules(n_distractors=4, max_iterations=iterations, window=iterations + 1, seed=seed), log=log)
    return state, history, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--model", required=True, help="encoder directory for the multiple-choice head")
    ap.add_argument("--embedder", default=None, help="sentence-transformers directory of the linear probe (default: --model)")
    ap.add_argument("--iterations", type=int, default=14)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="use the first N instances (0: all)")
    ap.add_argument("--mfu", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    dev = compute.device()
    print(json.dumps({"device": dev, **compute.machine()}), flush=True)
    view = pd.read_parquet(args.instances)
    cands = pd.read_parquet(args.candidates)
    pools = {i: list(zip(g["id"], g["candidate"])) for i, g in cands.groupby("instance_id", sort=False)}
    view = view[view["id"].isin([k for k, v in pools.items() if len(v) >= 4])].reset_index(drop=True)
    if args.limit:
        view = view.head(args.limit)
    print(f"{len(view)} instances, median pool {np.median([len(pools[i]) for i in view['id']]):.0f}", flush=True)

    emb = Embedder({"model": args.embedder or args.model, "precision": "fp32", "device": dev}, None, progress=False)
    texts = view["context"].tolist() + view["gold"].tolist() + cands["candidate"].tolist()
    vector = emb.lookup(texts + [c for ch in view["choices"] if ch is not None for c in ch])
    report = {"device": dev, "machine": compute.machine(), "instances": len(view), "runs": {}}
    results = {}
    for name, factory in (
            ("linear-probe", lambda: LinearProbe(vector, seed=args.seed)),
            ("transformer", lambda: TransformerMC(args.model, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                                                  max_length=args.max_length, seed=args.seed))):
        state, history, seconds = run_af(name, view, pools, factory, args.iterations, args.seed)
        results[name] = state
        report["runs"][name] = {"seconds": round(seconds, 1), "history": history}
        print(f"{name}: held-out accuracy by iteration "
              f"{[round(h['held_out_accuracy'], 3) for h in history]} in {seconds:.0f}s", flush=True)

    # Probe accuracy of the choices each AF run ended with vs the published choices, disjoint dialogues.
    text = dict(zip(cands["id"], cands["candidate"]))
    contexts = view["context"].tolist()
    groups = sorted(view["group_id"].unique())
    half = {groups[i] for i in compute.rng(args.seed, "quality-halves").permutation(len(groups))[: len(groups) // 2]}
    a = [i for i, g in enumerate(view["group_id"]) if g in half]
    b = [i for i, g in enumerate(view["group_id"]) if g not in half]
    sets = {f"rebuilt ({k})": ([[g] + [text[c] for c in results[k][i]["distractors"]] for g, i in zip(view["gold"], view["id"])],
                               [{0}] * len(view)) for k in results}
    published = [list(c) if c is not None else None for c in view["choices"]]
    sets["published"] = (published, [set(c) if c is not None else set() for c in view["correct_answers"]])
    report["probe"] = {}
    for name, (choices, correct) in sets.items():
        train, test = [i for i in a if choices[i]], [i for i in b if choices[i]]
        acc, pairwise = probe_accuracy(train, test, contexts, choices, correct, vector, args.seed)
        chance = float(np.mean([len(correct[i]) / len(choices[i]) for i in test]))
        report["probe"][name] = {"accuracy": acc, "pairwise": pairwise, "chance": chance}
        print(f"probe on {name}: accuracy {acc:.3f} (chance {chance:.3f}), pairwise {pairwise:.3f}", flush=True)

    if args.mfu:
        report["mfu"] = mfu(args)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2, default=str))


def mfu(args) -> dict:
    """Training throughput of the MC discriminator on a RoBERTa-large configuration (random weights)."""
    import torch
    from transformers import RobertaConfig, RobertaForMultipleChoice

    if not torch.cuda.is_available():
        print("mfu: no GPU here, skipped", flush=True)
        return {}
    cfg = RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                        intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1)
    model = RobertaForMultipleChoice(cfg).cuda()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    out = {"params": params}
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    for batch, seq in ((16, 256), (32, 256)):
        ids = torch.randint(5, 50000, (batch, 5, seq), device="cuda")
        labels = torch.randint(0, 5, (batch,), device="cuda")
        for step in range(13):
            if step == 3:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(input_ids=ids).logits.float(), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        per_step = (time.perf_counter() - t0) / 10
        tokens = batch * 5 * seq
        flops = 6 * params * tokens + 12 * cfg.num_hidden_layers * cfg.hidden_size * seq * tokens  # + attention
        tflops = flops / per_step / 1e12
        row = {"batch": batch, "choices": 5, "seq": seq, "step_s": round(per_step, 4), "tflops": round(tflops, 1),
               "mfu": round(tflops / peak, 3) if peak else None, "sequences_per_s": round(batch * 5 / per_step, 1)}
        out[f"b{batch}"] = row
        print(f"mfu {name}: {row}", flush=True)
    return out


if __name__ == "__main__":
    main()
