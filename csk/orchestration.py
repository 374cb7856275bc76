"""Running a pipeline's steps: as a Prefect flow (one materializing task per stage), or dry.

A dataset's flow body is a plain function `steps(run, **options)` that reads as the list of
construction steps (`run.stage("dedup", filtered, embeddings)`); its settings come from the
pipeline's config tables, so a step names only its inputs. The same body runs

* in a Prefect flow (`prefect_flow`): each stage a task that declares its output as a Prefect
  asset with the upstream stages' assets as dependencies, and publishes its counts (the
  manifests remain the lineage of record: Prefect's asset graph is Cloud-only);
* dry (`status`): nothing computed, each stage planned against the store: reused, or
  recomputed and why (the changed parameter, input file, model, code or upstream data).

Prefect is imported only when a flow runs, so configuration errors are reported before it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from csk.errors import CskError, NoRowsError, SourceError, StageError
from csk.pipeline import Pipeline, Stage, get_pipeline
from csk.artifacts import ArtifactRef
from csk.store import Store

log = logging.getLogger("csk")


@dataclass(frozen=True)
class Pending:
    """A dry run's stand-in for an artifact that would be recomputed (its content is not known yet)."""

    stage: str


@dataclass(frozen=True)
class Skipped:
    """A stage a partial run leaves out (`--until`: not needed; `--only`: not selected and not in the store)."""

    stage: str
    key: str | None = None


def selection(pipeline: Pipeline, config: Any, store: str | Path, steps=None, until: str | None = None,
              only: list[str] | tuple[str, ...] = ()) -> set[str] | None:
    """The stages a partial run computes: `until`: that stage and every stage it needs; `only`: those
    stages. The flow body is traced (nothing planned or computed) for its graph of stages and inputs."""
    if not until and not only:
        return None
    if until and only:
        raise CskError("--until and --only do not combine: --until STAGE runs that stage and what it needs, "
                       "--only STAGE... runs those stages on cached inputs")
    graph = flow_graph(pipeline, config, store, steps)
    wanted = [until] if until else list(only)
    unknown = [w for w in wanted if w not in graph]
    if unknown:
        raise CskError(f"{pipeline.name}: no stage {unknown} in this flow (with these settings); its stages: "
                       f"{', '.join(graph)}")
    if only:
        return set(only)
    chosen, todo = set(), [until]
    while todo:
        name = todo.pop()
        if name not in chosen:
            chosen.add(name)
            todo += graph.get(name, {}).values()
    return chosen


def flow_graph(pipeline: Pipeline, config: Any, store: str | Path, steps=None) -> dict[str, dict[str, str]]:
    """The stages a flow body runs with these settings, in order, each with {input name: the stage it
    reads}: the body is traced, nothing planned or computed."""
    trace = PipelineRun(pipeline, config, store, dry=True)
    trace.graph = {}
    (steps or pipeline.main)(trace)
    return trace.graph


