"""The node's write workload (``kraft-tck node --throughput N`` / ``--closed-loop``), as the benchmarks use it:
real node processes, real sockets, real files (fsync on); checked from the traces and the leader's report."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.spec.trace import read_trace

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SETTINGS = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 600,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
    "controller.quorum.append.linger.ms": 0,
}
REPORT = re.compile(r"committed (\d+) records in [\d.]+s .*?commit latency p50=([\d.]+)ms .*? over (\d+) writes")


def test_closed_loop_writes_each_record_after_the_last_one_committed(tmp_path: Path) -> None:
    """``--closed-loop``: every client append after the first of an epoch finds everything before it
    committed (the high watermark is the log end it appends at), one record per write; the leader reports
    each write's commit latency."""
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=dict(SETTINGS),
                     trace=True, extra_args=["--closed-loop", "--record-size", "100"])
    c.prepare()
    c.start_all()
    try:
        info = asyncio.run(c.wait_for_leader(30, min_hw=2))
        asyncio.run(asyncio.sleep(1.5))
        c.kill(info.leader_id, signal.SIGTERM)  # the leader prints its report on SIGTERM
    finally:
        c.stop_all(signal.SIGTERM)

    appends: dict[int, list[dict]] = defaultdict(list)  # type: ignore[type-arg]
    for path in c.trace_files(info.leader_id):
        for ev in read_trace(path).events:
            if ev["event"] == "ClientAppend":
                appends[ev["state"]["epoch"]].append(ev)
    later = [ev for evs in appends.values() for ev in evs[1:]]
    assert len(later) >= 50, f"only {len(later)} client appends in 1.5 s"
    for ev in later:
        (batch,) = ev["log"]["appended"]
        assert batch["baseOffset"] == batch["lastOffset"], f"a write of several records: {batch}"
        state = ev["state"]
        assert state["highWatermark"] == state["logEndOffset"] - 1, (
            f"append at offset {batch['baseOffset']} with the high watermark at {state['highWatermark']}: "
            "an earlier write was still uncommitted"
        )

    report = (c.node_dir(info.leader_id) / "node.log").read_text(encoding="utf-8")
    m = list(REPORT.finditer(report))[-1]
    records, p50, writes = int(m.group(1)), float(m.group(2)), int(m.group(3))
    assert records == writes >= len(later)
    assert 0 < p50 < 1000


def test_closed_loop_and_throughput_are_exclusive(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("node.id=1\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["node", "--config", str(config), "--closed-loop", "--throughput", "100"])
    assert result.exit_code == 2
    assert "--closed-loop and --throughput" in result.output


def test_closed_loop_leader_stops_at_once_with_a_write_that_cannot_commit(tmp_path: Path) -> None:
    """With its followers gone, the leader's one write waits for a commit that never comes (until the
    fetch timeout makes it resign); SIGTERM still stops the node at once, with its report."""
    settings = dict(SETTINGS) | {"controller.quorum.fetch.timeout.ms": 20_000,
                                 "controller.quorum.request.timeout.ms": 2_000}
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=settings,
                     extra_args=["--closed-loop", "--record-size", "100", "--no-fsync"])
    c.prepare()
    c.start_all()
    try:
        info = asyncio.run(c.wait_for_leader(30, min_hw=2))
        for i in range(1, 4):
            if i != info.leader_id:
                c.kill(i, signal.SIGKILL)
        asyncio.run(asyncio.sleep(0.3))  # the write in flight now has no majority to commit it
        t0 = time.monotonic()
        c.kill(info.leader_id, signal.SIGTERM)
        took = time.monotonic() - t0
    finally:
        c.stop_all(signal.SIGKILL)
    assert took < 5, f"the leader took {took:.1f}s to stop"
    report = (c.node_dir(info.leader_id) / "node.log").read_text(encoding="utf-8")
    assert REPORT.search(report), report[-2000:]


def test_sigusr1_restarts_the_workload_statistics(tmp_path: Path) -> None:
    """A benchmark leaves its warm-up out of the report: after SIGUSR1 the leader counts only the writes
    committed since, which is fewer than the log holds (the high watermark moved before it too)."""
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=dict(SETTINGS),
                     extra_args=["--closed-loop", "--record-size", "100", "--no-fsync"])
    c.prepare()
    c.start_all()
    try:
        info = asyncio.run(c.wait_for_leader(30, min_hw=2))
        asyncio.run(asyncio.sleep(1.0))
        before = asyncio.run(c.describe())
        for proc in c.procs.values():
            proc.send_signal(signal.SIGUSR1)
        asyncio.run(asyncio.sleep(1.0))
        after = asyncio.run(c.describe())
        c.kill(info.leader_id, signal.SIGTERM)
    finally:
        c.stop_all(signal.SIGTERM)
    assert before is not None and after is not None and before.leader_id == after.leader_id == info.leader_id
    m = list(REPORT.finditer((c.node_dir(info.leader_id) / "node.log").read_text(encoding="utf-8")))[-1]
    records = int(m.group(1))
    assert before.high_watermark > 100, "no warm-up to leave out"
    # Counted from the signal: about the writes between the two looks, never the warm-up before them.
    assert 0 < records < after.high_watermark - before.high_watermark + 200


@pytest.mark.parametrize(("choice", "loop_class"), [
    ("auto", "uvloop.Loop"),  # uvloop is a dependency on CPython/Linux: auto picks it
    ("uvloop", "uvloop.Loop"),
    ("asyncio", "asyncio.unix_events._UnixSelectorEventLoop"),
])
def test_the_node_runs_and_commits_on_the_event_loop_asked_for(tmp_path: Path, choice: str, loop_class: str) -> None:
    """``--event-loop``: the same node code on uvloop or plain asyncio; either one elects, commits its
    closed-loop writes and reports them."""
    if choice != "asyncio":
        pytest.importorskip("uvloop", reason="uvloop is not installed here (a dependency on CPython outside "
                                             "Windows): pip install uvloop")
    c = LocalCluster(tmp_path / "cluster", voters=1, base_port=free_base_port(1), settings=dict(SETTINGS))
    c.prepare()
    log_path = c.node_dir(1) / "node.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kraft_tck.reference.cli", "-v", "node", "--config", str(c.config_path(1)),
             "--closed-loop", "--no-fsync", "--event-loop", choice], stdout=log, stderr=subprocess.STDOUT)
    c.procs[1] = proc
    try:
        info = asyncio.run(c.wait_for_leader(30, min_hw=50))
        assert info.leader_id == 1
        asyncio.run(asyncio.sleep(1.5))  # past the fetch timeout: the only voter keeps leading
        later = asyncio.run(c.wait_for_leader(10, min_hw=info.high_watermark + 50))
        assert later.leader_epoch == info.leader_epoch, "the only voter resigned (check quorum)"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()  # never leave a node behind, even one that stopped answering
            proc.wait(10)
            raise
    out = log_path.read_text(encoding="utf-8")
    assert f"node 1 runs on {loop_class}" in out, out[-2000:]
    m = list(REPORT.finditer(out))[-1]
    assert int(m.group(1)) >= 48, out[-2000:]


def test_an_event_loop_that_is_not_installed_is_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails, as where it is not installed
    c = LocalCluster(tmp_path / "cluster", voters=1, base_port=free_base_port(1))
    c.prepare()
    result = CliRunner().invoke(main, ["node", "--config", str(c.config_path(1)), "--event-loop", "uvloop"])
    assert result.exit_code == 1
    assert "uvloop is not installed" in result.output and "--event-loop asyncio" in result.output
