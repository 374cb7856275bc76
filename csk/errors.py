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


class StageError(CskError):
    """A stage failed on something that is not the user's input (a bug, a full disk, a killed worker):
    the message names the stage and the cause; the cause's traceback stays in the log."""


class IntegrityError(CskError):
    """A stored artifact's files do not match the checksums its manifest recorded."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("damaged artifact files (the manifest's checksums do not match):\n"
                         + "\n".join(f"  {p}" for p in self.problems)
                         + "\nrun `csk verify PIPELINE --repair` to move damaged artifacts aside, then rerun to "
                           "recompute them")


class NoRowsError(CskError):
    """A stage kept no rows, so the stages after it have nothing to work on: the message names the
    stage, the input files and the rejection reasons with their counts."""


class SourceError(CskError):
    """A source file reads as another format (no row, or most of its records unreadable): the stage's
    artifact and rejected rows are written, then the run stops naming the file, the share and the reasons."""
