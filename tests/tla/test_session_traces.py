"""Black-box validation of whole conformance sessions (conformance/README.md "TLC validation").

The harness keeps every frame of the session, cut into lives of the target (a restart on a wiped
directory starts a new one), and after the catalog writes one harness trace per life
(``session-life-N.ndjson``, its header naming the cases it spans) and validates it with TLC in black-box
mode: every case is checked from the target's fresh start, not only the session's first.  Real runs,
real TLC.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.conformance.blackbox import read_session_trace, validate_session_traces
from kraft_tck.conformance.target import QuorumLayout, Timeouts, free_port, free_ports, target_properties
from kraft_tck.reference.config import render_properties
from kraft_tck.reference.storage import format_dir
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

from tests.tla.test_real_traces import _lines, _write

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests" / "conformance" / "faulty_node.py"
CLUSTER = "a3JhZnQtdGNrLWNvbmZvcg"

pytestmark = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


def _run(args: list[str], report: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--report", str(report)]
    return subprocess.run(cmd, cwd=REPO, env=env or dict(os.environ), capture_output=True, text=True, timeout=400)


def _results(report: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((report / "results.json").read_text())
    return loaded


@pytest.fixture(scope="module")
def session_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Vote and Election cases against the embedded reference node, TLC on (the default)."""
    report = tmp_path_factory.mktemp("session") / "report"
    proc = _run(["conformance/test_vote.py", "conformance/test_election.py"], report)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "TLC black-box validation: PASS" in proc.stdout, proc.stdout[-3000:]
    return report


def test_the_session_trace_spans_every_case_and_passes(session_run: Path) -> None:
    results = _results(session_run)
    bb = results["tlcBlackBox"]
    assert bb["status"] == "PASS", bb
    (life,) = bb["lives"]  # every case passed: no wiped restart, one life
    assert life["status"] == "PASS" and life["events"] > 100, life
    cases = [c["id"] for c in results["cases"]]
    assert life["cases"] == cases and len(cases) > 1
    path = Path(life["file"])
    header = json.loads(path.read_text().splitlines()[0])
    spans = header["cases"]
    assert [c["id"] for c in spans] == cases
    assert all(a["lastSeq"] < b["firstSeq"] for a, b in itertools.pairwise(spans))
    # Vote/8 kills the target (kill -9) and starts it on the same directory: a TargetRestart row, no new life
    assert len(header["targetRestarts"]) == 1
    assert "TargetRestart" in [ev.event for ev in translate(path).events]
    # every case is checked as part of the session trace, though its own trace is not from a fresh node
    assert all(c["tlc"] == f"checked as part of {path.name}: PASS" for c in results["cases"]), results["cases"]
    later = session_run / "traces" / (cases[1].replace("/", "_") + ".ndjson")
    assert validate_trace(later).status == "NOT CHECKED"
    html = (session_run / "index.html").read_text()
    assert "TLC black-box validation of the session harness trace" in html
    assert f"TLC: checked as part of {path.name}: PASS" in html


def _target_answer(lines: list[dict[str, Any]], api: str, first: int, last: int) -> int:
    """Index in ``lines`` (header first) of the target's first answer of ``api`` with seq in first..last."""
    return next(
        k
        for k, obj in enumerate(lines)
        if k > 0
        and first <= obj["seq"] <= last
        and obj["msg"]["api"] == api
        and obj["msg"]["kind"] == "response"
        and obj["msg"]["from"] == 1
        and not obj["msg"]["body"].get("ErrorCode")
    )


def test_a_doctored_later_case_fails_and_is_named(session_run: Path, tmp_path: Path) -> None:
    # KIP-595 "BeginQuorumEpoch Request Handling": the target answers in the epoch of the leader it
    # adopted.  One answer of a case well after the first gets the next epoch instead.
    life = _results(session_run)["tlcBlackBox"]["lives"][0]
    source = Path(life["file"])
    lines = _lines(source)
    spans = lines[0]["cases"]
    span = next(c for c in spans[2:] if any(
        c["firstSeq"] <= obj["seq"] <= c["lastSeq"] and obj["msg"]["api"] == "BeginQuorumEpoch"
        and obj["msg"]["from"] == 1 for obj in lines[1:]
    ))  # fmt: skip
    at = _target_answer(lines, "BeginQuorumEpoch", span["firstSeq"], span["lastSeq"])
    lines[at]["msg"]["body"]["Topics"][0]["Partitions"][0]["LeaderEpoch"] += 1
    doctored = _write(tmp_path / "session-life-0.ndjson", lines)
    result = validate_session_traces([read_session_trace(doctored)])
    assert result.status == "FAIL", result.message
    (entry,) = result.lives
    assert entry["failedEvent"]["seq"] == lines[at]["seq"] and entry["failedCase"] == span["id"]
    assert f"in case {span['id']}" in result.message and "spec state before it" in result.message
    assert result.by_case[span["id"]].startswith("checked as part of session-life-0.ndjson: FAIL")
    assert result.by_case[spans[0]["id"]] == "checked as part of session-life-0.ndjson: FAIL"


