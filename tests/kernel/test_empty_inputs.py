"""Inputs that leave nothing: a source whose every record is rejected, a filter that rejects every row.

The run writes the empty artifact (with its contract's columns and dtypes) and its rejected rows as
usual, then stops with one message naming each file, its record count and the rejection reasons with
their counts, and what to check: no contract error, no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from csk.cli import app
from tests.conftest import SAMPLE

pytestmark = pytest.mark.flow
runner = CliRunner()


def _csk(*args):
    return runner.invoke(app, [str(a) for a in args])


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _config(tmp: Path, text: str) -> Path:
    return _write(tmp / "p.toml", text)


# Each case: (pipeline, config text given the temporary directory, extra args, the stage that keeps
# nothing, lines the message must hold).
def _dream(tmp):
    _write(tmp / "dream.json", '[[12345, [{"question": "q", "choice": ["a"], "answer": "a"}], "id-1"]]')
    return f'[cicero.sources]\ndailydialog = ""\nmutual = ""\ndream = "{tmp}/dream.json"\n' \
           '[cicero.annotations]\nrelease = ""\n'


def _mutual(tmp):
    for i in range(3):
        _write(tmp / "mutual" / "dev" / f"dev_{i}.txt", b"\xff\xfe not utf-8")
    return f'[cicero.sources]\ndailydialog = ""\nmutual = "{tmp}/mutual"\ndream = ""\n[cicero.annotations]\nrelease = ""\n'


def _dailydialog_empty_lines(tmp):
    _write(tmp / "dialogues_text.txt", "\n\n")
    return f'[cicero.sources]\ndailydialog = "{tmp}/dialogues_text.txt"\nmutual = ""\ndream = ""\n' \
           '[cicero.annotations]\nrelease = ""\n'


def _cicero_annotations(tmp):
    _write(tmp / "cicero.jsonl", '{"not": "a CICERO record"}\n[1, 2]\n')
    return f'[cicero.sources]\ndailydialog = "{SAMPLE}/dailydialog/dialogues_text.txt"\nmutual = ""\ndream = ""\n' \
           f'[cicero.annotations]\nrelease = "{tmp}/cicero.jsonl"\n'


def _length_filter(tmp):
    return f'[cicero.sources]\ndailydialog = "{SAMPLE}/dailydialog/dialogues_text.txt"\nmutual = ""\ndream = ""\n' \
           '[cicero.annotations]\nrelease = ""\n[cicero.length_filter]\nmin_utterances = 100\nmax_utterances = 200\n'


def _naturalconv(tmp):
    _write(tmp / "dialog_release.json", '[{"dialog_id": 5, "content": 7}, {"dialog_id": "a"}]')
    return f'[corecode.sources]\nnaturalconv = "{tmp}/dialog_release.json"\ndulemon = ""\ncorecode = ""\n' \
           f'[corecode.conceptnet]\ndump = "{SAMPLE}/corecode/conceptnet-assertions-zh-sample.csv"\n' \
           f'[corecode.annotations]\nrelease = "{SAMPLE}/corecode/annotations.jsonl"\n'


def _conceptnet_dump(tmp):
    _write(tmp / "assertions.csv", "not\ta\tconceptnet\nline\n")
    return f'[corequisite.conceptnet]\ndump = "{tmp}/assertions.csv"\n' \
           f'[corequisite.annotations]\nanswers = "{SAMPLE}/corequisite/answers.csv"\n'


def _paco_answers(tmp):
    _write(tmp / "answers.csv", "task_id,worker_id,answer,does_not_make_sense\nno-such-task,W1,It rains.,0\n"
                                "other-task,W2,Dry.,0\n")
    return f'[corequisite.conceptnet]\ndump = "{SAMPLE}/corequisite/conceptnet-assertions-sample.csv"\n' \
           f'[corequisite.annotations]\nanswers = "{tmp}/answers.csv"\n' \
           f'[corequisite.answer_rules]\nexpert_labels = ""\n'


def _deco(tmp):
    _write(tmp / "personachat.txt", b"\xff\xfe\n")
    return f'[deco.sources]\ndailydialog = ""\npersonachat = "{tmp}/personachat.txt"\ntopicalchat = ""\n' \
           'responses = ""\nrelease = ""\nconture = ""\n'


CASES = {
    "dream_record_of_wrong_types": ("cicero", _dream, "sources", ["dream.json: 1 record, 1 rejected (malformed_record: 1)"]),
    "mutual_every_file_unreadable": ("cicero", _mutual, "sources",
                                     ["dev_0.txt: 1 record, 1 rejected (malformed_record: 1)", "invalid UTF-8"]),
    "dailydialog_no_records": ("cicero", _dailydialog_empty_lines, "sources", ["dialogues_text.txt: 0 records"]),
    "cicero_release_every_record_rejected": ("cicero", _cicero_annotations, "annotations",
                                             ["nothing for 'quality_check' to do", "cicero.jsonl: 2 records, 2 rejected"]),
    "length_filter_rejects_all": ("cicero", _length_filter, "length_filter",
                                  ["nothing for 'embed' to do", "too_few_utterances", "[cicero.length_filter]"]),
    "naturalconv_every_record_rejected": ("corecode", _naturalconv, "sources",
                                          ["dialog_release.json: 2 records, 2 rejected"]),
    "conceptnet_dump_unreadable": ("corequisite", _conceptnet_dump, "conceptnet",
                                   ["assertions.csv: 2 lines, 0 kept (malformed: 2)"]),
    "paco_answers_for_no_task": ("corequisite", _paco_answers, "annotations", ["answers.csv: 2 records, 2 rejected"]),
    "personachat_unreadable": ("deco", _deco, "sources", ["personachat.txt"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_nothing_left_is_one_clear_message(prefect_harness, tmp_path, case):
    pipeline, make, stage, wanted = CASES[case]
    config = _config(tmp_path, make(tmp_path))
    store = tmp_path / "store"
    out = _csk("run", pipeline, "--config", config, "--store", store)
    assert out.exit_code == 1, out.output
    text = out.output
    assert "Traceback" not in text and "violates data contract" not in text, text
    assert f"stage {stage!r} kept no rows" in text, text
    for w in wanted:
        assert w in text, f"{w!r} not in:\n{text}"
    assert "Check " in text  # what to do about it
    # the empty artifact was written as usual: the contract's columns and dtypes, and its rejected rows
    (artifact,) = [p for p in (store / pipeline / stage).iterdir()]
    manifest = json.loads((artifact / "manifest.json").read_text())
    data = pd.read_parquet(artifact / "data.parquet")
    assert data.empty
    from data_contracts import get_contract

    schema = get_contract(manifest["contract"]).to_schema()
    assert set(schema.columns) <= set(data.columns)
    assert _csk("validate", artifact / "data.parquet", "--contract", manifest["contract"]).exit_code == 0
    if manifest["rows"]["rejected"]:
        assert len(pd.read_parquet(artifact / "rejected.parquet")) == manifest["rows"]["rejected"]


# ---------------------------------------------------------------- every stage handed empty inputs
def _stage_cases():
    from csk.config import load_config
    from csk.orchestration import flow_graph
    from csk.pipeline import discover

    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="csk-empty-"))
    config = tmp / "pipelines.toml"
    config.write_text((Path(__file__).resolve().parent.parent.parent / "pipelines.toml").read_text()
                      .replace('"data/sample/', f'"{SAMPLE.as_posix()}/'))
    loaded = load_config(config, [])
    cases = []
    for name, p in sorted(discover().items()):
        for stage, inputs in flow_graph(p, loaded[name], tmp / "store").items():
            if inputs:
                cases.append(pytest.param(name, stage, inputs, id=f"{name}-{stage}"))
    return config, cases


CONFIG, STAGE_CASES = _stage_cases()


def _empty_artifact(store, pipeline: str, stage: str, contract: str):
    """An artifact of `stage` with no rows, written as the runtime writes one (contract columns and dtypes)."""
    import hashlib

    from csk.artifacts import to_parquet_bytes
    from data_contracts import conform_empty

    data = to_parquet_bytes(conform_empty(pd.DataFrame(), contract))
    key = hashlib.sha256(f"{stage}/{contract}".encode()).hexdigest()[:24]
    manifest = {"pipeline": pipeline, "stage": stage, "key": key, "contract": contract, "inputs": [],
                "rows": {"in": 0, "out": 0, "rejected": 0}, "data_sha256": hashlib.sha256(data).hexdigest()}
    return store._commit(pipeline, stage, key, {"data.parquet": data}, manifest)


@pytest.mark.parametrize("pipeline,stage,inputs", STAGE_CASES)
def test_every_stage_on_empty_inputs(tmp_path, pipeline, stage, inputs):
    """Each stage given empty (typed) inputs writes an empty artifact with its contract's columns and
    dtypes, or stops with a CskError saying why: never a KeyError, a contract error or a traceback."""
    from csk.config import load_config
    from csk.errors import ContractError, CskError
    from csk.pipeline import get_pipeline
    from csk.store import Store

    p = get_pipeline(pipeline)
    cfg = load_config(CONFIG, [])[pipeline]
    store = Store(tmp_path / "store")
    refs = {n: _empty_artifact(store, pipeline, up, p.stage(up).contract_name) for n, up in inputs.items()}
    target = p.stage(stage)
    params = {k: v.model_dump() if hasattr(v, "model_dump") else v for k, v in p.stage_params(target, cfg).items()}
    try:
        result = store.run(pipeline, target, params, refs)
    except ContractError as exc:
        pytest.fail(f"{pipeline}.{stage} on empty inputs: {exc}")
    except CskError:  # a clear stop (e.g. a file naming rows this run does not have): the message is the check
        return
    data = result.ref.load()
    schema = target.contract.to_schema()
    # every required column; an optional one (who annotated, where rows came from Label Studio) may be absent
    assert {c for c, spec in schema.columns.items() if spec.required} <= set(data.columns)
    if len(data):  # rows of its own files (a release read as released): checked by the contract on write
        return
    for col, spec in schema.columns.items():
        if spec.dtype is not None and col in data.columns:
            assert str(data[col].dtype) == str(pd.Series([], dtype=spec.dtype.type).dtype), (col, data[col].dtype)
