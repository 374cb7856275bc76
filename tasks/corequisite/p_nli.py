"""docs/method.md 2.4, P-NLI and P-G in the released CSV layouts, and Parquet: P-NLI one file per split named
as released (`PaCo_nli_train.csv`, `PaCo_nli_eval.csv` for dev, `PaCo_nli_test.csv`), P-G one file
(`PaCo_Gen.csv`, as released; per split on request)."""

from __future__ import annotations

import csv
import io

import pandas as pd

from csk.runtime import StageOutput

LABEL = {"enabling": 1, "disabling": 0}
RELEASE_SPLIT = {"train": "train", "dev": "eval", "test": "test"}  # the release names its dev split "eval"


def csv_bytes(header: list[str], rows: list[list]) -> bytes:
    """The release's CSV dialect: minimal quoting, "\\n" line ends (re-exports are byte-identical)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def p_nli(answers: pd.DataFrame, splits: pd.DataFrame) -> StageOutput:
    """Premise = the precondition, hypothesis = the fact; enabling -> 1 (entailment), disabling -> 0."""
    split = dict(zip(splits["id"], splits["split"]))
    data = pd.DataFrame({"id": answers["id"], "fact_id": answers["fact_id"], "context": answers["answer"],
                         "question": answers["statement"], "label": answers["polarity"].map(LABEL).astype(int),
                         "split": answers["id"].map(split)})
    files = {f"PaCo_nli_{RELEASE_SPLIT[s]}.csv": csv_bytes(["context", "question", "label"],
                                            part[["context", "question", "label"]].values.tolist())
             for s, part in data.groupby("split", sort=False)}
    balance = data.groupby(["split", "label"]).size().rename("n").reset_index().to_dict(orient="records")
    return StageOutput(data=data, files=files, notes={"label_balance": balance})


def p_g(answers: pd.DataFrame, splits: pd.DataFrame, *, per_split: bool = False) -> StageOutput:
    """Prompt = the fact + its question (as released: "<fact> What makes this possible? "); the answers
    are the references.

    Args:
        per_split: write `PaCo_Gen_{train,eval,test}.csv` instead of the release's one `PaCo_Gen.csv`
            (the split of each prompt is in the Parquet either way)
    """
    split = dict(zip(splits["id"], splits["split"]))
    rows = []
    for (fid, polarity), group in _release_order(answers):
        first = group.iloc[0]
        rows.append({"id": f"{fid}/{polarity}", "answer_id": first["id"], "fact_id": fid, "polarity": polarity,
                     "prompt": f"{first['statement']} {first['question']} ", "references": group["answer"].tolist(),
                     "answer_ids": group["id"].tolist(), "split": split[first["id"]]})
    data = pd.DataFrame(rows, columns=["id", "answer_id", "fact_id", "polarity", "prompt", "references", "answer_ids",
                                       "split"])
    width = max([3] + [len(r) for r in data["references"]])
    header = ["prompt"] + [f"refs_{i}" for i in range(width)]
    parts = data.groupby("split", sort=False) if per_split else [(None, data)]
    files = {f"PaCo_Gen_{RELEASE_SPLIT[s]}.csv" if s else "PaCo_Gen.csv":
             csv_bytes(header, [[p] + list(r) + [""] * (width - len(r)) for p, r in zip(part["prompt"], part["references"])])
             for s, part in parts}
    return StageOutput(data=data, files=files, rows_in=len(data))


def _release_order(answers: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """The (fact, polarity) groups of the answers in the order read; answers imported from a release's
    P-G file (`release_gen_row`, `release_gen_ref`) in that file's order of rows and references, a release
    directory's P-NLI answers that P-G repeats at P-G's place, the rest after them as read."""
    groups = list(answers.groupby(["fact_id", "polarity"], sort=False))
    if "release_gen_row" not in answers.columns or not answers["release_gen_row"].notna().any():
        return groups
    last = float("inf")

    def place(v) -> float:
        return last if pd.isna(v) else float(v)

    out = []
    for key, g in groups:
        order = sorted(range(len(g)), key=lambda k: (place(g["release_gen_ref"].iloc[k]), k))
        out.append((key, g.iloc[order]))
    out.sort(key=lambda kg: min(place(v) for v in kg[1]["release_gen_row"]))  # stable: the rest as read
    return out
