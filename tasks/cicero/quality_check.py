"""The annotation quality check (CICERO section 3.3): every human answer is judged by three
checkers; an answer a majority judges invalid is removed (the paper kept 86%).

Verdicts come back as JSON Lines, one line per vote: `{"id": instance id, "checker": name,
"valid": true|false}` (the ids are the `annotations` artifact's; the stage writes
`quality_sheet.jsonl` for the checkers). Each instance is decided by the majority of its votes;
fewer than `min_votes` votes, or a tie, keeps the answer and flags it `checked = false`. Without
a verdict file nothing is removed and the manifest says so.
"""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.params import InputPath
from csk.runtime import StageOutput
from readers.base import iter_json_lines


def read_votes(path: str, known: set[str]) -> dict[str, list[bool]]:
    votes: dict[str, dict[str, bool]] = {}
    for n, obj in iter_json_lines(path):
        if not isinstance(obj, dict) or not {"id", "checker", "valid"} <= set(obj) or not isinstance(obj["valid"], bool):
            raise InputError(str(path), f"line {n}", 'expected {"id", "checker", "valid": true|false}')
        iid = str(obj["id"])
        if iid not in known:
            raise InputError(str(path), f"line {n}", f"unknown instance id {iid!r} (ids are the annotations artifact's)")
        checker = str(obj["checker"])
        if checker in votes.setdefault(iid, {}):
            raise InputError(str(path), f"line {n}", f"checker {checker!r} voted twice on {iid!r}")
        votes[iid][checker] = obj["valid"]
    return {iid: list(v.values()) for iid, v in votes.items()}


def quality_check(annotations: pd.DataFrame, *, verdicts: InputPath = None, min_votes: int = 3) -> StageOutput:
    """Remove the answers a majority of checkers judged invalid.

    Args:
        verdicts: the checkers' votes, JSON Lines {"id", "checker", "valid"}; unset: no answer is removed
        min_votes: votes an answer needs to be decided (the paper: three checkers)
    """
    sheet = compute.jsonl_bytes(
        {"id": r.id, "dialogue": list(r.dialogue), "target": r.target, "question": r.question, "answer": r.answer}
        for r in annotations.itertuples())
    votes = read_votes(verdicts, set(annotations["id"])) if verdicts else {}
    valid = [sum(votes.get(i, [])) for i in annotations["id"]]
    invalid = [len(votes.get(i, [])) - v for i, v in zip(annotations["id"], valid)]
    df = annotations.assign(votes_valid=valid, votes_invalid=invalid)
    decided = (df["votes_valid"] + df["votes_invalid"] >= min_votes) & (df["votes_valid"] != df["votes_invalid"])
    df["checked"] = decided
    removed = decided & (df["votes_invalid"] > df["votes_valid"])
    rejected = df[removed].assign(
        reason_code="checkers_judged_invalid",
        reason=[f"{b} of {a + b} checkers judged the answer invalid" for a, b in
                zip(df.loc[removed, "votes_valid"], df.loc[removed, "votes_invalid"])])
    kept = df[~removed]
    notes = {"verdicts": verdicts or None, "instances": len(df), "decided": int(decided.sum()),
             "removed": int(removed.sum()), "kept_share_of_decided": float((decided & ~removed).sum() / decided.sum())
             if decided.any() else None, "paper_kept_share": 0.86,
             "note": "" if verdicts else "no verdict file: every answer kept, none checked"}
    return StageOutput(data=kept, rejected=rejected, notes=notes, files={"quality_sheet.jsonl": sheet},
                       tables={"quality_check": [{"measure": k, "value": v} for k, v in notes.items()
                                                 if isinstance(v, (int, float)) and v is not None]})
