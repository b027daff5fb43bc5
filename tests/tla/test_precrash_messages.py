"""Black-box validation across a kill -9 of the target (KIP-595/CrashWindow/3): what the target sent just before the
harness killed it may reach the harness after the relaunch.  tla/TraceKRaft.tla lets the incarnation before a
TargetRestart row take hidden steps for a message of the target that a row after the restart receives
(NeedsHiddenStep), so such a trace is a behaviour of KRaft; the message must still be one the target could have
sent before the kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_validate import validate_trace

REPO = Path(__file__).resolve().parents[2]
needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


@pytest.fixture(scope="module")
def crash_life(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The session trace of KIP-595/CrashWindow/3's own life (the target leader killed as a Fetch answer of its
    arrives, then relaunched), from a run against the embedded reference node."""
    out = tmp_path_factory.mktemp("crash-window")
    args = [sys.executable, "-m", "pytest", "conformance/test_crashwindow.py", "-q", "-p", "no:cacheprovider",
            "--case", "KIP-595/CrashWindow/3", "--trace-dir", str(out)]
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for path in sorted(out.glob("session-life-*.ndjson")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        if lines[0].get("targetRestarts"):
            return lines
    raise AssertionError(f"no session trace with a target restart in {out}")


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_fetch_answer_sent_before_the_kill_and_read_after_the_relaunch_passes(
    crash_life: list[dict[str, Any]], tmp_path: Path
) -> None:
    header, events = crash_life[0], crash_life[1:]
    assert validate_trace(_write(tmp_path / "as-run.ndjson", crash_life), timeout=300).status == "PASS"
    # The leader's last Fetch answer before the kill, read by the harness only after the relaunch.
    restart = header["targetRestarts"][0]
    answer = max(k for k, obj in enumerate(events) if obj["seq"] < restart and obj["event"] == "Receive"
                 and obj["msg"]["api"] == "Fetch" and obj["msg"]["kind"] == "response")
    moved = events.pop(answer)
    after = next(k for k, obj in enumerate(events) if obj["seq"] >= restart)
    events.insert(after, moved)
    for seq, obj in enumerate(events):
        obj["seq"] = seq
    header = {**header, "targetRestarts": [restart - 1]}  # the kill still comes before the events it came before
    verdict = validate_trace(_write(tmp_path / "late.ndjson", [header, *events]), timeout=300)
    assert verdict.status == "PASS", (verdict.reason, verdict.failed_event)
    # ... but not one the target could not have sent before the kill: an answer naming a later epoch
    part = moved["msg"]["body"]["Responses"][0]["Partitions"][0]
    part["CurrentLeader"]["LeaderEpoch"] += 5
    verdict = validate_trace(_write(tmp_path / "newer.ndjson", [header, *events]), timeout=300)
    assert verdict.status == "FAIL" and verdict.failed_event is not None
    assert verdict.failed_event.seq == moved["seq"], verdict.reason


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    return path
