"""Integrity of a store: checksums in every manifest, checked reuse, `csk verify`, `csk gc`, and one
writer per key when runs share a store."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.errors import IntegrityError
from csk.artifacts import MANIFEST, check_artifact
from csk.store import Store
from csk.verify import find_garbage, verify_store
from tests.kernel.test_runtime import LENGTH, LF, SOURCES, SRC_PARAMS, _run_both


def _flip(path, offset=None):
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def _files(ref):
    return sorted(p for p in (ref.path and __import__("pathlib").Path(ref.path)).rglob("*") if p.is_file())


def test_manifest_records_every_file_and_itself(tmp_path):
    a, b = _run_both(Store(tmp_path))
    m = b.ref.manifest()
    on_disk = {p.name for p in _files(b.ref)} - {MANIFEST}
    assert set(m["checksums"]) == on_disk == {"data.parquet", "rejected.parquet"}
    assert m["checksums"]["data.parquet"]["sha256"] == m["data_sha256"]
    assert len(m["manifest_sha256"]) == 64
    assert check_artifact(b.ref.path) == []


def test_a_flipped_byte_in_any_file_is_found(tmp_path):
    """Every byte position class: each artifact file, including the manifest, at its start, middle, end."""
    store = Store(tmp_path / "s")
    _, b = _run_both(store)
    for f in _files(b.ref):
        size = f.stat().st_size
        for offset in (0, size // 2, size - 2):
            original = f.read_bytes()
            _flip(f, offset)
            problems = check_artifact(b.ref.path)
            assert problems and str(f) in problems[0], (f, offset, problems)
            f.write_bytes(original)
    assert check_artifact(b.ref.path) == []


def test_reuse_checks_sizes_and_sources_content(tmp_path):
    store = Store(tmp_path)
    a, b = _run_both(store)
    # A source's content is always checked on reuse.
    _flip(a.ref.data_path)
    with pytest.raises(IntegrityError, match=r"stage 'sources': .*sources/.*/data.parquet: sha256"):
        _run_both(store)
    _flip(a.ref.data_path)
    # Downstream: a truncated file is caught by its size; a flipped byte with verify=True.
    original = b.ref.rejected_path.read_bytes()
    b.ref.rejected_path.write_bytes(original[:-10])
    with pytest.raises(IntegrityError, match=r"rejected.parquet: \d+ bytes, the manifest recorded"):
        _run_both(store)
    b.ref.rejected_path.write_bytes(original)
    assert _run_both(store)[1].reused  # the same bytes written back: re-hashed (other times), reused
    # A flipped byte, same size: the file's times moved, so it is re-hashed and the run stops naming it.
    _flip(b.ref.data_path)
    with pytest.raises(IntegrityError, match="length_filter.*data.parquet: sha256"):
        _run_both(store)
    with pytest.raises(IntegrityError, match="length_filter.*data.parquet: sha256"):
        _run_both(Store(tmp_path, verify=True))


def test_a_same_size_change_is_never_reused_and_an_untouched_artifact_is_not_hashed(tmp_path, monkeypatch):
    """issue 50 item 5: size, mtime, ctime and inode are in the manifest; any difference re-hashes.
    A flip with the modification time set back is still seen (a write moves the status-change time,
    which cannot be set back); a file copied out and back (a new inode, same bytes) is re-hashed and
    reused; an untouched artifact is reused without reading its bytes."""
    from csk import artifacts

    store = Store(tmp_path)
    _, b = _run_both(store)
    hashed = []
    real = artifacts.sha256_file
    monkeypatch.setattr(artifacts, "sha256_file", lambda p: hashed.append(str(p)) or real(p))
    assert _run_both(store)[1].reused and not [h for h in hashed if "length_filter" in h]
    for name in sorted(b.ref.manifest()["checksums"]):
        f = b.ref.path + "/" + name
        before = os.stat(f)
        original = open(f, "rb").read()
        _flip(__import__("pathlib").Path(f))
        os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))  # the modification time set back
        assert os.path.getsize(f) == before.st_size
        with pytest.raises(IntegrityError, match=f"length_filter.*{name}: sha256"):
            _run_both(store)
        tmp = f + ".copy"
        open(tmp, "wb").write(original)
        os.replace(tmp, f)  # the original bytes, a new inode
        hashed.clear()
        assert _run_both(store)[1].reused and any(h.endswith(name) for h in hashed)


def test_a_stage_never_computes_from_a_damaged_input(tmp_path):
    store = Store(tmp_path)
    a, _ = _run_both(store)
    _flip(a.ref.data_path)
    # A new length filter setting recomputes from the sources artifact: its bytes are checked as read.
    with pytest.raises(IntegrityError, match="stage 'length_filter': .*sources/.*data.parquet: sha256 .*read as an input"):
        store.run("cicero", LENGTH, {**LF, "min_utterances": 4}, [a.ref])


def test_csk_verify_names_damaged_files_and_repair_lets_a_rerun_recompute(tmp_path):
    store = Store(tmp_path)
    a, b = _run_both(store)
    runner = CliRunner()
    ok = runner.invoke(app, ["verify", "--store", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert "2 artifacts checked, 0 with problems" in ok.output
    before = b.ref.data_path.read_bytes()
    _flip(b.ref.data_path)
    res = runner.invoke(app, ["verify", "cicero", "--store", str(tmp_path)])
    assert res.exit_code == 1 and str(b.ref.data_path) in res.output and "sha256" in res.output
    res = runner.invoke(app, ["verify", "--store", str(tmp_path), "--repair"])
    assert res.exit_code == 1 and "_quarantine" in res.output
    assert not os.path.exists(b.ref.path)
    _, b2 = _run_both(store)
    assert not b2.reused and b2.ref.key == b.ref.key and b2.ref.data_path.read_bytes() == before
    assert runner.invoke(app, ["verify", "--store", str(tmp_path)]).exit_code == 0


def test_verify_checks_rows_inputs_and_lineage(tmp_path):
    from csk.artifacts import manifest_bytes

    store = Store(tmp_path)
    a, b = _run_both(store)
    # A manifest rewritten consistently (checksums and self-hash valid) but lying about its rows.
    m = b.ref.manifest()
    m["rows"]["in"] += 1
    (b.ref.path and open(os.path.join(b.ref.path, MANIFEST), "wb")).write(manifest_bytes(m))
    report = verify_store(store)
    assert any("rows in but" in line for _, line in report.problems)
    # An input that is no longer in the store.
    m["rows"]["in"] -= 1
    open(os.path.join(b.ref.path, MANIFEST), "wb").write(manifest_bytes(m))
    os.rename(a.ref.path, a.ref.path + "-gone")
    report = verify_store(store)
    assert [line for _, line in report.problems] == [
        f"{b.ref.path}/{MANIFEST}: input sources/{a.ref.key} is not in the store ({a.ref.path})"]


def test_gc_lists_then_removes_only_unreferenced(tmp_path):
    store = Store(tmp_path)
    a, b = _run_both(store)
    store.record_run("cicero", "r1", [{"stage": "length_filter", "key": b.ref.key}])
    _, c = _run_both(store, lf={**LF, "min_utterances": 6})  # not in any run record
    assert find_garbage(store, keep_minutes=60).artifacts == []  # too recent to touch
    g = find_garbage(store, keep_minutes=0)
    assert [str(d) for d in g.artifacts] == [c.ref.path]  # sources kept: an input of a recorded artifact
    runner = CliRunner()
    dry = runner.invoke(app, ["gc", "--store", str(tmp_path), "--keep-minutes", "0"])
    assert dry.exit_code == 0 and "would remove" in dry.output and os.path.exists(c.ref.path)
    res = runner.invoke(app, ["gc", "--store", str(tmp_path), "--keep-minutes", "0", "--apply"])
    assert res.exit_code == 0 and not os.path.exists(c.ref.path)
    assert os.path.exists(a.ref.path) and os.path.exists(b.ref.path)
    assert verify_store(store).problems == []


def test_one_writer_per_key(tmp_path, monkeypatch):
    """Two runs of the same stage at once: one computes, the other waits and reuses its artifact."""
    store = Store(tmp_path)
    a = store.run("cicero", SOURCES, SRC_PARAMS, [])
    calls = []
    real = Store.compute

    def slow(self, plan):
        calls.append(plan.stage.name)
        time.sleep(1.0)
        return real(self, plan)

    monkeypatch.setattr(Store, "compute", slow)
    results = []
    threads = [threading.Thread(target=lambda: results.append(Store(tmp_path).run("cicero", LENGTH, LF, [a.ref])))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["length_filter"]
    assert sorted(r.reused for r in results) == [False, True]
    assert results[0].ref.key == results[1].ref.key
    assert json.loads(open(os.path.join(results[0].ref.path, MANIFEST)).read())["rows"]["out"] > 0


def test_bytes_do_not_depend_on_where_the_store_lives(tmp_path):
    """The ConceptNet database built into a store's cache is named relative to the store, so two stores
    (or a moved one) hold the same bytes and keys downstream (bench/faults.py found the absolute path)."""
    from flows.corecode import PIPELINE
    from tests.conftest import SAMPLE

    stage = PIPELINE.stage("conceptnet")
    params = {"dump": str(SAMPLE / "corecode" / "conceptnet-assertions-zh-sample.csv"), "database": None,
              "languages": ["en", "zh"]}
    refs = [Store(tmp_path / name).run("corecode", stage, params, []).ref for name in ("one", "elsewhere")]
    assert refs[0].key == refs[1].key
    assert refs[0].data_path.read_bytes() == refs[1].data_path.read_bytes()
    assert refs[0].load()["database"].iloc[0].startswith("_cache/conceptnet/")
    from tasks.conceptnet import open_database
    from csk.runtime import StageContext

    db = open_database(refs[1].load(), StageContext(Store(tmp_path / "elsewhere"), "corecode", "screening"))
    assert db["database"].startswith(str(tmp_path / "elsewhere"))


def test_a_lost_conceptnet_cache_is_rebuilt_from_the_dump(tmp_path):
    """Artifacts copied to a store without its `_cache` (or a cleaned cache): opening the database the
    conceptnet artifact names rebuilds it from the dump it names, with the same edges."""
    import shutil

    from csk import conceptnet as cn
    from csk.runtime import StageContext
    from flows.corecode import PIPELINE
    from tasks.conceptnet import open_database
    from tests.conftest import SAMPLE

    params = {"dump": str(SAMPLE / "corecode" / "conceptnet-assertions-zh-sample.csv"), "database": None,
              "languages": ["en", "zh"]}
    store = Store(tmp_path)
    ref = store.run("corecode", PIPELINE.stage("conceptnet"), params, []).ref
    ctx = StageContext(store, "corecode", "screening")
    before = cn.relation_counts() if open_database(ref.load(), ctx) else None
    shutil.rmtree(tmp_path / "_cache")
    db = open_database(ref.load(), ctx)
    assert (tmp_path / ref.load()["database"].iloc[0]).exists() and db["lines"] is not None
    assert cn.relation_counts() == before


def test_gc_reclaims_caches_no_kept_artifact_needs(tmp_path):
    """Embedding LMDBs, unpacked models and ConceptNet databases that no kept artifact's manifest names,
    and quarantined artifacts, are listed by the dry run and removed by --apply; the needed ones stay."""
    import json
    import time

    store = Store(tmp_path)
    a, b = _run_both(store)
    store.record_run("cicero", "r1", [{"stage": "length_filter", "key": b.ref.key}])
    used, old = "a" * 64, "b" * 64
    # a kept artifact naming the embedder it ran (sha256, precision) and the ConceptNet database it read
    kept = tmp_path / "cicero" / "embed" / "k1"
    kept.mkdir(parents=True)
    (kept / MANIFEST).write_text(json.dumps({
        "pipeline": "cicero", "stage": "embed", "key": "k1", "inputs": [],
        "models": [{"name": "sentence-embedder", "sha256": used, "precision": "bf16",
                    "cache": used[:16] + "-bf16-pass8x1024x256"}],
        "notes": {"database": str(tmp_path / "_cache" / "conceptnet" / "keep-en.db")}}))
    store.record_run("cicero", "r2", [{"stage": "embed", "key": "k1"}])
    cache = tmp_path / "_cache"
    entries = {
        "embeddings/" + used[:16] + "-bf16-pass8x1024x256/data.mdb": True,
        "embeddings/" + used[:16] + "-fp32-pass8x1024x256/data.mdb": False,
        "embeddings/" + used[:16] + "-bf16/data.mdb": False,  # the layout before pass shapes: never read now
        "embeddings/" + old[:16] + "-bf16-pass8x1024x256/data.mdb": False,
        "models/all-mpnet-base-v2-" + used[:12] + "/config.json": True, "models/other-" + old[:12] + "/config.json": False,
        "conceptnet/keep-en.db": True, "conceptnet/keep-en.db.lines": True,
        "conceptnet/gone-en.db": False, "conceptnet/gone-en.db.lines": False, "conceptnet/gone-en.db.counts.json": False,
    }
    for rel in entries:
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache / rel).write_bytes(b"x" * 100)
    q = tmp_path / "_quarantine" / "cicero" / "sources" / "abc-20260101T000000Z"
    q.mkdir(parents=True)
    (q / "data.parquet").write_bytes(b"damaged")
    past = time.time() - 7200
    for p in list(cache.rglob("*")) + [q]:
        os.utime(p, (past, past))
    g = find_garbage(store, keep_minutes=60)
    removable = {str(p.relative_to(cache)) for p in g.caches}
    assert removable == {"embeddings/" + used[:16] + "-fp32-pass8x1024x256", "embeddings/" + used[:16] + "-bf16",
                         "embeddings/" + old[:16] + "-bf16-pass8x1024x256",
                         "models/other-" + old[:12], "conceptnet/gone-en.db", "conceptnet/gone-en.db.lines",
                         "conceptnet/gone-en.db.counts.json"}
    assert g.quarantine == [q]
    runner = CliRunner()
    dry = runner.invoke(app, ["gc", "--store", str(tmp_path)])
    assert dry.exit_code == 0 and "cache entries" in dry.output and (cache / "conceptnet" / "gone-en.db").exists()
    res = runner.invoke(app, ["gc", "--store", str(tmp_path), "--apply"])
    assert res.exit_code == 0, res.output
    for rel, needed in entries.items():
        assert (cache / rel).exists() == needed, rel
    assert not q.exists() and a.ref.data_path.exists()


def test_a_flipped_byte_anywhere_is_named_by_every_reading_command(tmp_path):
    """Every file of a finished run (data, rejected, manifest, extra files), one flipped byte at a time:
    `csk verify` names the artifact and file and exits non-zero; show and lineage give a named error;
    never a traceback."""
    store = Store(tmp_path)
    a, b = _run_both(store)
    store.record_run("cicero", "r1", [{"stage": r.stage, "key": r.key, "path": r.path} for r in (a.ref, b.ref)])
    runner = CliRunner()
    row = __import__("pandas").read_parquet(b.ref.data_path)["id"].iloc[0]
    for ref in (a.ref, b.ref):
        for f in _files(ref):
            before = f.read_bytes()
            _flip(f)
            try:
                res = runner.invoke(app, ["verify", "cicero", "--store", str(tmp_path)])
                assert res.exit_code == 1 and str(f) in res.output, (f, res.output)
                assert res.exception is None or isinstance(res.exception, SystemExit), (f, res.exception)
                assert "Traceback" not in res.output
                for cmd in (["show", "cicero", ref.stage, "--store", str(tmp_path)],
                            ["lineage", "cicero", "length_filter", "--row", row, "--store", str(tmp_path)]):
                    res = runner.invoke(app, cmd)
                    assert res.exception is None or isinstance(res.exception, SystemExit), (f, cmd, res.exception)
                    assert "Traceback" not in res.output
                    if f.name == "data.parquet" and res.exit_code:
                        assert str(f) in res.output or "could not be read" in res.output, (f, cmd, res.output)
            finally:
                f.write_bytes(before)
    assert runner.invoke(app, ["verify", "--store", str(tmp_path)]).exit_code == 0
