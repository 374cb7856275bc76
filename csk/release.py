"""Publishing a run: a dataset card and a release directory, both from the latest run's manifests
(the lineage of record), never from a re-run.

* `card`: a Hugging Face dataset card (YAML metadata by `huggingface_hub.DatasetCardData`, then
  description, sources with their licences and sha256, the construction steps with the parameters
  actually used and their counts and rejection reasons, counts per split, known deviations from the
  paper, and the fidelity figures where the pipeline measures them).
* `export`: `data/{split}-00000-of-00001.parquet` (what `datasets.load_dataset("parquet",
  data_dir=DIR)` and DuckDB's `read_parquet('DIR/data/*.parquet')` read directly), the released file
  formats the stages wrote under `release/<stage>/`, the card as README.md and SHA256SUMS.

A pipeline says what its dataset is with `Pipeline(release=Release(...))`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from csk.errors import CskError
from csk.runtime import Store, read_parquet


@dataclass(frozen=True)
class Release:
    """What a pipeline publishes.

    table: the stage whose rows are the dataset.
    split_stage: a stage holding each row's `split` (joined by id) when `table` has no split column.
    files: stages whose extra files (the paper's released formats) go under release/<stage>/.
    licences: source setting (as in pipelines.toml) -> licence of that corpus.
    deviations: known deviations from the paper, one sentence each.
    """

    table: str
    split_stage: str | None = None
    files: tuple[str, ...] = ()
    pretty_name: str = ""
    language: tuple[str, ...] = ("en",)
    license: str = "other"
    task_categories: tuple[str, ...] = ()
    citation: str = ""
    licences: dict[str, str] = field(default_factory=dict)
    deviations: tuple[str, ...] = ()


def _pipeline_release(pipeline: str) -> tuple[object, Release]:
    from csk.pipeline import get_pipeline

    p = get_pipeline(pipeline)
    if p.release is None:
        raise CskError(f"pipeline {pipeline!r} declares no release (Pipeline(release=Release(...)) in flows/{pipeline}.py)")
    return p, p.release


def _entries(store: Store, pipeline: str) -> dict[str, dict]:
    run = store.latest_run(pipeline)
    return {s["stage"]: {**s, "manifest": json.loads((Path(s["path"]) / "manifest.json").read_text())}
            for s in run["stages"]}


def dataset_table(store: Store, pipeline: str) -> pd.DataFrame:
    """The released rows with their split, from the latest run."""
    _, rel = _pipeline_release(pipeline)
    entries = _entries(store, pipeline)
    if rel.table not in entries:
        raise CskError(f"the latest {pipeline} run has no {rel.table!r} artifact to release")
    df = read_parquet(Path(entries[rel.table]["path"]) / "data.parquet")
    if "split" not in df.columns:
        if not rel.split_stage or rel.split_stage not in entries:
            raise CskError(f"{pipeline}: {rel.table!r} has no split column and no split stage ran")
        splits = read_parquet(Path(entries[rel.split_stage]["path"]) / "data.parquet")[["id", "split"]]
        df = df.merge(splits, on="id", how="left", validate="one_to_one")
        missing = df["split"].isna()
        if missing.any():
            raise CskError(f"{pipeline}: {int(missing.sum())} rows of {rel.table!r} have no split in "
                           f"{rel.split_stage!r} (e.g. {df.loc[missing, 'id'].head(3).tolist()}); rerun the pipeline")
    return df


def _size_category(n: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < bound:
            return name
    return "n>1M"


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |")
    return "\n".join(lines)


def card(store: Store, pipeline: str) -> str:
    """The dataset card (README.md) of the latest run."""
    from huggingface_hub import DatasetCard, DatasetCardData

    p, rel = _pipeline_release(pipeline)
    entries = _entries(store, pipeline)
    table = dataset_table(store, pipeline)
    counts = table["split"].value_counts().sort_index()
    data = DatasetCardData(
        pretty_name=rel.pretty_name or p.name, language=list(rel.language), license=rel.license,
        task_categories=list(rel.task_categories) or None, size_categories=_size_category(len(table)),
        configs=[{"config_name": "default",
                  "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in counts.index]}])
    out = [f"# {rel.pretty_name or p.name}", "", p.doc, "",
           f"Rebuilt by the `{pipeline}` pipeline of csk; run `{store.latest_run(pipeline)['run_id']}`.", ""]
    out += ["## Sources", "", "| setting | file | sha256 | licence |", "|---|---|---|---|"]
    seen = set()
    for name, e in entries.items():
        for f in e["manifest"].get("files", []):
            if (f["param"], f["path"]) in seen:
                continue
            seen.add((f["param"], f["path"]))
            out.append(f"| {name}.{f['param']} | `{f['path']}` | `{f['sha256']}` | "
                       f"{rel.licences.get(f['param'], 'see the corpus')} |")
    out += ["", "## Construction steps", ""]
    for name, e in entries.items():
        m, r = e["manifest"], e["rows"]
        lines = (p.stage(name).fn.__doc__ or "").strip().splitlines() if name in {s.name for s in p.stages} else []
        doc = lines[0] if lines else ""
        reasons = ", ".join(f"{k} {v}" for k, v in m.get("rejected_reasons", {}).items())
        unit = p.units.get(name, "rows")
        out.append(f"### `{name}`: {doc}")
        out.append(f"{r['in']} in, {r['out']} {unit} out, {r['rejected']} rejected"
                   + (f" ({reasons})" if reasons else "") + f"; key `{e['key']}`, {m.get('seconds', 0)} s.")
        params = {k: v for k, v in m.get("params", {}).items() if v not in (None, "", [], {})}
        if params:
            out.append(f"Parameters: `{json.dumps(params, ensure_ascii=False, default=str)}`")
        for model in m.get("models", []):
            out.append(f"Model `{model.get('name', model.get('param'))}`: `{model.get('path')}` sha256 "
                       f"`{model.get('sha256')}`")
        out.append("")
    out += ["## Splits", "", _md(counts.rename_axis("split").reset_index(name="rows")), ""]
    if rel.deviations:
        out += ["## Known deviations from the paper", ""] + [f"- {d}" for d in rel.deviations] + [""]
    if "fidelity" in entries:
        fid = read_parquet(Path(entries["fidelity"]["path"]) / "data.parquet")
        out += ["## Fidelity to the release", "", _md(fid.drop(columns=["id"], errors="ignore").head(50)), ""]
    if rel.citation:
        out += ["## Citation", "", "```bibtex", rel.citation.strip(), "```", ""]
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(out)))


def export(store: Store, pipeline: str, to: str | Path) -> dict:
    """Write the release directory; returns {file: sha256}. `to` must be empty or absent."""
    _, rel = _pipeline_release(pipeline)
    to = Path(to)
    if to.exists() and any(to.iterdir()):
        raise CskError(f"{to} is not empty: export writes a fresh release directory")
    table = dataset_table(store, pipeline)
    entries = _entries(store, pipeline)
    tmp = to.with_name(f".{to.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    for split, rows in table.groupby("split", sort=True):
        rows.reset_index(drop=True).to_parquet(tmp / "data" / f"{split}-00000-of-00001.parquet", index=False)
    for stage in rel.files:
        if stage not in entries:
            continue
        src = Path(entries[stage]["path"])
        for name in entries[stage]["manifest"].get("outputs", []):
            dst = tmp / "release" / stage / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, dst)
    (tmp / "README.md").write_text(card(store, pipeline), encoding="utf-8")
    sums = {}
    for f in sorted(x for x in tmp.rglob("*") if x.is_file()):
        sums[f.relative_to(tmp).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    (tmp / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    if to.exists():
        to.rmdir()
    tmp.rename(to)  # a release appears complete or not at all
    return sums
