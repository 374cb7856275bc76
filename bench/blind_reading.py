"""A blind reading of rebuilt distractors beside the published ones (issue 37's human measure).

`make`: draws items (random.Random(seed)) present in both files, and writes a sheet a careful reader
can judge without any other file: each item's dialogue, target and question, then its two choice sets
(rebuilt and published, in a shuffled order, named X and Y, choices shuffled, no answer marked), and a
key kept apart from the reader. `score`: joins each reader's verdicts to the key and prints, per set
and per reader, the share of distractors judged good (wrong, fluent, in place), ungrammatical, correct
and out of place, near-copy sets and the mean difficulty, then the two readers' mean and their agreement
(Cohen's kappa per judgement, over the distractors both read): the lines bench/results records.

Every draw is fresh: without --seed a seed is drawn from the operating system and recorded in the key
and printed; --exclude DIR ... leaves out the items of earlier draws (a default is chosen on one draw and
confirmed on another, never on the items it was tuned on): the items their keys name, or, where a key was
stripped of the released text (bench/results keeps only dialogue ids and the seed), the items its seed
replays, checked against the ids it kept (give such draws in the order they were made). At least 60
items (--n); `--remaining` draws every item the earlier draws left, however few (a file's last fresh items: a
partial reading, which its figures must say).

    python bench/blind_reading.py make --published RELEASE.jsonl --rebuilt REBUILT.jsonl --out DIR [--exclude OLD_DIR]
    python bench/blind_reading.py score --key DIR/key.json --verdicts DIR/reader1.jsonl DIR/reader2.jsonl

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


MIN_ITEMS = 60


def key(r: dict) -> tuple:
    """An item of a CICERO file: (ID, Target, Question)."""
    return (r.get("ID"), r.get("Target"), r.get("Question"))


def match_sha256(match) -> str:
    """The item's key as a digest: a committed key names its items without their released text."""
    import hashlib

    return hashlib.sha256(json.dumps(list(match), ensure_ascii=False).encode("utf-8")).hexdigest()


def strip(key_path: str, out: str) -> None:
    """A key fit to commit: each item's released text (target, question) replaced by its digest."""
    entries = json.loads(Path(key_path).read_text(encoding="utf-8"))
    for e in entries:
        if "match" in e:
            e["match_sha256"] = match_sha256(e.pop("match"))
    Path(out).write_text(json.dumps(entries, indent=1), encoding="utf-8")


def _replay(entries: list[dict], pub: list[dict], seen: set, where: str) -> set:
    """The items of an earlier draw whose key kept only the dialogue ids (the released text stripped, as
    bench/results holds them): its seed replays the draw over the published file minus the draws before it
    (give --exclude in the order they were made), checked against the ids it recorded."""
    seeds = {e.get("seed") for e in entries}
    if len(seeds) != 1 or None in seeds:
        raise SystemExit(f"{where}/key.json: neither the items' keys nor one seed to replay the draw with")
    candidates = [r for r in pub if key(r) not in seen]
    drawn = random.Random(seeds.pop()).sample(range(len(candidates)), min(len(entries), len(candidates)))
    got = [candidates[p].get("ID") for p in drawn]
    want = [e.get("id") for e in sorted(entries, key=lambda e: e["item"])]
    if got != want:
        raise SystemExit(f"{where}/key.json: replaying its seed over {len(candidates)} items does not give the ids "
                         "it recorded: another published file, or --exclude in another order than the draws were made")
    return {key(candidates[p]) for p in drawn}


