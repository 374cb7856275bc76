"""Human verification round trip (docs/method.md 1.6d) and the seeded shuffle of the final choices.

`verification` writes the marking sheet (one line per final distractor: is it speculatively
correct?) and, when a verdict file is configured, applies the verdicts: distractors marked
correct join the correct answers (CICERO: ~14% of instances end with more than one).

`shuffle_choices` orders gold + distractors by a per-instance seeded permutation and says
where the correct ones went; each dataset's MCQ export (its own slice) writes its format.
"""

from __future__ import annotations

import io

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.params import InputPath
from csk.runtime import StageOutput, to_parquet_bytes
from readers.base import iter_json_lines
from tasks.labeling import export_rows, is_export, light_kappa


def read_verdicts(path: str, known: dict[str, list[str]]) -> dict[str, set[int]]:
    """JSON Lines {"id", "distractor" (index or text), "text" (optional), "speculatively_correct": bool} ->
    the indices of the distractors marked correct. A verdict is matched to the choice TEXT: a line giving
    an index and a text that is not the distractor at that index is an error (the sheet it was made on is
    not this run's)."""
    out: dict[str, set[int]] = {}
    for n, obj in iter_json_lines(path):
        try:
            iid, d, verdict = str(obj["id"]), obj["distractor"], obj["speculatively_correct"]
        except (KeyError, TypeError) as exc:
            raise InputError(str(path), f"line {n}", f"expected {{id, distractor, speculatively_correct}}: {exc}") from None
        if iid not in known:
            raise InputError(str(path), f"line {n}", f"unknown instance id {iid!r}")
        options = known[iid]
        idx = d if isinstance(d, int) else (options.index(d) if d in options else None)
        if idx is None or not 0 <= idx < len(options):
            raise InputError(str(path), f"line {n}", f"distractor {d!r} is not one of instance {iid}'s distractors")
        text = obj.get("text")
        if text is not None and str(text).strip() != options[idx].strip():
            raise InputError(str(path), f"line {n}", f"the verdict is on {text!r}, but distractor {idx} of instance "
                             f"{iid} is {options[idx]!r}: the verdicts were made on another run's sheet")
        if not isinstance(verdict, bool):
            raise InputError(str(path), f"line {n}", f"speculatively_correct must be true or false, got {verdict!r}")
        if verdict:
            out.setdefault(iid, set()).add(int(idx))
        else:
            out.setdefault(iid, set())
    return out


def label_studio_verdicts(path: str, known: dict[str, list[str]]) -> tuple[dict[str, set[int]], pd.DataFrame,
                                                                             list[dict]]:
    """(marks, verdicts, rejected annotations) of the verification project's export: every annotator's
    verdict on every distractor of the item (ticked: speculatively correct), matched to the distractor's
    TEXT; a distractor more than half of its annotators ticked is marked correct. A ticked text that is not
    one of the item's distractors means the project was made from another run: rejected."""
    rows, rejected = export_rows(path, set(known))
    verdicts = []
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        options = known[r["row_id"]]
        ticked = [str(t) for t in r["values"].get("speculatively_correct", [])]
        strange = [t for t in ticked if t.strip() not in {o.strip() for o in options}]
        if strange:
            rejected.append({**lineage, "reason_code": "not_a_distractor",
                             "reason": f"ticked {strange[0]!r}, not one of the item's distractors: the project "
                                       "was made from another run's sheet"})
            continue
        verdicts += [{**lineage, "distractor": j, "text": o, "speculatively_correct": o.strip() in
                      {t.strip() for t in ticked}} for j, o in enumerate(options)]
    table = pd.DataFrame(verdicts)
    marks: dict[str, set[int]] = {}
    for (iid, j), g in table.groupby(["row_id", "distractor"]) if len(table) else ():
        marks.setdefault(iid, set())
        if g["speculatively_correct"].sum() * 2 > len(g):
            marks[iid].add(int(j))
    return marks, table, rejected


