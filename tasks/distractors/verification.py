"""Human verification round trip (SEEDS 1.6d) and the seeded shuffle of the final choices.

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
from csk.runtime import StageOutput
from readers.base import iter_json_lines


def read_verdicts(path: str, known: dict[str, list[str]]) -> dict[str, set[int]]:
    """JSON Lines {"id", "distractor" (index or text), "speculatively_correct": bool} -> correct indices."""
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
        if verdict is True:
            out.setdefault(iid, set()).add(int(idx))
        else:
            out.setdefault(iid, set())
    return out


def verification(distractors: pd.DataFrame, *, verdicts: InputPath = None) -> StageOutput:
    """Marking sheet out; annotators' verdicts in, where given.

    Args:
        verdicts: annotators' verdicts, JSON Lines {id, distractor, speculatively_correct}; unset: the
            correct answers are the gold only
    """
    sheet = [{"id": r.id, "distractor": j, "text": d, "gold": r.gold, "speculatively_correct": None}
             for r in distractors.itertuples() for j, d in enumerate(r.distractors)]
    buf = io.StringIO()
    pd.DataFrame(sheet, columns=["id", "distractor", "text", "gold", "speculatively_correct"]).to_csv(buf, index=False)
    known = {r.id: list(r.distractors) for r in distractors.itertuples()}
    marks = read_verdicts(verdicts, known) if verdicts else {}
    data = distractors[["id", "group_id", "gold", "distractors"]].copy()
    data["verified"] = data["id"].isin(marks.keys())
    data["correct_distractors"] = [sorted(marks.get(i, set())) for i in data["id"]]
    multi = int(sum(1 for v in data["correct_distractors"] if v))
    return StageOutput(data=data, files={"verification_sheet.jsonl": compute.jsonl_bytes(sheet),
                                         "verification_sheet.csv": buf.getvalue().encode()},
                       notes={"verdicts": verdicts or None, "verified": int(data["verified"].sum()),
                              "with_more_than_one_correct": multi,
                              "note": "no verdict file: correct answers = the gold only" if not verdicts else ""})


def shuffle_choices(seed: int, instance_id: str, gold: str, distractors: list[str],
                    correct_distractors: list[int]) -> tuple[list[str], int, list[int]]:
    """(choices, index of the gold, indices of every correct choice) after the instance's seeded shuffle."""
    options = [gold] + list(distractors)
    correct = {0} | {j + 1 for j in correct_distractors}
    order = compute.rng(seed, instance_id).permutation(len(options))
    pos = {int(k): i for i, k in enumerate(order)}
    return [options[k] for k in order], pos[0], sorted(pos[c] for c in correct)
