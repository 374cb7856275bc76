"""Resume as users run it (issue 72, item 4): the default discriminator, `cached-transformer`, killed after a
round and resumed, gives the bytes of an uninterrupted run (the linear probe's: test_flow_distractors.py)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow  # four rebuilds of 40 real items with the cached transformer: minutes on 2 cores
def test_the_cached_transformer_killed_after_round_2_resumes_to_the_bytes_of_an_uninterrupted_run(
        prefect_harness, tmp_path, config_copy, real):
    """kill -9 right after AF commits round 2 (its activation cache committed with it), then the same command
    again: rounds 1-2 come from the checkpoint and the resumed run computes only the pairs rounds 3-4 add; the
    rebuilt file is byte-identical to an uninterrupted run's, and so is a resume that lost the activation
    cache (its passes hold other row counts)."""
    import shutil
    import signal

    from tests.distractors.killable import KILL_AFTER_AF_ROUND_2, check_resume, rebuild_command

    lines = open(real / "cicero" / "cicero_v2_val_sample.jsonl", encoding="utf-8").read().splitlines()[:40]
    source = tmp_path / "v40.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rebuild = rebuild_command(source, "cicero", config_copy, discriminator="cached-transformer", max_iterations=4,
                              timeout=1200)

    killed = rebuild(tmp_path / "store", tmp_path / "out.jsonl", KILL_AFTER_AF_ROUND_2)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:] + killed.stderr[-2000:]
    kept = list((tmp_path / "store" / "_checkpoints").rglob("activations/index.jsonl"))
    assert kept and kept[0].stat().st_size > 0  # the rounds' activations were committed with them
    shutil.copytree(tmp_path / "store", tmp_path / "whole", ignore=shutil.ignore_patterns("_checkpoints", ".locks"))
    # a resume whose activation cache is lost: round 3 computes every pair it reads at once, in passes of other
    # row counts (a last pass of another size) than the rounds that computed them before
    shutil.copytree(tmp_path / "store", tmp_path / "cold", ignore=shutil.ignore_patterns(".locks"))
    for folder in list((tmp_path / "cold" / "_checkpoints").rglob("activations")):
        shutil.rmtree(folder)
    check_resume(rebuild, tmp_path)
    cold = rebuild(tmp_path / "cold", tmp_path / "cold.jsonl")
    assert cold.returncode == 0 and "AF resumes after round 2" in cold.stdout + cold.stderr, cold.stderr[-2000:]
    assert (tmp_path / "cold.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    af = json.load(open(next((tmp_path / "store" / "distractors" / "adversarial_filter").glob("*/manifest.json"))))
    assert af["resumed"] == {"adversarial_filter_rounds": [1, 2]} and len(af["notes"]["history"]) == 4
    whole_af = json.load(open(next((tmp_path / "whole" / "distractors" / "adversarial_filter").glob("*/manifest.json"))))
    assert af["notes"]["history"] == whole_af["notes"]["history"]
    assert af["data_sha256"] == whole_af["data_sha256"]
