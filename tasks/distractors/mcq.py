"""Human verification round trip and the MCQ task files (SEEDS 1.6d, 1.7).

`verification` writes the marking sheet (one line per final distractor: is it speculatively
correct?) and, when a verdict file is configured, applies the verdicts: distractors marked
correct join the Correct Answers (the paper: ~14% of instances end with more than one).

`mcq` writes task 2.1 (instances with one correct answer) and 2.2 (all instances) in CICERO's
released JSON Lines format exactly, per split, with choice order shuffled by the seed.
"""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pandas as pd

from csk.errors import InputError
from csk.runtime import StageOutput, sha256_file
from readers.base import iter_json_lines

CICERO_KEYS = ("ID", "Dialogue", "Target", "Question", "Choices", "Human Written Answer", "Correct Answers")


def read_verdicts(path: str, known: dict[str, list[str]]) -> dict[str, set[int]]:
    """JSON Lines {"id", "distractor" (index or text), "speculatively_correct": bool} -> correct indices."""
    p = path
    out: dict[str, set[int]] = {}
    for n, obj in iter_json_lines(path):
        try:
            iid, d, verdict = str(obj["id"]), obj["distractor"], obj["speculatively_correct"]
        except (KeyError, TypeError) as exc:
            raise InputError(str(p), f"line {n}", f"expected {{id, distractor, speculatively_correct}}: {exc}") from None
        if iid not in known:
            raise InputError(str(p), f"line {n}", f"unknown instance id {iid!r}")
        options = known[iid]
        idx = d if isinstance(d, int) else (options.index(d) if d in options else None)
        if idx is None or not 0 <= idx < len(options):
            raise InputError(str(p), f"line {n}", f"distractor {d!r} is not one of instance {iid}'s distractors")
        if verdict is True:
            out.setdefault(iid, set()).add(int(idx))
        else:
            out.setdefault(iid, set())
    return out


def verdicts_fingerprint(params: dict) -> dict:
    return {"verdicts_sha256": sha256_file(params["verdicts"]) if params.get("verdicts") else None}


def verification(distractors: pd.DataFrame, *, verdicts: str = "") -> StageOutput:
    sheet = [{"id": r.id, "distractor": j, "text": d, "gold": r.gold, "speculatively_correct": None}
             for r in distractors.itertuples() for j, d in enumerate(r.distractors)]
    jsonl = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sheet)
    buf = io.StringIO()
    pd.DataFrame(sheet, columns=["id", "distractor", "text", "gold", "speculatively_correct"]).to_csv(buf, index=False)
    known = {r.id: list(r.distractors) for r in distractors.itertuples()}
    marks = read_verdicts(verdicts, known) if verdicts else {}
    data = distractors[["id", "dialogue_id", "gold", "distractors"]].copy()
    data["verified"] = data["id"].isin(marks.keys())
    data["correct_distractors"] = [sorted(marks.get(i, set())) for i in data["id"]]
    multi = int(sum(1 for v in data["correct_distractors"] if v))
    return StageOutput(data=data, files={"verification_sheet.jsonl": jsonl.encode(),
                                         "verification_sheet.csv": buf.getvalue().encode()},
                       notes={"verdicts": verdicts or None, "verified": int(data["verified"].sum()),
                              "with_more_than_one_correct": multi,
                              "note": "no verdict file: Correct Answers = the gold only" if not verdicts else ""})


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "little"))


def mcq(verified: pd.DataFrame, instances: pd.DataFrame, *splits_input: pd.DataFrame, seed: int = 0) -> StageOutput:
    inst = instances.set_index("id")
    split_of = dict(zip(splits_input[0]["id"], splits_input[0]["split"])) if splits_input else {}
    rows = []
    for r in verified.itertuples():
        a = inst.loc[r.id]
        options = [r.gold] + list(r.distractors)
        correct = {0} | {j + 1 for j in r.correct_distractors}
        order = _rng(seed, r.id).permutation(len(options))
        choices = [options[k] for k in order]
        pos = {int(k): i for i, k in enumerate(order)}
        rows.append({"id": r.id, "split": split_of.get(r.id, "all"), "ID": str(a["cicero_id"]),
                     "Dialogue": list(a["dialogue"]), "Target": str(a["target"]), "Question": str(a["question"]),
                     "Choices": choices, "Human Written Answer": [pos[0]],
                     "Correct Answers": sorted(pos[c] for c in correct)})
    data = pd.DataFrame(rows)
    data["n_correct"] = data["Correct Answers"].map(len) if len(data) else []
    files = {}
    for task, subset in (("2.1_single_answer", data[data["n_correct"] == 1] if len(data) else data),
                         ("2.2_all_answers", data)):
        for split, group in subset.groupby("split", sort=True) if len(subset) else []:
            lines = "".join(json.dumps({k: r[k] for k in CICERO_KEYS}, ensure_ascii=False) + "\n"
                            for r in group.to_dict(orient="records"))
            files[f"mcq/{task}/{split}.jsonl"] = lines.encode()
    counts = data.groupby("split").agg(instances=("id", "size"), single_answer=("n_correct", lambda s: int((s == 1).sum())))
    return StageOutput(data=data, files=files,
                       tables={"mcq": counts.reset_index().to_dict(orient="records") if len(data) else []})
