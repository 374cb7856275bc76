"""Small PNG plots for artifacts (rendered headless, without timestamps in the file)."""

from __future__ import annotations

import io
from typing import Sequence


def figure(width: float = 6, height: float = 4, ncols: int = 1):
    """(pyplot, figure, axes) on the headless backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(1, ncols, figsize=(width, height))


def png(plt, fig) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def line_png(x: Sequence, series: dict[str, Sequence[float]], title: str, xlabel: str, ylabel: str) -> bytes:
    plt, fig, ax = figure()
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", label=name)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if all(float(v).is_integer() for v in x):  # rounds, iterations, sizes: no tick at 1.5
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    return png(plt, fig)


def hist_png(values: Sequence[float], title: str, xlabel: str, bins: int = 20) -> bytes:
    plt, fig, ax = figure()
    ax.hist(list(values), bins=bins)
    ax.set(title=title, xlabel=xlabel, ylabel="count")
    return png(plt, fig)


def bar_png(labels: Sequence[str], values: Sequence[float], title: str, ylabel: str) -> bytes:
    plt, fig, ax = figure()
    ax.bar([str(x) for x in labels], list(values))
    ax.set(title=title, ylabel=ylabel)
    ax.tick_params(axis="x", rotation=20)
    return png(plt, fig)
