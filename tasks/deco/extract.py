"""SEEDS 4.4-4.5: the extraction tasks (12 relations per sample) and the event-relation extractor
that turns them into tuples (ACCENT's T5, fine-tuned with `csk deco train-extractor`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from csk import compute
from csk.models import model_hash, resolve_model
from csk.params import Device, ModelDir, Precision
from csk.runtime import StageContext, StageOutput
from readers.deco import RELATIONS
from tasks import seq2seq
from tasks.deco.extraction import NONE, OutputError, none_negatives, parse_output, tasks_of, training_pairs


TUPLE_COLUMNS = ("id", "task_id", "sample_id", "relation", "head", "tail", "setting", "origin", "output")


def extraction_tasks(samples: pd.DataFrame, *, none_single: int = 3, none_pair: int = 2,
                     train_on_dev: bool = True, seed: int = 0) -> StageOutput:
    """One extractor input per sample and relation, with the human targets where there are tuples;
    the extractor's training pairs as `extractor_train.jsonl` (and `extractor_dev.jsonl`).

    Args:
        none_single: "None" examples per relation in the single setting (ACCENT: 3)
        none_pair: "None" examples per relation in the pair setting (ACCENT: 2)
        train_on_dev: the dev samples' tuples are trained on too (ACCENT's released script trains on
            the whole released train file); false: they go to extractor_dev.jsonl only
        seed: seed of the "None" examples
    """
    train = samples[samples["split"] == "train"]
    fit = train if train_on_dev else train[~train["dev"].astype(bool)]
    negatives = none_negatives(fit, single=none_single, pair=none_pair, seed=seed)
    data = pd.DataFrame(list(tasks_of(samples, negatives)),
                        columns=["id", "sample_id", "relation", "input", "gold_targets", "gold_settings", "annotated",
                                 "negative", "split", "dev"])
    pairs = training_pairs(fit, negatives)
    dev = training_pairs(train[train["dev"].astype(bool)], {}) if not train_on_dev else []
    per_relation = {rel: sum(1 for p in pairs if p["relation"] == rel and p["target"] != NONE) for rel in RELATIONS}
    return StageOutput(
        data=data, rows_in=len(samples),
        files={"extractor_train.jsonl": compute.jsonl_bytes(pairs), **({"extractor_dev.jsonl": compute.jsonl_bytes(dev)} if dev else {})},
        notes={"relations": list(RELATIONS), "training_pairs": len(pairs),
               "none_examples": sum(1 for p in pairs if p["target"] == NONE),
               "tuples_per_relation": per_relation,
               "annotated_samples": int(samples["tuples_single"].map(len).add(samples["tuples_pair"].map(len)).gt(0).sum())})


def extract(tasks: pd.DataFrame, *, extractor: ModelDir = None, num_beams: int = 10, max_length: int = 64,
            no_repeat_ngram_size: int = 2, samples_per_batch: int = 1,
            precision: Precision = "auto", device: Device = "auto",
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
    return StageOutput(data=data, rejected=pd.DataFrame(rejected) if rejected else None,
                       notes={**notes, "tuples": len(data),
                              "by_relation": data["relation"].value_counts().sort_index().to_dict()})


def train_extractor(base: str | Path, out: str | Path, train: list[Path], *, negatives: Path | None = None,
                    epochs: int = 50, batch_size: int = 4, lr: float = 5e-5, max_steps: int = 0,
                    none_single: int = 3, none_pair: int = 2, seed: int = 42) -> dict:
    """Fine-tune the extractor as ACCENT did (scripts/train_event_relation_extractor.sh: T5-base,
    50 epochs, batch 4, lr 5e-5, seed 42) on released DECO train files; "None" examples from
    ACCENT's none_sample CSV (context, response, relation, setting) when given, else drawn here."""
    from readers import read_deco

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
