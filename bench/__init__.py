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


def rss_gib(field: str = "RssAnon") -> float:
    """This process's resident memory now (GiB), from /proc: RssAnon is what it holds itself; RssFile the
    pages of memory-mapped files the kernel keeps in its page cache and may drop at will."""
    from pathlib import Path

    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


class PeakMemory:
    """The most resident memory (RssAnon: what the process holds itself) while the block runs, sampled every
    `every` seconds in a thread; `.gib` and `.mib` after the block. Unlike ru_maxrss, each block has its own
    peak, so sizes measured in one process do not inherit the largest one's."""

    def __init__(self, every: float = 0.2):
        self.every = every
        self.gib = float("nan")

    def __enter__(self) -> "PeakMemory":
        import threading

        self.gib = rss_gib()
        self._done = threading.Event()

        def watch():
            while not self._done.wait(self.every):
                self.gib = max(self.gib, rss_gib())

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.gib = max(self.gib, rss_gib())

    @property
    def mib(self) -> float:
        return self.gib * 1024
