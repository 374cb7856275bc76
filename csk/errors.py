"""Errors meant for the person running the pipeline: each one says what is wrong and where."""

from __future__ import annotations


class CskError(Exception):
    """Base class: the CLI prints these as a one-line message and exits non-zero."""


class InputError(CskError):
    """A source file is missing or one of its records is malformed."""

    def __init__(self, path: str, record: int | str | None, message: str):
        self.path = str(path)
        self.record = record
        self.message = message
        where = self.path if record is None else f"{self.path}, record {record}"
        super().__init__(f"{where}: {message}")


class ConfigError(CskError):
    """pipelines.toml or a --set override is invalid."""


class ContractError(CskError):
    """An artifact violates its data contract."""


class ModelError(CskError):
    """A configured model cannot be found or loaded."""


class ConservationError(CskError):
    """A stage lost rows: rows in != rows out + rows rejected."""
