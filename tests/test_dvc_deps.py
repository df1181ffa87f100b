"""dvc.yaml declares exactly the code and the parameters each stage reads.

Code: the import closure of each stage wrapper within src/ragrig, computed statically (every
`import` in the module, lazy ones inside functions included; the package `__init__.py` files an
import runs; and "ragrig.x:Name" strings in the lazy backend registries), is compared with the
stage's declared deps, a folder covering the files below it. A file the stage runs but does not
declare means an edit to it would not rerun the stage (stale results from the cache); a declared
file or folder the stage never imports means edits to it rerun the stage for nothing.

Parameters: the sections a wrapper loads (`load_section("embed", ...)`) and the runtime keys it
reads (`stage.read_runtime(..., "threads")`) must be exactly its dvc.yaml `params`.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from .conftest import PROJECT

SRC = PROJECT / "src"
STAGES_DIR = PROJECT / "stages"
REGISTRY_TARGET = re.compile(r"^(ragrig(?:\.\w+)+):\w+$")
# Calls whose first argument names the params section a stage reads.
SECTION_READERS = {"load_section", "validate_section", "section_schema"}
# Stages that read the whole params file only to record it (MLflow params, the summary header),
# not to compute: they declare only the sections that change their results.
RECORDS_ALL_PARAMS = {"report"}
# Keys of a section that say where a stage records its results, not what they are (the MLflow
# store): the stage lists every other key of its section, so changing these reruns nothing.
RECORDING_ONLY = {"report": {"mlflow"}}


def _dvc() -> dict:
    return yaml.safe_load((PROJECT / "dvc.yaml").read_text())


def _section_names() -> set[str]:
    return set(yaml.safe_load((PROJECT / "params.yaml").read_text()))


def _module_file(module: str) -> Path | None:
    """The file of a module of src/ (`ragrig.a.b`) or a stage helper (`_bootstrap`)."""
    if not module.startswith("ragrig"):
        helper = STAGES_DIR / f"{module}.py"
        return helper if "." not in module and helper.exists() else None
    base = SRC / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _module_name(path: Path) -> str:
    if not path.is_relative_to(SRC):
        return path.stem  # a stage wrapper or helper: top level
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _with_packages(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__, a/b/__init__ and a.b.c itself."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the module (lazy ones included)."""
    mods: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            mods.add(name)
            # `from ragrig.runtime import stage`: the imported names may be submodules
            mods |= {f"{name}.{a.name}" for a in node.names if _module_file(f"{name}.{a.name}")}
    return mods


def _registry_edges(tree: ast.AST, sections_read: set[str]) -> set[str]:
    """Modules named by "ragrig.x:Name" strings. In the section-schema registry (a dict keyed by
    exactly the params sections) only the sections this stage reads are followed: that registry
    imports one schema on request, not all of them."""
    all_sections = _section_names()
    edges: set[str] = set()
    in_section_registry: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if set(keys) == all_sections:
                for k, v in zip(node.keys, node.values, strict=True):
                    in_section_registry.add(id(v))
                    m = isinstance(v, ast.Constant) and REGISTRY_TARGET.match(str(v.value))
                    if m and k.value in sections_read:
                        edges.add(m.group(1))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in in_section_registry
            and (m := REGISTRY_TARGET.match(node.value))
        ):
            edges.add(m.group(1))
    return edges


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _first_str_arg(node: ast.Call) -> str | None:
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def params_read(wrapper: Path) -> set[str]:
    """Params a stage reads, in its wrapper or any module it imports: the sections it loads
    (`load_section("embed", ...)`), `runtime.<key>` for each `read_runtime(..., "<key>")` and
    `system.<key>` for each `read_system(..., "<key>")`."""
    read: set[str] = set()
    for path in {wrapper, *import_closure(wrapper)}:
        for node in ast.walk(_parsed(path)):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            if name == "load_section" and (section := _first_str_arg(node)):
                read.add(section)
            elif name in ("read_runtime", "read_system"):
                key = node.args[1] if len(node.args) > 1 else None
                assert isinstance(key, ast.Constant), f"{path}: {name} key must be a literal"
                read.add(f"{name.removeprefix('read_')}.{key.value}")
    return read


