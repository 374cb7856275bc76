"""CICERO (Ghosal et al. 2022): the construction steps of SEEDS.md section 1, in order."""

from __future__ import annotations

from prefect import flow

from csk.config import load_config
from flows.runtime import PipelineRun
from flows.stages import CICERO as S


@flow(name="cicero", log_prints=True)
def cicero_flow(config: str = "pipelines.toml", store: str = "artifacts", overrides: list[str] | None = None) -> list[dict]:
    cfg = load_config(config, overrides or []).cicero
    run = PipelineRun("cicero", store)

    dialogues = run.stage(S["sources"], params=cfg.sources.model_dump())
    run.stage(S["length_filter"], dialogues, params=cfg.length_filter.model_dump())

    return run.finish()


if __name__ == "__main__":
    cicero_flow()
