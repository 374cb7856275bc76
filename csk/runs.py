"""Past runs of a pipeline (the run records in `<store>/<pipeline>/_runs/`): list them, diff two
(params, keys, counts per stage), and show an artifact's rows. The run records and manifests are
the lineage of record, so everything here reads them, nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from csk.errors import CskError
from csk.store import Store
from csk.artifacts import read_parquet


def all_runs(store: Store, pipeline: str) -> list[dict]:
    """Every recorded run (partial ones included), oldest first (by finish time, then id); none: []."""
    d = store.runs_dir(pipeline)
    runs = [json.loads(p.read_text()) for p in d.glob("*.json") if p.name != "latest.json"] if d.is_dir() else []
    return sorted(runs, key=lambda r: (r["finished"], r["run_id"]))


def run_records(store: Store, pipeline: str) -> list[dict]:
    """Every recorded run, oldest first; an error when there is none."""
    runs = all_runs(store, pipeline)
    if not runs:
        raise CskError(f"no finished run of {pipeline!r} in {store.root} (run `csk run {pipeline}` first)")
    return runs


def find_run(runs: list[dict], ref: str) -> dict:
    """A run by id, unique id prefix, `latest`, or a negative index (-1 the latest, -2 the one before)."""
    if ref == "latest":
        return runs[-1]
    if ref.lstrip("-").isdigit() and ref.startswith("-"):
        k = int(ref)
        if -len(runs) <= k < 0:
            return runs[k]
        raise CskError(f"there are only {len(runs)} runs; {ref} names none")
    hits = [r for r in runs if r["run_id"].startswith(ref)]
    if len(hits) != 1:
        known = ", ".join(r["run_id"][:8] for r in runs[-5:])
        raise CskError(f"run {ref!r} names {'no' if not hits else 'more than one'} run; recent: {known}")
    return hits[0]


def chosen_run(store: Store, pipeline: str, ref: str | None = None) -> dict:
    """The run a reading command reads: by default the latest full run of the main flow (`csk run
    PIPELINE`); `ref` (an id, an id prefix, `latest` or -1, -2 ...) picks any recorded run, partial
    runs and other flows (e.g. `csk cicero rebuild-distractors`) included."""
    if ref is None:
        return store.latest_run(pipeline)
    return find_run(run_records(store, pipeline), ref)


def run_name(run: dict) -> str:
    """`run 1a2b3c4d` (the latest full run is also named so), for messages."""
    return f"run {run['run_id'][:8]} ({run.get('flow', run['pipeline'])})"


def summary(run: dict) -> dict:
    stages = run["stages"]
    cov = run.get("covered")
    covered = "all" if not cov else (f"--until {cov['until']}" if cov.get("until") else
                                     "--only " + " ".join(cov.get("only", [])))
    return {"run_id": run["run_id"], "finished": run["finished"], "flow": run.get("flow", run["pipeline"]),
            "covered": covered, "stages": len(stages),
            "computed": sum(not s["reused"] for s in stages), "reused": sum(bool(s["reused"]) for s in stages),
            "rows_out": {s["stage"]: s["rows"]["out"] for s in stages}}


def _manifest(path: str) -> dict:
    manifest = Path(path) / "manifest.json"
    return json.loads(manifest.read_text()) if manifest.exists() else {}


def _used_precision(m: dict) -> dict[str, str]:
    """model name -> the precision the stage recorded using it with."""
    out = {}
    for entry in m.get("models", []):
        p = entry.get("precision")
        p = p.get("precision") if isinstance(p, dict) else p
        if p:
            out[str(entry.get("name") or entry.get("param"))] = str(p)
    return out


def compute_differences(ma: dict, mb: dict) -> list[str]:
    """Where two artifacts of a stage were computed differently, from their manifests: the Device /
    Precision settings as resolved, the precision each model ran in, and the machine (CPU, vector-ISA
    flags, cores, torch). Float results may differ in the last bits across any of these."""
    out = []
    ra, rb = ma.get("resolved") or {}, mb.get("resolved") or {}
    out += [f"{k} resolved to {ra.get(k)} vs {rb.get(k)}" for k in sorted(set(ra) | set(rb)) if ra.get(k) != rb.get(k)]
    ua, ub = _used_precision(ma), _used_precision(mb)
    out += [f"{k} ran in {ua.get(k)} vs {ub.get(k)}" for k in sorted(set(ua) | set(ub)) if ua.get(k) != ub.get(k)]
    ha, hb = ma.get("machine") or {}, mb.get("machine") or {}
    if not ha or not hb:
        out += ["machine unknown (a manifest written before machines were recorded)"] if ha != hb else []
        return out
    for name in ("cpu", "cores", "torch"):
        if ha.get(name) != hb.get(name):
            out.append(f"{name} {ha.get(name)!r} vs {hb.get(name)!r}")
    fa, fb = set(ha.get("flags") or []), set(hb.get("flags") or [])
    if fa != fb:
        only = lambda x: ",".join(sorted(x)) or "-"  # noqa: E731
        out.append(f"CPU flags only in the first: {only(fa - fb)}; only in the second: {only(fb - fa)}")
    pa, pb = ha.get("precision") or {}, hb.get("precision") or {}
    if pa != pb:
        out.append(f"machine precision decision {pa} vs {pb}")
    return out


def _why(ma: dict, mb: dict, params: dict) -> list[str]:
    """What moved a stage's key: its parameters, its code (or version), its input data, its input files
    or models, the machine's precision/device decision."""
    if not ma or not mb:
        return ["unknown: a manifest is gone"]
    why = ["params"] if params else []
    if (ma.get("resolved") or {}) != (mb.get("resolved") or {}):
        why.append("precision/device decision")
    if (ma.get("stage_code"), ma.get("stage_version")) != (mb.get("stage_code"), mb.get("stage_version")):
        why.append("code")
    if [i.get("data_sha256") for i in ma.get("inputs", [])] != [i.get("data_sha256") for i in mb.get("inputs", [])]:
        why.append("input data")
    if ma.get("files") != mb.get("files") or [m.get("sha256") for m in ma.get("models", [])] != \
            [m.get("sha256") for m in mb.get("models", [])]:
        why.append("input files or models")
    return why


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def diff(a: dict, b: dict) -> list[dict]:
    """Per stage of either run: whether its key changed, the parameters that differ (from the
    manifests) and the row counts of both."""
    sa, sb = {s["stage"]: s for s in a["stages"]}, {s["stage"]: s for s in b["stages"]}
    order = list(sa) + [s for s in sb if s not in sa]
    out = []
    for name in order:
        x, y = sa.get(name), sb.get(name)
        row = {"stage": name, "key_a": x and x["key"], "key_b": y and y["key"],
               "same_key": bool(x and y and x["key"] == y["key"]),
               "rows_a": x and x["rows"], "rows_b": y and y["rows"], "params": {}, "why": []}
        if x and y and not row["same_key"]:
            ma, mb = _manifest(x["path"]), _manifest(y["path"])
            pa, pb = _flat(ma.get("params", {})), _flat(mb.get("params", {}))
            row["params"] = {k: [pa.get(k), pb.get(k)] for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)}
            row["why"] = _why(ma, mb, row["params"])
            if ma.get("data_sha256") != mb.get("data_sha256"):
                row["computed_differently"] = compute_differences(ma, mb)
        out.append(row)
    return out


def stage_rows(store: Store, pipeline: str, stage: str, *, rejected: bool = False, head: int = 10,
               row_id: str | None = None, run: str | None = None) -> pd.DataFrame:
    """Rows of a run's artifact of `stage` (or its rejected rows): the first `head`, or the one `row_id`."""
    record = chosen_run(store, pipeline, run)
    entry = next((s for s in record["stages"] if s["stage"] == stage), None)
    if entry is None:
        raise CskError(f"{run_name(record)} of {pipeline} has no stage {stage!r}; it has "
                       f"{', '.join(s['stage'] for s in record['stages'])}")
    path = Path(entry["path"]) / ("rejected.parquet" if rejected else "data.parquet")
    if not path.exists():
        return pd.DataFrame()
    df = read_parquet(path)
    if row_id is not None:
        df = df[df["id"].astype(str) == row_id]
        if df.empty:
            raise CskError(f"no row {row_id!r} in {path}")
        return df
    return df.head(head)
