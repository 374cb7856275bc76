"""The stage runtime: keys, reuse, atomic writes, contracts, conservation, determinism, lineage."""

from __future__ import annotations


import pandas as pd
import pytest

import csk.runtime as rt
import csk.store as store_module
from csk.errors import ConservationError, ContractError
from csk.lineage import row_lineage
from csk.pipeline import Stage
from csk.store import Store
from tasks.cicero.length_filter import length_filter
from tasks.cicero.sources import sources
from data_contracts import register
from data_contracts.common import Contract
from pandera.typing import Series
from tests.conftest import SAMPLE

class Counts(Contract):
    n: Series[int]


SOURCES = Stage(sources, contract="cicero.Dialogues", parent_column=None)
LENGTH = Stage(length_filter, contract="cicero.FilteredDialogues")
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
    assert m["inputs"] == [{"name": "dialogues", "stage": "sources", "key": a.ref.key, "path": a.ref.path,
                            "data_sha256": a.ref.manifest()["data_sha256"]}]  # bound by the parameter's name
    assert m["params"] == LF and m["contract"] == "cicero.FilteredDialogues"
    assert {"commit", "dirty"} <= set(m["code_version"]) and m["packages"]["pandas"]
    assert "torch" not in m["packages"] and "jieba" not in m["packages"]  # only what the stage's code imports
    assert m["machine"]["cpu"] and m["resolved"] == {}
    assert m["rejected_reasons"] == {"too_few_utterances": 3, "too_many_utterances": 1, "too_many_words": 1,
                                   "utterances_too_short": 1}
    files = a.ref.manifest()["files"]  # every typed input file, hashed the same way for every stage
    assert {f["param"] for f in files} == {"dailydialog", "mutual", "dream"}
    assert all(len(f["sha256"]) == 64 and f["path"].startswith(str(SAMPLE)) for f in files)


def test_crash_mid_write_leaves_nothing_reusable(tmp_path, monkeypatch):
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    real_write = store_module._write_file
    calls = {"n": 0}

    def dying_write(path, payload):
        calls["n"] += 1
        if calls["n"] == 2:  # after data.parquet, before the manifest
            raise KeyboardInterrupt("killed")
        real_write(path, payload)

    monkeypatch.setattr(store_module, "_write_file", dying_write)
    with pytest.raises(KeyboardInterrupt):
        store.run("cicero", LENGTH, LF, [a.ref])
    monkeypatch.setattr(store_module, "_write_file", real_write)
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

    stage = Stage(bad, contract="cicero.Dialogues", name="bad_stage")
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    with pytest.raises(ContractError) as exc:
        store.run("cicero", stage, {}, [a.ref])
    msg = str(exc.value)
    assert "bad_stage" in msg and "'source'" in msg and "dailydialog-000001" in msg
    from csk.contracts import validate_contract

    with pytest.raises(ContractError, match=r"x.parquet: violates data contract cicero.FilteredDialogues\n  missing"):
        validate_contract("x.parquet", "cicero.FilteredDialogues", a.ref.load())
    assert not (tmp_path / "cicero" / "bad_stage").exists()


def test_dropping_rows_silently_is_an_error(tmp_path):
    def lossy(dialogues):
        return rt.StageOutput(data=dialogues.iloc[1:])

    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    with pytest.raises(ConservationError, match="rejected with a reason"):
        store.run("cicero", Stage(lossy, contract="cicero.Dialogues"), {}, [a.ref])


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
    from csk.codehash import closure

    modules, third = closure(("tasks.cicero.targets", "data_contracts.cicero"))
    assert {"tasks.cicero.targets", "tasks.embed", "csk.models", "csk.runtime", "data_contracts.cicero"} <= set(modules)
    assert "csk.cli" not in modules and "csk.orchestration" not in modules  # orchestration is not stage code
    assert "prefect" not in third and {"networkx", "torch", "sentence_transformers"} <= set(third)
    # a helper imported inside a function is followed (answer_rules imports tasks.english where it parses)
    assert "tasks.english" in closure(("tasks.corequisite.answer_quality",))[0]