class PipelineRun:
    """Runs the stages of one pipeline and records the run for `csk artifacts`."""

    def __init__(self, pipeline: Pipeline, config: Any, store_root: str | Path, dry: bool = False,
                 shard_rows: int | None = None, verify: bool = False, until: str | None = None,
                 only: list[str] | tuple[str, ...] = (), steps=None):
        from csk.shards import DEFAULT_SHARD_ROWS

        self.graph: dict[str, dict[str, str]] | None = None  # set when tracing: stage -> {input: stage it reads}
        self.until, self.only = until, tuple(only)
        self.selected = selection(pipeline, config, store_root, steps, until, only) if (until or only) else None
        self.pipeline = pipeline
        self.config = config
        self.store = Store(store_root, verify=verify)
        self.dry = dry
        self.shard_rows = shard_rows or DEFAULT_SHARD_ROWS
        self.flow = None if steps in (None, pipeline.main) else steps.__name__  # recorded: which flow ran
        self.stages: list[dict] = []
        if not dry:
            self.store.clean_stale_tmp()
            from prefect.runtime import flow_run

            from csk.interrupt import ACTIVE

            ACTIVE.update(flow_run_id=flow_run.get_id(), tmp=self.store._tmp)

    # -- what a flow body calls
    def stage(self, which: "str | Stage | Callable", /, **bound: Any) -> ArtifactRef | Pending | None:
        """Run (or reuse) a stage, named by its function (`run.stage(dedup, dialogues=filtered,
        embeddings=vectors)`: the declaration's function is the name, as dagster's assets). Its upstream
        inputs are bound by the function's parameter names (an optional one may be None); any other
        keyword overrides one of its settings, which otherwise come from its table."""
        from csk.store import bind_inputs

        stage = self.pipeline.stage(which)
        input_names = {n for n, _ in stage.inputs}
        inputs = {k: v for k, v in bound.items() if k in input_names}
        overrides = {k: v for k, v in bound.items() if k not in input_names}
        names, refs = bind_inputs(stage, inputs)
        if self.graph is not None:  # tracing the flow's graph for a partial run
            self.graph[stage.name] = {n: r.stage for n, r in zip(names, refs)}
            return Pending(stage.name)
        params = {k: v.model_dump() if hasattr(v, "model_dump") else v
                  for k, v in self.pipeline.stage_params(stage, self.config, overrides).items()}
        if self.selected is not None:
            outside = self._partial(stage, params, dict(zip(names, refs)))
            if outside is not None:
                return outside
            missing = [(n, r) for n, r in zip(names, refs) if isinstance(r, Skipped)]
            if missing:
                n, r = missing[0]
                raise CskError(f"stage {stage.name!r} needs its input {n} (stage {r.stage!r}), which is not in "
                               f"{self.store.root}" + (f" (key {r.key})" if r.key else "") +
                               f": run `csk run {self.pipeline.name} --until {r.stage}` first, or add it to --only")
            for r in refs:  # cached inputs of a selected stage: part of this run, reused
                if isinstance(r, ArtifactRef) and r.stage not in self.selected and \
                        not any(s.get("stage") == r.stage for s in self.stages):
                    self._adopted(r)
        if self.dry:
            return self._plan(stage, params, dict(zip(names, refs)))
        if refs and refs[0].manifest()["rows"]["out"] == 0:
            raise NoRowsError(no_rows_message(self.pipeline, refs[0], consumer=stage.name))
        from prefect.assets import materialize
        from prefect.cache_policies import NONE

        task = materialize(
            asset_for(self.store, self.pipeline.name, stage.name),
            asset_deps=[asset_for(self.store, self.pipeline.name, r.stage) for r in refs],
            name=stage.name, cache_policy=NONE, persist_result=False,
        )(_execute)
        info = task(str(self.store.root), self.pipeline.name, stage.name, params, dict(zip(names, refs)),
                    self.shard_rows, self.store.verify, return_state=True).result()
        self.stages.append(info)
        ref = ArtifactRef(self.pipeline.name, stage.name, info["key"], info["path"])
        if not refs and info["rows"]["out"] == 0:
            # A source that kept nothing: its artifact and rejected rows are written; the run stops here,
            # saying which files gave which rejections (every later stage would have nothing to do).
            raise NoRowsError(no_rows_message(self.pipeline, ref))
        stop = (ref.manifest().get("notes") or {}).get("stop")
        if stop:  # written with its rejected rows; the stage says why the run cannot go on (e.g. a wrong file)
            raise SourceError(f"stage {stage.name!r}: {stop}\nEvery rejected row with its reason: {ref.rejected_path}")
        return ref

    def enabled(self, which: "str | Stage | Callable") -> bool:
        return self.pipeline.enabled(which, self.config)

    # -- partial runs
    def _partial(self, stage: Stage, params: dict, inputs: dict) -> ArtifactRef | Skipped | Pending | None:
        """A stage outside the selection: `--until` skips it; `--only` takes its artifact from the store
        when it is there (the one a full run would reuse), else marks it missing. None: it is selected."""
        if stage.name in self.selected:
            return None
        if self.until:
            if self.dry:
                self.stages.append({"stage": stage.name, "status": "skipped", "why": f"not needed for {self.until}"})
            return Skipped(stage.name)
        if any(isinstance(r, (Skipped, Pending)) for r in inputs.values()):
            waiting = [r for r in inputs.values() if isinstance(r, (Skipped, Pending))]
            return waiting[0] if isinstance(waiting[0], Pending) and self.dry else Skipped(stage.name)
        plan = self.store.plan(self.pipeline.name, stage, params, inputs)
        found = self.store.find(self.pipeline.name, stage.name, plan.key)
        if self.dry:
            self.stages.append({"stage": stage.name, "status": "cached" if found else "missing", "key": plan.key,
                                "why": "not in --only: " + ("its artifact in the store is used" if found else
                                                             "not in the store (a selected stage needing it fails)")})
        return found if found is not None else Skipped(stage.name, plan.key)

    def _adopted(self, ref: ArtifactRef) -> None:
        if self.dry:
            return
        m = ref.manifest()
        self.stages.append({"stage": ref.stage, "key": ref.key, "path": ref.path, "rows": m["rows"], "reused": True,
                            "seconds": 0.0})

    def from_latest(self, which) -> ArtifactRef | None:
        """The artifact a stage (named by its function, as flow bodies name stages) wrote in the latest
        finished run, used as it is (recorded in this run as reused); None when that run has none."""
        name = self.pipeline.stage(which).name
        run = self.store.latest_run(self.pipeline.name, required=False)
        entry = next((e for e in (run or {}).get("stages", []) if e["stage"] == name), None)
        return None if entry is None else self.adopt(entry)

    def adopt(self, entry: dict) -> ArtifactRef:
        """Use an artifact of an earlier run as it is (recorded in this run as reused)."""
        ref = self.store.ref_from_manifest_entry(self.pipeline.name, entry)
        if self.store.find(self.pipeline.name, ref.stage, ref.key) is None:
            raise CskError(f"artifact {ref.stage}/{ref.key} of the latest run is missing from {self.store.root}")
        if self.dry:
            self.stages.append({"stage": ref.stage, "status": "reused", "key": ref.key,
                                "why": "adopted from the latest run"})
            return ref
        from prefect import get_run_logger

        get_run_logger().info("%s: reused upstream artifact %s from the latest run", ref.stage, ref.key)
        self.stages.append({**entry, "reused": True})
        return ref

    def finish(self) -> list[dict]:
        from prefect.runtime import flow_run

        run_id = str(flow_run.get_id() or "local")
        stages = self.stages
        covered = None
        if self.selected is not None:
            covered = {"until": self.until} if self.until else {"only": list(self.only)}
            covered["stages"] = sorted(self.selected)
        path = self.store.record_run(self.pipeline.name, run_id, stages, covered=covered, flow=self.flow)
        self._summary_artifact(stages)
        reused = [s["stage"] for s in self.stages if s["reused"]]
        log.info("run recorded in %s; reused: %s", path, ", ".join(reused) or "none")
        return self.stages

    def _summary_artifact(self, stages: list[dict]) -> None:
        """One table per run: every stage, cached or computed, its rows with their unit, its seconds."""
        from prefect.artifacts import create_table_artifact

        units = self.pipeline.units
        create_table_artifact(
            key=_artifact_key(self.pipeline.name, "run-summary"),
            table=[{"stage": s["stage"], "status": "cached" if s["reused"] else "computed",
                    "rows_in": s["rows"]["in"], "rows_out": f"{s['rows']['out']} {units.get(s['stage'], 'rows')}",
                    "rejected": s["rows"]["rejected"], "seconds": s.get("seconds", 0.0), "key": s["key"]}
                   for s in stages],
            description=f"{self.pipeline.name}: what this run did, stage by stage")

    # -- dry runs
    def _plan(self, stage: Stage, params: dict, inputs: dict) -> ArtifactRef | Pending:
        waiting = list(dict.fromkeys(i.stage for i in inputs.values() if isinstance(i, Pending)))
        if waiting:
            own = self._own_code_changed(stage)
            if own:  # its own key changes whatever its inputs give: no early cut-off can save it
                self.stages.append({"stage": stage.name, "status": "recompute",
                                    "why": f"{own} (its inputs {', '.join(waiting)} are recomputed too)"})
            else:
                self.stages.append({"stage": stage.name, "status": "depends",
                                    "why": f"reused if the recomputed {', '.join(waiting)} output has the same bytes "
                                           "(early cut-off), else recomputed"})
            return Pending(stage.name)
        plan = self.store.plan(self.pipeline.name, stage, params, inputs)
        found = self.store.find(self.pipeline.name, stage.name, plan.key)
        if found is not None:
            self.stages.append({"stage": stage.name, "status": "reused", "key": plan.key, "why": "same key"})
            return found
        self.stages.append({"stage": stage.name, "status": "recompute", "key": plan.key,
                            "why": self._why(stage, plan)})
        return Pending(stage.name)

    def _previous(self, name: str) -> dict | None:
        """The stage's entry in the most recent run (partial runs included) that has it."""
        from csk.runs import all_runs

        for r in reversed(all_runs(self.store, self.pipeline.name)):
            hit = next((e for e in r["stages"] if e.get("stage") == name and e.get("key")), None)
            if hit is not None:
                return hit
        return None

    def _own_code_changed(self, stage: Stage) -> str | None:
        """Why the stage's own key differs from its last run's, from what does not depend on its inputs:
        its code (module, contract, the project modules they import) and its packages."""
        before = self._previous(stage.name)
        if before is None:
            return None
        try:
            m = self.store.ref_from_manifest_entry(self.pipeline.name, before).manifest()
        except (OSError, ValueError):
            return None
        if m.get("stage_code") != stage.code_hash():
            return "code changed (the stage's module, its contract's, or a project module they import)"
        old_pk, new_pk = m.get("packages") or {}, stage.packages()
        changed = [k for k in sorted(set(old_pk) | set(new_pk)) if old_pk.get(k) != new_pk.get(k)]
        if changed:
            return "package " + ", ".join(f"{k} {old_pk.get(k) or '(absent)'} -> {new_pk.get(k) or '(absent)'}"
                                          for k in changed)
        return None

    def _why(self, stage: Stage, plan) -> str:
        before = self._previous(stage.name)
        if before is None:
            return "never run in this store"
        ref = self.store.ref_from_manifest_entry(self.pipeline.name, before)
        try:
            m = ref.manifest()
        except OSError:
            return "the latest run's artifact is missing"
        reasons = []
        old, new = _flatten(m.get("params", {})), _flatten(plan.params_json)
        for k in sorted(set(old) | set(new)):
            if old.get(k) != new.get(k):
                reasons.append(f"parameter {k}: {old.get(k)!r} -> {new.get(k)!r}")
        old_files = {(f["param"], f["path"]): f["sha256"] for f in m.get("files", [])}
        new_files = {(f["param"], f["path"]): f["sha256"] for f in plan.files}
        for k in sorted(set(old_files) | set(new_files)):
            if old_files.get(k) != new_files.get(k):
                reasons.append(f"input file {k[1]} ({k[0]}) changed")
        old_models = {mm.get("param"): mm.get("sha256") for mm in m.get("models", []) if mm.get("param")}
        for mm in plan.models:
            if old_models.get(mm["param"]) != mm["sha256"]:
                reasons.append(f"model {mm['param']} ({mm['path']}) changed")
        if m.get("stage_code") != stage.code_hash():
            reasons.append("code changed (the stage's module, its contract's, or a project module they import)")
        old_pk, new_pk = m.get("packages") or {}, stage.packages()
        for k in sorted(set(old_pk) | set(new_pk)):
            if old_pk.get(k) != new_pk.get(k):
                reasons.append(f"package {k} {old_pk.get(k) or '(absent)'} -> {new_pk.get(k) or '(absent)'}")
        old_res = m.get("resolved") or {}
        for k in sorted(set(old_res) | set(plan.resolved)):
            if old_res.get(k) != plan.resolved.get(k):
                reasons.append(f"{k} resolves to {plan.resolved.get(k)} on this machine (was {old_res.get(k)})")
        old_inputs = {i.get("name", str(n)): i.get("data_sha256") for n, i in enumerate(m.get("inputs", []))}
        for name, ref_in, h in zip(plan.input_names, plan.inputs, plan.input_hashes):
            if old_inputs.get(name) != h:
                reasons.append(f"input {name} ({ref_in.stage}) has other data")
        if m.get("stage_version") != stage.version:
            reasons.append(f"stage version {m.get('stage_version')} -> {stage.version}")
        old_threads = (m.get("threads") or {}).get("count", (m.get("machine") or {}).get("cores"))
        if plan.threads.get("in_key") and old_threads != plan.threads["count"]:
            reasons.append(f"{plan.threads['count']} threads here, built with {old_threads} ({plan.threads['why']}; "
                           "[runtime] threads sets the count)")
        return "; ".join(reasons) or "no artifact with this key (the key scheme or an upstream key changed)"


