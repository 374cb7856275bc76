"""The stage runtime: keys, reuse, atomic writes, contracts, conservation, determinism, lineage."""

from __future__ import annotations


import pytest

import csk.runtime as rt
from csk.errors import ConservationError, ContractError
from csk.lineage import row_lineage
from csk.runtime import Stage, Store
from data_contracts import cicero as cc
from tasks.cicero.length_filter import length_filter
from tasks.cicero.sources import sources, sources_fingerprint
from tests.conftest import SAMPLE

SOURCES = Stage("sources", sources, cc.Dialogues, parent_column=None, fingerprint=sources_fingerprint)
LENGTH = Stage("length_filter", length_filter, cc.FilteredDialogues)
SRC_PARAMS = {"dailydialog": str(SAMPLE / "dailydialog" / "dialogues_text.txt"), "mutual": str(SAMPLE / "mutual"),
              "dream": str(SAMPLE / "dream" / "dev.json"), "lenient": False}
LF = {"min_utterances": 5, "max_utterances": 15, "min_avg_words": 6.0, "max_total_words": 275}


def _run_both(store, lf=LF, src=SRC_PARAMS):
    a = store.run("cicero", SOURCES, src, [])
    b = store.run("cicero", LENGTH, lf, [a.ref])
    return a, b


def test_reuse_and_downstream_only_recompute(tmp_path):
    store = Store(tmp_path)
    a1, b1 = _run_both(store)
    assert not a1.reused and not b1.reused
    a2, b2 = _run_both(store)
    assert a2.reused and b2.reused and b2.ref.key == b1.ref.key
    a3, b3 = _run_both(store, lf={**LF, "min_utterances": 6})
    assert a3.reused and not b3.reused and b3.ref.key != b1.ref.key


def test_source_edit_changes_key(tmp_path, sample_dir):
    store = Store(tmp_path / "store")
    src = {**SRC_PARAMS, "dailydialog": str(sample_dir / "dailydialog" / "dialogues_text.txt")}
    k1 = store.run("cicero", SOURCES, src, []).ref.key
    with open(src["dailydialog"], "a") as f:
        f.write("One more line of words here . __eou__ And a reply to it too . __eou__\n")
    k2 = store.run("cicero", SOURCES, src, []).ref.key
    assert k1 != k2


def test_deterministic_bytes(tmp_path):
    _, b1 = _run_both(Store(tmp_path / "one"))
    _, b2 = _run_both(Store(tmp_path / "two"))
    assert b1.ref.key == b2.ref.key
    assert b1.ref.data_path.read_bytes() == b2.ref.data_path.read_bytes()
    assert b1.ref.rejected_path.read_bytes() == b2.ref.rejected_path.read_bytes()


def test_manifest_contents(tmp_path):
    a, b = _run_both(Store(tmp_path))
    m = b.ref.manifest()
    assert m["rows"]["in"] == m["rows"]["out"] + m["rows"]["rejected"]
    assert m["inputs"] == [{"stage": "sources", "key": a.ref.key, "path": a.ref.path}]
    assert m["params"] == LF and m["contract"] == "FilteredDialogues"
    assert {"commit", "dirty"} <= set(m["code_version"]) and m["packages"]["pandas"]
    src = a.ref.manifest()["fingerprint"]
    assert set(src) == {"dailydialog", "mutual", "dream"} and all(len(h) == 64 for h in src["dream"].values())


def test_crash_mid_write_leaves_nothing_reusable(tmp_path, monkeypatch):
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    real_write = rt._write_file
    calls = {"n": 0}

    def dying_write(path, payload):
        calls["n"] += 1
        if calls["n"] == 2:  # after data.parquet, before the manifest
            raise KeyboardInterrupt("killed")
        real_write(path, payload)

    monkeypatch.setattr(rt, "_write_file", dying_write)
    with pytest.raises(KeyboardInterrupt):
        store.run("cicero", LENGTH, LF, [a.ref])
    monkeypatch.setattr(rt, "_write_file", real_write)
    key = store.key("cicero", LENGTH, LF, [a.ref])
    assert store.find("cicero", "length_filter", key) is None
    assert not store.artifact_dir("cicero", "length_filter", key).exists()
    again = store.run("cicero", LENGTH, LF, [a.ref])
    clean = _run_both(Store(tmp_path / "clean"))[1]
    assert not again.reused and again.ref.key == clean.ref.key
    assert again.ref.data_path.read_bytes() == clean.ref.data_path.read_bytes()


def test_contract_violation_names_stage_column_rows(tmp_path):
    def bad(dialogues):
        return rt.StageOutput(data=dialogues.assign(source="nowhere"))

    stage = Stage("bad_stage", bad, cc.Dialogues)
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    with pytest.raises(ContractError) as exc:
        store.run("cicero", stage, {}, [a.ref])
    msg = str(exc.value)
    assert "bad_stage" in msg and "'source'" in msg and "dailydialog-000001" in msg
    from csk.runtime import validate_contract

    with pytest.raises(ContractError, match=r"x.parquet: violates data contract FilteredDialogues\n  missing columns"):
        validate_contract("x.parquet", cc.FilteredDialogues, a.ref.load())
    assert not (tmp_path / "cicero" / "bad_stage").exists()


def test_dropping_rows_silently_is_an_error(tmp_path):
    def lossy(dialogues):
        return rt.StageOutput(data=dialogues.iloc[1:])

    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    with pytest.raises(ConservationError, match="rejected with a reason"):
        store.run("cicero", Stage("lossy", lossy, cc.Dialogues), {}, [a.ref])


def test_row_lineage_reaches_source_line(tmp_path):
    store = Store(tmp_path)
    _, b = _run_both(store)
    steps = row_lineage(store, b.ref, "dailydialog-000003")
    assert [s["stage"] for s in steps] == ["length_filter", "sources"]
    src = steps[-1]["source"]
    assert src["file"].endswith("dialogues_text.txt") and src["locator"] == "line 3" and len(src["sha256"]) == 64
    rejected = row_lineage(store, b.ref, "dailydialog-000008")
    assert rejected[0]["rejected"] and "fewer than 5" in rejected[0]["reason"]


def test_lenient_sources_reject_with_reason(tmp_path):
    bad = tmp_path / "dd.txt"
    bad.write_text("Good line of words here . __eou__ And another here . __eou__\nbroken line\n")
    store = Store(tmp_path / "s")
    params = {"dailydialog": str(bad), "mutual": None, "dream": None, "lenient": True}
    run = store.run("cicero", SOURCES, params, [])
    m = run.ref.manifest()
    assert m["rows"] == {"in": 2, "out": 1, "rejected": 1}
    assert "__eou__" in run.ref.load_rejected()["reason"].iloc[0]


def test_code_hash_covers_helper_modules():
    import tasks.cicero.targets  # noqa: F401  (the closure is over imported modules)
    from csk.runtime import module_closure

    closure = module_closure("tasks.cicero.targets")
    assert {"tasks.cicero.targets", "tasks.embed", "csk.models", "csk.runtime"} <= closure
    assert "prefect" not in " ".join(closure)
