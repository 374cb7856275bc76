"""The annotation quality check (CICERO section 3.3): every human answer is judged by three
checkers; an answer a majority judges invalid is removed (the paper kept 86%).

Verdicts come back as JSON Lines, one line per vote: `{"id": instance id, "checker": name,
"valid": true|false}` (the ids are the `annotations` artifact's; the stage writes
`quality_sheet.jsonl` for the checkers), or Label Studio's JSON export of the `quality_check` labeling
step (tasks/cicero/labeling.py): each annotation is a checker's vote, its annotator the checker, and the
instance keeps who voted (`checkers`, `vote_annotation_ids`); the checkers' agreement (Light's kappa,
the share of unanimous answers) goes into the manifest, rejected annotations into
`rejected_annotations.parquet`. Each instance is decided by the majority of its votes;
fewer than `min_votes` votes, or a tie, keeps the answer and flags it `checked = false`. Without
a verdict file nothing is removed and the manifest says so.
"""

from __future__ import annotations

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.params import InputPath
from csk.runtime import StageOutput, to_parquet_bytes
from readers.base import iter_json_lines
from tasks.labeling import export_rows, is_export, light_kappa, observed_agreement


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


def label_studio_votes(path: str, known: set[str]) -> tuple[pd.DataFrame, list[dict]]:
    """(votes, rejected annotations) of the quality_check project's export: one vote per annotation,
    {id, checker, valid} with the annotation's lineage; a checker's second vote on an answer, or an
    annotation that chose neither valid nor invalid, is rejected with the reason."""
    rows, rejected = export_rows(path, known)
    votes, seen = [], set()
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        chosen = r["values"].get("valid", [])
        if len(chosen) != 1 or chosen[0] not in ("valid", "invalid"):
            rejected.append({**lineage, "reason_code": "no_verdict",
                             "reason": f"checker {r['annotator']} chose {chosen!r}, not one of valid / invalid"})
        elif (r["row_id"], r["annotator"]) in seen:
            rejected.append({**lineage, "reason_code": "second_vote",
                             "reason": f"checker {r['annotator']} voted twice on {r['row_id']!r}: the first counts"})
        else:
            seen.add((r["row_id"], r["annotator"]))
            votes.append({**lineage, "checker": r["annotator"], "valid": chosen[0] == "valid"})
    return pd.DataFrame(votes), rejected


def quality_check(annotations: pd.DataFrame, *, verdicts: InputPath = None, min_votes: int = 3) -> StageOutput:
    """Remove the answers a majority of checkers judged invalid.

    Args:
        verdicts: the checkers' votes, JSON Lines {"id", "checker", "valid"}, or Label Studio's JSON export of
            the quality_check labeling step (`csk label pull cicero quality_check`); unset: no answer is removed
        min_votes: votes an answer needs to be decided (the paper: three checkers)
    """
    sheet = compute.jsonl_bytes(
        {"id": r.id, "dialogue": list(r.dialogue), "target": r.target, "question": r.question, "answer": r.answer}
        for r in annotations.itertuples())
    files, agreement, annotated = {}, {}, None
    if is_export(verdicts):
        table, bad = label_studio_votes(verdicts, set(annotations["id"]))
        votes = {i: list(g["valid"]) for i, g in table.groupby("row_id")} if len(table) else {}
        annotated = {i: g for i, g in table.groupby("row_id")} if len(table) else {}
        if bad:
            files["rejected_annotations.parquet"] = to_parquet_bytes(pd.DataFrame(bad).astype({"reason": str}))
        labels = table.assign(label=table["valid"]) if len(table) else table
        agreement = {"checkers": int(table["checker"].nunique()) if len(table) else 0,
                     "votes": len(table), "rejected_annotations": len(bad),
                     "light_kappa": light_kappa(labels) if len(table) else None,
                     "unanimous_share": observed_agreement(labels) if len(table) else None}
    else:
        votes = read_votes(verdicts, set(annotations["id"])) if verdicts else {}
    valid = [sum(votes.get(i, [])) for i in annotations["id"]]
    invalid = [len(votes.get(i, [])) - v for i, v in zip(annotations["id"], valid)]
    df = annotations.assign(votes_valid=valid, votes_invalid=invalid)
    if annotated is not None:  # who voted on each answer (Label Studio's users) and their annotations
        empty = pd.DataFrame({"checker": [], "annotation_id": []})
        df["checkers"] = [list(annotated.get(i, empty)["checker"].astype(str)) for i in df["id"]]
        df["vote_annotation_ids"] = [[int(a) for a in annotated.get(i, empty)["annotation_id"]] for i in df["id"]]
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
             "note": "" if verdicts else "no verdict file: every answer kept, none checked",
             **({"agreement": agreement} if agreement else {})}
    return StageOutput(data=kept, rejected=rejected, notes=notes, files={"quality_sheet.jsonl": sheet, **files},
                       tables={"quality_check": [{"measure": k, "value": v} for k, v in notes.items()
                                                 if isinstance(v, (int, float)) and v is not None],
                               **({"agreement": [{"measure": k, "value": v} for k, v in agreement.items()]}
                                  if agreement else {})})
