"""TLA+ validation of the simulator's foreign-cluster sender (`kraft-tck simulate`'s default --foreign-rate 1).

A node of another cluster (not traced, not a modelled peer) sends Vote, BeginQuorumEpoch, EndQuorumEpoch,
Fetch and FetchSnapshot requests with its cluster id; each receiver refuses the whole request with
INCONSISTENT_CLUSTER_ID before anything may change (KIP-595 "Fetch Request Handling" step 1,
``KafkaRaftClient.hasValidClusterId``).  The translation makes each such handler step a RefuseRequest row
(the node's state must stay as it was), so the default run's traces validate; a node that changed its state
on such a request still fails there.  Real simulator, real TLC.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import REFUSE_REQUEST, translate
from kraft_tck.tla.trace_validate import validate_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

# seed 15's default run: node 1, the leader, refuses the foreign node's EndQuorumEpoch at seq 217
SEED, REFUSED_SEQ = 15, 217


@pytest.mark.tlc
@needs_tlc
def test_requests_of_another_cluster_validate_as_refusals(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    cli = [sys.executable, "-m", "kraft_tck.reference.cli", "simulate", "--seeds", "1", "--first-seed", str(SEED),
           "--duration", "10s", "--out", str(out)]  # fmt: skip
    subprocess.run(cli, check=True, capture_output=True, timeout=300)
    path = out / f"seed-{SEED}.ndjson"
    lines = [json.loads(raw) for raw in path.read_text().splitlines()]
    handler = next(o for o in lines[1:] if o["seq"] == REFUSED_SEQ)
    assert handler["event"] == "HandleEndQuorumEpochRequest" and "cluster id" in handler.get("note", "")
    rows = translate(path).events
    assert REFUSE_REQUEST in [ev.event for ev in rows if ev.seq == REFUSED_SEQ]
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason
    # the leader bumping its epoch on the foreign request: no refusal changes anything
    handler["state"] = dict(handler["state"], epoch=handler["state"]["epoch"] + 1)
    doctored = tmp_path / "doctored.ndjson"
    doctored.write_text("".join(json.dumps(o) + "\n" for o in lines))
    failed = validate_trace(doctored)
    assert not failed.passed
    assert failed.failed_event is not None and failed.failed_event.seq == REFUSED_SEQ, failed.reason
