"""The embedded target's warm interpreters (conformance/target.py ``WarmInterpreters``): a run handed to a spare
behaves as ``python -m MODULE ARGS`` would — its output, its exit status, kill -9 of its process group — and no
spare outlives ``close``."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from kraft_tck.conformance.target import WarmInterpreters


def _ready(warm: WarmInterpreters, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(sp.is_ready() for sp in warm._spares):
        assert time.monotonic() < deadline, "the spares did not get ready"
        time.sleep(0.05)


def test_a_spare_runs_a_module_as_python_m_would(tmp_path: Path) -> None:
    warm = WarmInterpreters(("json.tool",), size=2)
    try:
        warm.fill()
        _ready(warm)
        good = tmp_path / "good.json"
        good.write_text('{"b": 1, "a": [1, 2]}')
        out = tmp_path / "good.out"
        proc = warm.run("json.tool", ["json.tool", "--sort-keys", str(good)], out, status=True)
        assert proc is not None
        assert WarmInterpreters.exit_status(proc, 30) == 0
        assert json.loads(out.read_text()) == {"a": [1, 2], "b": 1}
        assert out.read_text().startswith('{\n    "a"'), "its argv reached the module (--sort-keys, indent)"

        bad = tmp_path / "bad.json"
        bad.write_text("{not json")
        out2 = tmp_path / "bad.out"
        proc2 = warm.run("json.tool", ["json.tool", str(bad)], out2, status=True)
        assert proc2 is not None
        assert WarmInterpreters.exit_status(proc2, 30) == 1, "a failing run's exit status is its own"
        assert "Expecting property name" in out2.read_text()
        assert len(warm._spares) == 2, "each run starts a replacement spare"
    finally:
        warm.close()


def test_kill_9_reaches_a_warm_run_and_close_ends_every_spare(tmp_path: Path) -> None:
    warm = WarmInterpreters(("timeit",), size=2)
    try:
        warm.fill()
        _ready(warm)
        proc = warm.run("timeit", ["timeit", "-n", "1", "-r", "1", "import time; time.sleep(60)"], tmp_path / "t.out")
        assert proc is not None and proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)  # what CommandTarget.kill does
        assert proc.wait(10) == -signal.SIGKILL
        spares = [sp.proc for sp in warm._spares]
        assert spares and all(p.poll() is None for p in spares)
    finally:
        warm.close()
    assert all(p.wait(10) is not None for p in spares), "close ends the spares"


def test_a_spare_started_under_another_environment_is_not_used(tmp_path: Path) -> None:
    warm = WarmInterpreters(("json.tool",), size=1)
    try:
        warm.fill()
        old = warm._spares[0].proc
        os.environ["KRAFT_TCK_WARM_TEST"] = "1"  # the run would see another environment than the spare has
        try:
            assert warm.run("json.tool", ["json.tool", sys.executable], tmp_path / "x.out") is None
        finally:
            del os.environ["KRAFT_TCK_WARM_TEST"]
        assert old.wait(10) is not None, "the unusable spare was ended"
    finally:
        warm.close()


def test_a_spare_survives_pytest_naming_the_next_test(tmp_path: Path) -> None:
    """pytest rewrites PYTEST_CURRENT_TEST at every test phase: a spare must not count that as another environment
    (it used to: every spare started during one case was thrown away at the next, and launches went cold)."""
    before = os.environ.get("PYTEST_CURRENT_TEST")
    warm = WarmInterpreters(("json.tool",), size=1)
    try:
        os.environ["PYTEST_CURRENT_TEST"] = "conformance/test_a.py::test_one (call)"
        warm.fill()
        spare = warm._spares[0].proc
        os.environ["PYTEST_CURRENT_TEST"] = "conformance/test_b.py::test_two (setup)"
        good = tmp_path / "good.json"
        good.write_text("[1]")
        proc = warm.run("json.tool", ["json.tool", str(good)], tmp_path / "x.out", status=True)
        assert proc is spare, "the spare started under the other test name was used"
        assert WarmInterpreters.exit_status(proc, 30) == 0
    finally:
        warm.close()
        if before is None:
            os.environ.pop("PYTEST_CURRENT_TEST", None)
        else:
            os.environ["PYTEST_CURRENT_TEST"] = before


def test_a_spare_waits_as_a_batch_task_and_runs_as_an_ordinary_one(tmp_path: Path) -> None:
    """The spare prepares under SCHED_BATCH (not SCHED_IDLE, which an unprivileged process cannot leave: its node ran
    at idle priority), and the run it is handed is an ordinary SCHED_OTHER task."""
    warm = WarmInterpreters(("timeit",), size=1)
    try:
        warm.fill()
        _ready(warm)
        spare = warm._spares[0].proc
        assert os.sched_getscheduler(spare.pid) == os.SCHED_BATCH
        out = tmp_path / "policy.out"
        code = "import os, sys; sys.stderr.write('policy=%d\\n' % os.sched_getscheduler(0))"
        proc = warm.run("timeit", ["timeit", "-n", "1", "-r", "1", code], out, status=True)
        assert proc is spare
        assert WarmInterpreters.exit_status(proc, 30) == 0
        assert f"policy={os.SCHED_OTHER}" in out.read_text()
    finally:
        warm.close()
