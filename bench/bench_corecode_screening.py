"""CORECODE screening at NaturalConv scale: the `concepts` stage (jieba posseg) and the `screening`
stage (batched one-hop look-ups: one query per 500 distinct concepts, then set intersections)
against the baseline, the same SQL look-up once per concept occurrence of every utterance (what a
per-utterance-pair screen does), side by side in one process, at growing sizes.

Synthetic, built from jieba's own dictionary so the tagger sees real words: a Chinese ConceptNet
(`--edges` zh-zh edges between dictionary nouns, verbs and adjectives, drawn by word frequency, in the
5.7 dump format, built with `build_db`), and dialogues of `--turns` utterances of dictionary words.
The baseline runs on a slice of the largest size and is projected linearly (it is per occurrence).
Each stage's peak memory is printed, and a floor beside each: for `concepts`, jieba's posseg over the same
utterances in a plain loop (the tagger alone, no frame, no filter); for `screening`, one sqlite3 query
that fetches every one-hop edge of the distinct concepts (the look-ups as one join, nothing else).

    python bench/bench_corecode_screening.py [--dialogues 1000 4000 19700] [--edges 681000]

681,000 zh-zh edges is the 5.7 dump's Chinese share as bench_conceptnet.py draws it (2 of 12 of the
4.09M en/zh edges it keeps from 34.07M lines); CORECODE's published size is 19,700 dialogues.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench import PeakMemory, machine_line  # noqa: E402
from csk import compute  # noqa: E402
from csk import conceptnet as cn  # noqa: E402
from tasks.corecode.concepts import concepts  # noqa: E402
from tasks.corecode.screening import screening  # noqa: E402

RELS = ["/r/RelatedTo", "/r/Synonym", "/r/IsA", "/r/Causes", "/r/HasProperty", "/r/AtLocation", "/r/UsedFor"]


def dictionary() -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """(all words, their frequencies, content words (n/v/a), their frequencies) of jieba's dictionary."""
    import jieba

    path = Path(jieba.__file__).parent / "dict.txt"
    words, freq, content, cfreq = [], [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        w, f, t = line.split(" ")
        words.append(w)
        freq.append(float(f))
        if t[:1] in "nva" and len(w) <= 3:
            content.append(w)
            cfreq.append(float(f))
    p, cp = np.array(freq), np.array(cfreq)
    return words, p / p.sum(), content, cp / cp.sum()


def synthetic_dump(path: Path, n: int, content: list[str], cp: np.ndarray, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    heads = rng.choice(len(content), size=n, p=cp)
    tails = rng.choice(len(content), size=n, p=cp)
    rels = rng.integers(0, len(RELS), size=n)
    info = json.dumps({"dataset": "/d/conceptnet/4/zh", "weight": 1.0})
    with open(path, "w", encoding="utf-8") as f:
        for h, t, r in zip(heads, tails, rels):
            a, b = f"/c/zh/{content[h]}", f"/c/zh/{content[t]}"
            f.write(f"/a/[{RELS[r]}/,{a}/,{b}/]\t{RELS[r]}\t{a}\t{b}\t{info}\n")


def synthetic_dialogues(n: int, turns: int, words: list[str], p: np.ndarray, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    draws = rng.choice(len(words), size=(n, turns, 10), p=p)
    rows = [{"id": f"d{i}", "turns": [{"speaker": "AB"[k % 2], "text": "".join(words[w] for w in draws[i, k]) + "。"}
                                       for k in range(turns)]} for i in range(n)]
    return pd.DataFrame(rows)


def baseline(tagged: pd.DataFrame) -> float:
    """The same SQL unbatched: one look-up per concept occurrence of every utterance (what a per-
    utterance-pair screen does), then the same intersection."""
    t0 = time.perf_counter()
    for _, g in tagged.groupby("dialogue_id", sort=False):
        sets = list(g.sort_values("utterance")["concepts"])
        for i in range(len(sets) - 1):
            following = set(sets[i + 1])
            for c in sets[i]:
                sum(1 for e in cn.one_hop([c], "zh") if e["tail"] in following)
    return time.perf_counter() - t0


def tagger_floor(dialogues: pd.DataFrame) -> float:
    """jieba's posseg over every utterance in a plain loop: the tagging the `concepts` stage cannot avoid."""
    import jieba.posseg as pseg

    t0 = time.perf_counter()
    for turns in dialogues["turns"]:
        for t in turns:
            pseg.lcut(t["text"], HMM=False)
    return time.perf_counter() - t0


def join_floor(db: Path, tagged: pd.DataFrame) -> float:
    """One sqlite3 query fetching every one-hop edge of the distinct concepts (a temporary table joined with
    conceptnet-lite's label, concept and edge tables): the look-ups the `screening` stage cannot avoid, without
    its batching, its pairing of consecutive utterances or its intersections."""
    t0 = time.perf_counter()
    distinct = sorted({c for cs in tagged["concepts"] for c in cs})
    con = sqlite3.connect(db)
    con.execute("CREATE TEMP TABLE conc (c TEXT PRIMARY KEY)")
    con.executemany("INSERT INTO conc VALUES (?)", [(c,) for c in distinct])
    con.execute("""SELECT lh.text, lt.text FROM conc JOIN label lh ON lh.text = conc.c
                   JOIN concept ch ON ch.label_id = lh.id JOIN edge e ON e.start_id = ch.id
                   JOIN concept ct ON ct.id = e.end_id JOIN label lt ON lt.id = ct.label_id""").fetchall()
    con.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues", type=int, nargs="+", default=[1000, 4000, 19700])
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--edges", type=int, default=681_000)
    ap.add_argument("--baseline-dialogues", type=int, default=50)
    args = ap.parse_args()
    print(machine_line())
    words, p, content, cp = dictionary()
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "zh.csv"
        synthetic_dump(dump, args.edges, content, cp)
        t0 = time.perf_counter()
        db = cn.build_db(dump, Path(tmp) / "zh.db", ("zh",), progress=False)
        print(f"ConceptNet: {args.edges} zh edges among {len(content)} dictionary words, built in "
              f"{time.perf_counter() - t0:.1f} s")
        cn.connect(db)
        table = pd.DataFrame({"id": ["x"], "relation": ["RelatedTo"], "edges": [args.edges], "database": [str(db)],
                              "dump_sha256": [compute.sha256_file(dump)], "source_file": [str(dump)],
                              "source_record": [0], "source_locator": ["the whole dump"]})
        print(f"{'dialogues':>10} {'utterances':>11} {'concepts s':>11} {'MiB':>5} {'posseg floor s':>14} "
              f"{'ratio':>6} {'screening s':>12} {'MiB':>5} {'SQL join floor s':>16} {'ratio':>6} "
              f"{'per-occurrence loop s':>21} {'kept':>6}")
        done = []
        for n in args.dialogues:
            dialogues = synthetic_dialogues(n, args.turns, words, p)
            with PeakMemory() as m_concepts:
                t0 = time.perf_counter()
                tagged = concepts(dialogues).data
                t_concepts = time.perf_counter() - t0
            with PeakMemory() as m_screen:
                t0 = time.perf_counter()
                out = screening(dialogues, tagged, table)
                t_screen = time.perf_counter() - t0
            f_tag, f_join = tagger_floor(dialogues), join_floor(db, tagged)
            k = min(args.baseline_dialogues, n)
            sub = tagged[tagged["dialogue_id"].isin(set(dialogues["id"][:k]))]
            t_base = baseline(sub) * n / k  # projected: the baseline's cost is per occurrence
            print(f"{n:>10} {len(tagged):>11} {t_concepts:>11.1f} {m_concepts.mib:>5.0f} {f_tag:>14.1f} "
                  f"{t_concepts / f_tag:>5.2f}x {t_screen:>12.1f} {m_screen.mib:>5.0f} {f_join:>16.1f} "
                  f"{t_screen / f_join:>5.2f}x {t_base:>21.0f} {len(out.data):>6}", flush=True)
            done.append((n, t_concepts + t_screen))
        (n0, a), (n1, b) = done[0], done[-1]
        if n1 > n0:
            print(f"# growth {n0} -> {n1} dialogues: concepts + screening ~ n^{np.log(b / a) / np.log(n1 / n0):.2f}")


if __name__ == "__main__":
    main()
