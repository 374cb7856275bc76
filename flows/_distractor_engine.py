"""The distractor engine's steps, shared by the flows that run it (CICERO's and the generic
`csk distractors rebuild`): each flow declares the stages in its own pipeline; this is the order they run in."""

from __future__ import annotations

from pydantic import model_validator

from csk.errors import ConfigError
from csk.orchestration import PipelineRun
from csk.pipeline import PipelineSettings
from flows import ran_dry
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.verification import verification


class EngineSettings(PipelineSettings):
    """The settings of a pipeline that runs the engine; the rules here hold across its stages' tables, so
    the configuration is refused before Prefect starts rather than at the stage."""

    @model_validator(mode="after")
    def _server_has_an_address(self):
        # the pipeline's composed settings (csk.pipeline.Pipeline.config_model) are named after it
        pool = getattr(self, "counterfactuals", None)
        if pool is None or "server" not in pool.generators:
            return self
        unset = [k for k in ("base_url", "model") if not str(getattr(pool.server, k) or "").strip()]
        if unset:
            name = type(self).__name__
            raise ConfigError(
                f"{name}.counterfactuals.generators names \"server\" but {name}.counterfactuals.server."
                f"{' and .'.join(unset)} {'is' if len(unset) == 1 else 'are'} empty: set base_url to the server's "
                "API root (e.g. http://127.0.0.1:8000/v1) and model to the model's name there, or take \"server\" "
                "out of the generators")
        return self


# What a release of the engine's choices shows (csk.release.Release.shares / figures / deviations), the same
# for CICERO's and the generic pipeline: where the final distractors were written and by whom (AF's manifest
# counts them), and the measured quality of the rebuilt choices beside the published ones.
ENGINE_SHARES = (
    ("adversarial_filter", "final_by_tier", "Final distractors by tier (where each was written)", "tier"),
    ("adversarial_filter", "final_by_generator", "Final distractors by generator", "generator"),
)
ENGINE_FIGURES = {"distractor_quality": "Distractor quality (the rebuilt choices beside the published ones)"}


def engine_deviations(pipeline: str) -> tuple:
    """The engine's known deviations from the paper, each a sentence of the run's own parameters (None: not
    this run's): the generators of its pool, no NLI model, the discriminator AF fine-tuned."""
    return (
        lambda p: None if "t5" in p["counterfactuals"]["generators"] else
        "The counterfactual pool comes from " + " and ".join(p["counterfactuals"]["generators"]) +
        f" generators; the paper's T5 generator runs when {pipeline}.counterfactuals.generators includes t5 "
        "with a model directory.",
        lambda p: None if p["candidate_filter"]["nli"] not in ("off", "", None) else
        "No NLI model checked that distractors contradict the gold (candidate_filter.nli = off): a "
        "rewritten distractor rests on a contradicting rule (antonym, negation, quantity), a retrieved "
        "one on being another dialogue's answer; adversarial_filter's manifest counts each kind.",
        lambda p: None if p["adversarial_filter"]["discriminator"] == "transformer" else
        "Adversarial filtering used a linear probe on sentence embeddings as its discriminator (asked "
        "for); the fine-tuned one runs with adversarial_filter.discriminator = cached-transformer." if
        p["adversarial_filter"]["discriminator"] == "linear-probe" else
        f"Adversarial filtering fine-tuned {p['adversarial_filter']['model']} as its discriminator (on "
        f"a CPU its top {p['adversarial_filter']['trainable_layers']} layer(s) and head, the lower ones "
        "frozen; on CUDA every layer), not the paper's roberta-large: adversarial_filter.model takes "
        "its directory.",
    )


ENGINE_STOPS = ("the distractor engine stops there, this run has no multiple-choice items; more answers, from "
                "more dialogues, give it candidates")


def choose_distractors(run: PipelineRun, items):
    """Counterfactual pool -> candidate filter -> adversarial filtering -> (AF-Lite) -> human verification.
    Returns (the filtered pool, the verified choices); (pool, None) where a stage kept nothing."""
    pool = run.stage(counterfactuals, instances=items)
    if ran_dry(pool, "candidates", ENGINE_STOPS):
        return pool, None
    kept = run.stage(candidate_filter, candidates=pool, instances=items)
    if ran_dry(kept, "candidates", ENGINE_STOPS):
        return kept, None
    chosen = run.stage(adversarial_filter, instances=items, candidates=kept)
    if run.enabled(aflite) and not ran_dry(chosen, "instances", ENGINE_STOPS):
        chosen = run.stage(aflite, mcq=chosen, instances=items)
    if ran_dry(chosen, "instances", ENGINE_STOPS):
        return kept, None
    return kept, run.stage(verification, distractors=chosen, instances=items)
