"""``kraft-tck cluster`` (``make cluster``): N node processes in the foreground, one cluster id, stopped
cleanly by SIGTERM or Ctrl-C; ``--event-loop`` reaches every node. Real processes, sockets and files."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.storage import read_meta_file

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def node_commands(parent: int) -> list[list[str]]:
    """The command lines of ``parent``'s child processes (Linux /proc)."""
    out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
    return [Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0") for pid in out]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_cluster_command_runs_n_voters_on_the_loop_asked_for_and_stops_cleanly(
        tmp_path: Path, stop_signal: signal.Signals) -> None:
    port = free_base_port(3)
    base = tmp_path / "c"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kraft_tck.reference.cli", "cluster", "--voters", "3", "--dir", str(base),
         "--base-port", str(port), "--event-loop", "asyncio"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        view = LocalCluster(base, voters=3, base_port=port)
        deadline = time.monotonic() + 60
        while (info := asyncio.run(view.describe([1, 2, 3]))) is None or info.high_watermark == 0:
            assert proc.poll() is None and time.monotonic() < deadline, "no leader from kraft-tck cluster"
            time.sleep(0.1)
        assert sorted(v.replica_id for v in info.voters) == [1, 2, 3]
        commands = node_commands(proc.pid)
        assert len(commands) == 3
        assert all(c[c.index("--event-loop") + 1] == "asyncio" for c in commands), commands
        ids = {read_meta_file(view.data_dir(i) / "meta.properties").cluster_id for i in (1, 2, 3)}  # type: ignore[union-attr]
        assert len(ids) == 1
        proc.send_signal(stop_signal)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, out
    assert "cluster stopped" in out and f"cluster {ids.pop()}: 3 voters" in out
    assert node_commands(proc.pid) == []


def test_the_cluster_command_refuses_an_event_loop_that_is_not_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails, as where it is not installed
    result = CliRunner().invoke(main, ["cluster", "--dir", str(tmp_path / "c"), "--event-loop", "uvloop"])
    assert result.exit_code == 1
    assert "uvloop is not installed" in result.output
    assert not (tmp_path / "c").exists(), "nothing is prepared or started for a refused command"


def test_node_and_cluster_offer_the_workload_s_event_loops() -> None:
    """cli.py spells the choices out (importing workload there would load the whole node)."""
    from kraft_tck.reference.workload import EVENT_LOOPS

    for name in ("node", "cluster"):
        option = next(p for p in main.commands[name].params if p.name == "event_loop")
        assert tuple(option.type.choices) == EVENT_LOOPS, name  # type: ignore[attr-defined]
