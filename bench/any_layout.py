"""Issue 49's any-layout check: a CICERO v2 file rewritten in layouts no preset knows, rebuilt with
`csk distractors rebuild --map`, and the share of its items that come back with their published number
of choices (goal: >= 99%), the rest with their reasons.

Two layouts, written from the input file into --work (never into the repository):
* `question`: JSON Lines, unfamiliar keys, the target carried inside the question
  ({"uid", "conversation", "prompt": 'What is or could be the cause of "TARGET"?', "options", "right"});
* `columns`: CSV, one column per choice (opt1..opt6, empty cells where an item has fewer), the correct
  choices as a JSON list of column names, the dialogue one cell joined with " || " (no passage mapped).

    python bench/any_layout.py --input cicero_v2_val_mutual.jsonl --work /tmp/any_layout [--layouts question columns]

Prints, per layout, items in / rebuilt with their published number of choices / rejected by reason, and
the run's wall time; the CPU model first (figures are per machine).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_CHOICES = 6


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def question_layout(records: list[dict], out: Path) -> tuple[Path, str]:
    """The target inside the question, unfamiliar keys."""
    path = out / "question_layout.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for k, r in enumerate(records):
            prompt = r["Question"].replace("target", f'"{r["Target"]}"', 1)
            f.write(json.dumps({"uid": f"q{k:05d}", "conversation": r["Dialogue"], "prompt": prompt,
                                "options": r["Choices"], "right": r["Correct Answers"]}, ensure_ascii=False) + "\n")
    return path, "id=uid,group=conversation,context=prompt+conversation,question=prompt,choices=options," \
                 "answer=right,correct=right,passage=conversation"


def columns_layout(records: list[dict], out: Path) -> tuple[Path, str]:
    """One column per choice (empty cells), the correct ones named by column."""
    path = out / "columns_layout.csv"
    cols = [f"opt{i + 1}" for i in range(MAX_CHOICES)]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "talk", "about", "ask", *cols, "key"])
        for k, r in enumerate(records):
            choices = list(r["Choices"])[:MAX_CHOICES]
            w.writerow([k, " || ".join(r["Dialogue"]), r["Target"], r["Question"],
                        *(choices + [""] * (MAX_CHOICES - len(choices))),
                        json.dumps([cols[i] for i in r["Correct Answers"] if i < len(choices)])])
    return path, "id=row,group=talk,context=ask+about+talk,question=ask,choices=opt?,answer=key,correct=key"


LAYOUTS = {"question": question_layout, "columns": columns_layout}


def run(layout: str, records: list[dict], work: Path, extra: list[str]) -> dict:
    out = work / layout
    out.mkdir(parents=True, exist_ok=True)
    path, mapping = LAYOUTS[layout](records, out)
    store = out / "store"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "csk.cli", "distractors", "rebuild", "--input", str(path), "--map",
                           mapping, "--store", str(store), "--out", str(out / f"rebuilt{path.suffix}"),
                           "--config", str(ROOT / "pipelines.toml"), *extra],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"layout": layout, "error": (proc.stdout + proc.stderr)[-3000:], "wall_s": round(wall, 1)}
    import pandas as pd

    # this run's artifacts (a store used before holds others): the latest run record names them
    latest = {s["stage"]: Path(s["path"]) for s in
              json.loads((store / "distractors" / "_runs" / "latest.json").read_text())["stages"]}
    rebuilt = pd.read_parquet(latest["rebuilt_file"] / "data.parquet")
    same = int((rebuilt["choices"].map(len) == rebuilt["published_choices"].map(len)).sum())
    reasons: Counter = Counter()
    for stage in ("mcq_file", "adversarial_filter", "verification", "rebuilt_file"):
        rej = latest[stage] / "rejected.parquet" if stage in latest else None
        if rej is not None and rej.exists():
            frame = pd.read_parquet(rej)
            reasons.update(frame.get("reason_code", frame.get("reason", pd.Series(dtype=str))).astype(str))
    return {"layout": layout, "items": len(records), "rebuilt": len(rebuilt), "with_published_choices": same,
            "share": round(same / max(len(records), 1), 4), "rejected": dict(reasons), "wall_s": round(wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True, type=Path, help="a CICERO v2 JSON Lines file")
    ap.add_argument("--work", required=True, type=Path, help="a scratch directory (layouts, stores, rebuilt files)")
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    ap.add_argument("--set", action="append", default=[], help="passed to csk distractors rebuild --set")
    args = ap.parse_args()
    from csk.precision import cpu_model

    records = _records(args.input)
    extra = [x for s in args.set for x in ("--set", s)]
    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; input {args.input.name}: {len(records)} items")
    results = []
    for layout in args.layouts:
        r = run(layout, records, args.work, extra)
        results.append(r)
        if "error" in r:
            print(f"{layout}: the rebuild failed after {r['wall_s']} s:\n{r['error']}")
            continue
        print(f"{layout}: {r['items']} items, {r['with_published_choices']} rebuilt with their published number of "
              f"choices ({100 * r['share']:.1f}%), rejected {r['rejected'] or 'none'}; {r['wall_s']} s")
    (args.work / "any_layout.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
