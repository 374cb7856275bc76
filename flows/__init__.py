"""One module per dataset, each declaring `PIPELINE = Pipeline(...)`: its stages, its flow bodies
(each reads as the list of construction steps it runs) and its own commands. `csk` finds them
through `csk.pipeline.discover`, which imports every module of this package."""