def make(published: str, rebuilt: str, out: str, n: int = MIN_ITEMS, seed: int | None = None,
         exclude: list[str] = (), brief: bool = False, af: str | None = None, remaining: bool = False) -> None:
    """With `remaining`, every item the earlier draws (`exclude`) left, however few: the last fresh items of a
    file, a reading its figures must call partial where they are under MIN_ITEMS."""
    if n < MIN_ITEMS and not remaining:
        raise SystemExit(f"-n {n}: a reading needs at least {MIN_ITEMS} items (two readers' figures on fewer are noise)")
    if seed is None:
        import secrets

        seed = secrets.randbits(31)  # a fresh draw every time; recorded in the key
    pub, reb = _records(published), _records(rebuilt)
    for k in range(len(pub)):  # the instance id a rebuild gives a record: its line number
        pub[k]["_line"] = k + 1
    seen: set = set()
    for old in exclude:
        entries = json.loads((Path(old) / "key.json").read_text(encoding="utf-8"))
        seen |= ({tuple(e["match"]) for e in entries} if all("match" in e for e in entries)
                 else {e["match_sha256"] for e in entries} if all("match_sha256" in e for e in entries)
                 else _replay(entries, pub, seen, old))
    index = {}
    for r in reb:
        index.setdefault(key(r), []).append(r)
    pairs = []
    for r in pub:
        if index.get(key(r)):
            pairs.append((r, index[key(r)].pop(0)))
    pairs = [p for p in pairs if tuple(key(p[0])) not in seen and match_sha256(key(p[0])) not in seen]
    if remaining:
        n = len(pairs)
        if n < MIN_ITEMS:
            print(f"--remaining: {n} items, fewer than {MIN_ITEMS}: a partial reading (its figures are noisier)")
    rng = random.Random(seed)
    drawn = rng.sample(range(len(pairs)), min(n, len(pairs)))
    sheet, answer_key = [], []
    for k, p in enumerate(drawn, 1):
        p_rec, r_rec = pairs[p]
        sets = [("published", p_rec), ("rebuilt", r_rec)]
        rng.shuffle(sets)
        lines = [f"## Item {k}", "", "Dialogue:"] + [f"    {u}" for u in p_rec["Dialogue"]] + \
                ["", f"Target: {p_rec['Target']}", f"Question: {p_rec['Question']}", ""]
        entry = {"item": k, "id": p_rec.get("ID"), "match": list(key(p_rec)), "seed": seed, "sets": {}}
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
    if brief:
        _brief_sheet(pairs, drawn, answer_key, seed, out, _made_by(af, rebuilt) if af else None)
        return
    head = (f"# Blind reading: {len(drawn)} items, two choice sets each\n\n"
            "For every item read the dialogue, target and question. For each set and each choice say: is it a\n"
            "correct answer to the question about the target (correct), is it ungrammatical or garbled English\n"
            "(ungrammatical), does it come from another conversation: other people, places or events than this\n"
            "dialogue's (out_of_place). For each set: near_copies (several choices near-copies of one another),\n"
            "difficulty 1-5 (how hard it is to tell the correct choices from the wrong ones).\n\n")
    (Path(out) / "sheet.md").write_text(head + "\n\n".join(sheet) + "\n", encoding="utf-8")
    (Path(out) / "key.json").write_text(json.dumps(answer_key, indent=1), encoding="utf-8")
    print(f"{Path(out) / 'sheet.md'}: {len(drawn)} items (seed {seed}, {len(seen)} items of earlier draws left "
          f"out); key in {Path(out) / 'key.json'}")


def _made_by(af: str, rebuilt: str) -> dict:
    """(record number, distractor text) -> the kind of candidate it is (generator, and for a retrieved answer
    whether it names a thing of its dialogue; for a rewrite its rule), from the rebuild's adversarial_filter
    artifact (its instance ids are the records' numbers, r1 first)."""
    import pandas as pd

    data = pd.read_parquet(Path(af) / "data.parquet")
    if not data["id"].astype(str).str.fullmatch(r"r\d+").all():
        raise SystemExit(f"{af}: its instance ids are not record numbers (r1, r2, ...): --af needs the "
                         "adversarial_filter artifact of `csk distractors rebuild --preset cicero` on the published file")
    out = {}
    for r in data.itertuples():
        for t, g, rule in zip(r.distractors, r.distractor_generators, r.distractor_rules):
            kind = g + (":" + next((m for m in ("unanchored", "reserve") if f":{m}:" in rule), "anchored")
                        if g == "retrieval" else ":" + rule.split(":")[0] if g in ("lexical", "grounded") else
                        ":contrary:" + rule.split(":")[0] if g == "dialogue" and "+dialogue:" in rule else
                        ":spoken:" + rule.split(":")[0] if g == "dialogue" and "+utterance:" in rule else "")
            if kind == "grounded:role_flip" and "<->" not in rule:
                kind += ":one_person"  # one person's act given to the other
            out[(int(str(r.id).lstrip("r")), t.strip().lower())] = kind
    return out


