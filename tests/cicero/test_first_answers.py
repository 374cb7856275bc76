"""The README's Label Studio round trip on a first, small batch of answers: `csk run cicero` with
`cicero.annotations.release=""` and `cicero.annotations.answers=<export>` completes with 1, 3 and 8 answers
(stages that cannot work on so few rows pass them through, saying why), and `csk lineage` goes from a final
multiple-choice row to the annotator. The export has the exact shape of Label Studio's (the server itself:
tests/kernel/test_label_studio.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from csk.label_studio import tasks_of
from tests.label_studio_export import textarea, write

pytestmark = pytest.mark.flow
runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def tasks_store(tmp_path_factory, prefect_harness):
    """A store holding the annotation tasks (the README's first `csk run cicero`, up to its tasks)."""
    from tests.conftest import ROOT, SAMPLE

    tmp = tmp_path_factory.mktemp("first-answers")
    config = tmp / "pipelines.toml"
    config.write_text((ROOT / "pipelines.toml").read_text().replace('"data/sample/', f'"{SAMPLE.as_posix()}/'))
    store = tmp / "artifacts"
    out = _csk("run", "cicero", "--config", config, "--store", store, "--until", "annotation_tasks")
    assert out.exit_code == 0, out.output
    return config, store


@pytest.mark.parametrize("answers,dialogues", [(1, 1), (3, 2), (8, 5)])
def test_a_first_batch_of_answers_completes_the_run_and_lineage_reaches_the_annotator(answers, dialogues, tasks_store,
                                                                                       tmp_path):
    from tasks.cicero.labeling import STEPS

    config, store = tasks_store
    runs = json.loads(_csk("artifacts", "cicero", "--store", store, "--run", "-1", "--json").output)
    path = next(s["path"] for s in runs if s["stage"] == "annotation_tasks")
    tasks = pd.read_parquet(Path(path) / "data.parquet")
    chosen = list(dict.fromkeys(tasks["dialogue_id"]))[:dialogues]
    picked = [i for k in range(answers) for i in [tasks.index[tasks["dialogue_id"] == chosen[k % dialogues]][k // dialogues]]]
    export = write(tmp_path / "answers.json", tasks_of(STEPS[0], tasks),
                   {i: [(7, [textarea("answer", f"The speaker had planned the trip for weeks, note {i}.")])]
                    for i in picked})
    out = _csk("run", "cicero", "--config", config, "--store", store, "--set", 'cicero.annotations.release=""',
               "--set", f"cicero.annotations.answers={export}")
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    by = {s["stage"]: s for s in json.loads(_csk("artifacts", "cicero", "--store", store, "--json").output)}
    assert by["annotations"]["rows"]["out"] == answers
    # the final stage that has rows: the multiple-choice items, or (no candidate at all) the NLG tasks
    final = "mcq" if "mcq" in by else "nlg"
    if final == "nlg":  # a stage of the distractor engine kept nothing: the summary says which
        assert any(f"{stage}: kept none of its" in text for stage in ("counterfactuals", "candidate_filter",
                                                                      "adversarial_filter")), text
    elif dialogues < 5:  # fewer dialogues than AF's folds
        assert "adversarial_filter: adversarial filtering passed its instances through" in text
    rows = pd.read_parquet(Path(by[final]["path"]) / "data.parquet")
    assert 0 < len(rows)
    traced = _csk("lineage", "cicero", final, "--row", rows["id"].iloc[0], "--store", store)
    assert traced.exit_code == 0, traced.output
    assert "annotated by 7 (Label Studio annotation" in traced.output and "answers.json" in traced.output
