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
    with pytest.raises(ConfigError, match=r"cicero.length_filter.min_utterance: unknown key"):
        load_config(p)


def test_set_overrides_and_types(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("[cicero]\nseed = 1\n")
    cfg = load_config(p, ["cicero.length_filter.min_avg_words=5.5", "cicero.seed=7"])
    assert cfg.cicero.length_filter.min_avg_words == 5.5 and cfg.cicero.seed == 7
    with pytest.raises(ConfigError, match="cicero.seed"):
        load_config(p, ["cicero.seed=abc"])
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
