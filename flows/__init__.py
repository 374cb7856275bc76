"""One module per dataset, each declaring `PIPELINE = Pipeline(...)`: its stages, its flow bodies
(each reads as the list of construction steps it runs) and its own commands. `csk` finds them
through `csk.pipeline.discover`, which imports every module of this package."""


def ran_dry(ref, what: str, then: str) -> bool:
    """True when `ref`, a finished stage's artifact, kept no rows: on a first batch of one or two answers a
    stage may find nothing to build (no candidate distractor, no P-MCQA instance). The flow then skips what
    needs those rows, saying so (`then`, a warning), and the run goes on; the stage's manifest holds every
    rejection with its reason."""
    import logging

    from csk.artifacts import ArtifactRef

    if not isinstance(ref, ArtifactRef):  # a dry or partial run's placeholder
        return False
    rows = ref.manifest()["rows"]
    if rows["out"]:
        return False
    logging.getLogger("csk").warning(
        f"{ref.stage} kept no {what} ({rows['in']} in, {rows['rejected']} rejected: `csk show {ref.pipeline} "
        f"{ref.stage} --rejected`): {then}")
    return True
