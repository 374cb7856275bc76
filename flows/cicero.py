"""CICERO (Ghosal et al. 2022): the construction steps of SEEDS.md section 1, in order."""

from __future__ import annotations

from prefect import flow, get_run_logger

from csk.config import load_config
from flows.runtime import PipelineRun
from flows.stages import CICERO as S


@flow(name="cicero", log_prints=True)
def cicero_flow(config: str = "pipelines.toml", store: str = "artifacts", overrides: list[str] | None = None) -> list[dict]:
    cfg = load_config(config, overrides or []).cicero
    run = PipelineRun("cicero", store)
    embed = cfg.embed.model_dump()

    dialogues = run.stage(S["sources"], params=cfg.sources.model_dump())
    filtered = run.stage(S["length_filter"], dialogues, params=cfg.length_filter.model_dump())
    embeddings = run.stage(S["embed"], filtered, params=embed)
    deduped = run.stage(S["dedup"], filtered, embeddings, params=cfg.dedup.model_dump())
    targets = run.stage(S["targets"], deduped, params={"seed": cfg.seed, "embed": embed, **cfg.targets.model_dump()})
    tasks = run.stage(S["annotation_tasks"], targets, deduped)

    splits = None
    if cfg.annotations.release:
        answers = run.stage(S["annotations"], deduped, tasks, params=cfg.annotations.model_dump())
        splits = run.stage(S["splits"], answers, params={"seed": cfg.seed, **cfg.splits.model_dump()})
        run.stage(S["nlg"], splits, answers)
    else:
        get_run_logger().info("cicero.annotations.release is not set: stopping after the annotation task export")

    run.stage(S["statistics"], dialogues, filtered, deduped, targets, *([splits] if splits else []))
    return run.finish()


if __name__ == "__main__":
    cicero_flow()
