"""What a stage can execute, read from the source: the project modules it imports at any depth
(inside functions too), and the installed packages those modules import, with their versions.

Both go into the stage's key, so a reused artifact is what a fresh run would compute:

* code: the source of every project module reachable from the stage function's module and its
  contract's module through `import` / `from ... import` statements anywhere in their source
  (module level, inside functions and methods; `if TYPE_CHECKING:` blocks are skipped: they
  never run). Read with `ast`, not from a module's namespace, so a helper imported inside a
  function is followed too (e.g. `tasks.english`, imported where the parser is needed);
* packages: the distributions that provide the third-party modules those sources import, and
  everything they require in turn (a stage importing sentence-transformers runs transformers and
  torch), with their installed versions. Upgrading spaCy recomputes the stages that can run spaCy
  and only those. Two rules keep this to what computes a stage's bytes: the kernel (`csk.*`)
  counts only its module-level imports (pandas and pyarrow write every artifact; the torch its
  device helpers import inside functions runs only for stages that import torch themselves), and
  packages that schedule, lock or display work (`NOT_COMPUTE`) are not followed: a Dask shard
  gives the local runner's bytes whichever Prefect runs it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = ("csk", "readers", "tasks", "data_contracts", "flows")
# Orchestration and reporting: they decide which stages run and show what they did, never what a
# stage writes; following them would recompute every stage when a CLI message changes. This module too:
# it names keys and caches (a cache found by its name holds what the stage would compute), never a
# stage's bytes.
NOT_STAGE_CODE = ("csk.cli", "csk.orchestration", "csk.lineage_events", "csk.verify", "csk.runs", "csk.release",
                  "csk.lineage", "csk.progress", "csk.codehash", "flows")


NOT_COMPUTE = ("prefect", "prefect_dask", "dask", "distributed", "rich", "typer", "tqdm", "filelock",
               "docstring_parser")


def _is_project(name: str) -> bool:
    return name.split(".")[0] in PROJECT_PACKAGES


def _excluded(name: str) -> bool:
    return any(name == x or name.startswith(x + ".") for x in NOT_STAGE_CODE)


@lru_cache(maxsize=None)
def module_file(name: str) -> Path | None:
    """The source file of a module, found without running it (None: not a module, or no source). A
    project module is looked up on disk beside `csk` as the import system would find it (a package's
    __init__.py before a module's .py): `importlib.util.find_spec` imports a dotted name's parents, so
    asking for `tasks.distractors.fluency.forms` (a name, not a submodule) ran fluency.py and, through
    it, loaded lemminflect, spaCy and torch in a fully cached run."""
    if _is_project(name):
        base = PROJECT_ROOT.joinpath(*name.split("."))
        if not all(PROJECT_ROOT.joinpath(*name.split(".")[:i], "__init__.py").is_file()
                   for i in range(1, name.count(".") + 1)):
            return None  # a parent is not a package (a module, or a namespace package: no source of its own)
        for path in (base / "__init__.py", base.with_name(base.name + ".py")):
            if path.is_file():
                return path
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imported_names(tree: ast.AST, module: str, is_package: bool, *, top_level: bool = False,
                   type_checking: bool = False) -> set[str]:
    """Every module name an import statement of `tree` names, relative imports resolved; for
    `from a import b`, both `a` and `a.b` (b may be a submodule). `top_level`: only the statements
    that run on import (not inside function bodies). `type_checking`: also those under
    `if TYPE_CHECKING:` (never run, so no key follows them; an import circle still counts them).
    The project's one import resolver: keys, the import graph (`csk.imports`) and the layering tests."""
    out: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node) and not type_checking:
            todo += node.orelse
            continue
        if top_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            if base:
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
        todo.extend(ast.iter_child_nodes(node))
    return out


# ------------------------------------------------------------------ a memo on disk
# Parsing every module a stage can run (twice: its imports, its canonical source) and reading every
# installed distribution's metadata took most of a fully cached run's second. Their answers are kept in
# `<cache>/codehash/<salt>.json` (the folder of `csk.precision.cache_dir`), each under everything it depends on: a
# source's answers under its sha256 (and the module's name), a closure's hash under its modules' names and
# sha256s, the installed metadata under the names and mtimes of every distribution's metadata files on
# sys.path; the salt is this Python's version and this module's own source. A stale entry is never
# read: another byte, another name. Unwritable or unreadable: computed as before.
_MEMO: dict | None = None


@lru_cache(maxsize=None)
def _memo_path() -> Path:
    import os

    # csk.precision.cache_dir's folder (that module imports this one, and is stage code: not edited for this)
    base = Path(os.environ.get("CSK_CACHE_DIR") or
                Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "csk")
    salt = hashlib.sha256(sys.version.encode() + b"\0" + Path(__file__).read_bytes()).hexdigest()[:16]
    return base / "codehash" / f"{salt}.json"


def _memo() -> dict:
    global _MEMO
    if _MEMO is None:
        try:
            import json

            _MEMO = json.loads(_memo_path().read_text())
            if not isinstance(_MEMO, dict):
                _MEMO = {}
        except (OSError, ValueError):
            _MEMO = {}
    return _MEMO