def _flatten(d: Any, prefix: str = "") -> dict:
    if not isinstance(d, dict):
        return {prefix.rstrip("."): d}
    out = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


# ------------------------------------------------------------------ a stage that kept nothing
def _reason_counts(rejected) -> str:
    counts = rejected["reason_code"].astype(str).value_counts()
    return ", ".join(f"{code}: {n}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def counts_line(rows: dict, unit: str = "rows") -> str:
    """`18 in, 9 out, 1 rejected` that adds up on screen: where out + rejected is not in, say why (a
    stage whose rows in become several rows out, or many rows one, e.g. targets per dialogue)."""
    line = f"{rows['in']} in, {rows['out']} {unit} out, {rows['rejected']} rejected"
    if rows["in"] == rows["out"] + rows["rejected"]:
        return line
    why = ("a row in gives several rows out" if rows["out"] + rows["rejected"] > rows["in"]
           else "several rows in give one out")
    return f"{line}; {why}"


def no_rows_message(pipeline: Pipeline, ref: ArtifactRef, consumer: str | None = None, top: int = 5,
                    max_files: int = 10) -> str:
    """Why the data ran out at `ref`'s stage: its rows in and out, each input file it read with its
    record count and rejection reasons (counted), the most frequent reasons with an example, where the
    rejected rows are, and what to check."""
    m = ref.manifest()
    rows = m["rows"]
    rejected = ref.load_rejected()
    head = f"stage {ref.stage!r} kept no rows ({rows['in']} in, {rows['rejected']} rejected)"
    lines = [head + (f": nothing for {consumer!r} to do" if consumer else ": the run stops here")]
    from csk.params import portable_name, setting_value

    # each file read: its path here, and its name in the rows (portable, as the key names it)
    files = list(dict.fromkeys((f["path"], portable_name(f["path"], setting_value(m.get("params", {}), f["param"])))
                               for f in m.get("files", [])))
    read = (m.get("notes") or {}).get("read")
    if read:  # a stage whose records are not rows (a dump's lines) says what each file gave
        for path, r in read.items():
            unit = r.get("unit", "records")
            why = ", ".join(f"{k}: {n}" for k, n in r.get("rejected", {}).items())
            lines.append(f"  {path}: {r['records']} {unit}, {r.get('kept', 0)} kept" + (f" ({why})" if why else ""))
    elif files:
        seen = rejected.groupby(rejected["source_file"].astype(str), sort=True) \
            if "source_file" in rejected.columns and len(rejected) else []
        by_file = {f: g for f, g in seen}
        per_file = []
        for path, name in files:
            g = by_file.pop(name, None)
            g = by_file.pop(path, None) if g is None else g
            n = 0 if g is None else len(g)
            per_file.append(f"  {path}: {n} record{'s' if n != 1 else ''}" +
                            (f", {n} rejected ({_reason_counts(g)})" if n else " read"))
        for path, g in by_file.items():  # rejected rows naming a file by another spelling
            per_file.append(f"  {path}: {len(g)} rejected ({_reason_counts(g)})")
        lines += per_file[:max_files]
        if len(per_file) > max_files:
            lines.append(f"  ... and {len(per_file) - max_files} more files")
    if len(rejected):
        counts = rejected["reason_code"].astype(str).value_counts()
        lines.append("  top reasons:")
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            example = str(rejected.loc[rejected["reason_code"].astype(str) == code, "reason"].iloc[0])
            lines.append(f"    {code} ({n}): {example[:200]}")
        lines.append(f"  every rejected row with its reason: {ref.rejected_path}")
    table = f"[{pipeline.name}.{pipeline.stage(ref.stage).config_table}]"
    if not m.get("inputs"):
        lines.append(f"Check that each file is in its release's format and that {table} in the config names the "
                     f"right files (`csk config {pipeline.name}` prints them).")
    else:
        lines.append(f"Check the settings of {table} (`csk config {pipeline.name}`) and what the earlier stages "
                     "kept (`csk status " + pipeline.name + "`).")
    return "\n".join(lines)


# ------------------------------------------------------------------ Prefect tasks
def _artifact_key(*parts: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


def asset_for(store: Store, pipeline: str, stage: str):
    """One Prefect asset per stage of a store (its content key goes in the manifests), named by the store's
    directory name, not its absolute path, so the same store gives the same keys on every machine."""
    from prefect.assets import Asset
    from prefect.types.names import MAX_ASSET_KEY_LENGTH, RESTRICTED_ASSET_CHARACTERS

    key = f"csk://{store.root.name or 'store'}/{pipeline}/{stage}"
    for ch in RESTRICTED_ASSET_CHARACTERS:  # e.g. a space in the store path
        key = key.replace(ch, "_")
    if len(key) > MAX_ASSET_KEY_LENGTH:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        key = f"csk://{digest}/{pipeline}/{stage}"
    return Asset(key=key)


def _execute(store_root: str, pipeline: str, stage_name: str, params: dict, inputs: dict[str, ArtifactRef],
             shard_rows: int, verify: bool = False) -> dict:
    from prefect import get_run_logger
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    logger = get_run_logger()
    stage = get_pipeline(pipeline).stage(stage_name)
    store = Store(store_root, verify=verify)
    from prefect.runtime import flow_run

    from csk import lineage_events

    run = str(flow_run.get_id() or "local")
    lineage_events.start(store.root, run, pipeline, stage.name, list(inputs.values()))
    from csk.shards import sharding

    try:
        with sharding(shard_rows, store.tmp_dir):
            result = store.run(pipeline, stage, params, inputs)
    except Exception as exc:
        lineage_events.fail(store.root, run, pipeline, stage.name, exc)
        if isinstance(exc, CskError) and str(exc).startswith(f"stage {stage.name!r}"):
            raise
        # Whatever failed, the user is told which stage and why (a traceback alone names neither).
        cause = str(exc) if isinstance(exc, CskError) else f"{type(exc).__name__}: {exc}"
        raise StageError(f"stage {stage.name!r} failed: {cause}") from exc
    ref = result.ref
    manifest = ref.manifest()
    lineage_events.complete(store.root, run, pipeline, stage.name, manifest, ref.data_path, result.reused)
    rows = manifest["rows"]
    if result.reused:
        logger.info("%s: reused %s (key %s, not recomputed)", stage.name, ref.path, ref.key)
    else:
        logger.info("%s: computed %s in %.2fs (%s)", stage.name, ref.path, manifest["seconds"],
                    counts_line(rows, stage.unit))
    # Every run shows what each stage did, reused or not.
    create_table_artifact(
        key=_artifact_key(pipeline, stage.name),
        table=[{"stage": stage.name, "status": "reused" if result.reused else "computed", "key": ref.key,
                "rows_in": rows["in"], "rows_out": rows["out"], "rows_rejected": rows["rejected"], "path": ref.path}],
        description=f"{pipeline}/{stage.name}: row counts of artifact {ref.key}",
    )
    if not result.reused:
        for name, table in result.tables.items():
            create_table_artifact(key=_artifact_key(pipeline, stage.name, name), table=table,
                                  description=f"{pipeline}/{stage.name}: {name}")
        pngs = [f for f in manifest.get("outputs", []) if f.endswith(".png")]
        if pngs:
            # Inlined as data URIs: the Prefect UI cannot read the artifact store's files.
            parts = []
            for p in pngs:
                data = base64.b64encode(Path(ref.path, p).read_bytes()).decode()
                parts.append(f"![{p}](data:image/png;base64,{data})\n\n`{Path(ref.path, p)}`")
            create_markdown_artifact(key=_artifact_key(pipeline, stage.name, "plots"), markdown="\n\n".join(parts),
                                     description=f"{pipeline}/{stage.name}: plots")
    info = {"stage": stage.name, "key": ref.key, "path": ref.path, "rows": rows, "reused": result.reused,
            "seconds": manifest.get("seconds", 0.0) if not result.reused else 0.0}
    if result.reused:  # shown in the Prefect UI as Cached, not as an ordinary completion
        from prefect.states import Completed

        return Completed(name="Cached", message=f"reused artifact {ref.key} (not recomputed)", data=info)
    return info


# ------------------------------------------------------------------ flows
def flow_attribute(pipeline: Pipeline, steps) -> str:
    """The module attribute a pipeline's flow is reachable by (Prefect deployments import it)."""
    suffix = "" if steps is pipeline.main else "_" + steps.__name__
    return f"{pipeline.name}{suffix}_flow".replace("-", "_")


_FLOWS: dict[str, Any] = {}


def prefect_flow(pipeline: Pipeline, steps=None):
    """The Prefect flow running `steps` (default: the pipeline's main flow body)."""
    steps = steps or pipeline.main
    attr = flow_attribute(pipeline, steps)
    if attr not in _FLOWS:
        from prefect import flow

        from csk.config import load_config

        def body(config: str = "pipelines.toml", store: str = "artifacts", overrides: list[str] | None = None,
                 options: dict | None = None, until: str | None = None, only: list[str] | None = None) -> list[dict]:
            from csk.shards import cluster

            loaded = load_config(config, overrides or [], pipelines=[pipeline.name])
            rt = loaded.runtime
            with cluster(rt.runner, rt.address, rt.workers, rt.threads_per_worker):
                run = PipelineRun(pipeline, loaded[pipeline.name], store, shard_rows=rt.shard_rows, verify=rt.verify,
                                  until=until, only=only or (), steps=steps)
                steps(run, **(options or {}))
                return run.finish()

        body.__name__ = body.__qualname__ = attr
        name = pipeline.name if steps is pipeline.main else f"{pipeline.name}-{steps.__name__.replace('_', '-')}"
        _FLOWS[attr] = flow(name=name, log_prints=True, persist_result=False,  # only references travel
                            description=(steps.__doc__ or "").strip() or None)(body)
    return _FLOWS[attr]


def status(pipeline: Pipeline, config: Any, store: str | Path, steps=None, until: str | None = None,
           only: list[str] | tuple[str, ...] = (), **options: Any) -> list[dict]:
    """Which stages a run would reuse and which it would recompute, and why, without running anything
    (with `until` / `only`: what that partial run would do)."""
    run = PipelineRun(pipeline, config, store, dry=True, until=until, only=only, steps=steps)
    (steps or pipeline.main)(run, **options)
    return run.stages


def reuse_everything(pipeline: Pipeline, config: Any, store: str | Path, verify: bool = False) -> list[dict] | None:
    """A full run of the main flow when every stage's artifact is already in the store: decided from
    the keys alone (as `csk status` decides), each artifact checked as a reusing run checks it (sizes;
    content for source stages, or all with `verify`), and recorded as a run without starting Prefect
    (nothing to compute, nothing to orchestrate). None: something must run, so the run goes to Prefect
    as usual (also when a reused artifact would stop the run: Prefect's run says why)."""
    import uuid

    from csk import lineage_events
    from csk.artifacts import check_artifact

    try:
        plan = status(pipeline, config, store)
        if not plan or any(s.get("status") != "reused" for s in plan):
            return None
        st = Store(store, verify=verify)
        stages, refs = [], []
        for s in plan:
            ref = st.find(pipeline.name, s["stage"], s["key"])
            if ref is None:
                return None
            m = ref.manifest()
            if check_artifact(ref.path, content=verify or not m.get("inputs")) or m["rows"]["out"] == 0 \
                    or (m.get("notes") or {}).get("stop"):
                return None  # damaged, empty or stopping: the ordinary run reports it
            stages.append({"stage": s["stage"], "key": s["key"], "path": ref.path, "rows": m["rows"], "reused": True,
                           "seconds": 0.0})
            refs.append((ref, m))
    except Exception:  # noqa: BLE001 - anything unreadable: the ordinary run names it
        return None
    run_id = str(uuid.uuid4())
    for ref, m in refs:  # the same lineage events a reusing Prefect run emits
        inputs = [ArtifactRef(pipeline.name, i["stage"], i["key"], i["path"]) for i in m.get("inputs", [])]
        lineage_events.start(st.root, run_id, pipeline.name, ref.stage, inputs)
        lineage_events.complete(st.root, run_id, pipeline.name, ref.stage, m, ref.data_path, True)
    path = st.record_run(pipeline.name, run_id, stages)
    log.info("every stage reused: run recorded in %s without starting Prefect (nothing to compute)", path)
    return stages


def preflight(pipeline: Pipeline, config: Any, base_dir: Path | None = None) -> None:
    """What can be checked before Prefect starts: every configured input path and model of every stage
    (a model directory needs its config.json and weights). `base_dir`: the config file's directory,
    against which its relative paths were resolved (named in the error, with the likely fix)."""
    from csk.store import hash_inputs  # noqa: F401  (same resolution rules as the run)
    from csk.models import resolve_model
    from csk.params import typed_inputs, unused

    problems = []
    for stage in pipeline.stages:
        if stage.enabled is not None and not pipeline.enabled(stage.name, config):
            continue
        values = pipeline.stage_params(stage, config)
        dumped = {k: (v.model_dump() if hasattr(v, "model_dump") else v) for k, v in values.items()}
        for setting, kind, value in typed_inputs(stage.params_model, dumped):
            if unused(value):
                continue
            where = f"{pipeline.name}.{stage.config_table}.{setting}" if "." not in setting else f"{pipeline.name}.{setting}"
            try:
                if kind == "model":
                    resolve_model(str(value), "model", where, assemble=False)
                elif not Path(str(value)).exists():
                    problems.append(f"  {where}: {value} does not exist{_base_hint(Path(str(value)), base_dir)}")
                elif kind == "file" and Path(str(value)).is_dir():
                    problems.append(f"  {where}: {value} is a directory; this setting names one file "
                                    f"({_arg_doc(stage, setting)})")
            except CskError as exc:
                problems.append(f"  {exc}")
    if problems:
        raise CskError("the configuration names inputs that cannot be used:\n" + "\n".join(dict.fromkeys(problems)))


def _arg_doc(stage: Stage, setting: str) -> str:
    """A setting's one-line doc (what file it wants), from the stage's docstring."""
    import docstring_parser

    doc = docstring_parser.parse(stage.fn.__doc__ or "")
    return next((" ".join((p.description or "").split()) for p in doc.params if p.arg_name == setting),
                "see `csk config`")


def _base_hint(path: Path, base_dir: Path | None) -> str:
    """Why a relative path may have missed: it was resolved against the config file's directory."""
    if base_dir is None:
        return ""
    try:
        rel = path.relative_to(base_dir)
    except ValueError:
        return ""  # written as an absolute path
    here = Path.cwd() / rel
    if here.exists() and Path.cwd().resolve() != Path(base_dir).resolve():
        return (f" (relative paths in the config are resolved against its directory {base_dir}; {rel} exists "
                f"under the working directory: write {here} or move the config)")
    return f" (resolved against the config file's directory {base_dir})"


def __getattr__(name: str):
    """`csk.orchestration.<pipeline>_flow` (and `<pipeline>_<steps>_flow`): the importable Prefect flows."""
    if name.endswith("_flow") and not name.startswith("_"):
        from csk.pipeline import discover

        for p in discover().values():
            for steps in p.flows:
                if flow_attribute(p, steps) == name:
                    return prefect_flow(p, steps)
    raise AttributeError(name)
