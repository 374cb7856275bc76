"""The distractor engine's steps, shared by the flows that run it (CICERO's and the generic
`csk distractors rebuild`): each flow declares the stages in its own pipeline; this is the order they run in."""

from __future__ import annotations

import logging

from csk.orchestration import PipelineRun
from tasks.distractors.adversarial import adversarial_filter
from tasks.distractors.aflite import aflite
from tasks.distractors.candidate_filter import candidate_filter
from tasks.distractors.counterfactuals import counterfactuals
from tasks.distractors.verification import verification


def ran_dry(ref, what: str) -> bool:
    """True when `ref`, a finished stage's artifact, kept no rows (a first batch of one or two answers: no
    rewrite rule applies and there is no other dialogue's answer to retrieve). The engine then stops there,
    saying so, and the run goes on without multiple-choice items; its manifest holds every rejection."""
    from csk.artifacts import ArtifactRef

    if not isinstance(ref, ArtifactRef):  # a dry or partial run's placeholder
        return False
    rows = ref.manifest()["rows"]
    if rows["out"]:
        return False
    logging.getLogger("csk").warning(
        f"{ref.stage} kept no {what} ({rows['in']} in, {rows['rejected']} rejected: `csk show {ref.pipeline} "
        f"{ref.stage} --rejected`): the distractor engine stops there, this run has no multiple-choice items; "
        "more answers, from more dialogues, give it candidates")
    return True


def choose_distractors(run: PipelineRun, items):
    """Counterfactual pool -> candidate filter -> adversarial filtering -> (AF-Lite) -> human verification.
    Returns (the filtered pool, the verified choices); (pool, None) where a stage kept nothing."""
    pool = run.stage(counterfactuals, instances=items)
    if ran_dry(pool, "candidates"):
        return pool, None
    kept = run.stage(candidate_filter, candidates=pool, instances=items)
    if ran_dry(kept, "candidates"):
        return kept, None
    chosen = run.stage(adversarial_filter, instances=items, candidates=kept)
    if run.enabled(aflite) and not ran_dry(chosen, "instances"):
        chosen = run.stage(aflite, mcq=chosen, instances=items)
    if ran_dry(chosen, "instances"):
        return kept, None
    return kept, run.stage(verification, distractors=chosen, instances=items)
