"""CoreQuisite on a first Label Studio answer: `csk run corequisite` with one crowd answer and no expert labels
completes; P-MCQA, which needs three other answers as distractors, is skipped with a warning that says why;
P-NLI and P-G hold the answer, and `csk lineage` goes from its P-NLI row to the annotator."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.label_studio import tasks_of
from tests import label_studio_export as ls

pytestmark = pytest.mark.flow
runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_one_answer_completes_the_run_and_p_mcqa_says_why_it_is_empty(prefect_harness, tmp_path, config_copy):
    from flows.corequisite import PIPELINE

    store = tmp_path / "artifacts"
    first = _csk("run", "corequisite", "--config", config_copy, "--store", store, "--until", "annotation_tasks")
    assert first.exit_code == 0, first.output
    runs = json.loads(_csk("artifacts", "corequisite", "--store", store, "--run", "-1", "--json").output)
    tasks = pd.read_parquet(Path(next(s["path"] for s in runs if s["stage"] == "annotation_tasks")) / "data.parquet")
    export = ls.write(tmp_path / "preconditions.json", tasks_of(PIPELINE.labeling_step("preconditions"), tasks),
                      {0: [(5, [ls.textarea("answer_1", "There is enough light in the room.", to="statement")])]})
    out = _csk("run", "corequisite", "--config", config_copy, "--store", store,
               "--set", f"corequisite.annotations.answers={export}", "--set", "corequisite.answer_rules.expert_labels=")
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "mcqa_instances: kept none of its" in text and "the stages that need them did not run" in text
    by = {s["stage"]: s for s in json.loads(_csk("artifacts", "corequisite", "--store", store, "--json").output)}
    assert "p_mcqa" not in by and by["statistics"]["rows"]["out"] > 0
    nli = pd.read_parquet(Path(by["p_nli"]["path"]) / "data.parquet")
    assert len(nli) == 1 and nli["context"].iloc[0] == "There is enough light in the room."
    traced = _csk("lineage", "corequisite", "p_nli", "--row", nli["id"].iloc[0], "--store", store)
    assert traced.exit_code == 0 and "annotated by 5 (Label Studio annotation" in traced.output, traced.output
