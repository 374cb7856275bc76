"""The pipeline kernel: a new dataset is a slice (stages, contract, config table) and nothing else.

The toy pipeline below lives entirely in this file, as a reviewer would write one: two stages,
its own contracts, its own table in its own pipelines.toml. Nothing in csk/, flows/, tasks/ or
data_contracts/ knows about it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pandera.pandas as pa
import pytest
from pandera.typing import Series
from typer.testing import CliRunner

from csk.params import InputPath
from csk.pipeline import Pipeline, PipelineSettings, Stage, register, unregister
from csk.runtime import StageOutput
from data_contracts import register as register_contract
from data_contracts.common import Provenance
from tests.conftest import ROOT

runner = CliRunner()


# ---------------------------------------------------------------- the toy slice
class Lines(Provenance):
    text: Series[str]


class LongLines(Lines):
    n_chars: Series[int] = pa.Field(ge=1)


def read_lines(*, path: InputPath = None) -> StageOutput:
    """One row per non-empty line of a text file.

    Args:
        path: the text file to read
    """
    rows = [{"id": f"line-{n}", "text": t, "source_file": str(path), "source_record": n, "source_locator": f"line {n}"}
            for n, t in enumerate(Path(path).read_text().splitlines(), start=1) if t.strip()]
    return StageOutput(data=pd.DataFrame(rows))


def long_lines(lines: pd.DataFrame, *, min_chars: int = 5) -> StageOutput:
    """Keep lines of at least `min_chars` characters.

    Args:
        min_chars: the fewest characters a kept line has
    """
    n = lines["text"].str.len()
    keep = n >= min_chars
    rejected = lines[~keep].assign(reason_code="too_short", reason=[f"{k} < {min_chars} characters" for k in n[~keep]])
    return StageOutput(data=lines[keep].assign(n_chars=n[keep]), rejected=rejected)


def toy(run) -> None:
    """Read lines, keep the long ones."""
    lines = run.stage("read")
    run.stage("long_lines", lines=lines)


TOY = Pipeline(name="toy", stages=(Stage(read_lines, contract=Lines, unit="lines", name="read", parent_column=None),
                                   Stage(long_lines, contract=LongLines, unit="lines")),
               flows=(toy,), settings=PipelineSettings, doc="a toy pipeline written in a test")


@pytest.fixture
def toy_pipeline(tmp_path):
    register_contract("toy.Lines", Lines)
    register_contract("toy.LongLines", LongLines)
    register(TOY)
    text = tmp_path / "lines.txt"
    text.write_text("short\na much longer line\nab\n")
    config = tmp_path / "pipelines.toml"
    config.write_text(f'[toy.read]\npath = "{text.name}"\n\n[toy.long_lines]\nmin_chars = 5\n')
    yield config
    unregister("toy")


def _csk(*args):
    from csk.cli import app

    return runner.invoke(app, [str(a) for a in args])


def test_toy_config_is_composed_from_the_stage_signatures(toy_pipeline):
    from csk.config import load_config

    cfg = load_config(toy_pipeline)["toy"]
    assert cfg.long_lines.min_chars == 5 and cfg.read.path == str(toy_pipeline.parent / "lines.txt")
    out = _csk("config", "toy", "--config", toy_pipeline, "--json")
    assert out.exit_code == 0, out.output
    rows = {r["key"]: r for r in json.loads(out.output)}
    assert rows["toy.long_lines.min_chars"] == {"key": "toy.long_lines.min_chars", "value": 5, "default": 5,
                                                "doc": "the fewest characters a kept line has"}
    bad = _csk("status", "toy", "--config", toy_pipeline, "--set", "toy.long_lines.min_char=3")
    assert bad.exit_code == 1 and "unknown key 'min_char' in table [toy.long_lines]" in bad.output


@pytest.mark.flow
def test_toy_pipeline_runs_end_to_end_and_status_explains(prefect_harness, toy_pipeline, tmp_path, monkeypatch):
    store = tmp_path / "store"
    before = json.loads(_csk("status", "toy", "--config", toy_pipeline, "--store", store, "--json").output)
    assert [(s["stage"], s["status"]) for s in before] == [("read", "recompute"), ("long_lines", "depends")]
    result = _csk("run", "toy", "--config", toy_pipeline, "--store", store)
    assert result.exit_code == 0, result.output
    stages = json.loads(_csk("artifacts", "toy", "--store", store, "--json").output)
    assert [(s["stage"], s["rows"]) for s in stages] == [
        ("read", {"in": 3, "out": 3, "rejected": 0}), ("long_lines", {"in": 3, "out": 2, "rejected": 1})]
    rejected = pd.read_parquet(Path(stages[1]["path"]) / "rejected.parquet")
    assert list(rejected.columns[:4]) == ["id", "parent_id", "reason_code", "reason"]
    lineage = json.loads(_csk("lineage", "toy", "long_lines", "--row", "line-2", "--store", store, "--json").output)
    assert lineage[-1]["source"]["locator"] == "line 2" and len(lineage[-1]["source"]["sha256"]) == 64

    same = json.loads(_csk("status", "toy", "--config", toy_pipeline, "--store", store, "--json").output)
    assert {s["status"] for s in same} == {"reused"}
    changed = json.loads(_csk("status", "toy", "--config", toy_pipeline, "--store", store, "--json",
                              "--set", "toy.long_lines.min_chars=3").output)
    assert changed[0]["status"] == "reused"
    assert changed[1]["status"] == "recompute" and "parameter min_chars: 5 -> 3" in changed[1]["why"]
    (toy_pipeline.parent / "lines.txt").write_text("short\na much longer line\nabc\n")
    edited = json.loads(_csk("status", "toy", "--config", toy_pipeline, "--store", store, "--json").output)
    assert edited[0]["status"] == "recompute" and "lines.txt (path) changed" in edited[0]["why"]
    assert edited[1]["status"] == "depends"  # its input is recomputed: reused if that gives the same bytes
    # ... unless its own code changed: then it is recomputed whatever its inputs do
    from csk.pipeline import Stage

    code_hash = Stage.code_hash
    monkeypatch.setattr(Stage, "code_hash", lambda self: "edited" if self.name == "long_lines" else code_hash(self))
    edited = json.loads(_csk("status", "toy", "--config", toy_pipeline, "--store", store, "--json").output)
    assert edited[1]["status"] == "recompute" and edited[1]["why"].startswith("code changed"), edited[1]
    assert edited[1]["why"].count("read") == 1  # each recomputed input named once


def test_missing_input_is_reported_before_prefect_starts(toy_pipeline, tmp_path):
    result = _csk("run", "toy", "--config", toy_pipeline, "--store", tmp_path / "s", "--set",
                  f"toy.read.path={tmp_path / 'nope.txt'}")
    assert result.exit_code == 1 and "toy.read.path" in result.output and "does not exist" in result.output
    assert "temporary server" not in result.output and not (tmp_path / "s" / "toy").exists()


def test_contracts_are_named_per_dataset():
    from data_contracts import contracts

    names = set(contracts())
    assert {"cicero.Dialogues", "common.Rejected", "distractors.Instances", "cicero.MCQ"} <= names
    assert "Dialogues" not in names  # a second dataset's Dialogues cannot replace CICERO's


@pytest.mark.slow
def test_wheel_holds_every_module(tmp_path):
    """A non-editable install (the docker image's) must hold every module of the source tree."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("csk-*.whl"))
    inside = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(ROOT).as_posix() for pkg in ("csk", "readers", "tasks", "flows", "data_contracts")
                for p in (ROOT / pkg).rglob("*.py")}
    assert expected - inside == set()
    assert "tasks/distractors/adversarial.py" in inside
