"""TLA+ validation of simulator traces whose Fetch answers are capped in bytes.

`kraft-tck simulate`'s default run caps each Fetch answer at 1 KiB (whole batches, at least one: Kafka's fetch
max bytes, scaled to the simulator's small logs), so a lagging follower catches up over several answers.
KRaft.tla counts its cap in records (MaxFetchRecords); TraceKRaft.tla validates a capped trace by taking, for
each answer, KRaft with as many records per answer as the answer carries (FetchCap).  The default run's
traces validate; the same trace with the cap left out of its header does not (a partial answer is no
behaviour of an uncapped KRaft).  Real simulator, real TLC.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


@pytest.mark.tlc
@needs_tlc
def test_the_default_runs_capped_answers_validate(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    cli = [sys.executable, "-m", "kraft_tck.reference.cli", "simulate", "--seeds", "1", "--duration", "10s",
           "--out", str(out)]  # fmt: skip
    subprocess.run(cli, check=True, capture_output=True, timeout=300)
    path = out / "seed-0.ndjson"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["config"]["fetch.max.bytes"] == 1024
    # the run has answers cut short by the cap: fewer records than the leader held past the fetch offset
    partial = [ev for ev in translate(path).events if ev.fetched > 0]
    assert partial, "no Fetch answer with records: the run exercises nothing"
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason
    # without the cap in the header, an answer cut short is no behaviour of KRaft: the follower that takes
    # it ends with a shorter log than the whole answer would give it
    del header["config"]["fetch.max.bytes"]
    uncapped = tmp_path / "uncapped.ndjson"
    uncapped.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    again = validate_trace(uncapped)
    assert not again.passed
    assert again.failed_event is not None
    assert again.failed_event.event in ("HandleFetchRequest", "AnswerParkedFetch", "HandleFetchResponse")
