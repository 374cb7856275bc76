"""End to end: the CICERO Prefect flow through `csk`, on the bundled sample and the real formats."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from csk.cli import app

pytestmark = pytest.mark.flow
runner = CliRunner()


def _csk(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result


def test_cicero_flow_bundled_sample(prefect_harness, tmp_path, config_copy):
    store = tmp_path / "artifacts"
    first = _csk("run", "cicero", "--config", config_copy, "--store", store)
    assert first.exit_code == 0, first.output
    listing = _csk("artifacts", "cicero", "--store", store, "--json")
    stages = json.loads(listing.output)
    assert {"sources", "length_filter"} <= {s["stage"] for s in stages}
    assert all(not s["reused"] for s in stages)
    for s in stages:
        validate = _csk("validate", f"{s['path']}/data.parquet", "--contract",
                        json.load(open(f"{s['path']}/manifest.json"))["contract"])
        assert validate.exit_code == 0, validate.output

    second = _csk("run", "cicero", "--config", config_copy, "--store", store)
    assert second.exit_code == 0, second.output
    again = json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)
    assert all(s["reused"] for s in again)
    assert [s["key"] for s in again] == [s["key"] for s in stages]

    lineage = _csk("lineage", "cicero", "length_filter", "--row", "dailydialog-000002", "--store", store, "--json")
    steps = json.loads(lineage.output)
    assert steps[-1]["source"]["locator"] == "line 2"


def test_cicero_flow_real_dailydialog(prefect_harness, tmp_path, config_copy, real):
    store = tmp_path / "artifacts"
    dd = real / "dailydialog" / "dialogues_sample.txt"
    result = _csk("run", "cicero", "--config", config_copy, "--store", store,
                  "--set", f"cicero.sources.dailydialog={dd}", "--set", f"cicero.sources.mutual={real / 'mutual'}",
                  "--set", f"cicero.sources.dream={real / 'dream' / 'dev_sample.json'}")
    assert result.exit_code == 0, result.output
    stages = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)}
    assert stages["sources"]["rows"]["out"] == 700
    out = _csk("lineage", "cicero", "length_filter", "--row", "dailydialog-000003", "--store", store)
    assert out.exit_code == 0, out.output
    assert "dialogues_sample.txt line 3" in out.output


def test_bad_input_fails_cleanly_without_artifact(prefect_harness, tmp_path, config_copy):
    bad = tmp_path / "bad.txt"
    bad.write_text("Fine words in a line . __eou__ And more words . __eou__\nno marker\n")
    store = tmp_path / "artifacts"
    result = _csk("run", "cicero", "--config", config_copy, "--store", store,
                  "--set", f"cicero.sources.dailydialog={bad}")
    assert result.exit_code == 1
    assert "bad.txt, record line 2" in result.output
    assert not (store / "cicero" / "sources").exists()


def test_bad_config_key_fails_before_running(tmp_path, config_copy):
    result = _csk("run", "cicero", "--config", config_copy, "--store", tmp_path / "a",
                  "--set", "cicero.length_filter.max_words=3")
    assert result.exit_code == 1 and "max_words: unknown key" in result.output
