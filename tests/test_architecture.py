"""The direction of dependency between the top-level packages, read from the source with ``ast``.

The judge must not share code with the judged: no module of the conformance harness imports the reference
node (``kraft_tck.reference``), by an ``import`` statement anywhere in the module (lazy ones inside
functions too) or by ``importlib.import_module`` / ``__import__`` with a literal name. Both stand on
``kraft_tck.spec`` (the vocabulary: codec, framing, records, errors).

``python tests/test_architecture.py`` prints the import graph between the top-level packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "reference", "conformance", "traces", "tla")
ROOT = "kraft_tck"


def modules(package: str) -> Iterator[tuple[str, Path]]:
    """(dotted module name, path) of every .py file of a top-level package (its folder in the repo)."""
    base = REPO / package
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(base).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        yield ".".join([ROOT, package, *parts]), path


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(absolute module name, line, at module level) of everything ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top_level
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = here[: len(here) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            yield name, node.lineno, id(node) in top_level
            for alias in node.names:  # ``from kraft_tck import reference`` names a package too
                yield f"{name}.{alias.name}", node.lineno, id(node) in top_level
        elif isinstance(node, ast.Call) and _is_dynamic_import(node) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield arg.value, node.lineno, False
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # ``for m in ("kraft_tck.x.cli", ...): __import__(m)``: a function that imports by a computed
            # name imports every kraft_tck module name written in it.
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and _is_dynamic_import(n)]
            literal = {id(c.args[0]) for c in calls if c.args}  # yielded at the call itself
            if calls:
                for n in ast.walk(node):
                    if id(n) in literal:
                        continue
                    if (isinstance(n, ast.Constant) and isinstance(n.value, str) and package_of(n.value)
                            and n.value.replace(".", "").replace("_", "").isalnum()):
                        yield n.value, n.lineno, False


def _is_dynamic_import(call: ast.Call) -> bool:
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return called in ("import_module", "__import__")


def package_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == ROOT and parts[1] in PACKAGES:
        return parts[1]
    return None


def import_graph(module_level_only: bool = False) -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the importing modules (``module:line``), self-imports left out."""
    graph: dict[str, dict[str, list[str]]] = {p: {} for p in PACKAGES}
    for package in PACKAGES:
        for module, path in modules(package):
            for name, line, top in imported_names(module, path):
                target = package_of(name)
                if target is None or target == package or (module_level_only and not top):
                    continue
                where = f"{path.relative_to(REPO)}:{line}"
                sites = graph[package].setdefault(target, [])
                if where not in sites:
                    sites.append(where)
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[tuple[str, str]]:
    """Pairs of packages that reach each other."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {p: reach(p) for p in PACKAGES}
    pairs = [(a, b) for i, a in enumerate(PACKAGES) for b in PACKAGES[i + 1 :]]
    return [(a, b) for a, b in pairs if b in reachable[a] and a in reachable[b]]


def describe(graph: dict[str, dict[str, list[str]]]) -> str:
    lines = []
    for package, deps in graph.items():
        lines.append(f"{package} -> {', '.join(sorted(deps)) or '(nothing)'}")
        for dep in sorted(deps):
            sites = deps[dep]
            more = f" (+{len(sites) - 3} more)" if len(sites) > 3 else ""
            lines.append(f"    {dep}: {', '.join(sites[:3])}{more}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------- tests


def test_the_conformance_harness_does_not_import_the_reference_node() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for module, path in modules("conformance")
        for name, line, _top in imported_names(module, path)
        if package_of(name) == "reference"
    ]
    assert not offenders, "the judge imports the judged:\n" + "\n".join(offenders)


def test_importing_every_harness_module_loads_nothing_of_the_reference_node() -> None:
    """At run time too, transitively (through ``traces``, say): a fresh interpreter imports every module of
    ``kraft_tck.conformance`` and then holds no ``kraft_tck.reference`` module."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import kraft_tck.conformance as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('kraft_tck.conformance.' + m.name)\n"
        "print(sorted(k for k in sys.modules if k.startswith('kraft_tck.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "kraft_tck.conformance.virtual" in out and "kraft_tck.conformance.test_brokers" in out, out
    assert "kraft_tck.reference" not in out, out


def test_spec_imports_no_other_package() -> None:
    graph = import_graph()
    assert graph["spec"] == {}, describe({"spec": graph["spec"]})


#: Layers, bottom to top: a package may import only packages of a lower layer. spec is the vocabulary
#: (codec, records, trace format); reference is the node; tla checks traces against the model; traces (the
#: simulator drives the reference core, the pipeline fans traces out to TLC) and conformance stand on top.
LAYERS = {"spec": 0, "reference": 1, "tla": 1, "traces": 2, "conformance": 2}


def test_the_packages_form_no_cycle() -> None:
    graph = import_graph()  # lazy imports inside functions count: they are edges at run time
    assert cycles(graph) == [], describe(graph)


def test_every_import_between_packages_points_down() -> None:
    graph = import_graph()
    upward = [f"{src} -> {dst} ({', '.join(sites[:3])})" for src, deps in graph.items()
              for dst, sites in deps.items() if LAYERS[dst] >= LAYERS[src]]
    assert not upward, "imports that point up or sideways:\n" + "\n".join(upward)


def test_the_cli_root_finds_the_other_areas_commands_through_entry_points() -> None:
    from importlib.metadata import entry_points

    found = {e.name: e.value for e in entry_points(group="kraft_tck.commands")}
    assert found == {a: f"kraft_tck.{a}.cli:COMMANDS" for a in ("conformance", "tla", "traces")}, found
    out = subprocess.run([sys.executable, "-m", "kraft_tck.reference.cli", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for command in ("validate-trace", "simulate", "pipeline", "tlc", "node", "quorum"):
        assert f"  {command} " in out, out


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The checker itself: each form of importing the reference node is caught (and a plain string is not)."""
    src = tmp_path / "m.py"
    src.write_text(
        "import kraft_tck.reference.net\n"
        "from kraft_tck.reference import registry\n"
        "from kraft_tck import reference\n"
        "from ..reference.config import x\n"
        "def f():\n"
        "    import importlib\n"
        "    importlib.import_module('kraft_tck.reference.storage')\n"
        "    __import__('kraft_tck.reference.procs')\n"
        "def h():\n"
        "    launcher = 'kraft_tck.reference.cli'\n"
        "def g():\n"
        "    for m in ('kraft_tck.reference.workload', 'other'):\n"
        "        __import__(m)\n"
    )
    found = [(n, line) for n, line, _ in imported_names("kraft_tck.conformance.m", src) if package_of(n) == "reference"]
    assert sorted(line for _, line in found) == [1, 2, 2, 3, 4, 4, 7, 8, 12]


def test_both_sides_stand_on_spec() -> None:
    graph = import_graph(module_level_only=True)
    assert "spec" in graph["conformance"] and "spec" in graph["reference"], describe(graph)


if __name__ == "__main__":
    for title, only_top in (("all imports", False), ("module-level imports only", True)):
        g = import_graph(only_top)
        print(f"== {title}\n{describe(g)}\ncycles: {cycles(g)}\n")
    sys.exit(0)
