"""The computations: plain functions from DataFrames + params to a StageOutput, no Prefect."""
