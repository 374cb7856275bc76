"""docs/method.md 4.3: a seeded selection of N samples split train / test, with the dev slice of train
(DECO: 300 = 200 train + 100 test; the released train marks 40 as dev). Samples read from a
release keep the split they were released in.

docs/method.md 4.4's ratings: a released sample carries its raters' ratings (`event_cs_raw`, `general_cs_raw`)
and their means (`event_cs`, `general_cs`). Ratings collected in Label Studio (the `ratings` labeling
step, tasks/deco/labeling.py: three raters per sample) come back through the `ratings` setting: each
rater's two ratings become the sample's raw lists, in the order rated, and their means its scores, as
the release carries them, so the agreement and correlation stages read them unchanged; the sample keeps
who rated (`raters`, `rating_annotation_ids`), every annotation goes to `ratings.parquet` with its
lineage, the raters' agreement into the manifest (`agreement`), rejected annotations into
`rejected_annotations.parquet`.

docs/method.md 4.4's tuples: people wrote the event-relation tuples. Tuples written in Label Studio (the
`tuples` labeling step: one task per response and relation) come back through the `tuples` setting: a
sample written on carries the written tuples in place of what it carried, `single` ones in
`tuples_single`, `pair` ones in `tuples_pair`, in relation order, as the release carries them, so the
extraction tasks, the extractor's training targets and the tuple validation read them unchanged; the
sample names its writers (`writers`); every answer (a tuple, or none for a relation) goes to
`written_tuples.parquet` with its lineage, rejected answers (one event of two, no setting) to
`rejected_tuples.parquet` with the reason."""

from __future__ import annotations

import json

from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import Field

from csk import compute
from csk.errors import ConfigError, InputError
from csk.params import InputPath
from csk.runtime import StageOutput, to_parquet_bytes
from readers.deco import RELATIONS, join_history
from tasks.deco.agreement import inter_annotator
from tasks.labeling import export_rows, is_export, one, pairwise_spearman

RATINGS = ("event_cs", "general_cs")  # the ratings step's two Rating controls (1-5), as the release names them


def _num(v):
    return None if v is None or (isinstance(v, float) and v != v) else v


def _guid(g, k: int):
    g = _num(g)
    return k if g is None else int(g) if str(g).isdigit() else g


def _rating(x):
    """A rater's score as released: an integer where it is one (the release writes [2, 4, 2])."""
    x = float(x)
    return int(x) if x.is_integer() else x


def release_json(rows: pd.DataFrame) -> bytes:
    """Samples in DECO's released JSON layout, as the release writes it (one line, `json.dumps`'s
    defaults, integer ratings as integers, no final newline): an imported release re-exported in its
    order is its bytes. `read_deco` reads it back."""
    out = []
    for k, r in enumerate(rows.itertuples()):
        raw = lambda v: None if v is None or (not hasattr(v, "__len__")) else [_rating(x) for x in v]  # noqa: E731
        out.append({"history": join_history(list(r.history)), "response": r.response, "source": r.corpus,
                    "system": _num(r.system), "GUID": _guid(r.guid, k), "general_cs_raw": raw(r.general_cs_raw),
                    "event_cs_raw": raw(r.event_cs_raw),
                    "tuples_single": [list(map(str, t)) for t in r.tuples_single],
                    "tuples_pair": [list(map(str, t)) for t in r.tuples_pair],
                    "general_cs": _num(r.general_cs), "event_cs": _num(r.event_cs), "for_dev": bool(r.dev)})
    return json.dumps(out).encode()


def _draw(pool: pd.DataFrame, order, n: int, quota: dict[str, dict[str, int]]):
    """Positions (into `pool`) of the samples drawn, in draw order: the seeded permutation walked in
    order, a sample taken while every quota it falls under has room. A column's values not named in
    its quota share what the named ones leave of n, so quotas over two columns (system and corpus)
    hold together as far as the pool allows; what a quota could not fill is reported, never padded."""
    if not quota:
        return list(order[:n])
    room = {}
    for column, counts in quota.items():
        if column not in pool.columns:
            raise ConfigError(f"deco.sample.quota: no column {column!r}; quota columns are 'system' and 'corpus'")
        named = sum(counts.values())
        if named > n:
            raise ConfigError(f"deco.sample.quota.{column}: {named} samples named but n = {n}; lower the quotas or raise n")
        room[column] = {**{str(v): int(c) for v, c in counts.items()}, None: n - named}
    taken = []
    for i in order:
        if len(taken) == n:
            break
        keys = {c: (str(pool[c].iat[i]) if str(pool[c].iat[i]) in room[c] else None) for c in room}
        if all(room[c][k] > 0 for c, k in keys.items()):
            taken.append(i)
            for c, k in keys.items():
                room[c][k] -= 1
    return taken


