"""A command imports what it runs (issue 72, item 5): the CLI itself loads no dataset, engine, model or
lexicon; naming a pipeline imports that pipeline's code only; the memo of stage code hashes gives the
hashes a fresh reading gives. Each check runs in a fresh interpreter (this test process has imported
everything already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("lemminflect", "spacy", "torch", "transformers", "sentence_transformers", "pandas", "pandera", "prefect",
         "flows", "tasks", "data_contracts")


def _loaded(code: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                         cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ, **(env or {})})
    return {"modules": set(json.loads(out.stdout.strip().splitlines()[-1])), "stdout": out.stdout}


def test_the_cli_imports_no_dataset_engine_model_or_lexicon():
    modules = _loaded("import csk.cli")["modules"]
    assert not {m.split(".")[0] for m in modules} & set(HEAVY), sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_naming_a_pipeline_imports_that_pipeline_only():
    modules = _loaded("from csk.config import load_config\nfrom csk.pipeline import get_pipeline\n"
                      "load_config('pipelines.toml', [], pipelines=[get_pipeline('deco').name])")["modules"]
    assert "flows.deco" in modules
    assert not {"flows.cicero", "flows.corecode", "flows.corequisite", "flows.distractors",
                "flows._distractor_engine"} & modules
    assert not {m for m in modules if m.startswith("tasks.distractors") or m.startswith("tasks.cicero")}
    assert not {"lemminflect", "spacy"} & modules


def test_code_hash_memo_gives_the_fresh_hashes(tmp_path):
    """First process: computed and kept; second: read from the memo; both equal a reading without it."""
    code = ("from csk.pipeline import get_pipeline\n"
            "p = get_pipeline('deco')\n"
            "print(json.dumps([[s.code_hash(), s.packages()] for s in p.stages]))\n")
    code = "import json\n" + code
    env = {"CSK_CACHE_DIR": str(tmp_path)}
    first = _loaded(code, env)["stdout"].splitlines()[0]
    assert list(tmp_path.glob("codehash/*.json")), "the memo was not written"
    second = _loaded(code, env)["stdout"].splitlines()[0]
    from csk import codehash
    from csk.pipeline import get_pipeline

    codehash.forget()
    memo, codehash._MEMO = codehash._MEMO, {"": True}  # (the mark: nothing is read from disk, nothing written)
    try:
        fresh = json.dumps([[s.code_hash(), s.packages()] for s in get_pipeline("deco").stages])
    finally:
        codehash._MEMO = memo
        codehash.forget()
    assert first == second == fresh


def test_stage_keys_run_no_stage_code():
    """Hashing a stage's code reads its sources: no module of it runs (find_spec of `pkg.module.name`
    imported pkg.module, and tasks.distractors.fluency loaded lemminflect, spaCy and torch on import)."""
    code = ("from csk.pipeline import get_pipeline\n"
            "for s in get_pipeline('cicero').stages:\n"
            "    s.code_hash(), s.packages(), s.threads_matter\n")
    modules = _loaded(code)["modules"]
    assert not {"lemminflect", "spacy", "torch", "transformers"} & modules
    assert "tasks.distractors.fluency" not in modules


def test_help_lists_every_command_reading_sources_only():
    """`csk --help` lists the pipelines' and plugins' commands from their declarations (ast), importing
    none of them; the list is the one importing every pipeline gives ($CSK_PIPELINES forces that path)."""
    code = ("from typer.testing import CliRunner\nfrom csk.cli import app\n"
            "print(json.dumps(CliRunner().invoke(app, ['--help'], terminal_width=100).output))\n")
    code = "import json\n" + code
    read = _loaded(code)
    imported = _loaded(code, {"CSK_PIPELINES": "flows.deco"})
    assert json.loads(read["stdout"].splitlines()[0]) == json.loads(imported["stdout"].splitlines()[0])
    assert "train-extractor" in read["stdout"] and "precision" in read["stdout"]
    assert not {m for m in read["modules"] if m.split(".")[0] in ("flows", "tasks", "pandas", "pandera")}
    assert "flows.cicero" in imported["modules"]
