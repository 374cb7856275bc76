"""OpenLineage events for every stage run (openlineage-python): START when a stage begins, then
COMPLETE (computed or reused) or FAIL with the error. The job is `PIPELINE.STAGE`; inputs are the
upstream artifacts, the source files and the models, each with its sha256 as the dataset version;
the output is the artifact, named by pipeline/stage/key (content-addressed, so the same on every
machine), with its schema, row count and data sha256.

Events go to `<store>/_lineage/events.jsonl` (the client's file transport); with OPENLINEAGE_URL set
they go to that receiver over HTTP (Marquez is the usual one). CSK_OPENLINEAGE=off turns them off.
The manifests stay the lineage of record; these events let lineage tools see the same graph.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

log = logging.getLogger("csk")
PRODUCER = "urn:csk:producer"
NAMESPACE = "csk"


def enabled() -> bool:
    return os.environ.get("CSK_OPENLINEAGE", "on").lower() not in ("off", "0", "false")


def _client(store_root: Path):
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.file import FileConfig, FileTransport

    url = os.environ.get("OPENLINEAGE_URL")
    if url:
        return OpenLineageClient(url=url)
    path = Path(store_root) / "_lineage" / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(path), append=True)))


def run_id(flow_run: str, pipeline: str, stage: str) -> str:
    """One OpenLineage run per stage of a flow run, the same id for its START and its end."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"csk:{flow_run}:{pipeline}:{stage}"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _emit(store_root: Path, event) -> None:
    try:
        _client(store_root).emit(event)
    except Exception as exc:  # noqa: BLE001 - lineage must never fail a stage
        log.warning("OpenLineage event not emitted: %s", exc)


def _job(pipeline: str, stage: str):
    from openlineage.client.event_v2 import Job
    from openlineage.client.facet_v2 import job_type_job

    return Job(namespace=NAMESPACE, name=f"{pipeline}.{stage}",
               facets={"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="CSK",
                                                               jobType="STAGE")})


def start(store_root: Path, flow_run: str, pipeline: str, stage: str, inputs: list) -> None:
    if not enabled():
        return
    from openlineage.client.event_v2 import Run, RunEvent, RunState

    _emit(store_root, RunEvent(eventType=RunState.START, eventTime=_now(), producer=PRODUCER,
                               run=Run(runId=run_id(flow_run, pipeline, stage)), job=_job(pipeline, stage),
                               inputs=[_artifact_input(r.pipeline, r.stage, r.key) for r in inputs]))


def _artifact_input(pipeline: str, stage: str, key: str, sha: str | None = None):
    from openlineage.client.event_v2 import InputDataset
    from openlineage.client.facet_v2 import dataset_version_dataset

    facets = {"version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=sha)} if sha else {}
    return InputDataset(namespace=NAMESPACE, name=f"{pipeline}/{stage}/{key}", facets=facets)


def complete(store_root: Path, flow_run: str, pipeline: str, stage: str, manifest: dict, data_path: Path,
             reused: bool) -> None:
    if not enabled():
        return
    import pyarrow.parquet as pq
    from openlineage.client.event_v2 import InputDataset, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import (
        dataset_version_dataset,
        output_statistics_output_dataset,
        processing_engine_run,
        schema_dataset,
        tags_run,
    )

    version = dataset_version_dataset.DatasetVersionDatasetFacet
    inputs = [_artifact_input(pipeline, i["stage"], i["key"], i.get("data_sha256"))
              for i in manifest.get("inputs", [])]
    inputs += [InputDataset(namespace="file", name=f["path"], facets={"version": version(datasetVersion=f["sha256"])})
               for f in manifest.get("files", [])]
    inputs += [InputDataset(namespace="model", name=m.get("path") or m.get("spec") or m.get("name", "model"),
                            facets={"version": version(datasetVersion=m["sha256"])} if m.get("sha256") else {})
               for m in manifest.get("models", [])]
    schema = pq.read_schema(data_path)
    fields = [schema_dataset.SchemaDatasetFacetFields(name=f.name, type=str(f.type)) for f in schema]
    output = OutputDataset(
        namespace=NAMESPACE, name=f"{pipeline}/{stage}/{manifest['key']}",
        facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields),
                "version": version(datasetVersion=manifest["data_sha256"])},
        outputFacets={"outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=int(manifest["rows"]["out"]), size=int(Path(data_path).stat().st_size), fileCount=1)})
    run = Run(runId=run_id(flow_run, pipeline, stage), facets={
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=manifest.get("packages", {}).get("prefect") or "unknown", name="csk",
            openlineageAdapterVersion=_client_version()),
        # a reused artifact was not recomputed: its COMPLETE says so
        "tags": tags_run.TagsRunFacet(tags=[tags_run.TagsRunFacetFields(
            key="csk.status", value="reused" if reused else "computed", source="CSK")])})
    _emit(store_root, RunEvent(eventType=RunState.COMPLETE, eventTime=_now(), producer=PRODUCER, run=run,
                               job=_job(pipeline, stage), inputs=inputs, outputs=[output]))


def fail(store_root: Path, flow_run: str, pipeline: str, stage: str, error: BaseException) -> None:
    if not enabled():
        return
    from openlineage.client.event_v2 import Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run

    run = Run(runId=run_id(flow_run, pipeline, stage), facets={
        "errorMessage": error_message_run.ErrorMessageRunFacet(message=str(error)[:2000], programmingLanguage="python")})
    _emit(store_root, RunEvent(eventType=RunState.FAIL, eventTime=_now(), producer=PRODUCER, run=run,
                               job=_job(pipeline, stage)))


def _client_version() -> str:
    from importlib.metadata import version

    return version("openlineage-python")
