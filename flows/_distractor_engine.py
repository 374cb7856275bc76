"""The distractor engine's steps, shared by the flows that run it (CICERO's and the generic
`csk distractors rebuild`): each flow declares the stages in its own pipeline; this is the order they run in."""

from __future__ import annotations

from csk.orchestration import PipelineRun
from flows import ran_dry
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.verification import verification


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
