"""Issue 27's fluency checks on real answers: the lexical generator's rewrites of every gold answer of a
real CICERO release file, checked by `tasks.distractors.fluency`, with the share of each rule's rewrites
each check rejects; then the people's own answers (every choice of the file) through the checks made of
human-written candidates (misspelt, agreement, construction), with the share each flags; with
--examples a few rejected rewrites per check, for review on the screen.

    python bench/fluency_real.py [--release $CSK_REAL_SAMPLES/cicero/cicero_v2_val_sample.jsonl]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", type=Path, default=None,
                    help="a CICERO v2 file (default: the real sample under $CSK_REAL_SAMPLES)")
    ap.add_argument("--max-per-answer", type=int, default=24)
    ap.add_argument("--examples", action="store_true", help="also print a few rejected rewrites per check (real "
                    "text: for review on the screen, not for bench/results/)")
    args = ap.parse_args()
    from bench.real import need, real_file

    args.release = need(args.release or real_file("cicero", "cicero_v2_val_sample.jsonl"), "--release")
    from readers import read_cicero_release
    from tasks.distractors.counterfactuals import counterfactuals

    rows = read_cicero_release(args.release, lenient=True).rows
    view = pd.DataFrame({"id": [r["id"] for r in rows], "group_id": [r["cicero_id"] for r in rows],
                         "question": [r["question"] for r in rows], "target": [r.get("target") or "" for r in rows],
                         "passage": [r["dialogue"] for r in rows], "choices": [[] for _ in rows],
                         "correct_answers": [[] for _ in rows],
                         "gold": [r["choices"][r["correct_answers"][0]] for r in rows]})
    t0 = time.perf_counter()
    out = counterfactuals(view, generators=["lexical"], max_per_answer=args.max_per_answer)
    seconds = time.perf_counter() - t0
    rej = out.rejected[out.rejected["reason_code"].astype(str).str.startswith("fluency_")] \
        if out.rejected is not None else pd.DataFrame()
    checked = out.notes["fluency_checked"]
    print(f"{args.release.name}: {len(view)} gold answers, {checked} lexical rewrites checked, {len(rej)} rejected "
          f"({len(rej) / max(1, checked):.1%}), {len(out.data)} in the pools (at most --max-per-answer each); "
          f"{seconds:.1f} s")
    report = pd.DataFrame(out.notes["fluency"])
    table = report.pivot(index="rule", columns="check", values="share").fillna(0)
    table.insert(0, "rewrites", report.groupby("rule")["checked"].first())
    print("share of each rule's rewrites each check rejects (a chain counts for every rule in it):")
    print(table.to_string(float_format=lambda v: f"{v:.1%}"))
    from tasks.distractors import fluency as fl

    answers = sorted({c for r in rows for c in r["choices"] if len(str(c).split()) > 3})
    parsed = fl.parse(answers)
    flagged = {"misspelt": [a for a in answers if fl.misspellings(parsed[a])],
               "number_agreement": [a for a in answers if fl.agreement_problems(parsed[a])],
               "construction": [a for a in answers if fl.construction_problems(parsed[a])]}
    print(f"people's answers (distinct choices of the file, over 3 words): {len(answers)}; flagged: " + ", ".join(
        f"{k} {len(v)} ({len(v) / max(1, len(answers)):.1%})" for k, v in flagged.items()))
    for k, v in (flagged.items() if args.examples else ()):
        print(f"\n{k}: {len(v)}")
        for a in v[:6]:
            print(f"   {a!r}")
    for check, group in (rej.groupby("reason_code", observed=True) if args.examples else ()):
        print(f"\n{check}: {len(group)}")
        for r in group.head(4).itertuples():
            print(f"   [{r.rule}] {r.candidate!r}: {r.reason}")


if __name__ == "__main__":
    main()
