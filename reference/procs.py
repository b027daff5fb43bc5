"""A local cluster of reference node *processes* on loopback: the `cluster` command, tests and benchmarks.

Each node is a real OS process (`python -m kraft_tck.reference.cli node`) with its own data directory,
so kill -9, restart and fsync behave as they would in production. Every incarnation of a node writes
its own trace file (`node-i/trace-<k>.ndjson`), so a restart never overwrites the evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference.config import NodeConfig, render_properties
from kraft_tck.reference.quorum_client import QuorumError, QuorumInfo, describe_quorum
from kraft_tck.reference.storage import format_dir, new_uuid, read_meta_file


def ephemeral_port_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux ``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; other systems use 49152 and up


def free_base_port(n: int, host: str = "127.0.0.1") -> int:
    """A base port with ``n`` consecutive free ports on ``host`` (node i listens on base + i - 1).

    Chosen below the ephemeral range: a port found free there can be given to any client socket's
    local end (a node connecting to its peers, say) before our listener binds it, and the bind fails.
    """
    top = ephemeral_port_floor() - n
    low, high = (10000, top) if top > 11000 else (20000, 60000 - n)
    for _ in range(100):
        base = random.randint(low, high)
        socks: list[socket.socket] = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind((host, base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no range of {n} free ports on {host} between {low} and {high + n}")


@dataclass
class LocalCluster:
    base_dir: Path
    voters: int = 3
    base_port: int = 19190
    settings: dict[str, Any] = field(default_factory=dict)  # extra Kafka properties for every node
    trace: bool = False
    extra_args: list[str] = field(default_factory=list)  # e.g. ["--throughput", "1000"]
    cluster_id: str = ""
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    incarnations: dict[int, int] = field(default_factory=dict)

    def node_dir(self, node_id: int) -> Path:
        return self.base_dir / f"node-{node_id}"

    def config_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.properties"

    def data_dir(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "data"

    def port(self, node_id: int) -> int:
        return self.base_port + node_id - 1

    def trace_files(self, node_id: int) -> list[Path]:
        return sorted(self.node_dir(node_id).glob("trace-*.ndjson"), key=lambda p: int(p.stem.split("-")[1]))

    def prepare(self) -> str:
        """Write every node's server.properties and format its data dir with one cluster id."""
        quorum = ",".join(f"{i}@127.0.0.1:{self.port(i)}" for i in range(1, self.voters + 1))
        existing = read_meta_file(self.data_dir(1) / "meta.properties")
        self.cluster_id = self.cluster_id or (existing.cluster_id if existing else new_uuid())
        for i in range(1, self.voters + 1):
            self.node_dir(i).mkdir(parents=True, exist_ok=True)
            props: dict[str, Any] = {
                "process.roles": "controller",
                "node.id": i,
                "listeners": f"CONTROLLER://127.0.0.1:{self.port(i)}",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": quorum,
                "log.dirs": self.data_dir(i),
                **self.settings,
            }
            self.config_path(i).write_text(render_properties(props, header=f"kraft-tck node {i}"), encoding="utf-8")
            format_dir(self.data_dir(i), i, self.cluster_id)
        return self.cluster_id

    def node_configs(self) -> list[NodeConfig]:
        """Prepare the cluster and load every node's config, for running the nodes in this process instead
        (tests and benchmarks that need the ``Node`` objects' memory)."""
        self.prepare()
        return [NodeConfig.load(self.config_path(i)) for i in range(1, self.voters + 1)]

    def start(self, node_id: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "kraft_tck.reference.cli", "node", "--config", str(self.config_path(node_id)),
               *self.extra_args]
        if self.trace:
            k = self.incarnations.get(node_id, 0) + 1
            self.incarnations[node_id] = k
            cmd += ["--trace-file", str(self.node_dir(node_id) / f"trace-{k}.ndjson")]
        log = open(self.node_dir(node_id) / "node.log", "ab")  # noqa: SIM115 - owned by the child from here on
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs[node_id] = proc
        return proc

    def start_all(self) -> None:
        for i in range(1, self.voters + 1):
            self.start(i)

    def kill(self, node_id: int, sig: int = signal.SIGKILL, timeout_s: float = 10) -> int:
        proc = self.procs.pop(node_id)
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        for node_id in list(self.procs):
            self.kill(node_id, sig)

    def pin(self, node_id: int, cpus: set[int]) -> None:
        """Run node ``node_id``'s process on ``cpus`` only, every thread of it (Linux): a benchmark places
        the leader and the followers on CPUs of its choosing rather than the scheduler's. Threads the
        process starts later inherit the set."""
        if not hasattr(os, "sched_setaffinity"):
            raise OSError("pinning a process to CPUs needs os.sched_setaffinity (Linux)")
        pid = self.procs[node_id].pid
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(tid, cpus)

    def alive(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    async def describe(self, node_ids: list[int] | None = None, timeout_s: float = 1.0) -> QuorumInfo | None:
        """DescribeQuorum from whichever live node is leader; None while there is none."""
        for i in node_ids or self.alive():
            try:
                return await describe_quorum("127.0.0.1", self.port(i), timeout_s, follow_leader=False)
            except QuorumError:
                continue
        return None

    async def wait_for_leader(self, timeout_s: float, min_epoch: int = 0, exclude: int | None = None,
                              min_hw: int = 0) -> QuorumInfo:
        deadline = time.monotonic() + timeout_s
        last: QuorumInfo | None = None
        while time.monotonic() < deadline:
            info = await self.describe([i for i in self.alive() if i != exclude])
            if info is not None and info.leader_epoch >= min_epoch and info.high_watermark >= min_hw:
                return info
            last = info or last
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no leader with epoch >= {min_epoch} and HW >= {min_hw} within {timeout_s}s "
                           f"(last seen: {last})")

    async def wait_caught_up(self, node_id: int, timeout_s: float, min_offset: int) -> QuorumInfo:
        """Wait until the leader reports ``node_id``'s log end at or past ``min_offset`` (KIP-836 rows)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = await self.describe()
            if info is not None:
                row = next((r for r in info.voters if r.replica_id == node_id), None)
                if row is not None and row.log_end_offset >= min_offset:
                    return info
            await asyncio.sleep(0.05)
        raise TimeoutError(f"node {node_id} did not reach offset {min_offset} within {timeout_s}s")
