"""The GitHub Actions recipe of conformance/README.md runs as written: its "KRaft conformance" step's
``run:`` command, taken verbatim from the README, against a wheel of kraft-tck installed in a fresh
virtualenv, in a directory outside the checkout, with the reference node standing in for
``./bin/my-controller``. It exercises what a user's CI gets: the pytest plugin loaded from the installed
package (the ``pytest11`` entry point), ``--pyargs kraft_tck.conformance``, the package data (catalog,
target profiles, TLA+ specs for the black-box validation), the report and the junit file.

No network here: the wheel is installed with ``--no-deps`` and the project's virtualenv lends its
site-packages for the dependencies through a ``.pth`` line (as a plain path, so its editable kraft-tck
finder is not activated: ``kraft_tck`` comes from the wheel, which the test checks)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "conformance" / "README.md"
SOURCES = ("pyproject.toml", "README.md", "spec", "reference", "conformance", "traces", "tla")

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

MY_CONTROLLER = """#!/bin/sh
# Stands in for the implementation under test: the kraft-tck reference node, from the installed wheel.
set -e
cmd=$1; shift
case "$cmd" in
  format) exec kraft-tck format "$@" ;;
  run) exec kraft-tck node "$@" ;;
  *) echo "usage: my-controller format|run --config FILE [...]" >&2; exit 2 ;;
esac
"""


def recipe_command() -> str:
    """The ``run:`` of the "KRaft conformance" step of the README's GitHub Actions recipe, verbatim."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## As a CI gate for another implementation", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "conformance/README.md: no yaml block in the CI section"
    workflow = yaml.safe_load(block.group(1))
    steps = next(iter(workflow["jobs"].values()))["steps"]
    (step,) = [s for s in steps if s.get("name") == "KRaft conformance"]
    return str(step["run"])


def test_readme_recipe_is_a_bash_command_using_the_installed_plugin() -> None:
    cmd = recipe_command()
    assert cmd.lstrip().startswith("pytest --pyargs kraft_tck.conformance")
    assert subprocess.run(["bash", "-n", "-c", cmd], capture_output=True).returncode == 0
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nkraft_tck = "kraft_tck.conformance.plugin"' in pyproject


def build_wheel(tmp: Path) -> Path:
    """A wheel of kraft-tck built from a copy of the sources (the checkout stays clean), in ``tmp``/dist."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    dist = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), "."],
        cwd=src, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("kraft_tck-*.whl")
    return wheel


def _build_and_install(tmp: Path) -> Path:
    """A wheel from a copy of the sources, installed in a fresh venv."""
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # The dependencies: the project's own site-packages, as a plain path after the venv's own.
    (Path(site) / "kraft-tck-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # pytest is among those dependencies; its console script, as pip would have written it.
    script = venv / "bin" / "pytest"
    script.write_text(f"#!{py}\nimport sys\n\nimport pytest\n\nsys.exit(pytest.main())\n")
    script.chmod(0o755)
    return venv


def test_ci_recipe_runs_verbatim_against_the_installed_wheel(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.fail("java is not on PATH: the recipe's black-box TLC validation needs Java 17 (make check-java)")
    venv = _build_and_install(tmp_path)
    work = tmp_path / "their-repo"  # outside the checkout: no conftest.py, no pyproject of kraft-tck
    (work / "bin").mkdir(parents=True)
    controller = work / "bin" / "my-controller"
    controller.write_text(MY_CONTROLLER)
    controller.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHONPATH"))}
    # the fresh venv first; the project's venv (its pytest, its kraft-tck) off the PATH
    ours = {str(Path(sys.executable).parent), str(REPO / ".venv" / "bin")}
    keep = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p not in ours]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *keep])
    where = subprocess.run(
        ["python", "-c", "import kraft_tck.conformance.plugin as p; print(p.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv)), f"kraft_tck imported from {where}, not from the wheel"
    # A small selection through pytest's own environment variable: the recipe's command stays verbatim.
    env["PYTEST_ADDOPTS"] = "--case KIP-595/Vote/1 --case KIP-595/Vote/4"
    proc = subprocess.run(
        ["bash", "-e", "-c", recipe_command()], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "unrecognized arguments" not in out
    # the two cases and the black-box TLC validation of the session's harness trace
    assert "3 passed, 1 skipped" in out and "TLC black-box validation: PASS" in out, out[-3000:]
    report = work / "out" / "conformance"
    results = json.loads((report / "results.json").read_text())
    assert {c["id"]: c["outcome"] for c in results["cases"]} == {"KIP-595/Vote/1": "passed", "KIP-595/Vote/4": "passed"}
    assert (report / "index.html").exists() and (report / "traces" / "session-life-0.ndjson").exists()
    junit = ET.parse(report / "junit.xml").getroot()
    cases = {p.get("value") for p in junit.iter("property") if p.get("name") == "case_id"}
    assert cases == {"KIP-595/Vote/1", "KIP-595/Vote/4"}
    suite = next(junit.iter("testsuite"))
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