def test_a_forgotten_vote_fails_the_run_in_black_box_too(tmp_path: Path) -> None:
    # The faulty node keeps its vote in memory only (KIP-595 "Vote Request Handling": persist the vote
    # before responding).  After kill -9 it grants a second candidate of the same epoch: the harness sees
    # two granted Vote answers of one epoch, which no behaviour of KRaft sends.
    report = tmp_path / "report"
    env = {**os.environ, "KRAFT_TCK_FAULT": "forget-vote"}
    proc = _run(["conformance/test_vote.py", "--target-launcher", str(FAULTY)], report, env)
    assert proc.returncode == 1
    assert "TLC black-box validation of the session harness trace: FAIL" in proc.stdout, proc.stdout[-4000:]
    bb = _results(report)["tlcBlackBox"]
    failed = [life for life in bb["lives"] if life["status"] == "FAIL"]
    assert failed and failed[0]["failedCase"] == "KIP-595/Vote/8", bb
    assert failed[0]["failedEvent"]["message"]["type"] == "VoteResponse" and "stateBefore" in failed[0]


def test_an_address_target_gets_a_black_box_verdict(tmp_path: Path) -> None:
    """``--target host:port``: a reference node the test starts itself, before the harness listens (its
    lone elections reach nobody).  No node trace, so the white-box verdict is unavailable; the black-box
    verdict on the session harness trace is PASS."""
    harness = free_ports(2)
    port = free_port()
    layout = QuorumLayout(1, "127.0.0.1", port, "127.0.0.1", harness)
    timeouts = Timeouts(300, 600, 1000, 2000, 300, 9000)  # what the harness assumes for --target, sped up
    data = tmp_path / "data"
    format_dir(data, 1, CLUSTER)
    config = tmp_path / "server.properties"
    config.write_text(render_properties(target_properties(layout, timeouts, data)))
    log = (tmp_path / "node.out").open("wb")
    node = subprocess.Popen(
        [sys.executable, "-m", "kraft_tck.reference.cli", "node", "--config", str(config)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        # a node started by hand is up before the harness runs: wait until it listens (its start-up, not the
        # harness's, is what the test is not about)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and node.poll() is None, "the node never listened"
                time.sleep(0.1)
        report = tmp_path / "report"
        proc = _run(
            [
                "conformance/test_vote.py", "conformance/test_election.py",
                "--target", f"127.0.0.1:{port}", "--harness-ports", ",".join(map(str, harness)),
                "--cluster-id", CLUSTER, "--target-election-timeout-ms", "300", "--target-fetch-timeout-ms", "600",
            ],
            report,
        )  # fmt: skip
    finally:
        node.kill()
        node.wait(10)
        log.close()
    assert (report / "results.json").exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    results = _results(report)
    assert results["tlcValidation"]["status"] == "UNAVAILABLE"
    bb = results["tlcBlackBox"]
    assert bb["status"] == "PASS", (bb, proc.stdout[-3000:])
    assert "TLC black-box validation: PASS" in proc.stdout
    assert sum(len(life["cases"]) for life in bb["lives"]) > 1


def test_validate_trace_names_the_case_of_a_failed_event(session_run: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner
    from kraft_tck.tla.cli import validate_trace_command

    lines = _lines(Path(_results(session_run)["tlcBlackBox"]["lives"][0]["file"]))
    span = lines[0]["cases"][-1]
    at = _target_answer(lines, "BeginQuorumEpoch", lines[0]["cases"][1]["firstSeq"], span["lastSeq"])
    lines[at]["msg"]["body"]["Topics"][0]["Partitions"][0]["LeaderEpoch"] += 1
    case = next(c["id"] for c in lines[0]["cases"] if c["firstSeq"] <= lines[at]["seq"] <= c["lastSeq"])
    result = CliRunner().invoke(validate_trace_command, [str(_write(tmp_path / "doctored.ndjson", lines))])
    assert result.exit_code == 1, result.output
    assert f"in case {case}" in result.output, result.output
