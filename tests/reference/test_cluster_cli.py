"""``kraft-tck cluster`` keeps a cluster running when a node dies: it says so in one line (naming the
node's real log), the others elect a new leader, and ``kraft-tck cluster restart --node N --dir DIR``
brings the node back; a stopped cluster starts again from its directory. Real processes, sockets, files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main
from kraft_tck.reference.procs import LocalCluster, free_base_port

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

CLI = [sys.executable, "-m", "kraft_tck.reference.cli"]


def start_cluster(base: Path, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    out, err = base.with_suffix(".out"), base.with_suffix(".err")
    proc = subprocess.Popen([*CLI, "cluster", "--dir", str(base), *args], stdout=out.open("w"), stderr=err.open("w"),
                            text=True)
    return proc, out, err


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def test_killing_the_leader_leaves_a_working_cluster_and_restart_brings_the_node_back(tmp_path: Path) -> None:
    port = free_base_port(3)
    base = tmp_path / "c"
    proc, out, err = start_cluster(base, "--voters", "3", "--base-port", str(port), "--event-loop", "asyncio")
    view = LocalCluster(base, voters=3, base_port=port)
    try:
        wait_for(lambda: (i := asyncio.run(view.describe([1, 2, 3]))) is not None and i.high_watermark > 0, 60,
                 "a leader")
        info = asyncio.run(view.describe([1, 2, 3]))
        assert info is not None
        leader = info.leader_id
        state = json.loads((base / "cluster.json").read_text())
        os.kill(state["nodes"][str(leader)], signal.SIGKILL)

        survivors = [i for i in (1, 2, 3) if i != leader]
        wait_for(lambda: (i := asyncio.run(view.describe(survivors))) is not None
                 and i.leader_epoch > info.leader_epoch, 60, "a new leader among the survivors")
        wait_for(lambda: "exited" in err.read_text(), 10, "the line about the dead node")
        assert proc.poll() is None, "the cluster command must keep running"
        lines = err.read_text().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"node {leader} exited (killed by SIGKILL)")
        assert str(base / f"node-{leader}" / "node.log") in lines[0]
        assert f"kraft-tck cluster restart --node {leader} --dir {base}" in lines[0]

        restarted = subprocess.run([*CLI, "cluster", "restart", "--node", str(leader), "--dir", str(base)],
                                   capture_output=True, text=True, timeout=60)
        assert restarted.returncode == 0, restarted.stderr
        new_pid = json.loads((base / "cluster.json").read_text())["nodes"][str(leader)]
        assert restarted.stdout == f"node {leader} restarted (pid {new_pid})\n"
        # It rejoins: the leader sees it fetch again, caught up to the log end.
        now = asyncio.run(view.describe(survivors))
        assert now is not None
        leader_clock = next(r for r in now.voters if r.replica_id == now.leader_id).last_caught_up_timestamp

        def rejoined() -> bool:
            info = asyncio.run(view.describe(survivors))
            row = next((r for r in info.voters if r.replica_id == leader), None) if info else None
            return row is not None and row.log_end_offset >= now.high_watermark and \
                row.last_fetch_timestamp > leader_clock

        wait_for(rejoined, 60, f"node {leader} fetching again, caught up")
        wait_for(lambda: f"node {leader} restarted" in out.read_text(), 10, "the restart in the command's output")
        assert proc.poll() is None
    finally:
        code = stop(proc)
    assert code == 0, err.read_text()
    assert out.read_text().rstrip().endswith("cluster stopped")
    assert not any(p.poll() is None for p in view.procs.values())
    assert json.loads((base / "cluster.json").read_text())["nodes"] == {}

    # A stopped cluster starts again from its directory alone, same cluster and ports.
    cid = json.loads((base / "cluster.json").read_text())["cluster_id"]
    again, out2, err2 = start_cluster(base)
    try:
        wait_for(lambda: f"cluster {cid}: 3 voters on 127.0.0.1:{port}" in out2.read_text(), 30, "the second start")
        assert "(started again)" in out2.read_text()
        wait_for(lambda: asyncio.run(view.describe([1, 2, 3])) is not None, 60, "a leader after the second start")
    finally:
        assert stop(again) == 0, err2.read_text()


def test_restart_of_a_cluster_that_is_not_running_says_how_to_start_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["cluster", "restart", "--node", "1", "--dir", str(tmp_path / "none")])
    assert result.exit_code == 1 and "holds no cluster" in result.stderr and "kraft-tck cluster --dir" in result.stderr
    (tmp_path / "dead").mkdir()
    (tmp_path / "dead" / "cluster.json").write_text(json.dumps({"voters": 3, "base_port": 20000,
                                                                "pid": 2**22 + 12345, "nodes": {}}))
    result = CliRunner().invoke(main, ["cluster", "restart", "--node", "2", "--dir", str(tmp_path / "dead")])
    assert result.exit_code == 1 and "no kraft-tck cluster is running in" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_busy_port_or_an_unusable_dir_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    port = free_base_port(2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port + 1))
        s.listen()
        result = CliRunner().invoke(main, ["cluster", "--voters", "2", "--base-port", str(port),
                                           "--dir", str(tmp_path / "c")])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert f"port {port + 1} (node 2) on 127.0.0.1 is in use" in result.stderr
    assert not (tmp_path / "c").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["cluster", "--voters", "1", "--base-port", str(port),
                                       "--dir", str(blocker / "c")])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output and "choose a --dir you can write" in result.stderr


def test_nodes_left_by_a_killed_cluster_command_are_named_before_a_new_start(tmp_path: Path) -> None:
    port = free_base_port(1)
    base = tmp_path / "c"
    proc, _, _ = start_cluster(base, "--voters", "1", "--base-port", str(port))
    try:
        wait_for(lambda: (base / "cluster.json").exists() and json.loads((base / "cluster.json").read_text())["nodes"],
                 30, "the node to start")
        node_pid = json.loads((base / "cluster.json").read_text())["nodes"]["1"]
        proc.kill()  # the supervisor dies without stopping its node
        proc.wait(10)
        result = CliRunner().invoke(main, ["cluster", "--dir", str(base)])
        assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
        assert f"still run (pids {node_pid})" in result.stderr and f"kill {node_pid}" in result.stderr
    finally:
        for pid in json.loads((base / "cluster.json").read_text())["nodes"].values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_restart_of_a_running_node_stops_it_first_and_starts_a_new_process(tmp_path: Path) -> None:
    port = free_base_port(1)
    base = tmp_path / "c"
    proc, out, err = start_cluster(base, "--voters", "1", "--base-port", str(port), "--event-loop", "asyncio")
    view = LocalCluster(base, voters=1, base_port=port)
    try:
        wait_for(lambda: asyncio.run(view.describe([1])) is not None, 60, "the node to lead")
        old = json.loads((base / "cluster.json").read_text())["nodes"]["1"]
        done = subprocess.run([*CLI, "cluster", "restart", "--node", "1", "--dir", str(base)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        new = json.loads((base / "cluster.json").read_text())["nodes"]["1"]
        assert new != old and done.stdout == f"node 1 restarted (pid {new})\n"
        assert not Path(f"/proc/{old}").exists() or "zombie" in Path(f"/proc/{old}/status").read_text()
        wait_for(lambda: asyncio.run(view.describe([1])) is not None, 60, "the restarted node to lead")
        assert proc.poll() is None and "exited" not in err.read_text(), "a restart is not a death"
    finally:
        assert stop(proc) == 0, err.read_text()
    assert "node 1 restarted" in out.read_text()