SHEET_COLUMNS = ["id", "dialogue", "target", "question", "choice", "text", "role", "generator", "rule", "rationale",
                 "speculatively_correct"]


def sheet_rows(distractors: pd.DataFrame, instances: pd.DataFrame | None) -> list[dict]:
    """One row per choice of every item, with everything a reviewer needs to judge it: the dialogue (or
    context), the target, the question, every correct answer, and each distractor with the generator,
    rule and evidence it came with. Only the distractor rows take a verdict."""
    inst = instances.set_index("id") if instances is not None else None
    rows = []
    for r in distractors.itertuples():
        src = inst.loc[r.id] if inst is not None and r.id in inst.index else None
        passage = list(src["passage"]) if src is not None else []
        dialogue = "\n".join(passage) if passage else (str(src["context"]) if src is not None else "")
        target = str(src["target"]) if src is not None and "target" in src.index and isinstance(src["target"], str) else ""
        question = str(src["question"]) if src is not None else ""
        correct = [r.gold]
        if src is not None and src["choices"] is not None and len(src["choices"]):
            correct = [str(src["choices"][k]) for k in sorted(set(src["correct_answers"]))]
            correct = [r.gold] + [c for c in correct if c != r.gold]
        base = {"id": r.id, "dialogue": dialogue, "target": target, "question": question}
        for c in correct:
            rows.append({**base, "choice": None, "text": c, "role": "correct (published)", "generator": "",
                         "rule": "", "rationale": "", "speculatively_correct": None})
        gens, rules, why = (_listed(getattr(r, c, None), len(r.distractors))
                            for c in ("distractor_generators", "distractor_rules", "distractor_rationales"))
        for j, d in enumerate(r.distractors):
            rows.append({**base, "choice": j, "text": d, "role": "distractor", "generator": gens[j], "rule": rules[j],
                         "rationale": why[j], "speculatively_correct": None})
    return rows


def _listed(values, n: int) -> list[str]:
    return [str(v) for v in values] if values is not None and len(values) == n else [""] * n


def sheet_html(rows: list[dict]) -> bytes:
    """The sheet as one page a reviewer opens in a browser: per item the dialogue, target and question,
    then every choice; each distractor asks "could this be correct?"."""
    from html import escape

    parts = ["<!doctype html><meta charset='utf-8'><title>Distractor verification</title><style>"
             "body{font-family:sans-serif;max-width:60em;margin:auto}section{border-top:2px solid #444;padding:.5em 0}"
             "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5em}td{padding:.2em .5em;vertical-align:top}"
             ".correct{background:#e6f4e6}.why{color:#555;font-size:90%}</style>",
             "<h1>Distractor verification</h1><p>For every distractor: could it be a correct answer to the question "
             "about this dialogue? Write speculatively_correct = true or false in verification_sheet.jsonl "
             "(or .csv) for its (id, choice, text).</p>"]
    by_item: dict[str, list[dict]] = {}
    for r in rows:
        by_item.setdefault(r["id"], []).append(r)
    for iid, items in by_item.items():
        head = items[0]
        lines = [f"<mark>{escape(t)}</mark>" if head["target"] and head["target"].strip() in t else escape(t)
                 for t in head["dialogue"].split("\n")]  # the target highlighted where it is said
        parts.append(f"<section><h2>{escape(iid)}</h2><pre>{chr(10).join(lines)}</pre>")
        if head["target"]:
            parts.append(f"<p><b>Target:</b> {escape(head['target'])}</p>")
        parts.append(f"<p><b>Question:</b> {escape(head['question'])}</p><table>")
        for r in items:
            cls = " class='correct'" if r["role"] != "distractor" else ""
            label = "correct" if r["role"] != "distractor" else f"distractor {r['choice']}"
            why = f"<br><span class='why'>{escape(r['generator'])}: {escape(r['rationale'] or r['rule'])}</span>" \
                if r["role"] == "distractor" else ""
            parts.append(f"<tr{cls}><td>{label}</td><td>{escape(r['text'])}{why}</td></tr>")
        parts.append("</table></section>")
    return "".join(parts).encode()


