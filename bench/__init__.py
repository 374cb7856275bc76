"""Benchmarks: each prints the machine first, then ratios against a baseline run beside it."""


def reporter():
    """(say, lines): `say(text)` prints a line at once and keeps it for the results file."""
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    return say, lines


def machine_line() -> str:
    """The CPU, threads, vector ISA and torch version the figures below were measured with."""
    import torch

    from csk import compute

    m = compute.machine()
    return f"machine: {m['cpu']}, {m['threads']} threads, {m['cpu_capability']}, torch {torch.__version__}"