def _brief_sheet(pairs: list, drawn: list[int], answer_key: list[dict], seed: int, out: str,
                 made_by: dict | None = None) -> None:
    """The layout of ../shared/blind-reading/reader_brief.md: every (item, set) its own question Qnn, the
    questions in a seeded shuffled order (the two sets of an item apart), each choice to be labelled with
    one letter (C, W, O, U, A). The key names each question's item, set and distractors, and whether the
    set is a near-copy set by rule (tasks/distractors/giveaways.py); no released text."""
    from tasks.distractors.giveaways import near_copy_set

    rng = random.Random(seed + 1)
    questions = [(entry, name) for entry in answer_key for name in "XY"]
    rng.shuffle(questions)
    sheet = []
    for q, (entry, name) in enumerate(questions, 1):
        p_rec, r_rec = pairs[drawn[entry["item"] - 1]]
        which = entry["sets"][name]["which"]
        rec = dict(r_rec, _line=p_rec["_line"]) if which == "rebuilt" else p_rec
        order = list(range(len(rec["Choices"])))
        random.Random(f"{seed}-{q}").shuffle(order)
        entry["sets"][name]["question"] = f"Q{q:03d}"
        entry["sets"][name]["distractor"] = [c not in _correct(rec) for c in order]
        entry["sets"][name]["near_copy_set"] = near_copy_set(rec["Choices"], _correct(rec))
        if made_by is not None and which == "rebuilt":  # what made each distractor (no text): readings traced
            entry["sets"][name]["made_by"] = [made_by.get((rec["_line"], rec["Choices"][c].strip().lower()), "?")
                                              if c not in _correct(rec) else None for c in order]
        sheet.append("\n".join([f"## Q{q:03d}", "", "Dialogue:"] + [f"    {u}" for u in p_rec["Dialogue"]] +
                               ["", f"Target: {p_rec['Target']}", f"Question: {p_rec['Question']}", "", "Choices:"] +
                               [f"  {j + 1}. {rec['Choices'][c]}" for j, c in enumerate(order)]))
    head = f"# {len(questions)} items about dialogues (Q001-Q{len(questions):03d}); label every choice\n\n"
    (Path(out) / "sheet.md").write_text(head + "\n\n".join(sheet) + "\n", encoding="utf-8")
    (Path(out) / "key.json").write_text(json.dumps(answer_key, indent=1), encoding="utf-8")
    print(f"{Path(out) / 'sheet.md'}: {len(questions)} questions from {len(drawn)} items (seed {seed}); key in "
          f"{Path(out) / 'key.json'}")


LETTERS = ("W", "O", "U", "C", "A")


