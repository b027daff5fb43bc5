"""A report of every kind of outcome, for the report's tests (tests/conformance/test_report*.py)."""

from __future__ import annotations

from pathlib import Path

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.blackbox import BlackBoxValidation
from kraft_tck.conformance.catalog import catalog
from kraft_tck.conformance.report import write_report
from kraft_tck.conformance.session import CaseResult, TlcValidation
from kraft_tck.conformance.virtual import FrameLog

FAILED, ERRORED, DIFFERS, SKIPPED, PASSED = (
    "KIP-595/Divergence/1", "KIP-595/Vote/2", "KIP-595/LeaderProgress/1", "KIP-595/Vote/8", "KIP-595/Vote/1",
)
#: A TLC failure as long as real ones get, with a token that cannot wrap at a space.
LONG_TLC = "Error: no behaviour of KRaft produces event seq 3 " + "x" * 1500 + "\n" + "state line\n" * 40


def results() -> list[CaseResult]:
    cat = catalog()
    frames = FrameLog()
    frames.add(2, 1, 53, "request", 0, 1, {"LeaderId": 2})
    frames.add(1, 3, 1, "request", 17, 4, B.fetch_request(17, "c", 1, 9, 10, 7))
    frames.add(3, 1, 1, "response", 17, 4, B.fetch_response(17, diverging=(7, 7), leader=(3, 9)))
    frames.add(1, 3, 1, "request", 17, 5, B.fetch_request(17, "c", 1, 9, 10, 7))
    failed = CaseResult(cat[FAILED], "failed", 0.5, "the follower truncates to the divergence point",
                        "Fetch(offset=7)", "Fetch(offset=10)", "", frames.frames, tlc="checked as part of s: PASS")
    errored = CaseResult(cat[ERRORED], "error", 0.2, message="HarnessError: the target closed the connection")
    differs = CaseResult(cat[DIFFERS], "passed", 3.0, kafka_differences=[{
        "level": "KAFKA", "check": "resigns no earlier than 1.25 x fetch timeout", "expected": ">= 1875 ms",
        "actual": "1510 ms", "kafka": "checkquorum.timeout-factor", "met": False}])
    skipped = CaseResult(cat[SKIPPED], "skipped", 0.0, message="needs the capability restart: pass --target-cmd")
    passed = CaseResult(cat[PASSED], "passed", 0.1, frames=frames.frames[:1])
    return [passed, failed, differs, skipped, errored]


def write(directory: Path) -> Path:
    tlc = TlcValidation("FAIL", LONG_TLC, 3.2, 100)
    bb = BlackBoxValidation("PASS", "1,000 rows of 3 session traces", 23.0, 1000)
    args = ["conformance", "--target", "127.0.0.1:9093", "--target-id", "1", "--report", str(directory), "-x",
            "--case", "KIP-595/*", "--no-tlc"]
    from kraft_tck.conformance.report import repro_command

    return write_report(directory, results(), "node 1 at 127.0.0.1:9093", 0.0, tlc, bb, repro_command(args))
