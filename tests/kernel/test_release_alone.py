"""`csk run PIPELINE --release FILE`: one option rebuilds a release from the release alone (the bundled
corpora, answers and labels left out), on the real released samples (CSK_REAL_SAMPLES)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from csk.cli import app

pytestmark = [pytest.mark.flow, pytest.mark.slow]  # a Prefect run each, about 20-40 s on 2 cores
runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def _stage(store: Path, pipeline: str, stage: str) -> Path:
    runs = json.loads(_csk("artifacts", pipeline, "--store", store, "--run", "-1", "--json").output)
    return Path(next(s["path"] for s in runs if s["stage"] == stage))


def test_deco_release_alone_gives_the_release_back_byte_for_byte(prefect_harness, tmp_path, config_copy, real):
    release = real / "deco" / "deco_train.json"
    result = _csk("run", "deco", "--release", release, "--until", "sample", "--config", config_copy,
                  "--store", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert "from the release alone" in result.output and "deco.sources.dailydialog=" in result.output
    assert (_stage(tmp_path / "a", "deco", "sample") / "deco_train.json").read_bytes() == release.read_bytes()


def test_corequisite_release_alone_gives_the_pnli_rows_back(prefect_harness, tmp_path, config_copy, real):
    release = real / "paco" / "PaCo_nli_train_sample.csv"
    result = _csk("run", "corequisite", "--release", release, "--until", "p_nli", "--config", config_copy,
                  "--store", tmp_path / "a")
    assert result.exit_code == 0, result.output
    rows: Counter = Counter()
    files = sorted(_stage(tmp_path / "a", "corequisite", "p_nli").glob("PaCo_nli_*.csv"))
    assert [f.name for f in files] == ["PaCo_nli_train.csv"]  # a released train row comes back in train
    for f in files:
        reader = csv.reader(open(f, newline="", encoding="utf-8"))
        assert next(reader) == ["context", "question", "label"]
        rows.update(tuple(r) for r in reader)
    original = list(csv.reader(open(release, newline="", encoding="utf-8")))[1:]
    assert sum(rows.values()) == 1200 and rows == Counter(tuple(r) for r in original)


def test_a_pipeline_without_a_release_alone_mode_says_what_to_do(tmp_path, config_copy):
    result = _csk("run", "cicero", "--release", config_copy, "--config", config_copy, "--store", tmp_path / "a")
    assert result.exit_code == 1 and "rebuild-distractors --release" in result.output
