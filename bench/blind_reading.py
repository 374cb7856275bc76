"""A blind reading of rebuilt distractors beside the published ones (issue 37's human measure).

`make`: draws items (random.Random(seed)) present in both files, and writes a sheet a careful reader
can judge without any other file: each item's dialogue, target and question, then its two choice sets
(rebuilt and published, in a shuffled order, named X and Y, choices shuffled, no answer marked), and a
key kept apart from the reader. `score`: joins the reader's verdicts to the key and prints, per set,
the share of distractors judged ungrammatical, correct and out of place, near-copy sets and the mean
difficulty, the lines bench/results/distractors_real_cicero.txt records.

    python bench/blind_reading.py make --published RELEASE.jsonl --rebuilt REBUILT.jsonl --out DIR
    python bench/blind_reading.py score --key DIR/key.json --verdicts DIR/verdicts.jsonl

Records are matched by their position in the file (the rebuilt file keeps the input's records in order;
a record the rebuild left out is skipped). The verdicts file has one JSON object per item:
{"item": 1, "sets": {"X": {"difficulty": 1-5, "near_copies": bool, "choices": [{"correct": bool,
"ungrammatical": bool, "out_of_place": bool}, ...]}, "Y": {...}}} with the choices in the sheet's order.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def _records(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _correct(rec: dict) -> set[int]:
    return {int(k) for k in rec.get("Correct Answers", [])}


def make(published: str, rebuilt: str, out: str, n: int = 30, seed: int = 7) -> None:
    pub, reb = _records(published), _records(rebuilt)
    # the rebuilt file keeps the records it rebuilt, in the input's order: matched by (ID, Target, Question)
    def key(r):
        return (r.get("ID"), r.get("Target"), r.get("Question"))
    index = {}
    for r in reb:
        index.setdefault(key(r), []).append(r)
    pairs = []
    for r in pub:
        if index.get(key(r)):
            pairs.append((r, index[key(r)].pop(0)))
    rng = random.Random(seed)
    drawn = rng.sample(range(len(pairs)), min(n, len(pairs)))
    sheet, answer_key = [], []
    for k, p in enumerate(drawn, 1):
        p_rec, r_rec = pairs[p]
        sets = [("published", p_rec), ("rebuilt", r_rec)]
        rng.shuffle(sets)
        lines = [f"## Item {k}", "", "Dialogue:"] + [f"    {u}" for u in p_rec["Dialogue"]] + \
                ["", f"Target: {p_rec['Target']}", f"Question: {p_rec['Question']}", ""]
        entry = {"item": k, "id": p_rec.get("ID"), "sets": {}}
        for name, (which, rec) in zip("XY", sets):
            order = list(range(len(rec["Choices"])))
            rng.shuffle(order)
            lines.append(f"Set {name}:")
            lines += [f"  {j + 1}. {rec['Choices'][c]}" for j, c in enumerate(order)]
            lines.append("")
            entry["sets"][name] = {"which": which, "distractor": [c not in _correct(rec) for c in order]}
        sheet.append("\n".join(lines))
        answer_key.append(entry)
    Path(out).mkdir(parents=True, exist_ok=True)
    head = (f"# Blind reading: {len(drawn)} items, two choice sets each\n\n"
            "For every item read the dialogue, target and question. For each set and each choice say: is it a\n"
            "correct answer to the question about the target (correct), is it ungrammatical or garbled English\n"
            "(ungrammatical), does it come from another conversation: other people, places or events than this\n"
            "dialogue's (out_of_place). For each set: near_copies (several choices near-copies of one another),\n"
            "difficulty 1-5 (how hard it is to tell the correct choices from the wrong ones).\n\n")
    (Path(out) / "sheet.md").write_text(head + "\n\n".join(sheet) + "\n", encoding="utf-8")
    (Path(out) / "key.json").write_text(json.dumps(answer_key, indent=1), encoding="utf-8")
    print(f"{Path(out) / 'sheet.md'}: {len(drawn)} items; key in {Path(out) / 'key.json'}")


def score(key: str, verdicts: str) -> dict:
    answer_key = {e["item"]: e for e in json.loads(Path(key).read_text(encoding="utf-8"))}
    totals = {w: {"distractors": 0, "ungrammatical": 0, "correct": 0, "out_of_place": 0, "near_copies": 0,
                  "difficulty": [], "sets": 0} for w in ("rebuilt", "published")}
    for v in _records(verdicts):
        entry = answer_key[int(v["item"])]
        for name, judged in v["sets"].items():
            k = entry["sets"][name]
            t = totals[k["which"]]
            t["sets"] += 1
            t["near_copies"] += bool(judged.get("near_copies"))
            t["difficulty"].append(float(judged["difficulty"]))
            for is_distractor, c in zip(k["distractor"], judged["choices"]):
                if is_distractor:
                    t["distractors"] += 1
                    for m in ("ungrammatical", "correct", "out_of_place"):
                        t[m] += bool(c.get(m))
    for which, t in totals.items():
        d = max(t["distractors"], 1)
        print(f"{which:<10} distractors {t['distractors']}: ungrammatical {t['ungrammatical']:2d} "
              f"({100 * t['ungrammatical'] / d:.1f}%), judged correct {t['correct']:2d} ({100 * t['correct'] / d:.1f}%), "
              f"out of place {t['out_of_place']:2d} ({100 * t['out_of_place'] / d:.1f}%); near-copy sets "
              f"{t['near_copies']} of {t['sets']}; mean difficulty "
              f"{sum(t['difficulty']) / max(len(t['difficulty']), 1):.2f} / 5")
    return totals


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--published", required=True)
    m.add_argument("--rebuilt", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("-n", type=int, default=30)
    m.add_argument("--seed", type=int, default=7)
    s = sub.add_parser("score")
    s.add_argument("--key", required=True)
    s.add_argument("--verdicts", required=True)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.published, a.rebuilt, a.out, a.n, a.seed)
    else:
        score(a.key, a.verdicts)