def test_early_cutoff_stops_at_unchanged_bytes(tmp_path):
    """A recomputed stage whose output bytes did not change leaves its downstream stages reused."""
    def count(dialogues):
        return rt.StageOutput(data=dialogues[["id"]].assign(n=dialogues["n_utterances"]))

    register("test.Counts", Counts)
    downstream = Stage(count, contract=Counts)
    store = Store(tmp_path)
    a, b = _run_both(store)
    c1 = store.run("cicero", downstream, {}, [b.ref])
    # A bound at the longest kept dialogue keeps the same dialogues: same bytes, new key.
    longest = int(b.ref.load()["n_words"].max())
    assert longest < LF["max_total_words"]
    b2 = store.run("cicero", LENGTH, {**LF, "max_total_words": longest}, [a.ref])
    assert not b2.reused and b2.ref.key != b.ref.key
    assert b2.ref.data_path.read_bytes() == b.ref.data_path.read_bytes()
    c2 = store.run("cicero", downstream, {}, [b2.ref])
    assert c2.reused and c2.ref.key == c1.ref.key
    b3 = store.run("cicero", LENGTH, {**LF, "min_utterances": 6}, [a.ref])
    assert not store.run("cicero", downstream, {}, [b3.ref]).reused


def test_rejected_rows_have_one_shape(tmp_path):
    store = Store(tmp_path)
    _, b = _run_both(store)
    rej = b.ref.load_rejected()
    assert list(rej.columns[:4]) == ["id", "parent_id", "reason_code", "reason"]
    assert (rej["parent_id"] == rej["id"]).all()  # the input row each rejected row is
    assert isinstance(rej["reason_code"].dtype, pd.CategoricalDtype)
    assert rej.groupby("reason_code", observed=True).size().to_dict() == {
        "too_few_utterances": 3, "too_many_utterances": 1, "too_many_words": 1, "utterances_too_short": 1}

    def no_code(dialogues):
        return rt.StageOutput(data=dialogues.iloc[1:], rejected=dialogues.iloc[:1].assign(reason="x"))

    with pytest.raises(ContractError, match="reason_code"):
        store.run("cicero", Stage(no_code, contract="cicero.Dialogues"), {}, [b.ref])


def test_columns_differing_only_in_case_and_null_columns(tmp_path):
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])

    def shout(dialogues):
        return rt.StageOutput(data=dialogues.assign(ID=dialogues["id"]))

    with pytest.raises(ContractError, match="'id' and 'ID' differ only in case"):
        store.run("cicero", Stage(shout, contract="cicero.Dialogues"), {}, [a.ref])

    def empty_column(dialogues):
        return rt.StageOutput(data=dialogues.assign(note=None))

    out = store.run("cicero", Stage(empty_column, contract="cicero.Dialogues"), {}, [a.ref])
    import pyarrow.parquet as pq

    assert str(pq.read_schema(out.ref.data_path).field("note").type) == "string"  # never Arrow's null type


def test_missing_input_file_names_the_setting(tmp_path):
    from csk.errors import InputError

    with pytest.raises(InputError, match="not found \\(setting dream\\)"):
        Store(tmp_path).run("cicero", SOURCES, {**SRC_PARAMS, "dream": str(tmp_path / "nope.json")}, [])


