"""Exact reuse: a stage's key follows every project module it can execute (imports inside functions
included) and the versions of the packages its code imports; stages are declared once and checked
when declared; inputs are bound by name."""

from __future__ import annotations

import pandas as pd
import pytest

from csk import codehash
from csk.errors import ConfigError, CskError
from csk.pipeline import Stage, discover
from csk.runtime import StageOutput
from csk.store import bind_inputs


def _all(attr: str) -> dict:
    return {f"{p.name}/{s.name}": getattr(s, attr)() for p in discover().values() for s in p.stages}


def _edit(tmp_path, monkeypatch, module: str) -> None:
    """As if `module`'s file had been edited (a copy with one more statement stands in for it: a comment or
    docstring edit changes no key)."""
    edited = tmp_path / f"{module}.py"
    edited.write_text(codehash.module_file(module).read_text() + "\n_AN_EDIT = 1\n")
    real = codehash.module_file
    codehash.forget()
    monkeypatch.setattr(codehash, "module_file", lambda name: edited if name == module else real(name))


# tasks/english.py (spaCy) is imported inside functions by these stages' modules, and by no other
# (distractor_quality: its grounding figure names the nouns a distractor brings from another conversation)
CAN_RUN_ENGLISH = ["cicero/counterfactuals", "cicero/distractor_quality", "corequisite/answer_quality",
                   "corequisite/answer_rules", "corequisite/lexicalize", "deco/response_filter",
                   "distractors/counterfactuals", "distractors/distractor_quality"]
# jieba: CORECODE's tagging stages, and the distractor engine's counterfactuals (its Chinese rules)
CAN_RUN_JIEBA = ["cicero/counterfactuals", "corecode/annotations", "corecode/concepts", "corecode/statistics",
                 "distractors/counterfactuals"]


def test_editing_a_function_local_helper_changes_exactly_the_stages_that_can_run_it(fresh_codehash, tmp_path,
                                                                                      monkeypatch):
    before = _all("code_hash")
    _edit(tmp_path, monkeypatch, "tasks.english")
    after = _all("code_hash")
    assert sorted(k for k in before if after[k] != before[k]) == CAN_RUN_ENGLISH


def test_editing_a_contract_module_changes_its_stages(fresh_codehash, tmp_path, monkeypatch):
    before = _all("code_hash")
    _edit(tmp_path, monkeypatch, "data_contracts.deco")
    after = _all("code_hash")
    changed = {k for k in before if after[k] != before[k]}
    assert {f"deco/{s.name}" for s in discover()["deco"].stages} <= changed
    assert not any(k.startswith(("cicero/", "corecode/")) for k in changed)


def test_a_changed_package_version_changes_exactly_the_stages_that_import_it(fresh_codehash, monkeypatch):
    before = _all("packages")
    real = codehash._version
    for dist, expected in (("jieba", CAN_RUN_JIEBA),
                           ("spacy", CAN_RUN_ENGLISH)):
        codehash.forget()
        monkeypatch.setattr(codehash, "_version", lambda d, dist=dist: "99.0" if d == dist else real(d))
        after = _all("packages")
        assert sorted(k for k in before if after[k] != before[k]) == expected, dist
        assert all(after[k][dist] == "99.0" for k in expected)
    # the embedder's stages carry what sentence-transformers runs on
    embed = discover()["cicero"].stage("embed").packages()
    assert {"sentence-transformers", "transformers", "torch", "tokenizers"} <= set(embed)
    assert "prefect" not in embed and "dask" not in embed  # schedulers never change a stage's bytes


def test_the_key_follows_packages(fresh_codehash, tmp_path, monkeypatch):
    from csk.artifacts import ArtifactRef
    from csk.store import Store

    stage = discover()["corecode"].stage("concepts")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "manifest.json").write_text('{"data_sha256": "%s"}' % ("0" * 64))
    ref = ArtifactRef("corecode", "sources", "k", str(tmp_path / "in"))
    store = Store(tmp_path / "store")
    k1 = store.plan("corecode", stage, {}, {"dialogues": ref}).key
    real = codehash._version
    codehash.forget()
    monkeypatch.setattr(codehash, "_version", lambda d: "99.0" if d == "jieba" else real(d))
    assert store.plan("corecode", stage, {}, {"dialogues": ref}).key != k1


