"""The docs name what exists: every benchmark is in bench/README.md's table, every relative link resolves."""

from __future__ import annotations

import re
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
