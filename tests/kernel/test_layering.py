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
    """Every module a file imports, at any depth (inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


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


def test_no_import_circle_among_project_modules():
    """Imports run when a module is imported (not those inside functions) form no circle."""
    import networkx as nx

    graph = nx.DiGraph()
    for top in ("csk", "tasks", "flows", "readers", "data_contracts"):
        for path in (ROOT / top).rglob("*.py"):
            name = _module(path)
            _, _, on_import = codehash._parsed(name)
            graph.add_edges_from((name, m) for m in on_import if codehash.module_file(m) is not None
                                 and m.split(".")[0] in codehash.PROJECT_PACKAGES and m != name)
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert not cycles, cycles


def test_flow_bodies_name_stages_by_their_function():
    """`run.stage(dedup, ...)`, never `run.stage("dedup", ...)`: the function is the name (a renamed or
    removed stage is an import error, not a string found at run time)."""
    import re

    found = {str(p.relative_to(ROOT)): re.findall(r"run\.(?:stage|enabled)\(\s*[\"']\w+", p.read_text())
             for p in sorted((ROOT / "flows").glob("*.py"))}
    assert not {k: v for k, v in found.items() if v}
