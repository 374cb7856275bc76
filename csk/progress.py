"""Progress of long work, labelled with the stage it belongs to: a tqdm bar in the terminal
("embed: encode 1,204/28,000 texts") and, inside a Prefect task run, a Prefect progress artifact
that the UI shows moving (created once, updated at most every `PREFECT_EVERY` seconds).

The runtime says which stage is running (`stage_label`); code in `tasks/` only says what it counts:

    with progress(len(texts), "encode", unit="texts") as bar:
        ...; bar.update(len(batch))
"""

from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")
PREFECT_EVERY = 2.0  # seconds between two updates of a Prefect progress artifact
_STAGE: contextvars.ContextVar[str | None] = contextvars.ContextVar("csk_stage", default=None)


@contextmanager
def stage_label(name: str) -> Iterator[None]:
    """Label every bar opened inside with the stage's name (the runtime wraps each stage's compute)."""
    token = _STAGE.set(name)
    try:
        yield
    finally:
        _STAGE.reset(token)


def label(desc: str) -> str:
    stage = _STAGE.get()
    return f"{stage}: {desc}" if stage and not desc.startswith(f"{stage}:") else desc


def _in_prefect_task() -> bool:
    try:
        from prefect.context import TaskRunContext

        return TaskRunContext.get() is not None
    except Exception:  # noqa: BLE001 - no Prefect, no artifact
        return False


DELAY = 5.0  # a bar shows once its work has run this long: short work prints nothing, long work always shows
LOG_EVERY = 30.0  # seconds between two lines of a bar written to a file or pipe (a log), not a terminal


class _Lines:
    """A bar's output as whole lines: tqdm redraws a terminal line with carriage returns, which a log file
    keeps as one ever longer line; here each redraw is a line of its own."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.replace("\r", "\n")
        for line in filter(None, (t.strip() for t in text.split("\n"))):
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


def _bar_stream():
    """(stream, seconds between redraws): the terminal as tqdm draws it, else whole lines every LOG_EVERY."""
    import sys

    stream = sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return (stream, 1.0) if tty else (_Lines(stream), LOG_EVERY)


class Progress:
    """A tqdm bar plus, in a Prefect task, a progress artifact; `disable` (short work, or nothing to count)
    turns both off."""

    def __init__(self, total: int | None, desc: str, unit: str = "it", disable: bool = False):
        from tqdm.auto import tqdm

        self.desc = label(desc)
        self.total = total
        disable = disable or total == 0  # "0 lines [00:00, ?]" tells a reader nothing
        stream, every = _bar_stream()
        self.bar = tqdm(total=total, desc=self.desc, unit=f" {unit}" if unit != "it" else unit, disable=disable,
                        mininterval=every, maxinterval=max(every, 10.0), dynamic_ncols=every == 1.0, file=stream,
                        delay=DELAY)
        self.n = 0
        self._artifact = None
        self._last = 0.0
        self._started = time.monotonic()
        # long work only (past DELAY): small runs make no artifact
        self._wants_artifact = bool(total) and not disable and _in_prefect_task()

    def update(self, n: int = 1, **postfix) -> None:
        self.n += n
        self.bar.update(n)
        if postfix:
            self.bar.set_postfix(**postfix)
        now = time.monotonic()
        if self._wants_artifact and self._artifact is None and now - self._started >= DELAY:
            self._wants_artifact = False
            try:
                from prefect.artifacts import create_progress_artifact

                self._artifact = create_progress_artifact(0.0, description=self.desc)
            except Exception:  # noqa: BLE001 - progress must never fail a stage
                self._artifact = None
        if self._artifact is not None and (now - self._last >= PREFECT_EVERY or self.n >= (self.total or 0)):
            self._last = now
            self._push()

    def set_total(self, total: int) -> None:
        """A better estimate of the total (work whose length is known only as it goes)."""
        if total != self.total:
            self.total = self.bar.total = total
            self.bar.refresh()

    def _push(self) -> None:
        try:
            from prefect.artifacts import update_progress_artifact

            update_progress_artifact(self._artifact, 100.0 * min(self.n, self.total) / self.total,
                                     description=self.desc)
        except Exception:  # noqa: BLE001
            self._artifact = None

    def close(self) -> None:
        if self._artifact is not None and self.total:
            self.n = self.total if self.n >= self.total else self.n
            self._push()
        self.bar.close()


@contextmanager
def progress(total: int | None, desc: str, unit: str = "it", disable: bool = False) -> Iterator[Progress]:
    bar = Progress(total, desc, unit, disable)
    try:
        yield bar
    finally:
        bar.close()


def track(items: Iterable[T], total: int, desc: str, unit: str = "it", step: int = 1,
          disable: bool = False) -> Iterator[T]:
    """Iterate with progress; each item counts `step` (e.g. a batch start in range(0, n, batch))."""
    with progress(total, desc, unit, disable) as bar:
        for item in items:
            yield item
            bar.update(min(step, max(0, total - bar.n)))
