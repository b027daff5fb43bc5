"""The harness's own timeliness: it watches its event loop, says so when a case failed while the loop stalled,
and keeps TLC validation's Python work out of its process (conformance/validator.py).

Cases judge the target's timers (election, fetch, check-quorum timeouts of a few hundred ms for the embedded
node), so a harness that reads the target's messages late misjudges it.  Once the harness validated finished
lives in threads of its own process: translating a trace is pure Python, and while it ran the loop thread
waited for the interpreter's lock after every socket call (a relaunched target's answer was read ~0.9 s late
and the case failed its setup).  Real event loop, real validation process, real TLC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kraft_tck.conformance.session import LoopThread
from kraft_tck.conformance.validator import ValidationProcess
from kraft_tck.tla.tlc import tlc_unavailable_reason

from .test_machinery import _failure

REPO = Path(__file__).resolve().parents[2]


def test_the_loop_watcher_measures_a_stall() -> None:
    loop = LoopThread()
    try:
        time.sleep(0.1)  # the watcher's first step
        loop.reset_lag()
        loop.loop.call_soon_threadsafe(time.sleep, 0.3)  # a callback that blocks the loop for 300 ms
        time.sleep(0.5)
        stalled = loop.reset_lag()
        assert 0.2 <= stalled < 2.0, stalled
        assert loop.reset_lag() < stalled  # reset: the stall is not counted twice
        # a stall inside a relaunch of the target (the loop's time window given) judged nothing: not counted
        before = loop.loop.time()
        loop.loop.call_soon_threadsafe(time.sleep, 0.3)
        time.sleep(0.5)
        assert loop.reset_lag([(before, loop.loop.time())]) < 0.2
        loop.loop.call_soon_threadsafe(time.sleep, 0.3)
        time.sleep(0.5)
        assert loop.reset_lag([(before - 10, before - 5)]) >= 0.2  # a window before it does not hide it
    finally:
        loop.stop()


def test_a_failure_while_the_harness_stalled_says_so() -> None:
    failure = _failure()
    assert "harness:" not in str(failure)
    failure.note_harness("the harness's own event loop stalled for up to 420 ms while this case ran")
    text = str(failure)
    assert "harness:  the harness's own event loop stalled for up to 420 ms" in text
    # the note comes after the verdict, before the frames
    assert text.index("actual:") < text.index("harness:") < text.index("last messages")


@pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))
def test_validation_runs_outside_the_harness_process(tmp_path: Path) -> None:
    report = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/test_vote.py", "-q", "-p", "no:cacheprovider", "-n", "0",
         "--case", "KIP-595/Vote/1", "--report", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads((report / "results.json").read_text())
    schedule = results["tlcValidation"]["schedule"]
    assert schedule["runs"], schedule  # TLC ran (node and session traces, in one run)
    assert [sorted(run["lives"]) for run in schedule["runs"]] == [["node", "session"]], schedule
    assert all(run["pid"] != schedule["harnessPid"] for run in schedule["runs"]), schedule
    assert schedule["harnessPid"] != os.getpid()
    # each run's CPU, the validation process's and its TLC's (a JVM takes well over 0.3 s of CPU to start)
    assert all(run["cpuS"] is not None and run["cpuS"] > 0.3 for run in schedule["runs"]), schedule
    case = next(c for c in results["cases"] if c["id"] == "KIP-595/Vote/1")
    assert case["loopLagMs"] >= 0.0


def test_a_validation_process_runs_jobs_and_returns_their_errors() -> None:
    process = ValidationProcess()
    try:
        assert process.run(os.getpid) == process.pid != os.getpid()  # the job ran over there
        assert process.run(divmod, 17, 5) == (3, 2)
        with pytest.raises(ZeroDivisionError):
            process.run(divmod, 1, 0)  # the job's exception, raised here
        assert process.run(sorted, [3, 1, 2]) == [1, 2, 3]  # and the process serves on
    finally:
        process.close()
    assert process._proc.returncode == 0  # its standard input closed: it ended by itself


@pytest.mark.slow
@pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))
def test_background_runs_wait_for_enough_rows(tmp_path: Path) -> None:
    """While cases run, a TLC run waits for ``--tlc-batch-rows`` rows (lives of 30 frames here, each far fewer
    rows) and takes both kinds of every finished life: no JVM start for a handful of rows; once the catalog is
    done the last run takes the rest, and every life is validated, once."""
    report, batch = tmp_path / "report", 150
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "-n", "0", "--section", "Vote",
         "--section", "Epochs", "--tlc-life-frames", "30", "--tlc-batch-rows", str(batch), "--report", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads((report / "results.json").read_text())
    runs = results["tlcValidation"]["schedule"]["runs"]
    background = [r for r in runs if not r["final"]]
    assert background and any(r["final"] for r in runs), runs
    # batch priority while cases run, the scheduler's default for the last run (all the catalog waits for then)
    assert {r["nice"] for r in background} == {os.getpriority(os.PRIO_PROCESS, 0) + 5}, runs
    assert {r["nice"] for r in runs if r["final"]} == {os.getpriority(os.PRIO_PROCESS, 0)}, runs
    # runs wait on trace lines and rows; they validate events (a node trace has a few more lines than events)
    assert all(r["rows"] >= batch // 2 for r in background), runs
    assert all(r["lives"]["node"] and r["lives"]["session"] for r in background), runs  # both kinds in one run
    for kind, verdict in (("node", "tlcValidation"), ("session", "tlcBlackBox")):
        validated = [life for r in runs for life in r["lives"][kind]]
        # each life once, every life of the verdict, and many lives
        assert len(validated) == len(set(validated)) == len(results[verdict]["lives"]) >= 4, (kind, runs)