def score_brief(key: str, verdicts: list[str]) -> dict:
    """Readers' letters (reader_brief.md: {"Q001": ["C", "W", ...], ...}) on the distractors of each kind of
    set: the share of each letter (W = good), near-copy sets by rule, and Cohen's kappa per letter between
    two readers over the distractors both labelled."""
    from sklearn.metrics import cohen_kappa_score

    entries = json.loads(Path(key).read_text(encoding="utf-8"))
    where = {st["question"]: st for e in entries for st in e["sets"].values()}
    out: dict = {"items": len(entries), "seed": sorted({e.get("seed") for e in entries}), "readers": []}
    labels: list[dict] = []
    traced: dict[str, dict] = {}  # what made each rebuilt distractor -> its readers' letters
    print(f"{len(entries)} items, seed {out['seed']}")
    for r, path in enumerate(verdicts, 1):
        got = json.loads(Path(path).read_text(encoding="utf-8"))
        mine, totals = {}, {w: {x: 0 for x in LETTERS} for w in ("rebuilt", "published")}
        for q, st in where.items():
            letters = [str(x).strip().upper()[:1] for x in got.get(q, [])]
            if len(letters) != len(st["distractor"]):
                raise SystemExit(f"{path}: {q} has {len(letters)} labels for {len(st['distractor'])} choices")
            for j, (is_d, x) in enumerate(zip(st["distractor"], letters)):
                if is_d:
                    totals[st["which"]][x if x in LETTERS else "A"] += 1
                    mine[(q, j)] = x
        labels.append(mine)
        for q, st in where.items():
            for j, kind in enumerate(st.get("made_by") or []):
                if kind is not None:
                    traced.setdefault(kind, {x: 0 for x in LETTERS})[mine[(q, j)] if mine[(q, j)] in LETTERS else "A"] += 1
        out["readers"].append(totals)
        for w, t in totals.items():
            d = max(sum(t.values()), 1)
            print(f"{w:<10} (reader {r}) distractors {d}: " + ", ".join(f"{x} {100 * t[x] / d:.1f}%" for x in LETTERS))
    for w in ("rebuilt", "published"):
        t = {x: sum(r[w][x] for r in out["readers"]) for x in LETTERS}
        d = max(sum(t.values()), 1)
        sets = [st for st in where.values() if st["which"] == w and any(st["distractor"])]
        out[f"{w}_all"] = {**{x: round(100 * t[x] / d, 1) for x in LETTERS}, "distractors": d,
                           "near_copy_sets": sum(st["near_copy_set"] for st in sets), "sets": len(sets)}
        print(f"{w:<10} (all readers) distractors {d}: good (W) {100 * t['W'] / d:.1f}%, out of place (O) "
              f"{100 * t['O'] / d:.1f}%, ungrammatical (U) {100 * t['U'] / d:.1f}%, judged correct (C) "
              f"{100 * t['C'] / d:.1f}%, ambiguous (A) {100 * t['A'] / d:.1f}%; near-copy sets (rule) "
              f"{out[f'{w}_all']['near_copy_sets']} of {len(sets)}")
    for kind, t in sorted(traced.items()):
        d = max(sum(t.values()), 1)
        print(f"rebuilt by {kind:<24} readings {d:3d}: " + ", ".join(f"{x} {100 * t[x] / d:.0f}%" for x in LETTERS))
    out["by_generator"] = traced
    if len(labels) > 1:
        both = sorted(set(labels[0]) & set(labels[1]))
        kappas = {}
        for x in LETTERS[:4]:
            xa, xb = [labels[0][k] == x for k in both], [labels[1][k] == x for k in both]
            kappas[x] = round(float(cohen_kappa_score(xa, xb)), 3) if len(set(xa) | set(xb)) > 1 else float("nan")
        out["kappa"] = kappas
        print(f"agreement over {len(both)} distractors: " + ", ".join(f"{x} kappa {v:.2f}" for x, v in kappas.items()))
    return out


JUDGEMENTS = ("ungrammatical", "correct", "out_of_place")


def _tally(answer_key: dict, verdicts: str) -> tuple[dict, dict]:
    """One reader's totals per set kind, and their judgement of every distractor ((item, set, choice) ->
    flags)."""
    totals = {w: {"distractors": 0, "good": 0, **{m: 0 for m in JUDGEMENTS}, "near_copies": 0, "difficulty": [],
                  "sets": 0} for w in ("rebuilt", "published")}
    flags = {}
    for v in _records(verdicts):
        entry = answer_key[int(v["item"])]
        for name, judged in v["sets"].items():
            k = entry["sets"][name]
            t = totals[k["which"]]
            t["sets"] += 1
            t["near_copies"] += bool(judged.get("near_copies"))
            t["difficulty"].append(float(judged["difficulty"]))
            for j, (is_distractor, c) in enumerate(zip(k["distractor"], judged["choices"])):
                if is_distractor:
                    t["distractors"] += 1
                    f = {m: bool(c.get(m)) for m in JUDGEMENTS}
                    for m in JUDGEMENTS:
                        t[m] += f[m]
                    t["good"] += not any(f.values())  # wrong, fluent and in place
                    flags[(int(v["item"]), name, j)] = (k["which"], f)
    return totals, flags