def _sections_selected(tree: ast.AST) -> set[str]:
    """Sections whose schema a module loads by name (`load_section("embed", ...)`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in SECTION_READERS:
            out.add(_first_str_arg(node))
        elif isinstance(node, ast.Call) and _call_name(node) == "read_runtime":
            out.add("runtime")
    return out - {None}


@cache
def _parsed(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


@cache
def import_closure(wrapper: Path) -> frozenset[Path]:
    """Files of src/ragrig (and stage helpers) that running `wrapper` can import."""
    sections: set[str] = set()
    while True:  # until the sections loaded by name, anywhere in the closure, are all followed
        seen: set[Path] = set()
        todo = [wrapper]
        while todo:
            path = todo.pop()
            tree = _parsed(path)
            found = _imports(tree, path) | _registry_edges(tree, sections)
            for mod in found:
                for name in _with_packages(mod):
                    f = _module_file(name)
                    if f is not None and f not in seen and f != wrapper:
                        seen.add(f)
                        todo.append(f)
        selected = set().union(*(_sections_selected(_parsed(p)) for p in {wrapper, *seen}))
        if selected <= sections:
            return frozenset(seen)
        sections |= selected


def declared_code_deps(stage: dict, lib: str) -> list[Path]:
    out = []
    for dep in stage.get("deps", []):
        rel = dep.replace("${lib}", lib)
        if rel.startswith(("stages/", "src/")):
            out.append(PROJECT / rel)
    return out


def _covers(dep: Path, f: Path) -> bool:
    return f == dep or (dep.is_dir() and f.is_relative_to(dep))


def compare(closure: set[Path], declared: list[Path], wrapper: Path) -> tuple[list, list]:
    """(closure files no declared dep covers, declared deps covering no closure file)."""
    missing = sorted(
        str(f.relative_to(PROJECT)) for f in closure if not any(_covers(d, f) for d in declared)
    )
    unused = sorted(
        str(d.relative_to(PROJECT))
        for d in declared
        if d != wrapper and not any(_covers(d, f) for f in closure)
    )
    # a declared folder reruns the stage on an edit to any file in it: all must be imported
    unused += sorted(
        str(f.relative_to(PROJECT))
        for d in declared
        if d.is_dir() and any(_covers(d, f) for f in closure)
        for f in d.rglob("*.py")
        if "__pycache__" not in f.parts and f not in closure
    )
    return missing, unused


STAGE_NAMES = list(_dvc()["stages"])


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_declared_code_deps_are_the_import_closure(name):
    dvc = _dvc()
    lib = next(v["lib"] for v in dvc["vars"] if isinstance(v, dict) and "lib" in v)
    stage = dvc["stages"][name]
    wrapper = STAGES_DIR / f"{name}.py"
    assert f"stages/{name}.py" in stage["cmd"]
    closure = import_closure(wrapper)
    declared = declared_code_deps(stage, lib)
    assert all(d.exists() for d in declared), [str(d) for d in declared if not d.exists()]

    missing, unused = compare(closure, declared, wrapper)
    assert not missing, f"{name}: imports files its dvc.yaml deps do not list: {missing}"
    assert not unused, f"{name}: dvc.yaml lists code the stage never imports: {unused}"
    assert wrapper in declared, f"{name}: its own wrapper is not a dependency"


def _as_sections(declared: set[str]) -> set[str]:
    """A section listed key by key, all keys but its recording-only ones, counts as the
    section; listing only some of them (a key added to conf/ and not to dvc.yaml) does not."""
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    out = set(declared)
    for section, skip in RECORDING_ONLY.items():
        listed = {d for d in declared if d.startswith(section + ".")}
        expected = {f"{section}.{k}" for k in params[section] if k not in skip}
        if listed == expected:
            out = (out - listed) | {section}
    return out


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_declared_params_are_what_the_stage_reads(name):
    declared = _as_sections(set(_dvc()["stages"][name].get("params", [])))
    read = params_read(STAGES_DIR / f"{name}.py")
    assert declared == read, f"{name}: dvc.yaml params {sorted(declared)}, reads {sorted(read)}"
    # a stage that does not use the seed must not depend on it (changing it would rerun it)
    assert "runtime" not in read, f"{name}: reads the whole runtime section"


def test_only_generate_estimate_and_report_depend_on_the_seed():
    """generate samples queries with it (and estimate, the same queries, to price them); report
    seeds its bootstrap intervals (metrics.json, MLflow, the HTML page)."""
    seeded = [n for n in STAGE_NAMES if "runtime.seed" in _dvc()["stages"][n].get("params", [])]
    assert seeded == ["estimate", "generate", "report"]


def test_only_the_report_reads_the_whole_params_file():
    readers = {
        name
        for name in STAGE_NAMES
        for node in ast.walk(_parsed(STAGES_DIR / f"{name}.py"))
        if isinstance(node, ast.Call) and _call_name(node) == "load_params"
    }
    assert readers == RECORDS_ALL_PARAMS


# --- the closure itself, on cases with known answers -------------------------------------------


def test_closure_follows_lazy_imports_packages_and_registry_strings():
    closure = {str(f.relative_to(PROJECT)) for f in import_closure(STAGES_DIR / "embed.py")}
    assert "stages/_bootstrap.py" in closure  # `import _bootstrap`
    assert "src/ragrig/__init__.py" in closure  # run by any `import ragrig.x`
    assert (
        "src/ragrig/runtime/stage.py" in closure
    )  # `from ragrig.runtime import stage` (a submodule)
    assert "src/ragrig/embed/__init__.py" in closure  # lazy, inside main()
    assert "src/ragrig/embed/st.py" in closure  # only named in the EMBEDDERS registry string
    assert "src/ragrig/embed/config.py" in closure  # load_section("embed") via SECTIONS
    # the section registry loads one schema on request: not the other stages' schemas
    assert "src/ragrig/judge/config.py" not in closure
    assert "src/ragrig/generate/config.py" not in closure


def test_closure_sees_a_new_lazy_import(tmp_path):
    wrapper = STAGES_DIR / "judge.py"
    before = import_closure(wrapper)
    fake = tmp_path / "judge.py"
    fake.write_text(
        wrapper.read_text() + "\n\ndef _late():\n    from ragrig.embed.st import encode\n"
    )
    after = import_closure(fake)
    assert {SRC / "ragrig/embed/__init__.py", SRC / "ragrig/embed/st.py"} <= after - before


def test_compare_flags_both_directions():
    wrapper = STAGES_DIR / "train_verifier.py"
    closure = import_closure(wrapper)
    lib = SRC / "ragrig"
    declared = [wrapper, STAGES_DIR / "_bootstrap.py", lib / "judge", lib / "embed"]
    missing, unused = compare(closure, declared, wrapper)
    # a folder the stage never imports, and the files of a declared folder it never imports
    assert unused == [
        "src/ragrig/embed",
        "src/ragrig/judge/config.py",
        "src/ragrig/judge/correctness.py",
        "src/ragrig/judge/external.py",
    ]
    # a folder only partly imported: its other files are named (an edit to them would rerun)
    report = STAGES_DIR / "report.py"
    _, partly = compare(import_closure(report), [report, lib / "metrics"], report)
    assert partly == [
        "src/ragrig/metrics/calibration.py",
        "src/ragrig/metrics/fidelity.py",
        "src/ragrig/metrics/ingestion.py",
        "src/ragrig/metrics/intents.py",
    ]
    assert "src/ragrig/core/io.py" in missing and "src/ragrig/judge/overlap.py" not in missing


def test_no_stage_depends_on_where_runs_are_logged():
    """Another MLflow store (report.mlflow: sqlite, PostgreSQL, S3 artifacts) changes no stage's
    parameters, so no stage reruns; any other report key still reruns the report."""
    from ragrig.sweep.plan import StageGraph, stage_keys

    graph = StageGraph.from_dvc_yaml(PROJECT / "dvc.yaml")
    cfg = yaml.safe_load((PROJECT / "params.yaml").read_text())
    declared = {p for st in _dvc()["stages"].values() for p in st.get("params", [])}
    assert not {p for p in declared if p == "report" or p.startswith("report.mlflow")}
    team = yaml.safe_load((PROJECT / "conf/report/mlflow/team.yaml").read_text())
    other = {**cfg, "report": {**cfg["report"], "mlflow": team}}
    assert team["tracking_uri"].startswith("postgresql://") and other != cfg
    assert stage_keys(other, graph) == stage_keys(cfg, graph)
    seeded = {**cfg, "report": {**cfg["report"], "bootstrap_resamples": 7}}
    changed = stage_keys(seeded, graph)
    base = stage_keys(cfg, graph)
    # the estimate reads report.prices (the whole section, cheaply); generate reads only its
    # gate file (data/estimate/ok, the same bytes), so nothing past the estimate reruns
    assert [s for s in base if base[s] != changed[s]] == ["estimate", "report"]


def test_the_project_commits_no_dvc_lock():
    """docs/configuration.md: without a DVC remote a committed lock names outputs no clone's
    cache holds, and every sweep of a fresh clone refuses it; a local `dvc repro` writes one that
    `git add -A` would otherwise take along."""
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "--", "dvc.lock"], cwd=PROJECT, capture_output=True, text=True
    )
    if tracked.returncode != 0:  # not a git checkout (an sdist): nothing to check
        pytest.skip("not a git checkout")
    assert tracked.stdout.strip() == "", "dvc.lock is tracked: git rm --cached dvc.lock"
