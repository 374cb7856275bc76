"""docs/method.md 4.4-4.5: the extraction tasks (12 relations per sample) and the event-relation extractor
that turns them into tuples (ACCENT's T5, fine-tuned with `csk deco train-extractor`).

docs/method.md 4.4's tuple validation: `extract` writes every tuple with the history and response it was read
from (`validation_sheet.jsonl`, the `tuple_validation` labeling step's rows: tasks/deco/labeling.py).
Three validators accept or reject each tuple in Label Studio; their export comes back through the
`validations` setting and a tuple is kept when a majority of its validators accepted it (the others are
rejected with their votes); every tuple keeps its votes and validators (`validators`,
`validation_annotation_ids`), every vote goes to `validations.parquet` with its lineage, the validators'
agreement (Light's and Fleiss' kappa, the unanimous share) into the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from csk import compute
from csk.errors import InputError
from csk.models import model_hash, resolve_model
from csk.params import Device, InputPath, ModelDir, Precision
from csk.runtime import StageContext, StageOutput, to_parquet_bytes
from readers.deco import RELATIONS, UTT
from tasks import seq2seq
from tasks.deco.agreement import fleiss_kappa
from tasks.deco.extraction import (NONE, OutputError, extraction_tasks, none_negatives, parse_output,  # noqa: F401
                                   prompt, tasks_of, training_pairs)
from tasks.labeling import export_rows, is_export, light_kappa, observed_agreement


TUPLE_COLUMNS = ("id", "task_id", "sample_id", "relation", "head", "tail", "setting", "origin", "output")
ACCEPT, REJECT = "accept", "reject"  # the tuple_validation step's choices (control `verdict`)


def history_and_response(relation: str, text: str) -> tuple[list[str], str]:
    """The history slots (as released, empty ones kept) and the response of an extractor input
    (`prompt + history, each slot followed by </UTT>, + response`)."""
    head = prompt(relation)
    body = text[len(head):] if text.startswith(head) else text
    *history, response = body.split(UTT)
    return history, response


def validation_sheet(tuples: pd.DataFrame, tasks: pd.DataFrame) -> list[dict]:
    """Every tuple with the history and response it was read from: what a validator is shown."""
    inputs = dict(zip(tasks["id"], zip(tasks["relation"], tasks["input"])))
    rows = []
    for t in tuples.itertuples():
        history, response = history_and_response(*inputs[t.task_id])
        rows.append({"id": t.id, "task_id": t.task_id, "sample_id": t.sample_id, "relation": t.relation,
                     "head": t.head, "tail": t.tail, "setting": t.setting if t.setting in ("single", "pair") else None,
                     "origin": t.origin, "history": history, "response": response})
    return rows


def label_studio_validations(path: str, tuples: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """(votes, rejected annotations) of the tuple_validation project's export: one vote per annotation,
    {row_id (the tuple), validator, accept} with the annotation's lineage. An annotation choosing neither
    accept nor reject, a validator's second vote on a tuple (the first counts), or one on a task whose tuple
    is not this run's (another head, relation or tail under the same id: the project was made from another
    run) is rejected with the reason."""
    rows, rejected = export_rows(path, set(tuples["id"]))
    shown = {t.get("id"): t.get("data") or {} for t in json.loads(Path(path).read_text(encoding="utf-8"))
             if isinstance(t, dict)}
    current = {t.id: (t.head, t.relation, t.tail) for t in tuples.itertuples()}
    votes, seen = [], set()
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        data = shown.get(r["ls_task_id"], {})
        was = tuple(data.get(k) for k in ("head", "relation", "tail"))
        chosen = r["values"].get("verdict", [])
        if all(was) and was != current[r["row_id"]]:
            rejected.append({**lineage, "reason_code": "tuple_changed",
                             "reason": f"validator {r['annotator']} judged {' / '.join(was)!r}, but tuple "
                                       f"{r['row_id']!r} is now {' / '.join(current[r['row_id']])!r}: the project "
                                       "was made from another run"})
        elif len(chosen) != 1 or chosen[0] not in (ACCEPT, REJECT):
            rejected.append({**lineage, "reason_code": "no_verdict",
                             "reason": f"validator {r['annotator']} chose {chosen!r}, not one of accept / reject"})
        elif (r["row_id"], r["annotator"]) in seen:
            rejected.append({**lineage, "reason_code": "second_vote",
                             "reason": f"validator {r['annotator']} voted twice on {r['row_id']!r}: the first counts"})
        else:
            seen.add((r["row_id"], r["annotator"]))
            votes.append({**lineage, "validator": r["annotator"], "accept": chosen[0] == ACCEPT})
    table = pd.DataFrame(votes, columns=["row_id", "annotator", "annotation_id", "ls_task_id", "created_at",
                                         "updated_at", "lead_time", "source_file", "source_record", "source_locator",
                                         "id", "validator", "accept"])
    return table.sort_values(["row_id", "annotation_id"], kind="stable").reset_index(drop=True), rejected


def apply_validations(data: pd.DataFrame, path: str) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict[str, bytes]]:
    """(kept tuples, tuples the validators rejected, agreement, files): a tuple is kept when more than half
    of the validators who voted on it accepted it; one nobody voted on is kept, `validated` false."""
    if not is_export(path):
        raise InputError(str(path), None, "deco.extract.validations expects Label Studio's JSON export of the "
                         "tuple_validation labeling step (`csk label pull deco tuple_validation`), a JSON list of "
                         "tasks with their annotations")
    table, bad = label_studio_validations(path, data)
    by = {i: g for i, g in table.groupby("row_id", sort=False)}
    empty = table.iloc[:0]
    df = data.copy()
    df["votes_accept"] = [int(by.get(i, empty)["accept"].sum()) for i in df["id"]]
    df["votes_reject"] = [int((~by.get(i, empty)["accept"].astype(bool)).sum()) for i in df["id"]]
    df["validated"] = (df["votes_accept"] + df["votes_reject"]) > 0
    df["validators"] = [[str(a) for a in by.get(i, empty)["validator"]] for i in df["id"]]
    df["validation_annotation_ids"] = [[int(a) for a in by.get(i, empty)["annotation_id"]] for i in df["id"]]
    removed = df["validated"] & ~(2 * df["votes_accept"] > df["votes_accept"] + df["votes_reject"])
    rejected = df[removed].assign(
        parent_id=df.loc[removed, "task_id"], reason_code="validators_rejected",
        reason=[f"{a} of {a + r} validators accepted the tuple: not a majority" for a, r in
                zip(df.loc[removed, "votes_accept"], df.loc[removed, "votes_reject"])])
    labels = table.assign(label=table["accept"])
    counts = [[int(g["accept"].sum()), int((~g["accept"].astype(bool)).sum())] for _, g in table.groupby("row_id")]
    agreement = {"validators": int(table["validator"].nunique()), "votes": len(table),
                 "validated_tuples": int(df["validated"].sum()), "unvalidated_tuples": int((~df["validated"]).sum()),
                 "rejected_tuples": int(removed.sum()), "rejected_annotations": len(bad),
                 "light_kappa": light_kappa(labels) if len(table) else None,
                 "fleiss_kappa": fleiss_kappa(counts),
                 "unanimous_share": observed_agreement(labels) if len(table) else None}
    files = {"validations.parquet": to_parquet_bytes(table.astype({"annotation_id": "Int64", "ls_task_id": "Int64"}))}
    if bad:
        files["rejected_annotations.parquet"] = to_parquet_bytes(pd.DataFrame(bad).astype({"reason": str}))
    return df[~removed].reset_index(drop=True), rejected, agreement, files


def extract(tasks: pd.DataFrame, *, extractor: ModelDir = None, num_beams: int = 10, max_length: int = 64,
            no_repeat_ngram_size: int = 2, samples_per_batch: int = 1,
            precision: Precision = "auto", device: Device = "auto", validations: InputPath = None,
            ctx: StageContext | None = None) -> StageOutput:
    """Event-relation tuples of every sample: the extractor's where one is configured, else the
    human (gold) tuples, said so in the manifest. Outputs that are `None` or break the target format
    are rejected with the reason (ACCENT drops them).

    Args:
        extractor: seq2seq directory of the event-relation extractor (ACCENT: T5-base fine-tuned by
            csk deco train-extractor); empty: the human tuples of annotated samples
        num_beams: beam width (ACCENT: 10; one sequence returned)
        max_length: longest output in tokens (ACCENT: 64)
        no_repeat_ngram_size: ACCENT: 2
        samples_per_batch: samples per generate call, 12 prompts each (ACCENT: 1; more on a GPU)
        precision: auto: bf16 where measured faster on this device (a GPU), else fp32
        device: auto: CUDA when a GPU is visible
        validations: Label Studio's JSON export of the tuple_validation labeling step (`csk label pull deco
            tuple_validation`): a tuple is kept when a majority of its validators accepted it; unset: every
            tuple is kept
    """
    rows, rejected = [], []
    if not extractor:
        for t in tasks.itertuples():
            for k, (target, setting) in enumerate(zip(t.gold_targets, t.gold_settings)):
                head, tail = parse_output(target)
                rows.append({"id": f"{t.id}#{k}", "task_id": t.id, "sample_id": t.sample_id, "relation": t.relation,
                             "head": head, "tail": tail, "setting": setting, "origin": "gold", "output": target})
            if len(t.gold_targets) == 0:
                rejected.append({"id": t.id, "parent_id": t.id, "reason_code": "no_tuple",
                                 "reason": "no human tuple of this relation" if t.annotated
                                 else "sample not annotated and no extractor configured"})
        notes = {"extractor": "none configured: the human (gold) tuples are the tuples",
                 "unannotated_samples": int((~tasks.groupby("sample_id")["annotated"].first()).sum())}
    else:
        path = resolve_model(extractor, "event-relation extractor", "deco.extract.extractor")
        dev = compute.device(device)
        decision = compute.precision(precision, dev)
        texts = tasks["input"].tolist()
        outs = seq2seq.generate(texts, path, num_return=1, num_beams=num_beams,
                                batch_size=len(RELATIONS) * samples_per_batch, precision=decision["precision"],
                                device=dev, desc="extract", max_length=max_length,
                                no_repeat_ngram_size=no_repeat_ngram_size, early_stopping=True)
        for t, (out,) in zip(tasks.itertuples(), outs):
            try:
                parsed = parse_output(out)
            except OutputError as exc:
                rejected.append({"id": t.id, "parent_id": t.id, "reason_code": exc.code,
                                 "reason": str(exc), "output": out})
                continue
            if parsed is None:
                rejected.append({"id": t.id, "parent_id": t.id, "reason_code": "no_tuple",
                                 "reason": "the extractor answered None", "output": out})
                continue
            rows.append({"id": t.id, "task_id": t.id, "sample_id": t.sample_id, "relation": t.relation,
                         "head": parsed[0], "tail": parsed[1], "setting": None, "origin": "extractor", "output": out})
        sha = model_hash(path)
        if ctx is not None:
            ctx.record_model("event-relation-extractor", str(path), sha, kind="seq2seq", device=dev,
                             precision=decision, generated=len(texts))
        notes = {"extractor": f"{Path(path).name}@{sha[:12]}", "precision": decision["precision"],
                 "decoding": {"num_beams": num_beams, "num_return_sequences": 1, "max_length": max_length,
                              "no_repeat_ngram_size": no_repeat_ngram_size}}
    data = pd.DataFrame(rows, columns=list(TUPLE_COLUMNS)).astype(dict.fromkeys(TUPLE_COLUMNS, "str"))
    files = {"validation_sheet.jsonl": compute.jsonl_bytes(validation_sheet(data, tasks))}
    extracted, tables = len(data), {}
    if validations:
        data, invalid, agreement, more = apply_validations(data, validations)
        files.update(more)
        rejected += invalid.to_dict("records")
        notes.update(validations=str(validations), agreement=agreement)
        tables["agreement"] = [{"measure": k, "value": v} for k, v in agreement.items()]
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None, files=files, tables=tables,
                       notes={**notes, "tuples": len(data), **({"extracted": extracted} if validations else {}),
                              "by_relation": data["relation"].value_counts().sort_index().to_dict()})


def train_extractor(base: str | Path, out: str | Path, train: list[Path], *, negatives: Path | None = None,
                    epochs: int = 50, batch_size: int = 4, lr: float = 5e-5, max_steps: int = 0,
                    none_single: int = 3, none_pair: int = 2, seed: int = 42) -> dict:
    """Fine-tune the extractor as ACCENT did (scripts/train_event_relation_extractor.sh: T5-base,
    50 epochs, batch 4, lr 5e-5, seed 42) on released DECO train files; "None" examples from
    ACCENT's none_sample CSV (context, response, relation, setting) when given, else drawn here."""
    from readers.deco import read_deco

    read = [read_deco(p, lenient=True) for p in train]  # a malformed sample is skipped and counted, not trained on
    samples = pd.concat([pd.DataFrame(r.rows) for r in read], ignore_index=True)
    if negatives is not None:
        pairs = training_pairs(samples, {}) + _read_negatives(negatives)
    else:
        pairs = training_pairs(samples, none_negatives(samples, single=none_single, pair=none_pair, seed=seed))
    info = {"train_files": [str(p) for p in train], "skipped_records": [x for r in read for x in r.rejected], "negatives": str(negatives) if negatives else "drawn",
            "tuples": sum(1 for p in pairs if p["target"] != NONE), "none_examples": sum(1 for p in pairs if p["target"] == NONE)}
    return seq2seq.fine_tune(base, out, [(p["source"], p["target"]) for p in pairs], epochs=epochs, lr=lr,
                             batch_size=batch_size, max_steps=max_steps, seed=seed, max_source_length=256,
                             max_target_length=128, desc="train extractor", info=info)


def _read_negatives(path: Path) -> list[dict]:
    """ACCENT's none_sample_5each.csv (context = the </UTT> history, response, relation, setting) as
    "None" training pairs."""
    from csk.errors import InputError
    from readers.base import RECORD_ERRORS, RecordError, csv_rows, record_problem
    from readers.deco import SPELLING, split_history
    from tasks.deco.extraction import model_input

    pairs = []
    header, rows = csv_rows(path)
    if not {"context", "response", "relation", "setting"} <= set(header):
        raise InputError(str(path), "line 1", f"expected ACCENT's none-sample CSV (context, response, relation, "
                         f"setting), got the header {header}")
    for n, r, problem in rows:
        try:
            if problem:
                raise RecordError(problem)
            rel = SPELLING.get(r["relation"], r["relation"])
            if rel not in RELATIONS or r["setting"] not in ("single", "pair"):
                raise RecordError(f"relation {r['relation']!r} / setting {r['setting']!r} unknown")
            pairs.append({"sample_id": None, "relation": rel, "setting": r["setting"], "target": NONE,
                          "source": model_input(rel, split_history(r["context"]), r["response"])})
        except RECORD_ERRORS as exc:
            raise InputError(str(path), f"line {n}", f"expected ACCENT's none-sample CSV: {record_problem(exc)}") from None
    return pairs
