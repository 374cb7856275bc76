"""CICERO (Ghosal et al. 2022): the construction steps of SEEDS.md section 1, in order."""

from __future__ import annotations

from prefect import flow, get_run_logger

from csk.config import CiceroConfig, load_config
from csk.errors import CskError
from csk.runtime import ArtifactRef
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
        distractor_engine(run, cfg, answers, splits)
    else:
        get_run_logger().info("cicero.annotations.release is not set: stopping after the annotation task export")

    run.stage(S["statistics"], dialogues, filtered, deduped, targets, *([splits] if splits else []))
    return run.finish()


def distractor_engine(run: PipelineRun, cfg: CiceroConfig, instances: ArtifactRef, splits: ArtifactRef | None) -> None:
    """SEEDS 1.6: counterfactual pool -> candidate filter -> adversarial filtering -> (AF-Lite) ->
    human verification -> MCQ files, and the distractor-quality measurement."""
    embed = cfg.embed.model_dump()
    pool = run.stage(S["counterfactuals"], instances, params={"seed": cfg.seed, **cfg.counterfactuals.model_dump()})
    kept = run.stage(S["candidate_filter"], pool, params={"embed": embed, **cfg.candidate_filter.model_dump()})
    chosen = run.stage(S["adversarial_filter"], instances, kept,
                       params={"seed": cfg.seed, "embed": embed, **cfg.adversarial_filter.model_dump()})
    if cfg.aflite.enabled:
        af = cfg.aflite.model_dump(exclude={"enabled"})
        chosen = run.stage(S["aflite"], chosen, instances, params={"seed": cfg.seed, "embed": embed, **af})
    verified = run.stage(S["verification"], chosen, params=cfg.verification.model_dump())
    mcq = run.stage(S["mcq"], verified, instances, *([splits] if splits else []), params={"seed": cfg.seed})
    run.stage(S["distractor_quality"], mcq, instances, kept, params={"seed": cfg.seed, "embed": embed})


@flow(name="cicero-rebuild-distractors", log_prints=True)
def rebuild_distractors_flow(config: str = "pipelines.toml", store: str = "artifacts",
                             overrides: list[str] | None = None, release: str | None = None) -> list[dict]:
    """Only the distractor stages: on the latest run's cached instances, or on a released file alone."""
    cfg = load_config(config, overrides or []).cicero
    run = PipelineRun("cicero", store, merge_latest=not release)
    if release:
        instances = run.stage(S["release"], params={"release": release, "lenient": cfg.annotations.lenient})
        splits = None
    else:
        latest = {e["stage"]: e for e in run.store.latest_run("cicero")["stages"]}
        if "annotations" not in latest:
            raise CskError("the latest cicero run has no annotations artifact: run `csk run cicero` with "
                           "cicero.annotations.release set, or pass --release FILE")
        instances = run.adopt(latest["annotations"])
        splits = run.adopt(latest["splits"]) if "splits" in latest else None
    distractor_engine(run, cfg, instances, splits)
    return run.finish()


if __name__ == "__main__":
    cicero_flow()
