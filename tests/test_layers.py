"""The packages' layers point one way, and the checker that says so can fail.

Every ``import`` of ``src/`` is read with :mod:`ast` (the core, ``memcost``, and every plugin,
``memcost_*``): module-level and inside functions, absolute and relative,
``importlib.import_module("memcost....")`` too. From that graph:

- the core imports no plugin (a plugin imports the core, and is found by its entry point);

- there is no import cycle (a function-level import does not hide one), between modules or
  between the packages under ``memcost`` (``memory`` importing ``vectorstore`` while a
  ``vectorstore`` module imports ``memory`` is a cycle of packages, even when no two modules
  import each other);
- no two classes under ``src/memcost`` share a name (a newcomer should never ask "which
  ``FaissStore``?"), and none is a mixin: an object is made of parts it is handed, so one call
  can be followed without opening every file that adds methods to it;
- no module is over 1,000 lines and no function over 100 (a module is a concept: 200-600
  lines is healthy, and a concept is not split to meet a number).
- each module imports only its own layer or layers below, by the table :data:`LAYER_OF`
  (foundations <- llm <- offline <- stages <- analysis <- run/cli), with two extra rules:
  analysis never imports ``llm``, and nothing outside ``memcost.testing`` imports it;
- only ``memcost.llm.providers`` imports ``openai``.

A module is ranked by its top-level name under ``memcost`` (``memcost.memory.segments`` is a
``memory`` module), so new files inside a package need no change here; a new top-level module
or package must be added to :data:`LAYER_OF`, or the test fails and says so.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "memcost"  # the core
PACKAGES = tuple(sorted(p.parent.name for p in SRC.glob("*/__init__.py")))  # and the plugins

FOUNDATION, LLM, OFFLINE, STAGE, ANALYSIS, TOP, TESTING, PLUGIN = (
    "foundation", "llm", "offline", "stage", "analysis", "top", "testing", "plugin",
)  # fmt: skip
# What each layer may import (besides the standard library and third-party packages).
ALLOWED: dict[str, frozenset[str]] = {
    FOUNDATION: frozenset({FOUNDATION}),
    LLM: frozenset({FOUNDATION, LLM}),
    OFFLINE: frozenset({FOUNDATION, LLM, OFFLINE}),
    STAGE: frozenset({FOUNDATION, LLM, OFFLINE, STAGE}),
    ANALYSIS: frozenset({FOUNDATION, OFFLINE, STAGE, ANALYSIS}),  # never llm
    TOP: frozenset({FOUNDATION, LLM, OFFLINE, STAGE, ANALYSIS, TOP}),
    TESTING: frozenset({FOUNDATION, LLM, OFFLINE, STAGE, ANALYSIS, TOP, TESTING}),
    PLUGIN: frozenset({FOUNDATION, LLM, OFFLINE, STAGE, ANALYSIS, TOP, PLUGIN}),  # nothing below
}
_FOUNDATIONS = (
    "__init__ paths io text prompts catalog verify params calls answers stats paper manifest "
    "plugins"
)
_STAGES = "data memory longctx judge"
LAYER_OF: dict[str, str] = {
    **{name: FOUNDATION for name in _FOUNDATIONS.split()},
    "llm": LLM,
    "offline": OFFLINE,
    **{name: STAGE for name in _STAGES.split()},
    "costs": ANALYSIS,
    "today": ANALYSIS,
    "plots": ANALYSIS,
    "run": TOP,
    "cli": TOP,
    "local": TOP,
    "report": TOP,
    "__main__": TOP,
    "testing": TESTING,
}
OPENAI_IMPORTERS = frozenset({"memcost.llm.providers"})


@dataclass
class Graph:
    """``memcost`` modules and their imports: ``edges[module] = {imported: first line}``."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, dict[str, int]] = field(default_factory=dict)
    external: dict[str, dict[str, int]] = field(default_factory=dict)  # top-level names

    def add(self, source: str, target: str, line: int) -> None:
        self.edges.setdefault(source, {}).setdefault(target, line)

    def add_with_parents(self, source: str, target: str, line: int) -> None:
        """Importing ``a.b.c`` first runs ``a/b/__init__.py``: an edge to each package on the
        way that the source is not already inside."""
        self.add(source, target, line)
        parts = target.split(".")
        for n in range(1, len(parts)):
            parent = ".".join(parts[:n])
            if parent in self.modules and not (source + ".").startswith(parent + "."):
                self.add(source, parent, line)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(graph: Graph, module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (``from .x import y``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(tree: ast.AST, graph: Graph, module: str, is_package: bool):
    """``(name, line, surely a module)`` for every import anywhere in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, True
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(graph, module, is_package, node)
            yield target, node.lineno, True
            for alias in node.names:  # ``from memcost import llm`` imports a module, or a name
                yield f"{target}.{alias.name}", node.lineno, False
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno, True


@functools.cache
def _parsed(path: Path, mtime_ns: int) -> tuple[str, ast.Module, tuple[ast.AST, ...]]:
    """A file's text, tree and every node of it: read once for all the checks below."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    return text, tree, tuple(ast.walk(tree))


def parsed(path: Path) -> tuple[str, ast.Module, tuple[ast.AST, ...]]:
    return _parsed(path, path.stat().st_mtime_ns)


def build_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> Graph:
    graph = Graph()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            graph.modules[module_name(path, root)] = path
    for module, path in graph.modules.items():
        tree = parsed(path)[1]
        for target, line, is_module in _imports(tree, graph, module, path.name == "__init__.py"):
            if target == module:
                continue  # a package naming its own modules (``from memcost.memory import rag``)
            if target in graph.modules:
                graph.add_with_parents(module, target, line)
            elif target.split(".")[0] not in packages:
                graph.external.setdefault(module, {}).setdefault(target.split(".")[0], line)
            elif is_module:
                graph.add(module, target, line)  # names a module that does not exist: reported
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.edges.get(module, {})):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph.modules):
        if module not in state and (found := visit(module)):
            return found
    return None