def test_every_stage_runs_with_the_machines_thread_count_whatever_the_runner_set(tmp_path):
    """A bf16 product on one thread is not the bytes of one on two (the embedder showed it), and a model
    trained with another thread count is another model: every stage runs with `training_threads()`
    however many threads the process had (one: OMP_NUM_THREADS=1 or a Dask worker), restores them after,
    and its key names the count."""
    import torch

    from csk import compute

    seen = []

    def passthrough(dialogues):
        seen.append(torch.get_num_threads())
        return rt.StageOutput(data=dialogues)

    trained = compute.trains(lambda dialogues: passthrough(dialogues))
    trained.__name__ = "trained"
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        store.run("cicero", Stage(trained, contract="cicero.Dialogues"), {}, [a.ref])
        store.run("cicero", Stage(passthrough, contract="cicero.Dialogues"), {}, [a.ref])
        assert torch.get_num_threads() == 1  # restored
    finally:
        torch.set_num_threads(before)
    assert seen == [compute.training_threads()] * 2
    assert Stage(trained, contract="cicero.Dialogues").trains
    assert not Stage(passthrough, contract="cicero.Dialogues").trains
    plain, model = Stage(passthrough, contract="cicero.Dialogues"), Stage(trained, contract="cicero.Dialogues")
    keys = [store.plan("cicero", s, {}, [a.ref]).key for s in (plain, model)]
    real = compute.training_threads
    compute.training_threads = lambda: real() + 1  # another machine's count
    try:
        # a trained model depends on the count: another key; a stage running no threaded kernel does not
        assert store.plan("cicero", model, {}, [a.ref]).key != keys[1]
        assert store.plan("cicero", plain, {}, [a.ref]).key == keys[0]
    finally:
        compute.training_threads = real
    assert store.plan("cicero", plain, {}, [a.ref]).threads["in_key"] is False
    assert "trains" in store.plan("cicero", model, {}, [a.ref]).threads["why"]


def test_a_docstring_or_comment_edit_keeps_the_code_hash_and_a_code_edit_moves_it():
    """Keys hold what a stage computes: a module's syntax tree without docstrings and positions. A
    docstring, comment or blank-line edit keeps the hash; a changed constant or string the code uses moves it."""
    from csk.codehash import canonical_source

    base = b'"""Module doc."""\nTHRESHOLD = 0.9\n\n\ndef rule(x):\n    """Why."""\n    return x > THRESHOLD  # c\n'
    prose = b'"""Module doc, reworded."""\n# a comment\nTHRESHOLD = 0.9\n\n\n\ndef rule(x):\n    """Why, again."""\n' \
        b'    return x > THRESHOLD  # another comment\n'
    assert canonical_source(base) == canonical_source(prose)
    assert canonical_source(base) != canonical_source(base.replace(b"0.9", b"0.8"))
    assert canonical_source(base) != canonical_source(base.replace(b"x > ", b"x >= "))
    data = b'PROMPT = "Write {n} answers."\n'  # a string the code uses is code
    assert canonical_source(data) != canonical_source(data.replace(b"Write", b"Give"))
    only_doc = b'def f():\n    """Only a docstring."""\n'
    assert canonical_source(only_doc) == canonical_source(b'def f():\n    """Another."""\n')


def test_a_store_travels_the_same_data_at_another_path_has_the_same_keys_and_bytes(tmp_path):
    """Keys and rows hold content and portable names, never a machine's folders: the bundled sample copied
    byte for byte to two places gives the same keys and the same bytes at every stage; lineage in each store
    names its own copy, with the same sha256."""
    import shutil

    stores = []
    for where in ("here", "elsewhere/deeper"):
        copy = tmp_path / where / "sample"
        shutil.copytree(SAMPLE, copy)
        src = {k: v.replace(str(SAMPLE), str(copy)) if isinstance(v, str) else v for k, v in SRC_PARAMS.items()}
        store = Store(tmp_path / where / "store")
        stores.append((copy, store, _run_both(store, src=src)))
    (_, _, (a1, b1)), (copy2, store2, (a2, b2)) = stores
    assert (a1.ref.key, b1.ref.key) == (a2.ref.key, b2.ref.key)
    assert a1.ref.data_path.read_bytes() == a2.ref.data_path.read_bytes()
    assert b1.ref.data_path.read_bytes() == b2.ref.data_path.read_bytes()
    rows = a1.ref.load()
    assert not rows["source_file"].str.startswith("/").any() and "mutual/" in " ".join(rows["source_file"])
    steps = row_lineage(store2, b2.ref, "dailydialog-000003")
    assert steps[-1]["source"]["file"] == str(copy2 / "dailydialog" / "dialogues_text.txt")
    assert steps[-1]["source"]["sha256"] == row_lineage(stores[0][1], b1.ref, "dailydialog-000003")[-1]["source"]["sha256"]
