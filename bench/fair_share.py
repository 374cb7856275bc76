"""Fair speed beside a busy neighbour (issue 41): does the OpenMP wait policy decide what a busy core costs?

Every stage computes with the machine's thread count (`csk.compute.training_threads`, in its key: the
bytes must not depend on the load). Beside a process that keeps one of two cores busy, a thread that
spin-waits at each parallel region's barrier burns the time slices its sibling needs: the 28K CICERO
rebuild took 5x its idle time where a fair share of two cores gives 2x. The wait policy does not change
the thread count nor the order of any sum, so it cannot change a byte; this bench measures what it
changes in time.

Each configuration runs in a fresh process (the policy is read when the OpenMP runtime starts): a plain
`SentenceTransformer.encode` of the same texts with the machine's thread count, fp32 (the baseline is the
library call itself), idle and beside a one-core busy loop, with the OpenMP runtime's default wait policy
and with OMP_WAIT_POLICY=PASSIVE, and with a short spin (GOMP_SPINCOUNT=10000). It prints seconds, the busy/idle ratio (fair share: 2x on 2 cores) and
checks the vectors are identical across policies.

    python bench/fair_share.py [--texts 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import hashlib, json, os, sys, time
import torch
from sentence_transformers import SentenceTransformer
from csk.models import resolve_model
n, repeats, spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(len(os.sched_getaffinity(0)))
model = SentenceTransformer(str(resolve_model(spec, "sentence embedding model", "cicero.embed.model")), device="cpu")
words = "the speaker asked the listener about the weekend trip to the mountains and the weather there".split()
texts = [" ".join(words[(i * 7 + k) % len(words)] for k in range(8 + i % 24)) for i in range(n)]
model.encode(texts[:64], batch_size=64)
times, digest = [], None
for _ in range(repeats):
    t0 = time.perf_counter()
    v = model.encode(texts, batch_size=64, convert_to_numpy=True)
    times.append(time.perf_counter() - t0)
    digest = hashlib.sha256(v.tobytes()).hexdigest()
print(json.dumps({"seconds": min(times), "all": times, "sha256": digest, "threads": torch.get_num_threads()}))
"""


def busy_loop() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


POLICIES = {"default": {}, "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}, "spin 10000": {"GOMP_SPINCOUNT": "10000"},
            "spin 2000": {"GOMP_SPINCOUNT": "2000"}}


def embedder() -> str:
    """The sentence embedder pipelines.toml configures for CICERO (an installed package or a local directory)."""
    import tomllib

    return tomllib.loads((ROOT / "pipelines.toml").read_text())["cicero"]["embed"]["model"]


def run(n: int, repeats: int, policy: str) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "CSK_OMP_WAIT_POLICY"):
        env.pop(k, None)
    env.update(POLICIES[policy])
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(repeats), embedder()], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from csk.compute import host_record

    print("machine:", json.dumps(host_record()))
    rows = {}
    for policy in POLICIES:
        idle = run(a.texts, a.repeats, policy)
        loop = busy_loop()
        try:
            time.sleep(1)
            busy = run(a.texts, a.repeats, policy)
        finally:
            loop.kill()
        name = policy
        rows[name] = (idle, busy)
        print(f"wait policy {name:<8} idle {idle['seconds']:7.2f} s   beside a busy core {busy['seconds']:7.2f} s   "
              f"ratio {busy['seconds'] / idle['seconds']:.2f}x (fair share 2x; {idle['threads']} threads)   "
              f"runs busy {[round(t, 2) for t in busy['all']]}")
    digests = {r["sha256"] for pair in rows.values() for r in pair}
    print("vectors identical across policies and load:", len(digests) == 1,
          hashlib.sha256("".join(sorted(digests)).encode()).hexdigest()[:12])
    d, p = rows["default"], rows["PASSIVE"]
    print(f"PASSIVE vs default: idle {p[0]['seconds'] / d[0]['seconds']:.2f}x, busy {p[1]['seconds'] / d[1]['seconds']:.2f}x")


if __name__ == "__main__":
    main()
