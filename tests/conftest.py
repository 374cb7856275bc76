from __future__ import annotations

import os
import shutil
from pathlib import Path

# Offline and quiet before anything imports prefect or transformers.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One model cache for the whole test run: split models (all-mpnet-base-v2) are unpacked once, not per store.
os.environ.setdefault("CSK_MODEL_CACHE", str(Path(__import__("tempfile").gettempdir()) / "csk-test-model-cache"))
# The machine's precision decision is measured once (a few seconds) and cached here, not in ~/.cache.
os.environ.setdefault("CSK_CACHE_DIR", str(Path(__import__("tempfile").gettempdir()) / "csk-test-cache"))

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"


def real_samples() -> Path:
    """The real released samples: CSK_REAL_SAMPLES when set, else a `shared/real-samples` folder beside the
    checkout (as .ci/run has it); none: the test is skipped, saying where to get them (docs/testing.md)."""
    value = os.environ.get("CSK_REAL_SAMPLES")
    if not value:
        beside = ROOT.parent / "shared" / "real-samples"
        if beside.is_dir():
            return beside
        pytest.skip("no real samples: CSK_REAL_SAMPLES is not set (export CSK_REAL_SAMPLES=/path/to/real-samples; "
                    "docs/testing.md, 'The real released samples', says which file to take from which public "
                    "repository)")
    path = Path(value)
    if not path.is_dir():
        pytest.fail(f"CSK_REAL_SAMPLES={value} is not a directory")
    return path


@pytest.fixture
def real() -> Path:
    return real_samples()


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test server for the whole pytest run (it takes 15-30 s to start)."""
    from prefect.logging.configuration import setup_logging
    from prefect.testing.utilities import prefect_test_harness

    # Bind Prefect's console handler to the session's stderr now; otherwise it binds to the
    # first CliRunner's captured stream, which is closed when that invocation ends.
    setup_logging()
    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture
def config_copy(tmp_path) -> Path:
    """pipelines.toml copied next to the bundled sample, so relative paths still resolve."""
    dst = tmp_path / "pipelines.toml"
    text = (ROOT / "pipelines.toml").read_text()
    text = text.replace('"data/sample/', f'"{SAMPLE.as_posix()}/')
    dst.write_text(text)
    return dst


@pytest.fixture
def sample_dir(tmp_path) -> Path:
    dst = tmp_path / "sample"
    shutil.copytree(SAMPLE, dst)
    return dst


@pytest.fixture
def fresh_codehash():
    """Sources and package versions read again before and after a test that fakes an edit or an upgrade."""
    from csk import codehash

    codehash.forget()
    yield
    codehash.forget()


def pytest_terminal_summary(terminalreporter):
    """The machine the byte-equality tests ran on (local vs Dask runner, reruns, precision), printed
    at the end of every run (also under -q): float kernels can differ between CPU types, so each
    test run says which one it checked."""
    from csk.compute import host
    from csk.precision import _DECISIONS

    h = host()
    decided = ", ".join(f"{k}: {d['precision']}" for k, d in sorted(_DECISIONS.items())) or "not taken in this process"
    terminalreporter.write_line(f"csk machine: {h['cpu']}, {h['cores']} cores, torch {h['torch']}, vector ISA: "
                                f"{', '.join(h['flags']) or 'none detected'}; precision decision: {decided}")
