"""The dask runner: shards on a 2-worker LocalCluster give the same bytes as the local runner."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.shards import bounds, cluster, sharding, spans
from tests import tiny_models

pytestmark = pytest.mark.flow
SMALL_SHARDS = ("--set", "runtime.shard_rows=8", "--set", "cicero.embed.batch_size=1",
                "--set", "cicero.dedup.block_size=4")


def test_bounds_align_to_the_stage_unit():
    assert bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert bounds(40, 8, align=16) == [(0, 16), (16, 32), (32, 40)]
    with sharding(8, None):
        assert spans(40, align=16) == [(0, 40)]  # the local runner: one shard, nothing split


def _shard_work(tmp: Path, db: Path) -> dict:
    """Every sharded kernel once: encode, similarity tiles, seq2seq generation, ConceptNet matches."""
    from tasks import seq2seq
    from tasks.corecode.concepts import concepts
    from tasks.corecode.screening import screening
    from tasks.dedup import exact_pairs
    from tasks.embed import Embedder
    from readers import read_naturalconv
    from tests.conftest import SAMPLE

    texts = [f"utterance number {i} says {'something ' * (i % 7)}about the weather" for i in range(40)]
    vectors = Embedder({"batch_size": 1}, cache_dir=None, progress=False).encode(texts)
    x = np.random.default_rng(0).normal(size=(30, 16)).astype(np.float32)
    x[7] = x[3] + 0.01  # a near-duplicate pair across two row blocks
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    pairs = exact_pairs(x, 0.5, block_size=4, col_block=8, screen_bf16=False)
    t5 = tiny_models.t5(tmp / "t5")
    generated = seq2seq.generate([f"text {i}" for i in range(10)], t5, num_return=2, batch_size=2, do_sample=True,
                                 max_new_tokens=4, seed=3)
    cc = SAMPLE / "corecode"
    dialogues = pd.DataFrame(read_naturalconv(cc / "naturalconv" / "dialog_release.json", lenient=True).rows)
    conceptnet = pd.DataFrame({"id": ["r"], "database": [str(db)], "dump_sha256": ["0" * 64],
                               "source_file": [str(cc / "conceptnet-assertions-zh-sample.csv")]})
    screened = screening(dialogues, concepts(dialogues).data, conceptnet, min_matches=1)
    return {"vectors": vectors, "pairs": pairs, "generated": generated,
            "screened": screened.data[["id", "matches", "evidence"]].to_json(), "notes": screened.notes}


@pytest.mark.slow  # a LocalCluster and every sharded kernel (30 s), as the whole CICERO-on-Dask test (slow too)
def test_sharded_kernels_on_a_cluster_equal_the_local_runner(prefect_harness, tmp_path, caplog):
    from csk import conceptnet as cn
    from tests.conftest import SAMPLE

    db = cn.build_db(SAMPLE / "corecode" / "conceptnet-assertions-zh-sample.csv", tmp_path / "zh.db", ("zh",),
                     progress=False)
    with sharding(8, tmp_path / ".tmp"):
        local = _shard_work(tmp_path, db)
        with caplog.at_level(logging.INFO, logger="csk"), cluster("dask", workers=2):
            remote = _shard_work(tmp_path, db)
    ran = [r.getMessage() for r in caplog.records if "on the Dask cluster" in r.getMessage()]
    for fn in ("encode_shard", "screen_tiles", "generate_shard", "match_shard"):
        assert any(fn in m for m in ran), (fn, ran)
    assert local["vectors"].tobytes() == remote["vectors"].tobytes()
    for a, b in zip(local["pairs"], remote["pairs"]):
        assert a.tobytes() == b.tobytes()
    assert (3, 7) in set(zip(local["pairs"][0].tolist(), local["pairs"][1].tolist()))
    assert local["generated"] == remote["generated"]
    assert local["screened"] == remote["screened"] and local["notes"] == remote["notes"]
    assert not any((tmp_path / ".tmp").iterdir())  # shard files removed


def _files(store: Path) -> dict[str, str]:
    """sha256 of every file of every artifact (manifests hold timings: their data_sha256 is compared)."""
    out = {}
    for p in sorted((store / "cicero").rglob("*")):
        rel = p.relative_to(store).as_posix()
        if not p.is_file() or "/_runs/" in f"/{rel}":
            continue
        if p.name == "manifest.json":
            m = json.loads(p.read_text())
            out[rel] = f"{m['key']} {m['data_sha256']} {m['rows']}"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.slow  # a few minutes on 2 cores: `make test-all`
def test_cicero_on_a_2_worker_cluster_gives_the_local_runs_bytes(prefect_harness, tmp_path, config_copy, caplog):
    """Three fresh stores of the bundled CICERO run: local, local with torch on one thread, and the Dask
    runner (workers of one thread). Every stage's bytes agree, the trained ones too (the fine-tuned AF
    discriminator, distractor_quality's judge): they train with the machine's thread count."""
    import torch

    runner = CliRunner()
    local, one, dask = tmp_path / "local", tmp_path / "one_thread", tmp_path / "dask"
    first = runner.invoke(app, ["run", "cicero", "--config", str(config_copy), "--store", str(local), *SMALL_SHARDS])
    assert first.exit_code == 0, first.output
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = runner.invoke(app, ["run", "cicero", "--config", str(config_copy), "--store", str(one), *SMALL_SHARDS])
    finally:
        torch.set_num_threads(threads)
    assert single.exit_code == 0, single.output
    with caplog.at_level(logging.INFO, logger="csk"):
        second = runner.invoke(app, ["run", "cicero", "--config", str(config_copy), "--store", str(dask),
                                     "--runner", "dask", *SMALL_SHARDS])
    assert second.exit_code == 0, second.output
    sharded = {r.getMessage().split(":")[0] for r in caplog.records if "on the Dask cluster" in r.getMessage()}
    assert {"embed", "dedup", "targets"} <= sharded, sharded
    a, b, c = _files(local), _files(dask), _files(one)
    assert len(a) > 100 and a.keys() == b.keys() == c.keys()
    assert any("distractor_quality" in k for k in a) and any("adversarial_filter" in k for k in a)
    assert [k for k in a if a[k] != b[k]] == []
    assert [k for k in a if a[k] != c[k]] == []


def _local_cluster():
    from prefect_dask import DaskTaskRunner

    return DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": ":0"})


def test_a_cluster_whose_worker_dies_at_start_is_started_again(tmp_path, monkeypatch, caplog):
    """A worker killed in its first second fails the LocalCluster's start (Nanny failed to start): a fresh
    cluster is started once; when that fails too, the error says so."""
    import dask

    from csk.errors import StageError
    from csk.shards import start_cluster

    monkeypatch.setenv("CSK_TEST_KILL_MARK", str(tmp_path / "killed"))
    with dask.config.set({"distributed.worker.preload": ["tests.dask_kill_worker"]}):
        with caplog.at_level(logging.WARNING, logger="csk"):
            runner = start_cluster(_local_cluster, 2, timeout=30)
        try:
            assert (tmp_path / "killed").exists()  # the first start did lose a worker
            assert "did not start" in caplog.text and "starting a fresh one" in caplog.text
            assert len(runner.client.scheduler_info()["workers"]) == 2
        finally:
            runner.__exit__(None, None, None)
        monkeypatch.delenv("CSK_TEST_KILL_MARK")  # every worker dies: two attempts, then a clear error
        with pytest.raises(StageError, match="did not start \\(2 attempts\\)"):
            start_cluster(_local_cluster, 2, timeout=30)