def label_studio_ratings(path: str, known: set[str]) -> tuple[pd.DataFrame, list[dict]]:
    """(ratings, rejected annotations) of the ratings project's export: one row per annotation with its
    sample (`row_id`), `event_cs` and `general_cs` (1-5) and its lineage (annotator, annotation and task
    ids, times, the export file and task). An annotation without both ratings, or a rater's second one of
    a sample (the first counts), is rejected with the reason."""
    rows, rejected = export_rows(path, known)
    out, seen = [], set()
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        given = {k: r["values"].get(k) for k in RATINGS}
        missing = [k for k, v in given.items() if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 5]
        if missing:
            rejected.append({**lineage, "reason_code": "missing_rating",
                             "reason": f"rater {r['annotator']} gave no 1-5 rating of {' and '.join(missing)} "
                                       f"({given})"})
        elif (r["row_id"], r["annotator"]) in seen:
            rejected.append({**lineage, "reason_code": "second_rating",
                             "reason": f"rater {r['annotator']} rated {r['row_id']!r} twice: the first counts"})
        else:
            seen.add((r["row_id"], r["annotator"]))
            out.append({**lineage, **given})
    table = pd.DataFrame(out, columns=["row_id", "annotator", "annotation_id", "ls_task_id", "created_at",
                                       "updated_at", "lead_time", "source_file", "source_record", "source_locator",
                                       "id", *RATINGS])
    return table.sort_values(["row_id", "annotation_id"], kind="stable").reset_index(drop=True), rejected


def _finite(v: float | None) -> float | None:
    return None if v is None or v != v else float(v)


def _read_export(path: str, step: str, reader, data: pd.DataFrame, by: str):
    """(table, rejected, sample id -> its rows) of a step's Label Studio export, read by `reader`."""
    if not is_export(path):
        raise InputError(str(path), None, f"deco.sample.{step} expects Label Studio's JSON export of the {step} "
                         f"labeling step (`csk label pull deco {step}`), a JSON list of tasks with their annotations")
    table, bad = reader(path, set(data["id"]))
    return table, bad, {i: g for i, g in table.groupby(by, sort=False)}


def apply_ratings(data: pd.DataFrame, path: str) -> tuple[pd.DataFrame, dict, dict[str, bytes]]:
    """The samples with the ratings of Label Studio's export in place of what they carried (a sample no
    rater rated keeps its released ratings, or none): (samples, agreement, files)."""
    table, bad, by = _read_export(path, "ratings", label_studio_ratings, data, "row_id")
    data = data.copy()
    for k in RATINGS:
        data[f"{k}_raw"] = [[float(x) for x in by[i][k]] if i in by else raw for i, raw in
                            zip(data["id"], data[f"{k}_raw"])]
        data[k] = [float(np.mean(by[i][k])) if i in by else v for i, v in zip(data["id"], data[k])]
    data = data.astype({k: float for k in RATINGS})
    data["raters"] = [[str(a) for a in by[i]["annotator"]] if i in by else [] for i in data["id"]]
    data["rating_annotation_ids"] = [[int(a) for a in by[i]["annotation_id"]] if i in by else [] for i in data["id"]]
    rated = data[data["id"].isin(by)]
    agreement = {"raters": int(table["annotator"].nunique()), "annotations": len(table),
                 "rated_samples": len(rated), "unrated_samples": int(len(data) - len(rated)),
                 "rejected_annotations": len(bad)}
    for k in RATINGS:
        agreement[f"pairwise_spearman_{k}"] = pairwise_spearman(table, value=k) if len(table) else None
        agreement[f"inter_annotator_spearman_{k}"] = _finite(inter_annotator(
            [r for r in rated[f"{k}_raw"] if len(r)]))
    files = {"ratings.parquet": to_parquet_bytes(table.astype({"annotation_id": "Int64", "ls_task_id": "Int64"}))}
    if bad:
        files["rejected_annotations.parquet"] = to_parquet_bytes(pd.DataFrame(bad).astype({"reason": str}))
    return data, agreement, files


