"""The catalog in parallel (pytest-xdist ``-n N``): one target per worker with its own ports, directory,
traces and TLC validation; the controller merges the verdicts into one report, one JUnit file and one exit
status; an external ``--target host:port`` stays serial. Real ``pytest conformance`` processes, real
reference-node processes, real TLC."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kraft_tck.conformance.blackbox import BlackBoxValidation, merge_blackbox
from kraft_tck.conformance.plugin import EXIT_TARGET_UNREACHABLE
from kraft_tck.conformance.session import TlcValidation, merge_tlc
from kraft_tck.conformance.target import worker_stripe
from kraft_tck.tla.tlc import tlc_unavailable_reason

REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
@pytest.mark.tlc
@pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))
def test_two_workers_two_targets_one_report(tmp_path: Path) -> None:
    report, junit = tmp_path / "report", tmp_path / "junit.xml"
    proc = harness("-n", "2", "--section", "Vote", "--report", str(report), "--junitxml", str(junit))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "cases on 2 targets in parallel" in out
    results = json.loads((report / "results.json").read_text())
    ids = [c["id"] for c in results["cases"]]
    assert ids == sorted(ids, key=lambda i: int(i.rsplit("/", 1)[1])) and len(ids) == 8  # catalog order
    assert {c["outcome"] for c in results["cases"]} == {"passed"}
    # each worker's target wrote its own traces, in its own directory, on its own ports
    workers = sorted(p.name for p in (report / "traces").iterdir() if p.is_dir())
    assert workers == ["gw0", "gw1"]
    for w in workers:
        assert list((report / "traces" / w / "target").glob("target-trace-*.ndjson"))
        assert list((report / "traces" / w).glob("session-life-*.ndjson"))
    assert results["target"].startswith("2 targets in parallel") and results["target"].count(" at 127.0.0.1:") == 2
    # each case's span on its worker (bench_conformance's time outside the cases): the case's own time within it,
    # a worker's cases one after another
    assert {c["worker"] for c in results["cases"]} <= {"gw0", "gw1"}
    for c in results["cases"]:
        assert c["startedAt"] > 0 and c["endedAt"] - c["startedAt"] >= c["durationS"] - 0.01, c
    for w in workers:
        spans = sorted((c["startedAt"], c["endedAt"]) for c in results["cases"] if c["worker"] == w)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
    # the two workers' TLC verdicts merged: both node traces and both session traces validated
    assert results["tlcValidation"]["status"] == "PASS" and len(results["tlcValidation"]["lives"]) >= 2
    assert results["tlcBlackBox"]["status"] == "PASS" and len(results["tlcBlackBox"]["lives"]) >= 2
    assert all(c["tlc"].endswith(": PASS") for c in results["cases"]), [c["tlc"] for c in results["cases"]]
    # JUnit: the 8 cases with their case_id, and each worker's two TLC validations as passed items
    cases = ET.parse(junit).getroot().iter("testcase")
    names = [c.get("name", "") for c in cases]
    assert sum(1 for n in names if n.startswith("test_")) == 8
    assert sorted(n for n in names if n.startswith("TLC")) == sorted(
        f"{item} [{w}]" for item in ("TLC validation of the target's node trace",
                                     "TLC black-box validation of the session harness trace") for w in workers
    )  # fmt: skip
    tree = ET.parse(junit).getroot()
    assert tree.find("testsuite") is not None and int(tree.find("testsuite").get("failures", "1")) == 0  # type: ignore[union-attr]


def test_a_failed_case_in_a_worker_fails_the_run_and_the_report_says_which(tmp_path: Path) -> None:
    # a node that forgets its vote across kill -9 (tests/conformance/faulty_node.py) fails Vote/8 on
    # whichever worker runs it; Vote/1 passes on the other
    launcher = REPO / "tests" / "conformance" / "faulty_node.py"
    report = tmp_path / "report"
    proc = harness("-n", "2", "--no-tlc", "--case", "KIP-595/Vote/8", "--case", "KIP-595/Vote/1",
                   "--target-launcher", f"{launcher}", "--report", str(report), timeout=300,
                   env={**os.environ, "KRAFT_TCK_FAULT": "forget-vote"})  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    results = json.loads((report / "results.json").read_text())
    assert {c["id"]: c["outcome"] for c in results["cases"]} == {"KIP-595/Vote/1": "passed", "KIP-595/Vote/8": "failed"}
    assert "FAIL  KIP-595/Vote/8" in out and "1 failed, 1 passed" in out


def test_an_external_target_runs_serially_and_says_so_in_one_line() -> None:
    # nothing listens on port 1: the serial run stops at once with its own exit code, after one line on -n
    proc = harness("-n", "2", "--no-tlc", "--target", "127.0.0.1:1", "--cluster-id", "x", timeout=120)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "kraft-tck:" in ln]
    assert proc.returncode == EXIT_TARGET_UNREACHABLE, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert any("serially" in ln and "--target host:port" in ln for ln in lines), lines
    assert "gw0" not in proc.stdout + proc.stderr  # no worker was started


def test_each_worker_takes_its_own_stripe_of_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert worker_stripe(10000, 30000) == (10000, 30000)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    stripes = []
    for k in range(2):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{k}")
        stripes.append(worker_stripe(10000, 30000))
    (low0, high0), (low1, high1) = stripes
    assert low0 == 10000 and high1 <= 30000 and high0 + 5 < low1  # disjoint, a base's ports included
    # free_ports of worker gw1 of 2 come from its stripe of the range below the ephemeral ports
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    from kraft_tck.conformance.target import _ephemeral_floor, free_ports

    top = _ephemeral_floor() - 3
    low, high = worker_stripe(*((10000, top) if top > 11000 else (20000, 60000 - 3)))
    for _ in range(20):
        ports = free_ports(3)
        assert low <= ports[0] <= high and ports == tuple(range(ports[0], ports[0] + 3))


def test_verdicts_of_several_lives_or_workers_merge() -> None:
    ok = TlcValidation("PASS", "", 2.0, 10, [{"status": "PASS", "events": 10}])
    bad = TlcValidation("FAIL", "life 1: no behaviour", 3.0, 5, [{"status": "FAIL", "events": 5}])
    none = TlcValidation("NOT CHECKED", "nothing", 0.0, 0, [{"status": "NOT CHECKED", "events": 0}])
    assert merge_tlc([ok, ok]).status == "PASS" and merge_tlc([ok, ok]).events == 20
    assert merge_tlc([ok, bad]).status == "FAIL" and "no behaviour" in merge_tlc([ok, bad]).message
    assert merge_tlc([none, none]).status == "NOT CHECKED" and merge_tlc([ok, none]).status == "PASS"
    a = BlackBoxValidation("PASS", "", 1.0, 7, [{"status": "PASS", "events": 7, "file": "/x/s-0", "reason": ""}],
                           {"c1": "checked as part of s-0: PASS", "c2": "checked as part of s-0: PASS"})
    life = {"status": "FAIL", "events": 4, "file": "/x/s-1", "reason": "r"}
    b = BlackBoxValidation("FAIL", "seq 3 in case c2", 1.0, 4, [life], {"c2": "checked as part of s-1: FAIL"})
    merged = merge_blackbox([a, b])
    assert merged.status == "FAIL" and merged.events == 11 and len(merged.lives) == 2
    assert merged.by_case == {"c1": "checked as part of s-0: PASS", "c2": "checked as part of s-1: FAIL"}
    assert merge_blackbox([a, a]).message.startswith("14 rows of 2 session harness trace(s) match KRaft")
