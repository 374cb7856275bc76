"""Publishing a run: a dataset card and a release directory, both from the latest run's manifests
(the lineage of record), never from a re-run.

* `card`: a Hugging Face dataset card (YAML metadata by `huggingface_hub.DatasetCardData`, then
  description, sources with their licences and sha256, the construction steps with the parameters
  actually used and their counts and rejection reasons, counts per split, known deviations from the
  paper, and the fidelity figures where the pipeline measures them).
* `export`: `data/{split}-00000-of-00001.parquet` (what `datasets.load_dataset("parquet",
  data_dir=DIR)` and DuckDB's `read_parquet('DIR/data/*.parquet')` read directly), the released file
  formats the stages wrote under `release/<stage>/`, the card as README.md and SHA256SUMS.

Both read, by default, the latest finished run of any of the pipeline's flows (`csk run PIPELINE`, or a
rebuild such as `csk cicero rebuild-distractors`): a user who just rebuilt expects to publish that; a
partial run (--until, --only) is no release and is read only when named with --run.

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
from csk.store import Store
from csk.artifacts import read_parquet


@dataclass(frozen=True)
class Release:
    """What a pipeline publishes.

    table: the stage whose rows are the dataset.
    split_stage: a stage holding each row's `split` (joined by id) when `table` has no split column.
    files: stages whose extra files (the paper's released formats) go under release/<stage>/.
    licences: source setting (as in pipelines.toml) -> licence of that corpus.
    deviations: known deviations from the paper, one sentence each: a string, or a function of the
        run's parameters ({stage: its params}) returning the sentence (None: not a deviation of this run),
        so the card states what the run did (`lambda p: f"... at cosine {p['dedup']['threshold']}"`).
    file_notes: a folder of the release (e.g. "release/mcq") -> what its files hold.
    rebuilt: (stage, columns): the columns of `table` a later stage rebuilt (CICERO's choices, from `mcq`):
        the data files carry that stage's values under the columns' names (null where it rejected the row,
        `rebuilt_reason` says why) and the table's own as `published_<column>`.
    or_table: stages whose rows are the dataset in a run without `table`, the first the run has (a
        rebuild from a released file alone reads its rows in another stage than a full run).
    unsplit: the split of a row in a run that neither splits its rows nor reads them from a file whose
        name gives one (`release_split`); never `all`, which `datasets` keeps for the union of splits.
    figures: stage -> heading: stages whose rows are measures, each shown on the card as a table.
    shares: (stage, note, heading, what): counts a stage's manifest notes hold by `what` (e.g.
        adversarial_filter's `final_by_tier`), shown on the card under `heading`, each with its share; a note
        the run's manifest lacks is left out.
    drop: columns of the table a release leaves out (a stage's own bookkeeping, e.g. a layout repeated on
        every row).
    """

    table: str
    split_stage: str | None = None
    or_table: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    pretty_name: str = ""
    language: tuple[str, ...] = ("en",)
    license: str = "other"
    task_categories: tuple[str, ...] = ()
    citation: str = ""
    licences: dict[str, str] = field(default_factory=dict)
    deviations: tuple = ()
    file_notes: dict[str, str] = field(default_factory=dict)
    rebuilt: tuple[str, tuple[str, ...]] | None = None
    unsplit: str = "unsplit"
    figures: dict[str, str] = field(default_factory=lambda: {"fidelity": "Fidelity to the release"})
    shares: tuple[tuple[str, str, str, str], ...] = ()
    drop: tuple[str, ...] = ()

    def table_of(self, stages) -> str | None:
        """The stage whose rows are this run's dataset: `table`, else the first of `or_table` it ran."""
        return next((t for t in (self.table, *self.or_table) if t in stages), None)


def _rebuilt_columns(df: pd.DataFrame, rel: Release, entries: dict) -> pd.DataFrame:
    """`rel.rebuilt`'s columns from the stage that rebuilt them, the table's own kept as published_*."""
    stage, columns = rel.rebuilt
    if stage not in entries:
        return df
    path = Path(entries[stage]["path"])
    new = read_parquet(path / "data.parquet")[["id", *columns]]
    out = df.rename(columns={c: f"published_{c}" for c in columns}).merge(new, on="id", how="left",
                                                                          validate="one_to_one")
    # why a row has none: the first stage that rejected it under its id (AF before round 1, the MCQ stage)
    reasons: dict[str, str] = {}
    wanted = set(out.loc[out[columns[0]].isna(), "id"])
    stages = _stages(entries)
    on_the_way, todo = {stage}, [stage]  # the stages `stage` read from, at any depth (not a sibling's rejections)
    while todo:
        for i in stages[todo.pop()]["manifest"].get("inputs", []):
            if i["stage"] in stages and i["stage"] not in on_the_way:
                on_the_way.add(i["stage"])
                todo.append(i["stage"])
    for name, e in stages.items():
        if name not in on_the_way:
            continue
        rej = Path(e["path"]) / "rejected.parquet"
        if wanted and rej.exists():
            r = read_parquet(rej)
            r = r[r["id"].isin(wanted - set(reasons))]
            reasons.update({i: f"{name}: {c}: {t}" for i, c, t in zip(r["id"], r["reason_code"], r["reason"])})
    out["rebuilt_reason"] = [reasons.get(i, "not rebuilt") if i in wanted else None for i in out["id"]]
    return out


def _pipeline_release(pipeline: str) -> tuple[object, Release]:
    from csk.pipeline import get_pipeline

    p = get_pipeline(pipeline)
    if p.release is None:
        raise CskError(f"pipeline {pipeline!r} declares no release (Pipeline(release=Release(...)) in flows/{pipeline}.py)")
    return p, p.release


def release_run(store: Store, pipeline: str, run: str | None = None) -> dict:
    """The run a release is made of: `run` when named (any recorded run, `csk.runs.find_run`), else the
    latest finished run of any of the pipeline's flows, partial runs (--until, --only) aside."""
    from csk.runs import all_runs, chosen_run

    if run is not None:
        return chosen_run(store, pipeline, run)
    whole = [r for r in all_runs(store, pipeline) if not r.get("covered")]
    return whole[-1] if whole else store.latest_run(pipeline)  # none: its error names the partial runs


def _entries(store: Store, pipeline: str, run: str | None = None) -> dict[str, dict]:
    record = release_run(store, pipeline, run)
    entries = {s["stage"]: {**s, "manifest": json.loads((Path(s["path"]) / "manifest.json").read_text())}
               for s in record["stages"]}
    return {"_run": {"record": record}, **entries}


def _stages(entries: dict) -> dict[str, dict]:
    return {k: v for k, v in entries.items() if k != "_run"}


def _walk_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk_strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk_strings(v)


def public_paths(entries: dict) -> dict[str, str]:
    """Every local absolute path the run's manifests name -> the name a release gives it: a source
    file relative to the configured source (`mutual/dev/dev_1.txt` for a file of the configured
    directory `.../mutual`, `dialogues_text.txt` for a configured file), any other path (a model
    directory, a configured file) by its last component. A release names no local folder."""
    out: dict[str, str] = {}
    from csk.params import portable_name, setting_value

    for e in _stages(entries).values():
        m = e["manifest"]
        params = m.get("params", {})
        for f in m.get("files", []):  # the name keys and rows give it (csk.params.portable_name)
            out[f["path"]] = portable_name(f["path"], setting_value(params, f["param"]))
        for v in _walk_strings([params, m.get("models", [])]):
            if v.startswith(("/", "~")) and len(v) > 1:
                out.setdefault(v, Path(v).name)
    return out


def _scrub(text: str, paths: dict[str, str]) -> str:
    for local in sorted(paths, key=len, reverse=True):  # the longest first: a file before its folder
        text = text.replace(local, paths[local])
    return text


def dataset_table(store: Store, pipeline: str, run: str | None = None, entries: dict | None = None) -> pd.DataFrame:
    """The released rows with their split, from a run (default: `release_run`'s)."""
    from csk.runs import run_name

    _, rel = _pipeline_release(pipeline)
    entries = entries or _entries(store, pipeline, run)
    table = rel.table_of(_stages(entries))
    if table is None:
        record = entries["_run"]["record"]
        wanted = " or ".join(repr(t) for t in (rel.table, *rel.or_table))
        raise CskError(f"{run_name(record)} of {pipeline} has no {wanted} artifact to release (its stages: "
                       f"{', '.join(s['stage'] for s in record['stages']) or 'none'}); `csk runs {pipeline}` lists "
                       f"the runs, --run ID exports another")
    df = read_parquet(Path(entries[table]["path"]) / "data.parquet").drop(columns=list(rel.drop), errors="ignore")
    if "split" not in df.columns and not (rel.split_stage and rel.split_stage in entries):
        # one file rebuilt alone: the split its name gives (`release_split`), else the one word for none
        given = df["release_split"] if "release_split" in df.columns else pd.Series(None, index=df.index, dtype=object)
        df["split"] = given.where(given.notna(), rel.unsplit).astype(str)
    if "split" not in df.columns:
        splits = read_parquet(Path(entries[rel.split_stage]["path"]) / "data.parquet")[["id", "split"]]
        df = df.merge(splits, on="id", how="left", validate="one_to_one")
        missing = df["split"].isna()
        if missing.any():
            raise CskError(f"{pipeline}: {int(missing.sum())} rows of {table!r} have no split in "
                           f"{rel.split_stage!r} (e.g. {df.loc[missing, 'id'].head(3).tolist()}); rerun the pipeline")
    if rel.rebuilt:
        df = _rebuilt_columns(df, rel, entries)
    return _public_columns(df, entries)


PATH_FIELDS = ("source_file", "file")  # columns and record keys that hold a file's path


def _public_columns(df: pd.DataFrame, entries: dict) -> pd.DataFrame:
    """Columns as a release shows them: every local path (`source_file`, a file named in `evidence`)
    as the release names it (relative to its configured source), and `source_sha256` beside
    `source_file`, so a row is traceable without a local path."""
    paths = public_paths(entries)
    sha = {f["path"]: f["sha256"] for e in _stages(entries).values() for f in e["manifest"].get("files", [])}
    sha.update({paths[p]: h for p, h in list(sha.items()) if p in paths})  # rows name a file by its portable name

    def public(v, field: str | None = None):
        # only paths: a value the manifests name as a file read, or a file field (`source_file`, an
        # evidence item's `file`) holding an absolute path; text that merely starts with "/" stays
        if isinstance(v, str):
            if v in paths:
                return paths[v]
            return Path(v).name if field in PATH_FIELDS and v.startswith("/") else v
        if isinstance(v, dict):
            return {k: public(x, k) for k, x in v.items()}
        if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and getattr(v, "ndim", 0) == 1):
            return [public(x, field) for x in v]
        return v

    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(lambda v, c=col: public(v, c))
    if "source_file" in out.columns:
        out.insert(out.columns.get_loc("source_file") + 1, "source_sha256",
                   df["source_file"].astype(str).map(sha).astype(object))
    return out


def _size_category(n: int) -> str:
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < bound:
            return name
    return "n>1M"


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join("" if isinstance(v, float) and v != v else
                                       str(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |")
    return "\n".join(lines)


def _rounded(value):
    """Figures as a card shows them: floats to 4 significant digits, containers walked."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _release_name(stage: str, name: str) -> str:
    """Where a stage's released file goes: release/<stage>/<name>, without doubling the stage's folder
    when its files already sit in one (`mcq/2.1_single_answer/...` -> release/mcq/2.1_single_answer/...)."""
    first, _, rest = name.partition("/")
    return f"release/{stage}/{rest if first == stage and rest else name}"


def card(store: Store, pipeline: str, run: str | None = None) -> str:
    """The dataset card (README.md) of a run (default: `release_run`'s), from its manifests."""
    from huggingface_hub import DatasetCard, DatasetCardData

    p, rel = _pipeline_release(pipeline)
    entries = _entries(store, pipeline, run)
    record = entries["_run"]["record"]
    stages = _stages(entries)
    table = dataset_table(store, pipeline, entries=entries)
    counts = table["split"].value_counts().sort_index()
    data = DatasetCardData(
        pretty_name=rel.pretty_name or p.name, language=list(rel.language), license=rel.license,
        task_categories=list(rel.task_categories) or None, size_categories=_size_category(len(table)),
        configs=[{"config_name": "default",
                  "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in counts.index]}])
    out = [f"# {rel.pretty_name or p.name}", "", p.doc, "",
           f"Rebuilt by the `{pipeline}` pipeline of csk; run `{record['run_id']}` "
           f"({record.get('flow', pipeline)}, finished {record['finished'][:19]} UTC).", ""]
    out += ["## Sources", "", "| setting | file | sha256 | licence |", "|---|---|---|---|"]
    seen = set()
    for name, e in stages.items():
        for f in e["manifest"].get("files", []):
            if (f["param"], f["path"]) in seen:
                continue
            seen.add((f["param"], f["path"]))
            out.append(f"| {name}.{f['param']} | `{f['path']}` | `{f['sha256']}` | "
                       f"{rel.licences.get(f['param'], 'see the corpus')} |")
    folders: dict[str, str] = {}  # the release's folders, each with what it holds (the deepest note that covers it)
    for stage in rel.files:
        for name in stages[stage]["manifest"].get("outputs", []) if stage in stages else ():
            path = _release_name(stage, name)
            key = max((k for k in rel.file_notes if path.startswith(k + "/")), key=len, default=f"release/{stage}")
            folders.setdefault(key, rel.file_notes.get(key, f"the `{stage}` stage's files"))
    if folders:
        out += ["", "## Files", "", "| folder | what it holds |", "|---|---|",
                "| `data/` | the dataset's rows, one Parquet file per split" + (
                    f"; {', '.join(f'`{c}`' for c in rel.rebuilt[1])}: as the `{rel.rebuilt[0]}` stage REBUILT them "
                    f"(null where it could not, `rebuilt_reason` says why), `published_*`: the release's own |"
                    if rel.rebuilt and rel.rebuilt[0] in stages else " |")]
        out += [f"| `{k}/` | {v} |" for k, v in folders.items()]
    out += ["", "## Construction steps", ""]
    declared = {s.name for s in p.stages}
    for name, e in stages.items():
        m, r = e["manifest"], e["rows"]
        doc = _summary_line(p.stage(name).fn.__doc__ if name in declared else "") or "a stage of an earlier version"
        reasons = ", ".join(f"{k} {v}" for k, v in m.get("rejected_reasons", {}).items())
        unit = p.units.get(name, "rows")
        out.append(f"### `{name}`: {doc}")
        out.append(f"{r['in']} in, {r['out']} {unit} out, {r['rejected']} rejected"
                   + (f" ({reasons})" if reasons else "") + f"; key `{e['key']}`, {float(m.get('seconds', 0)):.1f} s.")
        # what a stage itself says a reader of the card should know (its manifest's notes.card lines)
        out += [str(line) for line in (m.get("notes") or {}).get("card", [])]
        params = {k: v for k, v in m.get("params", {}).items() if v not in (None, "", [], {})}
        if params:
            out.append(f"Parameters: `{json.dumps(_rounded(params), ensure_ascii=False, default=str)}`")
        for model in m.get("models", []):
            from csk.models import display_name

            what = display_name(model["spec"]) if model.get("spec") else Path(str(model.get("path", ""))).name
            precision = f", {model['precision']}" if isinstance(model.get("precision"), str) else ""
            out.append(f"Model `{model.get('name', model.get('param'))}`: {what}{precision}, sha256 "
                       f"`{model.get('sha256')}`")
        out.append("")
    out += ["## Splits", "", _md(counts.rename_axis("split").reset_index(name="rows")), ""]
    deviations = _deviations(rel, stages)
    if deviations:
        out += ["## Known deviations from the paper", ""] + [f"- {d}" for d in deviations] + [""]
    out += _share_tables(rel, stages)
    for stage, heading in rel.figures.items():
        if stage in stages:
            fig = read_parquet(Path(stages[stage]["path"]) / "data.parquet")
            fig = fig.drop(columns=["id"], errors="ignore").head(50)
            out += [f"## {heading}", "", _md(fig.map(_rounded)), ""]
    if rel.citation:
        out += ["## Citation", "", "```bibtex", rel.citation.strip(), "```", ""]
    text = _scrub("\n".join(out), public_paths(entries))
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + text))


def _share_tables(rel: Release, stages: dict) -> list[str]:
    """The card's tables of `rel.shares`: each count with its share of the whole, under its heading; a note
    the stage's manifest does not hold (a run of older code) is left out."""
    out: list[str] = []
    for stage, note, heading, what in rel.shares:
        counts = (stages[stage]["manifest"].get("notes") or {}).get(note) if stage in stages else None
        if not isinstance(counts, dict) or not counts:
            continue
        total = sum(int(n) for n in counts.values())
        table = pd.DataFrame({what: list(counts), "count": [int(n) for n in counts.values()],
                              "share": [f"{100 * int(n) / total:.1f}%" if total else "" for n in counts.values()]})
        out += [f"## {heading}", "", _md(table), ""]
    return out


def _summary_line(doc: str | None) -> str:
    """A docstring's first sentence (its first paragraph up to the first full stop), on one line."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split())
    head, dot, _ = para.partition(". ")
    return (head if dot else para).rstrip(".")


def _deviations(rel: Release, stages: dict) -> list[str]:
    """The release's deviations as they hold for this run: callables read the run's own parameters."""
    params = {name: e["manifest"].get("params", {}) for name, e in stages.items()}
    out = []
    for d in rel.deviations:
        if callable(d):
            try:
                d = d(params)
            except KeyError:  # a stage this run did not have: the deviation is not this run's
                d = None
        if d:
            out.append(d)
    return out


def export(store: Store, pipeline: str, to: str | Path, run: str | None = None) -> dict:
    """Write the release directory; returns {file: sha256}. `to` must be empty or absent."""
    _, rel = _pipeline_release(pipeline)
    to = Path(to)
    if to.exists() and any(to.iterdir()):
        raise CskError(f"{to} is not empty: export writes a fresh release directory")
    entries = _entries(store, pipeline, run)
    stages = _stages(entries)
    table = dataset_table(store, pipeline, entries=entries)
    tmp = to.with_name(f".{to.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    for split, rows in table.groupby("split", sort=True):
        rows.reset_index(drop=True).to_parquet(tmp / "data" / f"{split}-00000-of-00001.parquet", index=False)
    for stage in rel.files:
        if stage not in stages:
            continue
        src = Path(stages[stage]["path"])
        for name in stages[stage]["manifest"].get("outputs", []):
            dst = tmp / _release_name(stage, name)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, dst)
    (tmp / "README.md").write_text(card(store, pipeline, run), encoding="utf-8")
    sums = {}
    for f in sorted(x for x in tmp.rglob("*") if x.is_file()):
        sums[f.relative_to(tmp).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    (tmp / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    if to.exists():
        to.rmdir()
    tmp.rename(to)  # a release appears complete or not at all
    return sums
