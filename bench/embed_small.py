"""Fixed costs on a small input (issue 41): the `embed` stage on the real CICERO v2 sample's dialogues beside a
plain `SentenceTransformer.encode` of the same texts, in one process.

The stage runs as a flow runs it (a fresh store: its embedding cache cold; the precision ladder as this
machine has it cached, measured once per machine and model); the baseline is the library call with the same
model, fp32, the machine's threads, after the model is loaded. Printed: each side's seconds, the ratio
(goal <= 2x), and the stage's own breakdown from its manifest.

    python bench/embed_small.py [--sample $CSK_REAL_SAMPLES/cicero/cicero_v2_val_sample.jsonl] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(k, v)

import pandas as pd  # noqa: E402

from csk.compute import host_record  # noqa: E402

PIPELINE = "cicero"  # whose embed settings (pipelines.toml) both sides use


def dialogues(path: Path) -> pd.DataFrame:
    """The sample's distinct dialogues as the sources stage gives them (turns with speaker and text)."""
    seen, rows = set(), []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        key = tuple(rec["Dialogue"])
        if key in seen:
            continue
        seen.add(key)
        turns = [{"speaker": u.split(":", 1)[0].strip(), "text": u.split(":", 1)[1].strip() if ":" in u else u}
                 for u in rec["Dialogue"]]
        rows.append({"id": f"d{len(rows):04d}", "turns": turns})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sample", default=None, help="a CICERO v2 file (default: the real sample under $CSK_REAL_SAMPLES)")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from sentence_transformers import SentenceTransformer

    from csk.models import resolve_model
    from csk.pipeline import get_pipeline
    from csk.store import Store
    from tasks.embed import dialogue_text

    from bench.real import need, real_file

    print("machine:", json.dumps(host_record()))
    dlg = dialogues(need(Path(a.sample) if a.sample else real_file("cicero", "cicero_v2_val_sample.jsonl"),
                         "--sample"))
    texts = [dialogue_text(t) for t in dlg["turns"]]
    # the stage and the baseline use the same model: the one pipelines.toml configures (an installed package
    # or a local directory, resolved offline)
    from csk.config import load_config

    pipeline = get_pipeline(PIPELINE)
    stage = pipeline.stage("embed")
    cfg = load_config(ROOT / "pipelines.toml", [])[PIPELINE]
    params = {k: v.model_dump() if hasattr(v, "model_dump") else v for k, v in pipeline.stage_params(stage, cfg).items()}
    spec = params["embed"]["model"]
    t0 = time.perf_counter()
    model = SentenceTransformer(str(resolve_model(spec, "sentence embedding model", f"{PIPELINE}.embed.model")),
                                device="cpu")
    load = time.perf_counter() - t0
    model.encode(texts[:4])
    plain = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        model.encode(texts, batch_size=32)
        plain.append(time.perf_counter() - t0)
    staged = []
    for _ in range(a.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "store")
            from csk.artifacts import ArtifactRef, manifest_bytes, to_parquet_bytes

            d = Path(tmp) / "store" / "cicero" / "dedup" / "k"
            d.mkdir(parents=True)
            data = to_parquet_bytes(dlg)
            (d / "data.parquet").write_bytes(data)
            import hashlib

            (d / "manifest.json").write_bytes(manifest_bytes({"data_sha256": hashlib.sha256(data).hexdigest(),
                                                              "contract": "cicero.Deduplicated"}))
            ref = ArtifactRef("cicero", "dedup", "k", str(d))
            t0 = time.perf_counter()
            run = store.run("cicero", stage, params, [ref])
            staged.append(time.perf_counter() - t0)
            notes = run.ref.manifest().get("notes", {})
    best_plain, best_stage = min(plain), min(staged)
    print(f"model: {spec} (pipelines.toml, {PIPELINE}.embed.model)")
    print(f"{len(texts)} dialogues ({sum(len(t.split()) for t in texts)} words)")
    print(f"plain SentenceTransformer.encode (fp32, model loaded): {best_plain:.2f} s  (runs {[round(t, 2) for t in plain]})")
    print(f"the embed stage, cold store (model load, precision, cache, write included): {best_stage:.2f} s  "
          f"(runs {[round(t, 2) for t in staged]})")
    print(f"plain model load: {load:.2f} s; plain load + encode {load + best_plain:.2f} s")
    print(f"ratio {best_stage / best_plain:.2f}x the encode, {best_stage / (load + best_plain):.2f}x load + encode "
          "(goal <= 2x)")
    print("stage notes:", json.dumps(notes.get("embedder", {}), default=str)[:1500])


if __name__ == "__main__":
    main()
