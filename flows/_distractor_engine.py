"""The distractor engine's steps, shared by the flows that run it (CICERO's and the generic
`csk distractors rebuild`): each flow declares the stages in its own pipeline; this is the order they run in."""

from __future__ import annotations

from csk.orchestration import PipelineRun
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.verification import verification


def choose_distractors(run: PipelineRun, items):
    """Counterfactual pool -> candidate filter -> adversarial filtering -> (AF-Lite) -> human verification.
    Returns (the filtered pool, the verified choices)."""
    pool = run.stage(counterfactuals, instances=items)
    kept = run.stage(candidate_filter, candidates=pool, instances=items)
    chosen = run.stage(adversarial_filter, instances=items, candidates=kept)
    if run.enabled(aflite):
        chosen = run.stage(aflite, mcq=chosen, instances=items)
    return kept, run.stage(verification, distractors=chosen, instances=items)
