"""Where the benches find the real released samples: the folder `CSK_REAL_SAMPLES` names (docs/testing.md,
"The real released samples", says which file to take from which public repository). Nothing outside the
repository is assumed: unset, a bench that needs them says so, and one that can do without falls back on
the bundled sample."""

from __future__ import annotations

import os
from pathlib import Path


def real_samples() -> Path | None:
    """The folder of real released samples, or None when `CSK_REAL_SAMPLES` is unset."""
    value = os.environ.get("CSK_REAL_SAMPLES")
    return Path(value) if value else None


def real_file(*parts: str) -> Path | None:
    """A file of the real samples (e.g. "cicero", "cicero_v2_val_sample.jsonl"), or None when unset."""
    root = real_samples()
    return root.joinpath(*parts) if root is not None else None


def need(path: Path | None, what: str) -> Path:
    """`path`, or a clear stop saying how to give it."""
    if path is None or not path.exists():
        raise SystemExit(f"{what}: {'not found at ' + str(path) if path else 'no file given'}; pass it, or export "
                         "CSK_REAL_SAMPLES=/path/to/real-samples (docs/testing.md, 'The real released samples')")
    return path