SETTINGS = ("single", "pair")  # the tuples step's choice: both events from the response, or event1 from the turn before
NONE = "none"  # its third: the conversation has no such pair of events


def label_studio_tuples(path: str, known: set[str]) -> tuple[pd.DataFrame, list[dict]]:
    """(answers, rejected) of the tuples project's export: one row per annotation of a task
    `SAMPLE#RELATION` with the tuple written (`event1`, `event2`, `setting`), or none (setting `none`,
    the boxes empty), and its lineage. One event of two, events beside `none`, or no setting at all is
    rejected with the reason."""
    tasks = {f"{sid}#{rel}" for sid in known for rel in RELATIONS}
    rows, rejected = export_rows(path, tasks)
    out = []
    for r in rows:
        lineage = {k: v for k, v in r.items() if k != "values"}
        sid, rel = r["row_id"].rsplit("#", 1)
        head, tail = (str(one(r["values"], k, "") or "").strip() for k in ("event1", "event2"))
        setting = one(r["values"], "setting")
        if setting == NONE and (head or tail):
            rejected.append({**lineage, "reason_code": "events_with_none",
                             "reason": f"writer {r['annotator']} chose none for {rel} but wrote an event: which holds?"})
        elif setting != NONE and bool(head) != bool(tail):
            rejected.append({**lineage, "reason_code": "half_tuple",
                             "reason": f"writer {r['annotator']} wrote event{1 if head else 2} of {rel} but not "
                                       f"event{2 if head else 1}: a tuple needs both"})
        elif setting not in (*SETTINGS, NONE):
            rejected.append({**lineage, "reason_code": "no_setting",
                             "reason": f"writer {r['annotator']} answered {rel} without choosing single, pair or none "
                                       f"({setting!r})"})
        else:
            out.append({**lineage, "sample_id": sid, "relation": rel, "event1": head or None, "event2": tail or None,
                        "setting": setting if head else None})
    table = pd.DataFrame(out, columns=["row_id", "sample_id", "relation", "event1", "event2", "setting", "annotator",
                                       "annotation_id", "ls_task_id", "created_at", "updated_at", "lead_time",
                                       "source_file", "source_record", "source_locator", "id"])
    order = {rel: k for k, rel in enumerate(RELATIONS)}
    table = table.assign(_order=table["relation"].map(order)).sort_values(
        ["sample_id", "_order", "annotation_id"], kind="stable").drop(columns="_order")
    return table.reset_index(drop=True), rejected


def apply_tuples(data: pd.DataFrame, path: str) -> tuple[pd.DataFrame, dict, dict[str, bytes]]:
    """The samples with the tuples of Label Studio's export in place of what they carried (a sample no one
    wrote on keeps its released tuples, or none): (samples, notes, files)."""
    table, bad, by = _read_export(path, "tuples", label_studio_tuples, data, "sample_id")
    data = data.copy()
    for setting in SETTINGS:
        data[f"tuples_{setting}"] = [
            [[h, rel, t] for h, rel, t, s in zip(by[i]["event1"], by[i]["relation"], by[i]["event2"], by[i]["setting"])
             if s == setting] if i in by else list(v) for i, v in zip(data["id"], data[f"tuples_{setting}"])]
    data["writers"] = [sorted(set(by[i]["annotator"].astype(str))) if i in by else [] for i in data["id"]]
    written = table[table["event1"].notna()]
    notes = {"writers": int(table["annotator"].nunique()), "answers": len(table), "tuples": len(written),
             "none_answers": int(table["event1"].isna().sum()), "samples_written": len(by),
             "tuples_by_relation": written["relation"].value_counts().reindex(list(RELATIONS), fill_value=0).to_dict(),
             "rejected_answers": len(bad)}
    files = {"written_tuples.parquet": to_parquet_bytes(table.astype({"annotation_id": "Int64", "ls_task_id": "Int64"}))}
    if bad:
        files["rejected_tuples.parquet"] = to_parquet_bytes(pd.DataFrame(bad).astype({"reason": str}))
    return data, notes, files


