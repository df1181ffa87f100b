"""The package's import structure: no circle, arrows only down the layers, a small package root.

The layers (docs/index.md, "Layout"): a module may import its own package, any package of a lower
layer, and, among the pipeline's stage packages, an upstream stage (its read-side API, e.g.
`retrieve` reading `index`). Every `import` statement counts, lazy ones inside functions
included; `if TYPE_CHECKING:` blocks do not (they never run), nor do the "ragrig.x:Name" strings
of the lazy registries (a name resolved when a backend is chosen, like a plugin entry point: the
config sections in `ragrig.core.config.SECTIONS`, each stage's backends in its `base.py`).
tests/test_dvc_deps.py follows those strings too, since what a stage runs is what it depends on.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from .conftest import PROJECT

SRC = PROJECT / "src"
PACKAGE = SRC / "ragrig"

# bottom first; packages of one layer do not import each other, except where said below
LAYERS: list[set[str]] = [
    {"core"},
    {"runtime", "weights"},
    {"dataset", "llm", "metrics", "storage"},
    {"tracking"},
    {"parse", "chunk", "embed", "index", "retrieve", "rerank", "generate", "judge", "report"},
    {"training"},
    {"train_embed", "train_rerank", "train_verifier"},
    {"compose"},
    {"tools", "traces"},
    {"sweep"},
    {"cli"},
]
# the pipeline's order: a stage package may read an upstream stage's API
STAGES = ["parse", "chunk", "embed", "index", "retrieve", "rerank", "generate", "judge", "report"]
# modules the package root may hold besides its packages
ROOT_MODULES = {"__init__.py", "__main__.py"}


def _layer(package: str) -> int:
    for i, members in enumerate(LAYERS):
        if package in members:
            return i
    raise AssertionError(f"src/ragrig/{package} is in no layer of {__name__}.LAYERS")


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    mods = _modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _edges(module: str) -> dict[str, int]:
    """Every ragrig module `module` imports, with the line of the first import."""
    tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for b in node.body
        for n in ast.walk(b)
    }
    out: dict[str, int] = {}

    def add(name: str | None, line: int) -> None:
        if name and name != module:
            out.setdefault(name, line)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "ragrig":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                add(full if full in _modules() else _resolve(node.module), node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ragrig.") or alias.name == "ragrig":
                    add(_resolve(alias.name), node.lineno)
    return out


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


def _allowed(src: str, dst: str) -> bool:
    a, b = _package(src), _package(dst)
    if b is None:  # the package root's face (`ragrig.__version__`)
        return dst == "ragrig"
    if a == b:
        return True
    if a is None:
        return True  # ragrig/__main__.py reaches the command line
    la, lb = _layer(a), _layer(b)
    if la != lb:
        return lb < la
    return a in STAGES and b in STAGES and STAGES.index(b) < STAGES.index(a)


def test_every_package_is_in_a_layer():
    for d in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (d / "__init__.py").exists(), f"src/ragrig/{d.name} has no __init__.py"
        _layer(d.name)


def test_the_package_root_holds_only_its_face():
    modules = {p.name for p in PACKAGE.glob("*.py")}
    assert modules <= ROOT_MODULES, f"src/ragrig/ holds modules {sorted(modules - ROOT_MODULES)}"


def test_imports_point_only_down():
    wrong = []
    for module in sorted(_modules()):
        for dst, line in sorted(_edges(module).items()):
            if not _allowed(module, dst):
                path = _modules()[module].relative_to(PROJECT)
                wrong.append(f"{path}:{line}: {module} imports {dst}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_circle():
    graph = {m: set(_edges(m)) for m in _modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_a_generator_backend_never_imports_another():
    from ragrig.generate import GENERATORS

    backends = {v.split(":")[0] for v in GENERATORS.values()}
    crossing = [
        f"{m} imports {dst}" for m in sorted(backends) for dst in _edges(m) if dst in backends
    ]
    assert crossing == []
