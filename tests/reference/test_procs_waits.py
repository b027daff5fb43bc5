"""The waits of reference/procs.py (tenacity): they return as soon as the awaited thing is there, and give
up with their own message when the time is up or the process that should act has gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kraft_tck.reference.procs import ClusterDirError, LocalCluster, request_path, request_restart


def _state(base: Path, pid: int) -> None:
    (base / "cluster.json").write_text(json.dumps({"voters": 3, "pid": pid, "nodes": {"2": 4242}}), encoding="utf-8")


def test_a_restart_request_returns_the_new_pid_once_the_cluster_removed_it(tmp_path: Path) -> None:
    _state(tmp_path, os.getpid())  # "the cluster command" is this process: alive

    def act() -> None:  # what the running cluster command does: act, then remove the request
        path = request_path(tmp_path, 2)
        while not path.exists():
            time.sleep(0.01)
        time.sleep(0.3)
        path.unlink()

    helper = threading.Thread(target=act)
    helper.start()
    t0 = time.monotonic()
    assert request_restart(tmp_path, 2, timeout_s=10) == 4242
    helper.join()
    assert 0.25 < time.monotonic() - t0 < 5


def test_a_restart_nobody_acts_on_times_out_and_withdraws_the_request(tmp_path: Path) -> None:
    _state(tmp_path, os.getpid())
    t0 = time.monotonic()
    with pytest.raises(ClusterDirError, match=r"did not act on the restart within 1s"):
        request_restart(tmp_path, 2, timeout_s=1)
    assert 0.9 < time.monotonic() - t0 < 5
    assert not request_path(tmp_path, 2).exists()


def test_a_cluster_command_that_exits_meanwhile_ends_the_wait_early(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    _state(tmp_path, child.pid)
    reaper = threading.Thread(target=child.wait)  # reaped, so that its pid is gone rather than a zombie
    reaper.start()
    t0 = time.monotonic()
    with pytest.raises(ClusterDirError, match="did not act"):
        request_restart(tmp_path, 2, timeout_s=30)
    reaper.join()
    assert time.monotonic() - t0 < 10  # not the 30 s timeout


def test_waiting_for_a_leader_of_a_cluster_that_is_not_running_times_out_with_what_it_saw(tmp_path: Path) -> None:
    import asyncio

    cluster = LocalCluster(tmp_path, voters=3, base_port=1)  # no process started: nobody answers
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no leader with epoch >= 2 and HW >= 0 within 0.5s \(last seen: None\)"):
        asyncio.run(cluster.wait_for_leader(0.5, min_epoch=2))
    with pytest.raises(TimeoutError, match=r"node 1 did not reach offset 5 within 0\.3s"):
        asyncio.run(cluster.wait_caught_up(1, 0.3, 5))
    assert time.monotonic() - t0 < 5