# ------------------------------------------------------------------ declared once, checked when declared
def _two_inputs(dialogues: pd.DataFrame, splits: pd.DataFrame | None = None, *, k: int = 1) -> StageOutput:
    return StageOutput(data=dialogues)


def _star(*frames: pd.DataFrame) -> StageOutput:
    return StageOutput(data=frames[0])


def _untyped(dialogues, *, k=1) -> StageOutput:
    return StageOutput(data=dialogues)


def test_a_stage_is_named_by_its_function_and_checked_when_declared():
    s = Stage(_two_inputs, contract="cicero.Dialogues", unit="dialogues")
    assert s.name == "_two_inputs" and s.contract_name == "cicero.Dialogues"
    assert s.inputs == (("dialogues", True), ("splits", False))
    with pytest.raises(ConfigError, match=r"stage '_two_inputs'.*unknown contract 'cicero.Dialgoues'"):
        Stage(_two_inputs, contract="cicero.Dialgoues")  # misspelt: an error before any run
    with pytest.raises(ConfigError, match="pandera DataFrameModel"):
        Stage(_two_inputs, contract=dict)
    with pytest.raises(ConfigError, match="unit must name"):
        Stage(_two_inputs, contract="cicero.Dialogues", unit="")
    with pytest.raises(ConfigError, match="bound by name"):
        Stage(_star, contract="cicero.Dialogues")
    with pytest.raises(ConfigError, match="type annotation"):
        Stage(_untyped, contract="cicero.Dialogues")
    with pytest.raises(ConfigError, match="first argument is the stage function"):
        Stage("dedup", _two_inputs)  # the old declaration, name first


def test_no_stage_name_is_written_in_a_declaration():
    """Every stage of the four pipelines is named by its function but one (CICERO's `release` reads a
    release with the function `release_instances`)."""
    named = [(p.name, s.name) for p in discover().values() for s in p.stages if s.name != s.fn.__name__]
    assert named == [("cicero", "release")]


def test_inputs_bind_by_name():
    s = Stage(_two_inputs, contract="cicero.Dialogues")
    assert bind_inputs(s, {"dialogues": "D"}) == (["dialogues"], ["D"])
    assert bind_inputs(s, {"dialogues": "D", "splits": None}) == (["dialogues"], ["D"])  # optional: None
    assert bind_inputs(s, {"splits": "S", "dialogues": "D"}) == (["dialogues", "splits"], ["D", "S"])
    with pytest.raises(CskError, match=r"needs input \['dialogues'\]"):
        bind_inputs(s, {"splits": "S"})
    with pytest.raises(CskError, match=r"has no input \['dialogs'\]"):
        bind_inputs(s, {"dialogs": "D"})


def test_an_edit_to_ciceros_targets_recomputes_only_cicero(fresh_codehash, tmp_path, monkeypatch):
    """TextRank lives in the shared tasks/textrank.py; CICERO's own target rules reach no other pipeline's
    stage (the precision ladder's ranking check is generic), so `csk status` recomputes nothing there."""
    before = _all("code_hash")
    _edit(tmp_path, monkeypatch, "tasks.cicero.targets")
    after = _all("code_hash")
    changed = sorted(k for k in before if after[k] != before[k])
    assert changed and all(k.startswith("cicero/") for k in changed), changed


def test_a_styling_edit_of_the_labeling_views_moves_no_stage_key(fresh_codehash, tmp_path, monkeypatch):
    """How a task looks in Label Studio (tasks/labeling_views.py) is no stage's code: an edit to its HTML or
    XML leaves every key; the import helpers that stages run (tasks/labeling.py) still key them."""
    before = _all("code_hash")
    _edit(tmp_path, monkeypatch, "tasks.labeling_views")
    assert _all("code_hash") == before
    _edit(tmp_path, monkeypatch, "tasks.labeling")
    assert {k for k, v in _all("code_hash").items() if v != before[k]} >= {"cicero/annotations", "cicero/quality_check"}


def test_a_stage_that_writes_prompts_keys_no_thread_count():
    """DECO's extraction_tasks writes the extractor's inputs (prompts only): its module imports no model
    code, so its key holds no thread count; extract, which runs the seq2seq model, does."""
    deco = discover()["deco"]
    assert deco.stage("extraction_tasks").threads_matter is None
    assert deco.stage("extract").threads_matter