def package_of(module: str) -> str:
    """``memcost.memory.build`` -> ``memcost.memory``; a top-level module is its own package;
    a plugin is one package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == PACKAGE else parts[0]


def package_graph(graph: Graph) -> Graph:
    """The same imports between the packages (and top-level modules) under ``src``."""
    packages = Graph()
    for module in graph.modules:
        packages.modules.setdefault(package_of(module), graph.modules[module])
    for source, targets in graph.edges.items():
        for target, line in targets.items():
            a, b = package_of(source), package_of(target)
            if a != b and a != PACKAGE and b != PACKAGE:
                packages.add(a, b, line)
    return packages


MAX_MODULE_LINES = 1_000
MAX_FUNCTION_LINES = 100


def _sources(root: Path) -> list[Path]:
    return sorted(path for package in PACKAGES for path in (root / package).rglob("*.py"))


def mixins(root: Path) -> list[str]:
    """Classes whose name ends in ``Mixin``, as ``file:line name``."""
    found = []
    for path in _sources(root):
        for node in parsed(path)[2]:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Mixin"):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def oversized(root: Path) -> list[str]:
    """Modules over :data:`MAX_MODULE_LINES` lines and functions over :data:`MAX_FUNCTION_LINES`."""
    found = []
    for path in _sources(root):
        text, _, nodes = parsed(path)
        where = path.relative_to(root)
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            found.append(f"{where}: {lines} lines")
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def duplicate_classes(root: Path) -> dict[str, list[str]]:
    """Class names defined more than once under ``root``: name -> ``file:line`` each."""
    seen: dict[str, list[str]] = {}
    for path in _sources(root):
        for node in parsed(path)[2]:
            if isinstance(node, ast.ClassDef):
                where = f"{path.relative_to(root)}:{node.lineno}"
                seen.setdefault(node.name, []).append(where)
    return {name: places for name, places in seen.items() if len(places) > 1}


def layer_of(module: str, table: dict[str, str]) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return PLUGIN
    return table.get(parts[1] if len(parts) > 1 else "__init__")


def violations(
    graph: Graph,
    table: dict[str, str] | None = None,
) -> list[str]:
    """Every broken rule, one line each (empty when the package is layered as it should be)."""
    table = LAYER_OF if table is None else table
    problems = []
    for module in sorted(graph.modules):
        if layer_of(module, table) is None:
            problems.append(f"{module}: no layer; add its top-level name to LAYER_OF")
    for source, targets in sorted(graph.edges.items()):
        for target, line in sorted(targets.items()):
            if target not in graph.modules:
                problems.append(f"{source}:{line} imports {target}, which does not exist")
                continue
            mine, theirs = layer_of(source, table), layer_of(target, table)
            if mine and theirs and theirs not in ALLOWED[mine]:
                problems.append(f"{source}:{line} ({mine}) imports {target} ({theirs})")
    for source, names in sorted(graph.external.items()):
        if "openai" in names and source not in OPENAI_IMPORTERS:
            problems.append(f"{source}:{names['openai']} imports openai (only llm/providers may)")
    if cycle := find_cycle(graph):
        problems.append("import cycle: " + " -> ".join(cycle))
    if cycle := find_cycle(package_graph(graph)):
        problems.append("package cycle: " + " -> ".join(cycle))
    return problems


@pytest.fixture(scope="module")
def graph() -> Graph:
    return build_graph(SRC)


# --------------------------------------------------------------------------------- the package


def test_the_package_is_layered(graph):
    assert len(graph.modules) > 40
    assert violations(graph) == []


def test_the_core_imports_no_plugin_and_every_plugin_imports_the_core(graph):
    plugins = [p for p in PACKAGES if p != PACKAGE]
    assert {"memcost_systems", "memcost_serving", "memcost_published"} <= set(plugins)
    reached = {
        (source, target)
        for source, targets in graph.edges.items()
        for target in targets
        if source.split(".")[0] == PACKAGE and target.split(".")[0] != PACKAGE
    }
    assert reached == set()
    # and no text of the core names one: an entry point finds it
    core = [p for p in _sources(SRC) if p.is_relative_to(SRC / PACKAGE)]
    named = [f"{p.relative_to(SRC)}" for p in core for x in plugins if x in parsed(p)[0]]
    assert named == []
    for plugin in plugins:
        assert any(t.startswith(PACKAGE + ".") for s, ts in graph.edges.items()
                   if s.startswith(plugin) for t in ts), plugin  # fmt: skip


def test_no_two_classes_share_a_name():
    assert duplicate_classes(SRC) == {}


def test_no_class_is_a_mixin():
    assert mixins(SRC) == []


def test_modules_and_functions_stay_small():
    assert oversized(SRC) == []


def test_function_level_imports_are_in_the_graph(graph):
    # the runner executes notebooks with papermill, imported inside a function
    assert "papermill" in graph.external["memcost.run.runner"]
    assert "memcost.run.report" in graph.edges["memcost.run.runner"]


def test_the_client_does_not_write_the_manifest(graph):
    reach, todo = set(), ["memcost.llm"]
    while todo:
        for target in graph.edges.get(todo.pop(), {}):
            if target not in reach:
                reach.add(target)
                todo.append(target)
    assert "memcost.manifest" not in reach
    assert not any(m.startswith(("memcost.run", "memcost.cli")) for m in reach)


# --------------------------------------------------------------------------- the checker fails


def _package(tmp_path: Path, files: dict[str, str]) -> Graph:
    for name, text in {
        **files,
        "../memcost_plugin/systems.py": "from memcost import paths\n",
    }.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return build_graph(tmp_path, (PACKAGE, "memcost_plugin"))


BASE = {
    "__init__.py": "",
    "paths.py": "import os\n",
    "llm/__init__.py": "from memcost.llm.client import Client\n",
    "llm/client.py": "from memcost import paths\nclass Client: ...\n",
    "llm/providers.py": "def load():\n    import openai\n",
    "memory/__init__.py": "from .build import build\n",
    "memory/build.py": "from ..llm.client import Client\ndef build(): ...\n",
    "costs/__init__.py": "from memcost.paths import os\n",
    "cli/__init__.py": "from memcost.memory import build\n",
    "testing/__init__.py": "",
    "testing/server.py": "from memcost.llm import client\n",
}


def test_checker_passes_a_layered_package(tmp_path):
    graph = _package(tmp_path, BASE)
    # a relative import, with the package it runs on the way (``memcost.llm``'s __init__)
    assert graph.edges["memcost.memory.build"] == {"memcost.llm.client": 1, "memcost.llm": 1}
    assert violations(graph) == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        # a foundation reaching up, from inside a function
        ("paths.py", "def f():\n    from memcost.llm import client\n",
         "memcost.paths:2 (foundation) imports memcost.llm (llm)"),
        # analysis reading through the client
        ("costs/ledger.py", "from ..llm.client import Client\n",
         "memcost.costs.ledger:1 (analysis) imports memcost.llm.client (llm)"),
        # a stage importing the command line
        ("memory/report.py", "import memcost.cli\n",
         "memcost.memory.report:1 (stage) imports memcost.cli (top)"),
        # the product importing the test server
        ("memory/fake.py", "from memcost.testing import server\n",
         "memcost.memory.fake:1 (stage) imports memcost.testing (testing)"),
        # openai outside llm/providers
        ("llm/cache.py", "import openai.types\n",
         "memcost.llm.cache:1 imports openai (only llm/providers may)"),
        # a module without a layer
        ("widgets.py", "", "memcost.widgets: no layer; add its top-level name to LAYER_OF"),
        # the core reaching into a plugin
        ("memory/extra.py", "from memcost_plugin import systems\n",
         "memcost.memory.extra:1 (stage) imports memcost_plugin.systems (plugin)"),
        # a cycle hidden behind a function-level import
        ("llm/client.py",
         "from memcost import paths\nclass Client: ...\ndef f():\n    from memcost import llm\n",
         "import cycle: memcost.llm -> memcost.llm.client -> memcost.llm"),
        # by importlib, with a name that does not exist
        ("run.py", "import importlib\nimportlib.import_module('memcost.gone')\n",
         "memcost.run:2 imports memcost.gone, which does not exist"),
    ],
)  # fmt: skip
def test_checker_fails_a_broken_rule(tmp_path, name, text, expected):
    graph = _package(tmp_path, {**BASE, name: text})
    assert expected in violations(graph)


def test_checker_fails_two_packages_that_import_each_other(tmp_path):
    # memory.index -> retrieval.search -> memory.build: no module imports itself back, but the
    # packages do (the cycle memory and vectorstore once had)
    graph = _package(
        tmp_path,
        {
            **BASE,
            "memory/index.py": "from memcost.retrieval import search\n",
            "retrieval/search.py": "from memcost.memory import build\n",
        },
    )
    assert find_cycle(graph) is None
    assert "package cycle: memcost.memory -> memcost.retrieval -> memcost.memory" in (
        violations(graph)
    )


def test_checker_finds_a_mixin_and_an_oversized_function(tmp_path):
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    _package(
        tmp_path,
        {
            **BASE,
            "llm/calls.py": "class CallMixin:\n    pass\n",
            "memory/big.py": "def f():\n" + long_body,
        },
    )
    assert mixins(tmp_path) == ["memcost/llm/calls.py:1 CallMixin"]
    assert oversized(tmp_path) == [f"memcost/memory/big.py:1 f: {MAX_FUNCTION_LINES + 1} lines"]


def test_checker_finds_two_classes_of_one_name(tmp_path):
    _package(tmp_path, {**BASE, "memory/store.py": "class Client:\n    pass\n"})
    assert duplicate_classes(tmp_path) == {
        "Client": ["memcost/llm/client.py:2", "memcost/memory/store.py:1"]
    }


def test_checker_fails_the_real_package_with_one_bad_edge(graph):
    graph.add("memcost.paths", "memcost.run.runner", 1)
    try:
        problems = violations(graph)
    finally:
        del graph.edges["memcost.paths"]["memcost.run.runner"]
    assert "memcost.paths:1 (foundation) imports memcost.run.runner (top)" in problems
    assert any(p.startswith("import cycle: ") for p in problems)