def _memo_put(key: str, value: Any) -> Any:
    """Keep `value` under `key`; the memo is written once, when the process exits."""
    memo = _memo()
    if not memo.get("", False):
        import atexit

        if len(memo) > 20_000:  # a long-lived cache of many edited sources: start again
            memo.clear()
        memo[""] = True  # (a mark, never written: this process has new entries)
        atexit.register(_memo_write)
    memo[key] = value
    return value


def _memo_write() -> None:
    import json
    import os

    memo = {k: v for k, v in _memo().items() if k}
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass
    _memo().pop("", None)


def _sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@lru_cache(maxsize=None)
def _parsed(name: str) -> tuple[bytes, frozenset[str], frozenset[str]]:
    """(source bytes, names imported anywhere in it, names imported on import) of a project module."""
    path = module_file(name)
    if path is None:
        return b"", frozenset(), frozenset()
    raw = path.read_bytes()
    pkg = path.name == "__init__.py"
    key = f"imports:{name}:{int(pkg)}:{_sha(raw)}"
    known = _memo().get(key)
    if known is None:
        tree = ast.parse(raw, str(path))
        known = _memo_put(key, [sorted(imported_names(tree, name, pkg)),
                                sorted(imported_names(tree, name, pkg, top_level=True))])
    return raw, frozenset(known[0]), frozenset(known[1])


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@lru_cache(maxsize=None)
def _walk(roots: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """Every project module reachable from `roots` through imports, with the third-party top-level
    modules it imports itself (a kernel module: those it imports on import only)."""
    seen: dict[str, frozenset[str]] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or not _is_project(name):
            continue
        if _excluded(name) and name not in roots:
            continue
        if module_file(name) is None:  # `from pkg import name`: a name, not a submodule
            continue
        todo += [p for p in _parents(name) if p not in seen]  # importing a.b runs a/__init__.py
        _, anywhere, on_import = _parsed(name)
        todo += sorted(m for m in anywhere if _is_project(m))
        kernel = name.split(".")[0] == "csk"
        seen[name] = frozenset(top for top in (m.split(".")[0] for m in (on_import if kernel else anywhere)
                                               if not _is_project(m))
                               if top not in sys.stdlib_module_names and top != "__future__" and top not in NOT_COMPUTE)
    return seen


@lru_cache(maxsize=None)
def closure(roots: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(project modules, third-party top-level modules) reachable from `roots` through imports."""
    walked = _walk(roots)
    return tuple(sorted(walked)), tuple(sorted(set().union(*walked.values())))


@lru_cache(maxsize=None)
def one_thread_module(name: str) -> str | None:
    """The module's `THREAD_COUNT_FREE` statement (a top-level string: why its bytes do not depend on the
    intra-op thread count whatever it imports, e.g. every float kernel it runs is on one thread), or None."""
    raw = _parsed(name)[0]
    if b"THREAD_COUNT_FREE" not in raw:
        return None
    for n in ast.parse(raw).body:
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "THREAD_COUNT_FREE" for t in targets) and \
                isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            return n.value.value
    return None


def thread_count_free_reasons(roots: tuple[str, ...], packages: tuple[str, ...]) -> list[str]:
    """"module: why" for each module reachable from `roots` that imports one of `packages` and says its
    bytes are free of the thread count (`one_thread_module`)."""
    return [f"{name}: {one_thread_module(name)}" for name, tops in sorted(_walk(roots).items())
            if tops & set(packages) and one_thread_module(name)]


@lru_cache(maxsize=None)
def threaded_third_party(roots: tuple[str, ...]) -> tuple[str, ...]:
    """The third-party modules the code reachable from `roots` imports, leaving out those imported by a
    module that runs its kernels on one thread (`one_thread_module`)."""
    walked = _walk(roots)
    return tuple(sorted(set().union(*(tops for name, tops in walked.items() if not one_thread_module(name)))))


def _is_string(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def canonical_source(raw: bytes, filename: str = "<module>") -> bytes:
    """What of a module's source can change what it computes: its syntax tree without docstrings (module,
    class and function, and attribute docstrings: a string statement right after an assignment, as
    `ServerSpec`'s fields have; it is never evaluated into anything), comments, blank lines or positions. A
    docstring or comment edit, or code moved down a line, keeps every key; any change to code or to a string
    it uses moves them (Bazel: a key holds content, and here the content is the program, not its prose)."""
    tree = ast.parse(raw, filename)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and _is_string(body[0]):
                node.body = body[1:] or [ast.Pass()]
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and len(stmts) > 1:
                setattr(node, field, [s for i, s in enumerate(stmts) if not (
                    i and _is_string(s) and isinstance(stmts[i - 1], (ast.Assign, ast.AnnAssign, ast.AugAssign)))])
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


@lru_cache(maxsize=None)
def _canonical(name: str) -> bytes:
    path = module_file(name)
    return canonical_source(path.read_bytes(), str(path)) if path is not None else b""


def code_hash(roots: tuple[str, ...]) -> str:
    names = closure(roots)[0]
    sources = [[name, _sha(_parsed(name)[0]) if module_file(name) is not None else None] for name in names]
    key = "code:" + _sha(repr(sources).encode())
    known = _memo().get(key)
    if known is None:
        h = hashlib.sha256()
        for name in names:
            h.update(name.encode() + b"\0" + _canonical(name) + b"\0")
        known = _memo_put(key, h.hexdigest()[:16])
    return known


@lru_cache(maxsize=None)
def _installed() -> str:
    """The memo's key of the installed distributions: every metadata directory on sys.path (where
    importlib.metadata looks), with the mtimes of it and of the files read from it."""
    import os

    lines = [sys.version, sys.platform]
    for entry in sys.path:
        try:
            found = sorted((e for e in os.scandir(entry or ".") if e.name.endswith((".dist-info", ".egg-info"))),
                           key=lambda e: e.name)
        except OSError:
            continue
        lines.append(f"{entry}")
        for e in found:
            lines.append(f"{e.name} {e.stat().st_mtime_ns}")
            if e.is_dir():
                for f in ("METADATA", "PKG-INFO", "RECORD", "top_level.txt", "installed-files.txt", "SOURCES.txt",
                          "requires.txt"):
                    try:
                        lines.append(f"{f} {os.stat(os.path.join(e.path, f)).st_mtime_ns}")
                    except OSError:
                        pass
    return "installed:" + _sha("\n".join(lines).encode())


def _installed_memo(part: str, item: str, compute: Callable[[], Any]) -> Any:
    key = f"{_installed()}:{part}:{item}"
    memo = _memo()
    if key not in memo:
        _memo_put(key, compute())
    return memo[key]


@lru_cache(maxsize=None)
def _distributions_of_module() -> dict[str, list[str]]:
    return _installed_memo("top-level", "", metadata.packages_distributions)


def _norm(dist: str) -> str:
    return dist.lower().replace("_", "-").replace(".", "-")


@lru_cache(maxsize=None)
def _requirements(dist: str) -> tuple[str, ...]:
    """The distributions `dist` requires (no extras, markers evaluated here)."""
    def read() -> list[str]:
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            reqs = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            return []
        out = []
        for line in reqs:
            try:
                r = Requirement(line)
            except InvalidRequirement:
                continue
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue
            out.append(_norm(r.name))
        return sorted(set(out))

    return tuple(_installed_memo("requires", dist, read))


@lru_cache(maxsize=None)
def _version(dist: str) -> str | None:
    def read() -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return _installed_memo("version", dist, read)


@lru_cache(maxsize=None)
def packages(roots: tuple[str, ...]) -> dict[str, str]:
    """distribution -> installed version, for every distribution the stage's code can run: those
    providing the modules it imports, and their requirements, transitively."""
    mods = _distributions_of_module()
    todo = sorted({_norm(d) for top in closure(roots)[1] for d in mods.get(top, [])})
    seen: dict[str, str] = {}
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        version = _version(dist)
        if version is None:
            continue
        seen[dist] = version
        todo += [r for r in _requirements(dist) if r not in seen]
    return dict(sorted(seen.items()))


def forget() -> None:
    """Read the sources and installed versions again (tests that edit a module or fake a version)."""
    for f in (module_file, _parsed, _canonical, _walk, closure, one_thread_module, threaded_third_party, packages,
              _distributions_of_module, _requirements, _version, _installed):
        getattr(f, "cache_clear", lambda: None)()  # (a test may have put a plain function in one's place)


# ------------------------------------------------------------------ a stage's code version
def stage_code_hash(fn: Callable, contract_module: str | None = None) -> str:
    """Hash of the sources of every project module the stage can execute: its function's module, its
    contract's module, and every project module they import at any depth, inside functions too
    (`csk.codehash`): an edit anywhere there recomputes."""
    module = inspect.getmodule(fn)
    if module is None:
        return hashlib.sha256(fn.__qualname__.encode()).hexdigest()[:16]
    return code_hash(tuple(m for m in (module.__name__, contract_module) if m))


def stage_third_party(fn: Callable, contract_module: str | None = None, threaded: bool = False) -> tuple[str, ...]:
    """The third-party top-level modules the stage's code imports (as `closure` counts them); `threaded`:
    leaving out those of modules that run their kernels on one thread (`threaded_third_party`)."""
    module = inspect.getmodule(fn)
    roots = tuple(m for m in (module and module.__name__, contract_module) if m)
    return threaded_third_party(roots) if threaded else closure(roots)[1]


def stage_packages(fn: Callable, contract_module: str | None = None) -> dict[str, str]:
    """Installed versions of the distributions the stage's code imports, and what they require."""
    module = inspect.getmodule(fn)
    return packages(tuple(m for m in (module and module.__name__, contract_module) if m))


_CODE_VERSION: dict | None = None


def code_version() -> dict:
    global _CODE_VERSION
    if _CODE_VERSION is None:
        info: dict[str, Any] = {"commit": None, "dirty": None}
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                    text=True, timeout=10)
            if commit.returncode == 0:
                info["commit"] = commit.stdout.strip()
                status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
                info["dirty"] = bool(status.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
        _CODE_VERSION = info
    return _CODE_VERSION
