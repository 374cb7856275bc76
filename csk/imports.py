"""The project's import graph, read from the sources (`ast`, nothing is run), and what it says about keys.

* `graph()`: every project module -> the project modules it imports anywhere (module level, inside
  functions, under `if TYPE_CHECKING:` too): the test that no circle exists reads it;
* `key_dependents()`: for each module, the pipelines (and how many of their stages) whose keys hash it,
  by the same closure a stage's key uses (`csk.codehash.closure`); `csk deps` prints it for
  docs/layout.md ("which pipelines recompute when I edit this file"), generated, never written by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

from csk.codehash import PROJECT_PACKAGES, PROJECT_ROOT, closure, imported_names, module_file

DOC_BEGIN = "<!-- csk deps: generated from the import graph (`csk deps --write docs/layout.md`); do not edit -->"
DOC_END = "<!-- end of csk deps -->"


def module_name(path: Path, root: Path = PROJECT_ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def project_modules(root: Path = PROJECT_ROOT) -> dict[str, Path]:
    """Every module of the project's packages, by name."""
    return {module_name(p, root): p for top in PROJECT_PACKAGES for p in sorted((root / top).rglob("*.py"))}


def imports_of(path: Path, root: Path = PROJECT_ROOT) -> set[str]:
    """Every module name a project file imports, wherever the statement is (inside functions and under
    `if TYPE_CHECKING:` too), by the resolver keys use (`csk.codehash.imported_names`)."""
    tree = ast.parse(path.read_bytes(), str(path))
    return imported_names(tree, module_name(path, root), path.name == "__init__.py", type_checking=True)


def graph(root: Path = PROJECT_ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports (a name that is not a module, e.g. `from a import f`,
    counts as `a`)."""
    modules = project_modules(root)
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {m for m in imports_of(path, root) if m in modules}
        out[name] = targets - {name}
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `g` (each as its strongly connected set of modules, sorted)."""
    import networkx as nx

    dg = nx.DiGraph()
    dg.add_nodes_from(g)
    dg.add_edges_from((a, b) for a, targets in g.items() for b in targets)
    return sorted(sorted(c) for c in nx.strongly_connected_components(dg) if len(c) > 1)


def key_dependents(pipelines: dict) -> dict[str, dict[str, int]]:
    """module -> {pipeline: how many of its stages hash the module into their key}."""
    out: dict[str, dict[str, int]] = {}
    for name, p in sorted(pipelines.items()):
        for stage in p.stages:
            for m in closure(tuple(x for x in (stage.fn.__module__, stage.contract.__module__) if x))[0]:
                out.setdefault(m, {}).setdefault(name, 0)
                out[m][name] += 1
    return out


def is_shared(module: str, pipelines: dict, hashed_by: dict[str, int] | None = None) -> bool:
    """A module no single dataset owns: not a flow (flows pick stages, they are in no key), and not
    `tasks.<name>.*`, `data_contracts.<name>` or `readers.<name>` of a pipeline whose keys alone hash it
    (the distractor engine, `tasks.distractors`, is a pipeline's and CICERO's: shared)."""
    parts = module.split(".")
    if parts[0] == "flows":
        return False
    owner = parts[1] if len(parts) >= 2 and parts[0] in ("tasks", "data_contracts", "readers") else None
    return owner not in pipelines or set(hashed_by or {}) - {owner} != set()


def layout_table(pipelines: dict) -> str:
    """The Markdown table docs/layout.md carries between DOC_BEGIN and DOC_END."""
    deps = key_dependents(pipelines)
    names = sorted(pipelines)
    total = {n: len(pipelines[n].stages) for n in names}
    lines = [DOC_BEGIN, "",
             "| shared module | " + " | ".join(f"{n} ({total[n]})" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for module in sorted(m for m in deps if is_shared(m, pipelines, deps[m]) and module_file(m) is not None):
        cells = [str(deps[module].get(n, "")) for n in names]
        lines.append(f"| `{module}` | " + " | ".join(cells) + " |")
    lines += ["", DOC_END]
    return "\n".join(lines) + "\n"


def replace_section(doc: str, table: str) -> str:
    """`doc` with its generated section replaced by `table` (appended when it has none)."""
    if DOC_BEGIN in doc and DOC_END in doc:
        head, rest = doc.split(DOC_BEGIN, 1)
        _, tail = rest.split(DOC_END, 1)
        return head + table.rstrip("\n") + tail
    return doc.rstrip("\n") + "\n\n" + table
