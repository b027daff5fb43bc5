"""The docs name what exists: every benchmark is in bench/README.md's table, every relative link resolves."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "CONTRIBUTING.md", "bench/README.md", "reference/README.md", "conformance/README.md",
        "spec/README.md"]


def test_every_benchmark_is_in_the_bench_readme_table() -> None:
    table = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(bench_[a-z_]+\.py)` \|", table, flags=re.M))
    scripts = {p.name for p in (REPO / "bench").glob("bench_*.py")}
    assert listed == scripts, f"missing rows: {sorted(scripts - listed)}; no such script: {sorted(listed - scripts)}"


@pytest.mark.parametrize("doc", [d for d in DOCS if (REPO / d).exists()])
def test_relative_links_resolve(doc: str) -> None:
    path = REPO / doc
    links = re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8"))
    broken = [link for link in links if not (path.parent / link).exists()]
    assert not broken, f"{doc}: links to what is not there: {broken}"


# ------------------------------------------------------------------ the command lines the docs show


def doc_command_lines() -> list[tuple[str, str]]:
    """(doc, command) for every kraft-tck, make and pytest line of the docs' code blocks, continuation
    lines joined and trailing comments dropped."""
    found = []
    for doc in DOCS:
        path = REPO / doc
        if not path.exists():
            continue
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                command = re.sub(r"\s+#.*$", "", line.strip())
                if command.startswith(("kraft-tck ", "make ", "pytest ")):
                    found.append((doc, command))
    return found


def _runnable(command: str) -> list[str]:
    """Arguments of a documented command line: optional parts [..] kept without brackets (first of a|b),
    placeholders <..> and X... filled with a word."""
    command = re.sub(r"\[([^\]]*)\]", lambda m: m.group(1).split(" | ")[0], command)
    command = re.sub(r"<[^>]+>", "x", command)
    return [a.rstrip(".") or "x" for a in shlex.split(command)]


def test_the_docs_show_command_lines() -> None:
    commands = [c for _, c in doc_command_lines()]
    assert any(c.startswith("kraft-tck quorum") for c in commands) and any(c.startswith("pytest") for c in commands)


@pytest.mark.parametrize("doc,command", [x for x in doc_command_lines() if x[1].startswith("kraft-tck ")])
def test_every_documented_kraft_tck_command_line_parses(doc: str, command: str) -> None:
    from click.testing import CliRunner
    from kraft_tck.reference.cli import main

    # --help stops before the command runs, after click has parsed (and refused) every option before it
    out = CliRunner().invoke(main, [*_runnable(command)[1:], "--help"])
    assert out.exit_code == 0, f"{doc}: `{command}`:\n{out.output}"


@pytest.mark.parametrize("doc,command", [x for x in doc_command_lines() if x[1].startswith("make ")])
def test_every_documented_make_target_exists(doc: str, command: str) -> None:
    target = command.split()[1]
    out = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{doc}: `{command}`: {out.stderr}"


def test_every_documented_pytest_option_exists() -> None:
    # options of pytest itself, not what a quoted --target-cmd value passes to the target's own commands
    options = {tok.split("=", 1)[0] for _, c in doc_command_lines() if c.startswith("pytest ")
               for tok in shlex.split(c) if re.match(r"--[a-z][a-z-]*", tok)}
    assert options
    known = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=REPO / "tests", capture_output=True,
                           text=True, timeout=120).stdout
    aliases = {"--junitxml": "--junit-xml"}  # pytest's help lists one spelling of its own options
    missing = sorted(o for o in options if not re.search(rf"(?<![\w-]){re.escape(aliases.get(o, o))}\b", known))
    assert not missing, f"the docs use pytest options nobody registers: {missing}"