def _line(label: str, t: dict) -> str:
    d = max(t["distractors"], 1)
    return (f"{label:<22} distractors {t['distractors']}: good {100 * t['good'] / d:.1f}%, out of place "
            f"{100 * t['out_of_place'] / d:.1f}%, judged correct {100 * t['correct'] / d:.1f}%, ungrammatical "
            f"{100 * t['ungrammatical'] / d:.1f}%; near-copy sets {t['near_copies']} of {t['sets']}; mean difficulty "
            f"{sum(t['difficulty']) / max(len(t['difficulty']), 1):.2f} / 5")


def score(key: str, verdicts: list[str]) -> dict:
    """Each reader's figures, their mean, and (with two readers) Cohen's kappa per judgement."""
    from sklearn.metrics import cohen_kappa_score

    answer_key = {e["item"]: e for e in json.loads(Path(key).read_text(encoding="utf-8"))}
    seeds = sorted({e.get("seed") for e in answer_key.values() if e.get("seed") is not None})
    print(f"{len(answer_key)} items, seed {seeds}")
    readers = [_tally(answer_key, v) for v in verdicts]
    out = {"items": len(answer_key), "seed": seeds, "readers": []}
    for r, (totals, _) in enumerate(readers, 1):
        for which, t in totals.items():
            print(_line(f"{which} (reader {r})", t))
        out["readers"].append(totals)
    if len(readers) > 1:
        for which in ("rebuilt", "published"):
            mean = {m: sum(r[0][which][m] for r in readers) for m in ("distractors", "good", *JUDGEMENTS,
                                                                       "near_copies", "sets")}
            mean["difficulty"] = [x for r in readers for x in r[0][which]["difficulty"]]
            print(_line(f"{which} (both readers)", mean))
            out[f"{which}_both"] = {k: v for k, v in mean.items() if k != "difficulty"}
        a, b = readers[0][1], readers[1][1]
        both = sorted(set(a) & set(b))
        kappas = {}
        for m in (*JUDGEMENTS, "good"):
            xa = [a[k][1][m] if m != "good" else not any(a[k][1].values()) for k in both]
            xb = [b[k][1][m] if m != "good" else not any(b[k][1].values()) for k in both]
            agree = sum(x == y for x, y in zip(xa, xb)) / max(len(both), 1)
            kappa = cohen_kappa_score(xa, xb) if len(set(xa) | set(xb)) > 1 else float("nan")
            kappas[m] = {"kappa": round(float(kappa), 3), "agreement": round(agree, 3)}
        print(f"agreement over {len(both)} distractors read by both: " +
              ", ".join(f"{m} kappa {v['kappa']:.2f} (agree {100 * v['agreement']:.0f}%)" for m, v in kappas.items()))
        out["agreement"] = kappas
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--published", required=True)
    m.add_argument("--rebuilt", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("-n", "--n", type=int, default=MIN_ITEMS)
    m.add_argument("--seed", type=int, default=None, help="default: a fresh seed from the operating system")
    m.add_argument("--exclude", nargs="*", default=[], help="earlier draws' folders: their items are left out")
    m.add_argument("--af", help="the rebuild's adversarial_filter artifact folder: each rebuilt distractor's "
                   "generator goes into the key, and score --brief traces the readers' letters to it")
    m.add_argument("--brief", action="store_true", help="the layout of ../shared/blind-reading/reader_brief.md "
                   "(every set its own question, one letter per choice)")
    m.add_argument("--remaining", action="store_true", help="every item --exclude's draws left, even under "
                   f"{MIN_ITEMS} (the last fresh items of a file: a partial reading)")
    s = sub.add_parser("score")
    s.add_argument("--key", required=True)
    s.add_argument("--verdicts", required=True, nargs="+", help="one file per reader")
    s.add_argument("--json", help="also write the figures here")
    s.add_argument("--brief", action="store_true", help="verdicts in reader_brief.md's letters")
    t = sub.add_parser("strip", help="a key fit to commit: the released text of each item replaced by its digest")
    t.add_argument("--key", required=True)
    t.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.published, a.rebuilt, a.out, a.n, a.seed, a.exclude, a.brief, a.af, a.remaining)
    elif a.cmd == "strip":
        strip(a.key, a.out)
    else:
        figures = (score_brief if a.brief else score)(a.key, a.verdicts)
        if a.json:
            Path(a.json).write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