def sample(samples: pd.DataFrame, *, n: int = 300, train: int = 200, dev: int = 40,
           quota: dict[str, dict[str, Annotated[int, Field(ge=0)]]] | None = None, seed: int = 0,
           ratings: InputPath = None, tuples: InputPath = None) -> StageOutput:
    """Selected samples with `split` (train / test) and `dev`; the others rejected as not_sampled.

    Args:
        n: samples to select among those without a released split (the paper: 300)
        train: of the n, how many go to train; the rest is test (the paper: 200)
        dev: of train, how many are marked dev (the release: 40)
        quota: column (`system`, `corpus`) -> value -> how many of the n have it, e.g.
            {system = {Human = 45}}; values not named share the rest. None: whatever the pool holds
        seed: seed of the selection and the split
        ratings: Label Studio's JSON export of the ratings labeling step (`csk label pull deco ratings`): each
            rater's event_cs and general_cs (1-5) of the samples, which replace their released ratings (the
            means become event_cs / general_cs); unset: the released ratings, none for built samples
        tuples: Label Studio's JSON export of the tuples labeling step (`csk label pull deco tuples`): the
            event-relation tuples people wrote, which replace the tuples of the samples written on; unset:
            the released tuples, none for built samples
    """
    if not 0 <= dev <= train <= n:
        raise ConfigError(f"deco.sample: need 0 <= dev <= train <= n, got dev={dev}, train={train}, n={n}")
    quota = {c: dict(v) for c, v in (quota or {}).items()}
    released = samples["split"].notna()
    kept = samples[released].assign(dev=samples.loc[released, "for_dev"].astype(bool), selection="released")
    pool = samples[~released].sort_values("id")
    order = compute.rng(seed, "deco-sample").permutation(len(pool))
    taken = _draw(pool, order, n, quota)
    chosen = pool.iloc[taken]
    k_train = min(train, len(chosen)) if len(chosen) >= n else round(len(chosen) * train / n)
    k_dev = min(dev, k_train) if len(chosen) >= n else round(len(chosen) * dev / n)
    split = ["train"] * k_train + ["test"] * (len(chosen) - k_train)
    drawn = chosen.assign(split=split, dev=[i < k_dev for i in range(len(chosen))], selection="sampled",
                          for_dev=[i < k_dev for i in range(len(chosen))])
    short = {}
    for column, counts in quota.items():
        have = chosen[column].astype(str).value_counts()
        short.update({f"{column}={v}": c - int(have.get(str(v), 0)) for v, c in counts.items()
                      if int(have.get(str(v), 0)) < c})
    left = np.ones(len(pool), bool)
    left[taken] = False
    rest = pool[left]
    # in the order read (a release's own order), built samples by their source line
    data = pd.concat([f for f in (kept, drawn) if len(f)] or [kept]).sort_values(
        ["source_file", "source_record", "id"], kind="stable")
    data = data.astype({"dev": bool, "for_dev": bool, "split": "str"}).reset_index(drop=True)
    agreement, files = {}, {}
    if ratings:
        data, agreement, files = apply_ratings(data, ratings)
    written = {}
    if tuples:
        data, written, more = apply_tuples(data, tuples)
        files = {**files, **more}
    counts = data.groupby(["split", "dev"]).size()
    return StageOutput(
        data=data, files={**{f"deco_{split}.json": release_json(rows) for split, rows in data.groupby("split")},
                          **files},
        tables={"agreement": [{"measure": k, "value": v} for k, v in agreement.items()]} if agreement else {},
        rejected=rest.assign(reason_code="not_sampled",
                             reason=f"not among the {n} samples drawn (seed {seed}{', quotas' if quota else ''})"),
        notes={"released": int(released.sum()), "drawn": len(drawn), "candidates": len(pool),
               **({"short": f"only {len(pool)} candidates for n={n}: train/dev scaled to {k_train}/{k_dev}"}
                  if len(pool) < n else {}),
               **({"quota": quota, "drawn_by": {c: chosen[c].astype(str).value_counts().sort_index().to_dict()
                                                 for c in quota}} if quota else {}),
               **({"short_of_quota": short} if short else {}),
               "splits": {f"{s}{' (dev)' if d else ''}": int(c) for (s, d), c in counts.items()},
               **({"ratings": str(ratings), "agreement": agreement} if ratings else {}),
               **({"tuples": str(tuples), "written": written} if tuples else {})})
