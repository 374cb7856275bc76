"""csk: reference data-construction pipelines for commonsense-dialogue datasets."""

__version__ = "0.1.0"
