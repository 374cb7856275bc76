"""Prefect glue around the stage runtime: one materializing task per stage.

The task declares its output as a Prefect asset with the upstream stages' assets as
dependencies, so Prefect's lineage sees the same graph as the manifests (which remain the
lineage of record), and publishes a table artifact with the stage's counts.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.assets import Asset, materialize
from prefect.cache_policies import NONE
from prefect.runtime import flow_run

from csk.runtime import ArtifactRef, Stage, Store


def _artifact_key(*parts: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


def asset_for(store: Store, pipeline: str, stage: str) -> Asset:
    """One Prefect asset per stage of a store (its content key goes in the manifests)."""
    from prefect.types.names import MAX_ASSET_KEY_LENGTH, RESTRICTED_ASSET_CHARACTERS

    key = f"file://{store.root.as_posix()}/{pipeline}/{stage}"
    for ch in RESTRICTED_ASSET_CHARACTERS:  # e.g. a space in the store path
        key = key.replace(ch, "_")
    if len(key) > MAX_ASSET_KEY_LENGTH:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        key = f"file://{digest}/{pipeline}/{stage}"
    return Asset(key=key)


def _execute(store_root: str, pipeline: str, stage: Stage, params: dict, inputs: list[ArtifactRef]) -> dict:
    logger = get_run_logger()
    store = Store(store_root)
    result = store.run(pipeline, stage, params, inputs)
    ref = result.ref
    manifest = ref.manifest()
    rows = manifest["rows"]
    if result.reused:
        logger.info("%s: reused %s (key %s, not recomputed)", stage.name, ref.path, ref.key)
    else:
        logger.info("%s: computed %s in %.2fs (%d in, %d out, %d rejected)", stage.name, ref.path,
                    manifest["seconds"], rows["in"], rows["out"], rows["rejected"])
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
        pngs = [f for f in manifest.get("files", []) if f.endswith(".png")]
        if pngs:
            # Inlined as data URIs: the Prefect UI cannot read the artifact store's files.
            parts = []
            for p in pngs:
                data = base64.b64encode(Path(ref.path, p).read_bytes()).decode()
                parts.append(f"![{p}](data:image/png;base64,{data})\n\n`{Path(ref.path, p)}`")
            create_markdown_artifact(key=_artifact_key(pipeline, stage.name, "plots"), markdown="\n\n".join(parts),
                                     description=f"{pipeline}/{stage.name}: plots")
    return {"stage": stage.name, "key": ref.key, "path": ref.path, "rows": rows, "reused": result.reused}


class PipelineRun:
    """Runs stages of one pipeline as Prefect tasks and records the run for `csk artifacts`."""

    def __init__(self, pipeline: str, store_root: str, merge_latest: bool = False):
        self.pipeline = pipeline
        self.merge_latest = merge_latest  # a partial rerun updates the latest run's record
        self.store = Store(store_root)
        self.store.clean_stale_tmp()
        self.stages: list[dict] = []

    def stage(self, stage: Stage, *inputs: ArtifactRef, params: dict | None = None) -> ArtifactRef:
        params = params or {}
        if inputs:
            rows = inputs[0].manifest()["rows"]
            if rows["out"] == 0:
                from csk.errors import CskError

                raise CskError(
                    f"stage {inputs[0].stage!r} left no rows ({rows['in']} in, {rows['rejected']} rejected; reasons in "
                    f"{inputs[0].rejected_path}): nothing for {stage.name!r} to do. Check that stage's settings.")
        task = materialize(
            asset_for(self.store, self.pipeline, stage.name),
            asset_deps=[asset_for(self.store, self.pipeline, r.stage) for r in inputs],
            name=stage.name,
            cache_policy=NONE,
            persist_result=False,
        )(_execute)
        info = task(str(self.store.root), self.pipeline, stage, params, list(inputs))
        self.stages.append(info)
        return ArtifactRef(self.pipeline, stage.name, info["key"], info["path"])

    def adopt(self, entry: dict) -> ArtifactRef:
        """Use an artifact of an earlier run as it is (recorded in this run as reused)."""
        ref = self.store.ref_from_manifest_entry(self.pipeline, entry)
        if self.store.find(self.pipeline, ref.stage, ref.key) is None:
            from csk.errors import CskError

            raise CskError(f"artifact {ref.stage}/{ref.key} of the latest run is missing from {self.store.root}")
        get_run_logger().info("%s: reused upstream artifact %s from the latest run", ref.stage, ref.key)
        self.stages.append({**entry, "reused": True})
        return ref

    def finish(self) -> list[dict]:
        run_id = str(flow_run.get_id() or "local")
        stages = self.stages
        if self.merge_latest:
            mine = {s["stage"] for s in self.stages}
            earlier = [{**s, "reused": True} for s in self.store.latest_run(self.pipeline)["stages"]
                       if s["stage"] not in mine]
            stages = earlier + self.stages
        path = self.store.record_run(self.pipeline, run_id, stages)
        reused = [s["stage"] for s in self.stages if s["reused"]]
        logging.getLogger("csk").info("run recorded in %s; reused: %s", path, ", ".join(reused) or "none")
        return self.stages
