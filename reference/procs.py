"""A local cluster of reference node *processes* on loopback: the `cluster` command, tests and benchmarks.

Each node is a real OS process (`python -m kraft_tck.reference.cli node`) with its own data directory,
so kill -9, restart and fsync behave as they would in production. Every incarnation of a node writes
its own trace file (`node-i/trace-<k>.ndjson`), so a restart never overwrites the evidence.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference.config import NodeConfig, render_properties
from kraft_tck.reference.quorum_client import QuorumError, QuorumInfo, describe_quorum, secured
from kraft_tck.reference.security import ClientSecurity
from kraft_tck.reference.storage import format_dir, new_uuid, read_meta_file
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_result, stop_after_delay, stop_any, wait_fixed
from tenacity.stop import stop_base


@contextlib.contextmanager
def imports_from(tree: Path | None) -> Iterator[None]:
    """Node processes started inside import ``kraft_tck`` from ``tree`` first (None: this tree): a benchmark's
    baseline, e.g. a ``git worktree`` of an earlier commit, measured beside this tree in one run."""
    before = os.environ.get("PYTHONPATH")
    if tree is not None:
        os.environ["PYTHONPATH"] = str(tree) + (os.pathsep + before if before else "")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


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
    #: How ``describe`` reaches a secured quorum (TLS, SASL: ``security.client_security``); plaintext when None.
    client_security: ClientSecurity | None = None
    #: KIP-853: ``"static"`` (controller.quorum.voters, kraft.version 0, every node a voter) or ``"dynamic"``:
    #: node 1 formatted ``kraft-tck format --standalone`` (the only voter), the others ``--no-initial-controllers``
    #: (observers until ``add_controller``); every node gets ``controller.quorum.bootstrap.servers`` instead of
    #: controller.quorum.voters (see ``bootstrap_servers``).
    quorum: str = "static"
    #: Nodes restarted on another port than ``base_port + id - 1`` (node id -> port): ``port`` answers it.
    moved_ports: dict[int, int] = field(default_factory=dict)

    def node_dir(self, node_id: int) -> Path:
        return self.base_dir / f"node-{node_id}"

    def config_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.properties"

    def data_dir(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "data"

    def port(self, node_id: int) -> int:
        return self.moved_ports.get(node_id, self.base_port + node_id - 1)

    def trace_files(self, node_id: int) -> list[Path]:
        return sorted(self.node_dir(node_id).glob("trace-*.ndjson"), key=lambda p: int(p.stem.split("-")[1]))

    def bootstrap_servers(self, node_id: int) -> list[int]:
        """The nodes in ``node_id``'s controller.quorum.bootstrap.servers (dynamic quorum): node 1 for a joining
        node, every node for node 1, which then finds the leader again after it is removed from the voters (an
        observer fetches from the bootstrap servers, Kafka's KafkaRaftClient.maybeSendAnyVoterFetch)."""
        return list(range(1, self.voters + 1)) if node_id == 1 else [1]

    def prepare(self) -> str:
        """Write every node's server.properties and format its data dir with one cluster id."""
        if self.quorum not in ("static", "dynamic"):
            raise ValueError(f"quorum must be 'static' or 'dynamic', not {self.quorum!r}")
        quorum = ",".join(f"{i}@127.0.0.1:{self.port(i)}" for i in range(1, self.voters + 1))
        existing = read_meta_file(self.data_dir(1) / "meta.properties")
        self.cluster_id = self.cluster_id or (existing.cluster_id if existing else new_uuid())
        for i in range(1, self.voters + 1):
            self.node_dir(i).mkdir(parents=True, exist_ok=True)
            voters: dict[str, Any] = {"controller.quorum.voters": quorum} if self.quorum == "static" else {
                "controller.quorum.bootstrap.servers": ",".join(
                    f"127.0.0.1:{self.port(j)}" for j in self.bootstrap_servers(i))}
            props: dict[str, Any] = {
                "process.roles": "controller",
                "node.id": i,
                "listeners": f"CONTROLLER://127.0.0.1:{self.port(i)}",
                "controller.listener.names": "CONTROLLER",
                **voters,
                "log.dirs": self.data_dir(i),
                **self.settings,
            }
            self.config_path(i).write_text(render_properties(props, header=f"kraft-tck node {i}"), encoding="utf-8")
            if self.quorum == "static":
                format_dir(self.data_dir(i), i, self.cluster_id)
            elif read_meta_file(self.data_dir(i) / "meta.properties") is None:
                self.format_node(i, "--standalone" if i == 1 else "--no-initial-controllers")
        return self.cluster_id

    def kraft_tck(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the ``kraft-tck`` command line (this interpreter's) with ``args``; its output, whatever its status."""
        return subprocess.run([sys.executable, "-m", "kraft_tck.reference.cli", *args], capture_output=True,
                              text=True, timeout=timeout_s, check=False)

    def format_node(self, node_id: int, *mode: str) -> None:
        """``kraft-tck format`` of node ``node_id``'s data dir with the cluster id and ``mode`` (KIP-853's
        ``--standalone``, ``--initial-controllers ...``, ``--no-initial-controllers``)."""
        done = self.kraft_tck("format", "-c", str(self.config_path(node_id)), "-t", self.cluster_id, *mode)
        if done.returncode != 0:
            raise RuntimeError(f"kraft-tck format {' '.join(mode)} of node {node_id} failed "
                               f"({done.returncode}): {done.stdout}{done.stderr}")

    def directory_id(self, node_id: int) -> str | None:
        """The directory id in node ``node_id``'s meta.properties (its ReplicaKey's, KIP-853)."""
        meta = read_meta_file(self.data_dir(node_id) / "meta.properties")
        return meta.directory_id if meta is not None else None

    def quorum_command(self, *args: str, command_config: Path | None = None,
                       timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """``kraft-tck quorum --bootstrap-controller <every live node> [--command-config F] args``:
        kafka-metadata-quorum's commands."""
        where = ",".join(f"127.0.0.1:{self.port(i)}" for i in (self.alive() or range(1, self.voters + 1)))
        config = ["--command-config", str(command_config)] if command_config is not None else []
        return self.kraft_tck("quorum", "--bootstrap-controller", where, *config, *args, timeout_s=timeout_s)

    def add_controller(self, node_id: int) -> subprocess.CompletedProcess[str]:
        """``kraft-tck quorum --command-config <node_id's server.properties> add-controller`` (KIP-853 AddRaftVoter)."""
        return self.quorum_command("add-controller", command_config=self.config_path(node_id))

    def remove_controller(self, node_id: int) -> subprocess.CompletedProcess[str]:
        """``kraft-tck quorum remove-controller`` of node ``node_id``, by its directory id (KIP-853 RemoveRaftVoter)."""
        return self.quorum_command("remove-controller", "--controller-id", str(node_id),
                                   "--controller-directory-id", str(self.directory_id(node_id)))

    def node_configs(self) -> list[NodeConfig]:
        """Prepare the cluster and load every node's config, for running the nodes in this process instead
        (tests and benchmarks that need the ``Node`` objects' memory)."""
        self.prepare()
        return [NodeConfig.load(self.config_path(i)) for i in range(1, self.voters + 1)]

    def start(self, node_id: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "kraft_tck.reference.cli", "node", "--config", str(self.config_path(node_id)),
               *self.extra_args]
        if self.trace:
            # After the traces already there (a cluster started again from its directory): none is overwritten.
            on_disk = [int(p.stem.split("-")[1]) for p in self.trace_files(node_id)]
            k = max(self.incarnations.get(node_id, 0), *on_disk, 0) + 1
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
        with secured(self.client_security):
            for i in node_ids or self.alive():
                try:
                    return await describe_quorum("127.0.0.1", self.port(i), timeout_s, follow_leader=False)
                except QuorumError:
                    continue
        return None

    async def wait_for_leader(self, timeout_s: float, min_epoch: int = 0, exclude: int | None = None,
                              min_hw: int = 0) -> QuorumInfo:
        last: QuorumInfo | None = None

        async def leader() -> QuorumInfo | None:
            nonlocal last
            info = await self.describe([i for i in self.alive() if i != exclude])
            last = info or last
            return info if info is not None and info.leader_epoch >= min_epoch and info.high_watermark >= min_hw \
                else None

        found: QuorumInfo | None = await AsyncRetrying(**_until_found(timeout_s))(leader)
        if found is None:
            raise TimeoutError(f"no leader with epoch >= {min_epoch} and HW >= {min_hw} within {timeout_s}s "
                               f"(last seen: {last})")
        return found

    async def wait_caught_up(self, node_id: int, timeout_s: float, min_offset: int) -> QuorumInfo:
        """Wait until the leader reports ``node_id``'s log end at or past ``min_offset`` (KIP-836 rows)."""

        async def caught_up() -> QuorumInfo | None:
            info = await self.describe()
            row = next((r for r in info.voters if r.replica_id == node_id), None) if info is not None else None
            return info if row is not None and row.log_end_offset >= min_offset else None

        found: QuorumInfo | None = await AsyncRetrying(**_until_found(timeout_s))(caught_up)
        if found is None:
            raise TimeoutError(f"node {node_id} did not reach offset {min_offset} within {timeout_s}s")
        return found


#: How often the waits above ask again.
POLL_S = 0.05


def _until_found(timeout_s: float) -> dict[str, Any]:
    """tenacity settings for "ask every POLL_S until the answer is not None, or ``timeout_s`` has passed"
    (then the call returns None)."""
    return {"stop": stop_after_delay(timeout_s), "wait": wait_fixed(POLL_S),
            "retry": retry_if_result(lambda found: found is None), "retry_error_callback": lambda _state: None}


# ============================================================================================ a supervised cluster
#
# ``kraft-tck cluster`` runs in the foreground and keeps the cluster running when a node dies; it writes
# its settings and pids to ``<dir>/cluster.json`` (so a stopped cluster can be started again from its
# directory) and takes requests from other commands as files in ``<dir>/control/`` (``restart-<id>``),
# which ``kraft-tck cluster restart`` writes and the running command removes once it has acted.

STATE_FILE = "cluster.json"
CONTROL_DIR = "control"


class ClusterDirError(Exception):
    """The cluster directory cannot be used as asked; the message says what to do."""


def port_in_use(host: str, port: int) -> bool:
    """Whether ``host:port`` cannot be bound now (something listens there, or holds it). SO_REUSEADDR as
    the node's listener has it: connections of a stopped node in TIME_WAIT do not make the port busy."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def node_process_alive(pid: int, base_dir: Path) -> bool:
    """Whether ``pid`` is a node process of the cluster in ``base_dir`` (its command line names a config
    there; where /proc is missing, whether the pid is alive)."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True
    return str(base_dir) in cmdline and " node " in cmdline.replace("\0", " ")


def read_state(base_dir: Path) -> dict[str, Any] | None:
    """The ``cluster.json`` of a cluster directory, None when there is none."""
    path = base_dir / STATE_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None  # no cluster there yet (preparing the directory says what is wrong with it, if anything)
    except (OSError, ValueError) as exc:
        raise ClusterDirError(f"{path} cannot be read ({exc}): remove it to start the cluster afresh") from exc
    if not isinstance(doc, dict):
        raise ClusterDirError(f"{path} is not a cluster state file: remove it to start the cluster afresh")
    return doc


class _pid_gone(stop_base):
    """A tenacity stop condition: process ``pid`` has exited."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, retry_state: RetryCallState) -> bool:
        return not pid_alive(self.pid)


def request_path(base_dir: Path, node_id: int) -> Path:
    return base_dir / CONTROL_DIR / f"restart-{node_id}"


def request_restart(base_dir: Path, node_id: int, timeout_s: float = 20.0) -> int:
    """Ask the ``kraft-tck cluster`` running in ``base_dir`` to (re)start node ``node_id``; wait until it
    has, and return the node's new pid."""
    state = read_state(base_dir)
    if state is None:
        raise ClusterDirError(f"{base_dir} holds no cluster: start one with kraft-tck cluster --dir {base_dir}")
    voters = int(state.get("voters", 0))
    if not 1 <= node_id <= voters:
        raise ClusterDirError(f"the cluster in {base_dir} has nodes 1..{voters}: there is no node {node_id}")
    pid = int(state.get("pid", 0))
    if not pid or not pid_alive(pid):
        raise ClusterDirError(f"no kraft-tck cluster is running in {base_dir}: start it again with "
                              f"kraft-tck cluster --dir {base_dir}")
    path = request_path(base_dir, node_id)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_text(str(os.getpid()), encoding="utf-8")
    tmp.rename(path)
    # The running command removes the request once it has acted; it stopping is as good as a timeout.
    acted = Retrying(stop=stop_any(stop_after_delay(timeout_s), _pid_gone(pid)), wait=wait_fixed(POLL_S),
                     retry=retry_if_result(lambda done: not done), retry_error_callback=lambda _state: False)(
        lambda: not path.exists())
    if not acted:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise ClusterDirError(f"the kraft-tck cluster running in {base_dir} (pid {pid}) did not act on the "
                              f"restart within {timeout_s:.0f}s")
    new = read_state(base_dir) or {}
    return int((new.get("nodes") or {}).get(str(node_id), 0))


@dataclass
class Supervisor:
    """Keeps a ``LocalCluster`` running: notices nodes that exit (once each) and acts on restart requests."""

    cluster: LocalCluster
    reported: set[int] = field(default_factory=set)

    def save(self, running: bool = True) -> None:
        """Write ``cluster.json``: the settings, and (while ``running``) this process's pid and the nodes'."""
        c = self.cluster
        state = {
            "voters": c.voters, "base_port": c.base_port, "trace": c.trace, "extra_args": c.extra_args,
            "cluster_id": c.cluster_id, "pid": os.getpid() if running else 0,
            "nodes": {str(i): p.pid for i, p in sorted(c.procs.items()) if p.poll() is None},
        }
        path = c.base_dir / STATE_FILE
        tmp = path.with_suffix(".part")
        tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        tmp.rename(path)

    def clear_requests(self) -> None:
        """Requests left by an earlier run are not for this one."""
        for path in (self.cluster.base_dir / CONTROL_DIR).glob("restart-*"):
            path.unlink(missing_ok=True)

    def exited(self) -> list[tuple[int, int]]:
        """(node id, exit code) of each node that has exited since the last call."""
        out = []
        for i, proc in sorted(self.cluster.procs.items()):
            code = proc.poll()
            if code is not None and i not in self.reported:
                self.reported.add(i)
                out.append((i, code))
        if out:
            self.save()
        return out

    def restart_requests(self) -> list[int]:
        """Act on every restart request: the node is stopped (SIGTERM) if it runs, then started again."""
        done = []
        for path in sorted((self.cluster.base_dir / CONTROL_DIR).glob("restart-*")):
            if path.suffix == ".part":
                continue
            try:
                node_id = int(path.name.split("-", 1)[1])
            except ValueError:
                path.unlink(missing_ok=True)
                continue
            if 1 <= node_id <= self.cluster.voters:
                if node_id in self.cluster.procs:
                    self.cluster.kill(node_id, signal.SIGTERM)
                self.cluster.start(node_id)
                self.reported.discard(node_id)
                done.append(node_id)
                self.save()
            path.unlink(missing_ok=True)
        return done