def verification(distractors: pd.DataFrame, instances: pd.DataFrame | None = None, *,
                 verdicts: InputPath = None) -> StageOutput:
    """Marking sheet out (every item with its dialogue, question, correct answers and distractors with their
    evidence); annotators' verdicts in, where given.

    Args:
        verdicts: annotators' verdicts, JSON Lines {id, distractor (index or text), text, speculatively_correct},
            or Label Studio's JSON export of the verification labeling step (`csk label pull`); unset: the correct answers are the published ones (or the gold) only
    """
    sheet = sheet_rows(distractors, instances)
    marked = [r for r in sheet if r["role"] == "distractor"]
    buf = io.StringIO()
    pd.DataFrame(sheet, columns=SHEET_COLUMNS).to_csv(buf, index=False)
    known = {r.id: list(r.distractors) for r in distractors.itertuples()}
    files, agreement = {}, {}
    if is_export(verdicts):
        marks, table, bad = label_studio_verdicts(verdicts, known)
        if len(table):
            files["verdicts.parquet"] = to_parquet_bytes(table)  # every annotator's verdict, with its annotation
            labels = table.assign(row_id=table["row_id"] + "/" + table["distractor"].astype(str),
                                  label=table["speculatively_correct"])
            agreement = {"annotators": int(table["annotator"].nunique()), "light_kappa": light_kappa(labels)}
        if bad:
            files["rejected_annotations.parquet"] = to_parquet_bytes(pd.DataFrame(bad).astype({"reason": str}))
            agreement["rejected_annotations"] = len(bad)
    else:
        marks = read_verdicts(verdicts, known) if verdicts else {}
    data = distractors.copy()
    data["verified"] = data["id"].isin(marks.keys())
    data["correct_distractors"] = [sorted(marks.get(i, set())) for i in data["id"]]
    multi = int(sum(1 for v in data["correct_distractors"] if v))
    return StageOutput(data=data, files={"verification_sheet.jsonl": compute.jsonl_bytes(sheet),
                                         "verification_sheet.csv": buf.getvalue().encode(),
                                         "verification_sheet.html": sheet_html(sheet), **files},
                       notes={"verdicts": verdicts or None, "verified": int(data["verified"].sum()),
                              "distractors_to_verify": len(marked),
                              "distractors_marked_correct": int(sum(len(v) for v in data["correct_distractors"])),
                              "with_more_than_one_correct": multi,
                              "note": "no verdict file: correct answers = the published ones (or the gold) only"
                              if not verdicts else "", **({"agreement": agreement} if agreement else {})})


def fill_slots(published: list[str], correct: list[int], distractors: list[str]) -> list[str]:
    """The published choices with every slot not marked correct refilled by the new distractors, in order:
    the correct answers stay where they were published (so an answer index or label still holds)."""
    slots = [k for k in range(len(published)) if k not in set(correct)]
    if len(distractors) < len(slots):
        raise ValueError(f"{len(distractors)} distractor(s) for {len(slots)} slot(s)")
    choices = list(published)
    for k, d in zip(slots, distractors):
        choices[k] = d
    return choices


def shuffle_choices(seed: int, instance_id: str, gold: str, distractors: list[str],
                    correct_distractors: list[int]) -> tuple[list[str], int, list[int]]:
    """(choices, index of the gold, indices of every correct choice) after the instance's seeded shuffle."""
    options = [gold] + list(distractors)
    correct = {0} | {j + 1 for j in correct_distractors}
    order = compute.rng(seed, instance_id).permutation(len(options))
    pos = {int(k): i for i, k in enumerate(order)}
    return [options[k] for k in order], pos[0], sorted(pos[c] for c in correct)
