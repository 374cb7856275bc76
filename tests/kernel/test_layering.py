"""The house's layering, checked on the sources (no module is run): the kernel (csk/) knows no dataset,
shared stages (tasks/*.py, tasks/distractors/) know no dataset slice, and a slice's edit recomputes
nothing in another slice's stages (a stage's key hashes every module it can import, `csk.codehash`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from csk import codehash
from csk.pipeline import discover

ROOT = Path(__file__).resolve().parent.parent.parent
SLICES = ("cicero", "corequisite", "corecode", "deco")


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (inside functions too), by the project's one resolver."""
    from csk.imports import imports_of

    return imports_of(path, ROOT)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_the_kernel_imports_no_stage_and_no_flow():
    bad = {_module(p): sorted(m for m in _imports(p) if m.split(".")[0] in ("tasks", "flows"))
           for p in sorted((ROOT / "csk").rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}, "csk/ finds pipelines and commands by entry points"


@pytest.mark.parametrize("path", sorted((ROOT / "tasks").glob("*.py")) + sorted((ROOT / "tasks/distractors").glob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_shared_stages_reach_no_dataset_slice(path):
    """Not only its own imports: nothing it can run (the modules its key hashes) is a slice's."""
    reached = codehash.closure((_module(path),))[0]
    assert not [m for m in reached if m.split(".")[:2][-1] in SLICES and m.startswith("tasks.")]


@pytest.mark.parametrize("pipeline", ["deco", "corequisite", "corecode", "distractors"])
def test_an_edit_to_ciceros_targets_recomputes_nothing_in_another_pipeline(pipeline):
    """`csk status` recomputes a stage when a module in its code hash changes: tasks/cicero/targets.py is
    in no other pipeline's stage's hash."""
    for stage in discover()[pipeline].stages:
        reached = codehash.closure(tuple(m for m in (stage.fn.__module__, stage.contract.__module__)))[0]
        assert not [m for m in reached if m.startswith("tasks.cicero")], f"{pipeline}.{stage.name}"


def test_no_import_circle_anywhere_in_the_tree():
    """Every import counts, inside functions and under TYPE_CHECKING too (an import inside a function is
    still a wire: it runs, and a stage's key hashes it), kernel included."""
    from csk.imports import cycles, graph

    g = graph()
    assert len(g) > 100 and "csk.compute" in g and "tasks.embed" in g
    assert not cycles(g)


def test_the_circle_finder_finds_a_circle(tmp_path):
    """The test above can fail: a two-module circle made inside a function is found."""
    from csk.imports import cycles, graph

    (tmp_path / "csk").mkdir()
    (tmp_path / "csk" / "__init__.py").write_text("")
    (tmp_path / "csk" / "a.py").write_text("def f():\n    from csk.b import g\n")
    (tmp_path / "csk" / "b.py").write_text("from . import a\n")
    assert cycles(graph(tmp_path)) == [["csk.a", "csk.b"]]


@pytest.mark.parametrize("top", ["csk", "data_contracts"])
def test_the_kernel_and_the_contracts_import_no_dataset_code(top):
    """Not tasks/, flows/ or readers/, at any depth of a file (function-local imports included): the
    kernel finds dataset code through entry points, and a contract states a format without reading it."""
    from csk.imports import graph

    bad = {m: sorted(t for t in targets if t.split(".")[0] in ("tasks", "flows", "readers"))
           for m, targets in graph().items() if m.split(".")[0] == top}
    assert not {k: v for k, v in bad.items() if v}


def test_the_kernel_names_no_dataset():
    """No string of the kernel's code is a registered pipeline's name (a branch on `pipeline == "cicero"`,
    a hint naming one dataset): what differs by dataset is declared by its Pipeline."""
    names = set(discover())
    found = {}
    for path in sorted((ROOT / "csk").rglob("*.py")):
        tree = ast.parse(path.read_bytes())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and id(n) not in docs and n.value in names]
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found


def test_flow_bodies_name_stages_by_their_function():
    """`run.stage(dedup, ...)`, never `run.stage("dedup", ...)`: the function is the name (a renamed or
    removed stage is an import error, not a string found at run time)."""
    import re

    found = {str(p.relative_to(ROOT)): re.findall(r"run\.(?:stage|enabled)\(\s*[\"']\w+", p.read_text())
             for p in sorted((ROOT / "flows").glob("*.py"))}
    assert not {k: v for k, v in found.items() if v}


def test_no_test_double_in_production_code():
    """Production code runs the real thing: no unittest.mock (a process-wide patch of subprocess.Popen
    once started Prefect's temporary server)."""
    from csk.imports import project_modules

    found = {}
    for name, path in project_modules().items():
        names = set()
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        if any(n.startswith("unittest") for n in names):
            found[name] = sorted(names)
    assert not found


def test_the_layout_doc_lists_what_each_shared_module_recomputes():
    """docs/layout.md's module table is the import graph's (`csk deps --write docs/layout.md`)."""
    from csk.imports import DOC_BEGIN, layout_table, replace_section

    doc = (ROOT / "docs" / "layout.md").read_text()
    table = layout_table(discover())
    assert DOC_BEGIN in doc and replace_section(doc, table) == doc, "run `csk deps --write docs/layout.md`"
    assert "| `tasks.embed` |" in table and "| `tasks.distractors.adversarial` |" in table
    row = next(line for line in table.splitlines() if line.startswith("| `tasks.distractors.adversarial` |"))
    names = sorted(discover())
    cells = dict(zip(names, [c.strip() for c in row.split("|")[2:-1]]))
    assert not cells["deco"] and not cells["corequisite"] and not cells["corecode"] and cells["cicero"]


def test_project_code_imports_a_reader_from_its_own_module():
    """`readers` loads each reader on first use (its __init__ imports none, so a stage's key hashes only
    the readers it imports); `from readers import read_x` would hide which one from the key."""
    from csk.imports import project_modules

    found = {}
    for name, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.ImportFrom) and node.module == "readers" and not node.level:
                found.setdefault(name, []).extend(a.name for a in node.names)
    assert not found
    from readers import read_dailydialog  # still there for tests and notebooks, loaded on use

    assert read_dailydialog.__module__ == "readers.dailydialog"


def test_a_contract_is_looked_up_in_its_own_module_only():
    """`get_contract` / `contract_name` import the named contract module alone (they imported every
    dataset's contracts, DECO's reader with them)."""
    import subprocess
    import sys

    code = ("import sys; from data_contracts import get_contract, contract_name; "
            "c = get_contract('corecode.Dialogues'); assert contract_name(c) == 'corecode.Dialogues'; "
            "print(sorted(m for m in sys.modules if m.startswith(('data_contracts.', 'readers', 'tasks'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "['data_contracts.common', 'data_contracts.corecode']", out.stdout
