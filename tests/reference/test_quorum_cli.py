"""``kraft-tck quorum describe`` prints what ``kafka-metadata-quorum describe`` of Kafka 3.9/4.0 prints
(``MetadataQuorumCommand``): the same lines, the same table, the same option checks and their words.

The renderer is checked on the worked example of KIP-595/KIP-836 (leader LEO 234134; followers 234130
and 234100; observers 234124 and 234130: lags 0/4/34/10/4, MaxFollowerLag 34), the option checks with
click's runner, and the whole command against a live 3-node cluster with a follower stopped by SIGSTOP.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.quorum_client import (
    QuorumError,
    QuorumInfo,
    ReplicaRow,
    kafka_uuid,
    max_follower_lag,
    render_replication,
    render_status,
)

T = 1_700_000_000_000  # the leader's clock when it answered


def seed_example(leader_first: bool = True) -> QuorumInfo:
    """The KIP-595 "Tooling" example, with KIP-836 timestamps: each replica last caught up LagTimeMs ago."""
    leader = ReplicaRow(0, 234134, T, T, "Leader")
    followers = (ReplicaRow(1, 234130, T - 10, T - 10, "Follower"), ReplicaRow(2, 234100, T - 15, T - 15, "Follower"))
    voters = (leader, *followers) if leader_first else (*followers, leader)
    observers = (ReplicaRow(3, 234124, T - 12, T - 12, "Observer"), ReplicaRow(4, 234130, T - 15, T - 15, "Observer"))
    return QuorumInfo(leader_id=0, leader_epoch=15, high_watermark=234130, voters=voters, observers=observers,
                      version=2, cluster_id="SomeClusterId")


def table(text: str) -> list[list[str]]:
    """The cells of a prettyPrintTable output (each cell padded, then a tab)."""
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in text.splitlines()]


@pytest.mark.parametrize("leader_first", [True, False], ids=["leader-listed-first", "leader-listed-last"])
def test_the_seed_example_prints_the_seed_s_lags(leader_first: bool) -> None:
    info = seed_example(leader_first)
    rows = table(render_replication(info))
    assert rows[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status"]
    # Leader first, then the other voters, then the observers (MetadataQuorumCommand.handleDescribeReplication).
    assert [(r[0], r[3], r[6]) for r in rows[1:]] == [
        ("0", "0", "Leader"), ("1", "4", "Follower"), ("2", "34", "Follower"), ("3", "10", "Observer"),
        ("4", "4", "Observer")]
    status = render_status(info).splitlines()
    assert status[:6] == [
        "ClusterId:              SomeClusterId",
        "LeaderId:               0",
        "LeaderEpoch:            15",
        "HighWatermark:          234130",
        "MaxFollowerLag:         34",
        "MaxFollowerLagTimeMs:   15",
    ]
    assert len(status) == 8, "no trailer after CurrentObservers"


def test_the_table_is_kafka_s_pretty_print_table() -> None:
    """Every cell padded to its column's width and followed by a tab; no line after the last row."""
    out = render_replication(seed_example())
    lines = out.split("\n")
    assert len(lines) == 6 and all(line.endswith("\t") for line in lines)
    assert lines[1] == ("0     \tAAAAAAAAAAAAAAAAAAAAAA\t234134      \t0  \t1700000000000     \t"
                        "1700000000000        \tLeader  \t")


def test_voters_and_observers_print_as_kafka_3_9_prints_them() -> None:
    directory = uuid.UUID("c19a173e-a5a8-4aee-85e9-cf0c92677202")
    info = QuorumInfo(
        leader_id=1, leader_epoch=3, high_watermark=10,
        voters=(ReplicaRow(1, 10, T, T, "Leader", directory), ReplicaRow(2, 10, T, T, "Follower")),
        observers=(ReplicaRow(7, 9, T, T, "Observer"),), version=2,
        nodes={1: (("CONTROLLER", "127.0.0.1", 9093),), 2: (("CONTROLLER", "::1", 9094),)})
    status = render_status(info).splitlines()
    assert kafka_uuid(directory) == "wZoXPqWoSu6F6c8MkmdyAg"  # MetadataQuorumCommandUnitTest's id, the same UUID
    assert status[0] == "ClusterId:              null"  # not known: what Java prints for a null String
    assert status[6] == ('CurrentVoters:          [{"id": 1, "directoryId": "wZoXPqWoSu6F6c8MkmdyAg", "endpoints": '
                         '["CONTROLLER://127.0.0.1:9093"]}, {"id": 2, "directoryId": null, "endpoints": '
                         '["CONTROLLER://[::1]:9094"]}]')
    assert status[7] == 'CurrentObservers:       [{"id": 7, "directoryId": null}]'
    assert table(render_replication(info))[1][1] == "wZoXPqWoSu6F6c8MkmdyAg"


def rows(*voters: tuple[int, int, int]) -> QuorumInfo:
    """Voters as (id, log end offset, last caught up); node 1 leads."""
    return QuorumInfo(1, 1, 0, tuple(ReplicaRow(i, leo, lcu, lcu, "Leader" if i == 1 else "Follower")
                                     for i, leo, lcu in voters), (), 1)


def test_max_follower_lag_is_computed_as_kafka_computes_it() -> None:
    # An idle, caught-up cluster: the first voter of the answer stands for "the most lagging" one.
    assert max_follower_lag(rows((1, 5, T), (2, 5, T - 300), (3, 5, T - 200))) == (0, 0)  # it is the leader
    assert max_follower_lag(rows((2, 5, T - 300), (1, 5, T), (3, 5, T - 200))) == (0, 300)  # a follower
    assert max_follower_lag(rows((1, 9, T), (2, 5, T - 300), (3, 2, T - 800))) == (7, 800)
    assert max_follower_lag(rows((1, 9, T), (2, 5, -1))) == (4, -1)  # a timestamp not known
    assert max_follower_lag(rows((1, 9, T))) == (0, 0)  # a single voter


def test_human_readable_timestamps_are_relative_and_refuse_a_clock_drift() -> None:
    cells = table(render_replication(seed_example(), human_readable=True, now_ms=T + 5))
    assert [r[4] for r in cells[1:]] == ["5 ms ago", "15 ms ago", "20 ms ago", "17 ms ago", "20 ms ago"]
    with pytest.raises(QuorumError, match="possible drift in system clock"):
        render_replication(seed_example(), human_readable=True, now_ms=T - 1)


# ---------------------------------------------------------------------------------------------- options


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["describe"], "One of --status or --replication must be specified with describe sub-command"),
    (["describe", "--human-readable"], "One of --status or --replication must be specified with describe sub-command"),
    (["describe", "--status", "--replication"],
     "Only one of --status or --replication should be specified with describe sub-command"),
    (["describe", "--status", "--human-readable"],
     "The option --human-readable is only supported along with --replication"),
])
def test_describe_takes_exactly_one_of_status_and_replication(args: list[str], message: str) -> None:
    """MetadataQuorumCommandErrorTest.testDescribeOptions: exit 1 and the one line, before any connection
    (nothing listens on port 1)."""
    code, out, err = run("quorum", "--bootstrap-server", "127.0.0.1:1", *args)
    assert (code, out, err) == (1, "", message + "\n")


def test_one_bootstrap_option_is_required_and_the_two_exclude_each_other() -> None:
    assert run("quorum", "describe", "--status") == (
        1, "", "one of the arguments --bootstrap-server --bootstrap-controller is required\n")
    assert run("quorum", "--bootstrap-server", "a:1", "--bootstrap-controller", "b:2", "describe", "--status") == (
        1, "", "argument --bootstrap-controller: not allowed with argument --bootstrap-server\n")


def test_long_options_may_be_abbreviated_as_argparse_allows() -> None:
    """``describe --st --re`` is --status --replication (argparse4j prefix matching), so Kafka's error."""
    assert run("quorum", "--bootstrap-server", "127.0.0.1:1", "describe", "--st", "--re") == (
        1, "", "Only one of --status or --replication should be specified with describe sub-command\n")
    assert run("quorum", "--bootstrap-server", "127.0.0.1:1", "describe", "--st", "--hu") == (
        1, "", "The option --human-readable is only supported along with --replication\n")


def test_describe_help_needs_no_bootstrap_option() -> None:
    code, out, _ = run("quorum", "describe", "--help")
    assert code == 0 and "--replication" in out and "--human-readable" in out


def test_command_config_missing_or_unusable_is_refused_in_one_line(tmp_path: Path) -> None:
    code, _, err = run("quorum", "--bootstrap-server", "127.0.0.1:1", "--command-config", "admin.properties",
                         "describe")
    assert (code, err) == (1, "Properties file admin.properties does not exists!\n")  # Kafka's words
    # Security settings are honoured (tests/reference/test_security.py runs them against a secured quorum);
    # one that cannot be is refused in one line naming the key.
    ssl = tmp_path / "ssl.properties"
    ssl.write_text("security.protocol=SSL\nssl.truststore.location=/x\n")
    code, _, err = run("quorum", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(ssl),
                       "describe", "--status")
    assert code == 1 and len(err.splitlines()) == 1
    assert "ssl.truststore.location" in err and "/x: no such file" in err
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    code, _, err = run("quorum", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(gssapi),
                       "describe", "--status")
    assert code == 1 and len(err.splitlines()) == 1 and "sasl.mechanism=GSSAPI is not supported" in err


def test_an_unreachable_bootstrap_controller_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        code, out, err = run("quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe", "--status")
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert f"nothing listens on 127.0.0.1:{port}" in err
    code, _, err = run("quorum", "--bootstrap-controller", "no-such-host.invalid:9093", "describe", "--replication")
    assert code == 1 and len(err.splitlines()) == 1 and "cannot resolve host 'no-such-host.invalid'" in err


def test_a_timeout_in_command_config_is_used(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("request.timeout.ms=1234\nclient.id=me\n")
    from kraft_tck.reference.cli import _QuorumOptions

    endpoints, timeout_s = _QuorumOptions("h:1", None, str(props), 5000).connection()
    assert endpoints == [("h", 1)] and timeout_s == 1.234


# ---------------------------------------------------------------------------------------------- live


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraft_tck.reference.cli", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_a_live_cluster_with_a_stopped_follower_shows_its_lag(tmp_path: Path) -> None:
    port = free_base_port(3)
    cluster = LocalCluster(tmp_path / "c", voters=3, base_port=port, extra_args=["--throughput", "200"],
                           settings={"controller.quorum.election.timeout.ms": 1000,
                                     "controller.quorum.fetch.timeout.ms": 2000})
    cluster.prepare()
    cluster.start_all()
    try:
        info = asyncio.run(cluster.wait_for_leader(60, min_hw=10))
        laggard = next(r.replica_id for r in info.voters if r.replica_id != info.leader_id)
        other = next(r.replica_id for r in info.voters if r.replica_id not in (info.leader_id, laggard))
        os.kill(cluster.procs[laggard].pid, signal.SIGSTOP)
        try:
            time.sleep(2.0)
            bootstrap = f"127.0.0.1:{cluster.port(other)}"  # a follower: the tool finds the leader itself
            repl = cli("quorum", "--bootstrap-controller", bootstrap, "describe", "--replication")
            status = cli("quorum", "--bootstrap-controller", bootstrap, "describe", "--status")
            brokers = cli("quorum", "--bootstrap-controller", bootstrap, "describe", "--brokers")
        finally:
            os.kill(cluster.procs[laggard].pid, signal.SIGCONT)
    finally:
        cluster.stop_all()
    assert repl.returncode == 0, repl.stderr
    cells = table(repl.stdout)
    assert cells[1][6] == "Leader" and cells[1][3] == "0"
    leader_leo = int(cells[1][2])
    by_id = {int(r[0]): r for r in cells[1:]}
    for r in cells[1:]:
        assert int(r[3]) == leader_leo - int(r[2]), r  # KIP-836: leader LEO - replica LEO
    assert int(by_id[laggard][3]) > 100, repl.stdout  # 2 s of a 200 records/s workload went past it
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert len(lines) == 8 and [line.split(":")[0] for line in lines] == [
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers"]
    assert int(lines[1].split()[1]) == info.leader_id
    cid = cluster.cluster_id
    # Kafka's tool reads the id with DescribeCluster (KIP-919), which the reference node answers.
    assert lines[0] == f"ClusterId:              {cid}", status
    assert int(lines[4].split()[1]) > 100
    assert int(lines[5].split()[1]) >= 1500, status.stdout  # it last caught up before the 2 s pause
    assert re.fullmatch(r'CurrentVoters:\s+\[\{"id": \d+, "directoryId": \S+, "endpoints": \["\S+://\S+:\d+"\]\}.*\]',
                        lines[6]), lines[6]  # MetadataQuorumCommandTest's pattern
    assert brokers.returncode == 0, brokers.stderr  # --brokers follows the leader from a follower too
    assert brokers.stdout.startswith("BrokerId")


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_without_a_leader_the_tool_retries_until_its_timeout_then_says_so(tmp_path: Path) -> None:
    """KIP-595 "DescribeQuorum Response Handling" 2: no leader known, back off and retry (here: one voter
    of three runs, so there is never one)."""
    cluster = LocalCluster(tmp_path / "c", voters=3, base_port=free_base_port(3))
    cluster.prepare()
    cluster.start(1)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the node listens
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", cluster.port(1))) == 0:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        began = time.monotonic()
        done = cli("quorum", "--timeout-ms", "1500", "--bootstrap-controller", f"127.0.0.1:{cluster.port(1)}",
                   "describe", "--status")
        took = time.monotonic() - began
    finally:
        cluster.stop_all()
    assert done.returncode == 1 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert "knows no leader" in done.stderr and took >= 1.5


def test_a_port_that_is_not_a_kafka_listener_is_one_line() -> None:
    """Something else listens there (an HTTP server): one line naming the port, no log noise."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        done = cli("quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe", "--status")
    finally:
        server.close()
    assert done.returncode == 1 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"127.0.0.1:{port} does not answer as a Kafka node" in done.stderr


# ---------------------------------------------------------------------------------------------- KIP-853


def controller_config(tmp_path: Path, node_id: int = 5) -> tuple[Path, str]:
    """A formatted controller's properties, and the directory id format gave it."""
    cfg = tmp_path / "controller.properties"
    cfg.write_text(f"process.roles=controller\nnode.id={node_id}\nlisteners=CONTROLLER://localhost:9093\n"
                   f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters={node_id}@localhost:9093\n"
                   f"log.dirs={tmp_path / 'data'}\n")
    assert run("format", "-c", str(cfg), "--random-cluster-id")[0] == 0
    meta = (tmp_path / "data" / "meta.properties").read_text()
    return cfg, re.search(r"directory.id=(\S+)", meta).group(1)  # type: ignore[union-attr]


def test_add_and_remove_controller_dry_runs_print_what_kafka_prints(tmp_path: Path) -> None:
    cfg, directory = controller_config(tmp_path)
    assert run("quorum", "--bootstrap-controller", "127.0.0.1:1", "--command-config", str(cfg), "add-controller",
               "--dry-run") == (0, f"DRY RUN of adding controller 5 with directory id {directory} and endpoints: "
                                   "CONTROLLER://localhost:9093\n", "")
    assert run("quorum", "--bootstrap-server", "127.0.0.1:1", "remove-controller", "-i", "2", "-d",
               "_KWDkTahTVaiVVVTaugNew", "--dry-run") == (
        0, "DRY RUN of removing  KRaft controller 2 with directory id _KWDkTahTVaiVVVTaugNew\n", "")


@pytest.mark.parametrize(("args", "message"), [
    (["add-controller", "--dry-run"],
     "You must supply the configuration file of the controller you are adding when using add-controller."),
    (["remove-controller", "-i", "-1", "-d", "_KWDkTahTVaiVVVTaugNew"], "Invalid negative --controller-id: -1"),
])
def test_voter_changes_refuse_what_kafka_refuses(args: list[str], message: str) -> None:
    assert run("quorum", "--bootstrap-server", "127.0.0.1:1", *args) == (1, "", message + "\n")


def test_add_controller_reads_the_controller_config_as_kafka_does(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text("process.roles=broker\nnode.id=4\n")
    assert run("quorum", "--bootstrap-server", "h:1", "--command-config", str(cfg), "add-controller")[2] == (
        "process.roles did not contain 'controller' in configuration file. Is this a valid controller "
        "configuration file?\n")
    cfg.write_text(f"process.roles=controller\nnode.id=4\nlog.dirs={tmp_path / 'empty'}\n")
    assert run("quorum", "--bootstrap-server", "h:1", "--command-config", str(cfg), "add-controller")[2] == (
        f"Unable to read meta.properties from {tmp_path / 'empty'}\n")


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_voter_change_on_a_static_quorum_is_refused_in_one_line(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", voters=1, base_port=free_base_port(1))
    cluster.prepare()
    cluster.start_all()
    try:
        asyncio.run(cluster.wait_for_leader(60))
        done = cli("quorum", "--bootstrap-controller", f"127.0.0.1:{cluster.port(1)}", "remove-controller",
                   "-i", "1", "-d", "_KWDkTahTVaiVVVTaugNew")
    finally:
        cluster.stop_all()
    assert done.returncode == 1 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    # A node that does not serve api key 81 is named as a static quorum; one that serves it answers a kraft.version 0
    # quorum UNSUPPORTED_VERSION (KafkaRaftClient.handleRemoveVoterRequest via RemoveVoterHandler).
    err = done.stderr
    assert ("does not serve RemoveRaftVoter (api key 81)" in err
            or ("RemoveRaftVoter failed at the leader" in err and "UNSUPPORTED_VERSION" in err)), err


class FakeLeader:
    """A Kafka-protocol server on a real socket that says it leads (DescribeQuorum) and answers AddRaftVoter /
    RemoveRaftVoter with the error given, recording what it was sent. Runs its own event loop in a thread, since
    the CLI runs asyncio.run in the test's thread."""

    def __init__(self, error: int = 0, message: str | None = None, serves: tuple[int, ...] = (80, 81)) -> None:
        import threading

        from kraft_tck.reference.net import KafkaServer

        self.error, self.message = error, message
        self.requests: list[tuple[int, int, dict[str, object]]] = []
        ranges = {55: (0, 1), **{k: (0, 0) for k in serves}}
        self.server = KafkaServer(self.handle, ranges)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        self.port = self.server.port

    def handle(self, req: object) -> dict[str, object]:
        api_key, version, body = req.api_key, req.api_version, req.body  # type: ignore[attr-defined]
        if api_key == 55:
            voter = {"ReplicaId": 1, "LogEndOffset": 10, "LastFetchTimestamp": -1, "LastCaughtUpTimestamp": -1}
            return {"ErrorCode": 0, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{
                "PartitionIndex": 0, "ErrorCode": 0, "LeaderId": 1, "LeaderEpoch": 3, "HighWatermark": 10,
                "CurrentVoters": [voter], "Observers": []}]}]}
        self.requests.append((api_key, version, body))
        return {"ThrottleTimeMs": 0, "ErrorCode": self.error, "ErrorMessage": self.message}

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def fake_leader() -> Iterator[Callable[..., FakeLeader]]:
    made: list[FakeLeader] = []

    def make(error: int = 0, message: str | None = None, serves: tuple[int, ...] = (80, 81)) -> FakeLeader:
        made.append(FakeLeader(error, message, serves))
        return made[-1]

    yield make
    for leader in made:
        leader.close()


def test_add_controller_sends_add_raft_voter_to_the_leader_and_prints_kafkas_line(
        tmp_path: Path, fake_leader: Callable[..., FakeLeader]) -> None:
    """MetadataQuorumCommand.handleAddController: AddRaftVoter(node.id, directory.id of meta.properties, every
    controller listener) sent once to the leader (KafkaAdminClient.addRaftVoter), then Kafka's "Added" line."""
    cfg, directory = controller_config(tmp_path)
    leader = fake_leader()
    code, out, err = run("quorum", "--bootstrap-controller", f"127.0.0.1:{leader.port}", "--command-config", str(cfg),
                         "add-controller")
    assert (code, out, err) == (0, f"Added controller 5 with directory id {directory} and endpoints: "
                                   "CONTROLLER://localhost:9093\n", "")
    assert len(leader.requests) == 1
    api_key, version, body = leader.requests[0]
    from kraft_tck.reference.quorum_client import kafka_uuid

    assert (api_key, version) == (80, 0)
    assert body["ClusterId"] is None and body["TimeoutMs"] == 5000 and body["VoterId"] == 5
    assert kafka_uuid(body["VoterDirectoryId"]) == directory
    assert [(x["Name"], x["Host"], x["Port"]) for x in body["Listeners"]] == [  # type: ignore[attr-defined]
        ("CONTROLLER", "localhost", 9093)]


def test_remove_controller_sends_remove_raft_voter_and_prints_kafkas_line(
        fake_leader: Callable[..., FakeLeader]) -> None:
    leader = fake_leader()
    code, out, err = run("quorum", "--bootstrap-controller", f"127.0.0.1:{leader.port}", "remove-controller",
                         "--controller-id", "2", "--controller-directory-id", "_KWDkTahTVaiVVVTaugNew")
    # Kafka's printf("%s KRaft controller ...", "Removed "): two spaces.
    assert (code, out, err) == (0, "Removed  KRaft controller 2 with directory id _KWDkTahTVaiVVVTaugNew\n", "")
    from kraft_tck.reference.quorum_client import kafka_uuid

    [(api_key, version, body)] = leader.requests
    assert (api_key, version, body["VoterId"], body["ClusterId"]) == (81, 0, 2, None)
    assert kafka_uuid(body["VoterDirectoryId"]) == "_KWDkTahTVaiVVVTaugNew"


@pytest.mark.parametrize(("error", "message", "shown"), [
    (126, None, "DUPLICATE_VOTER: The voter is already part of the set of voters."),
    (127, "VoterKey(id=2, directoryId=x) not in the voter set", "VOTER_NOT_FOUND: VoterKey(id=2, directoryId=x) not "
                                                                "in the voter set"),
    (7, None, "REQUEST_TIMED_OUT"),
    (35, None, "UNSUPPORTED_VERSION"),
])
def test_an_error_answer_is_one_line_and_not_retried(tmp_path: Path, fake_leader: Callable[..., FakeLeader],
                                                       error: int, message: str | None, shown: str) -> None:
    """KafkaAdminClient completes the call with the answer's error (ApiError: its message, else the code's)."""
    cfg, _ = controller_config(tmp_path)
    leader = fake_leader(error, message)
    for args in (["--command-config", str(cfg), "add-controller"],
                 ["remove-controller", "-i", "2", "-d", "_KWDkTahTVaiVVVTaugNew"]):
        code, out, err = run("quorum", "--bootstrap-controller", f"127.0.0.1:{leader.port}", *args)
        assert code == 1 and out == "" and len(err.splitlines()) == 1, err
        name = "AddRaftVoter" if "add-controller" in args else "RemoveRaftVoter"
        assert err.startswith(f"Error: {name} failed at the leader 127.0.0.1:{leader.port}: ") and shown in err, err
    assert [k for k, _, _ in leader.requests] == [80, 81]  # one request each: no retry


def test_a_leader_that_does_not_serve_the_rpc_is_named(tmp_path: Path, fake_leader: Callable[..., FakeLeader]) -> None:
    leader = fake_leader(serves=())
    code, out, err = run("quorum", "--bootstrap-controller", f"127.0.0.1:{leader.port}", "remove-controller",
                         "-i", "2", "-d", "_KWDkTahTVaiVVVTaugNew")
    assert code == 1 and out == "" and "does not serve RemoveRaftVoter (api key 81)" in err and leader.requests == []


def test_add_controller_needs_the_directory_id_of_meta_properties(tmp_path: Path) -> None:
    """MetadataQuorumCommand.getMetadataDirectoryId: "No directory id found in <dir>"."""
    cfg, _ = controller_config(tmp_path)
    meta = tmp_path / "data" / "meta.properties"
    meta.write_text("\n".join(line for line in meta.read_text().splitlines() if not line.startswith("directory.id")))
    assert run("quorum", "--bootstrap-controller", "127.0.0.1:1", "--command-config", str(cfg), "add-controller") == (
        1, "", f"No directory id found in {tmp_path / 'data'}\n")


@pytest.mark.parametrize(("directory", "problem"), [
    ("AAAA", "decoded as 3 bytes, which is not equal to the expected 16 bytes"),
    ("short", "Input string `short` is not valid base64"),
    ("_KWDkTahTVaiVVVTaugNew==xx", "is too long to be decoded as a base64 UUID"),
    ("_KWDkTahTVaiVVVTaugNe!", "Input string `_KWDkTahTVaiVVVTaugNe!` is not valid base64"),
])
def test_remove_controller_refuses_a_directory_id_that_is_not_a_kafka_uuid(directory: str, problem: str) -> None:
    code, out, err = run("quorum", "--bootstrap-controller", "127.0.0.1:1", "remove-controller", "-i", "2",
                         "-d", directory, "--dry-run")
    assert code == 1 and out == "" and err.startswith("Failed to parse --controller-directory-id: ") and problem in err
    assert run("quorum", "--bootstrap-controller", "127.0.0.1:1", "remove-controller", "-i", "2", "-d",
               "_KWDkTahTVaiVVVTaugNew==", "--dry-run")[0] == 0  # Java's URL decoder takes the padding


@pytest.mark.cluster
@pytest.mark.timeout(240)
def test_add_and_remove_controller_against_real_nodes(tmp_path: Path) -> None:
    """KIP-853 end to end through this command line: node 1 formatted --standalone, node 2 --no-initial-controllers
    (an observer through controller.quorum.bootstrap.servers); add-controller makes node 2 a voter (describe
    --status lists both with their directory ids and endpoints), remove-controller makes it an observer again."""
    cluster = LocalCluster(tmp_path / "c", voters=2, base_port=free_base_port(2), quorum="dynamic")
    cluster.prepare()
    cluster.start_all()
    bootstrap = f"127.0.0.1:{cluster.port(1)}"
    dir1, dir2 = cluster.directory_id(1), cluster.directory_id(2)
    try:
        def status_until(test: Callable[[str], bool], what: str) -> str:
            deadline, last = time.monotonic() + 90, ""
            while time.monotonic() < deadline:
                done = cli("quorum", "--bootstrap-controller", bootstrap, "describe", "--status")
                last = done.stdout + done.stderr
                if done.returncode == 0 and test(done.stdout):
                    return done.stdout
                time.sleep(0.5)
            raise AssertionError(f"{what}: not within 90 s; last: {last}")

        status_until(lambda out: '"id": 2' in out.splitlines()[7], "node 2 an observer")
        deadline, outputs = time.monotonic() + 90, []
        while True:
            # The leader answers REQUEST_TIMED_OUT to a joiner not caught up yet (LeaderState.isReplicaCaughtUp), and
            # also when the VotersRecord was appended but not committed in time (then the voter is added:
            # KafkaRaftClientReconfigTest.testAddVoterTimeout, and asking again is DUPLICATE_VOTER).
            added = cli("quorum", "--bootstrap-controller", bootstrap, "--command-config",
                        str(cluster.config_path(2)), "add-controller")
            outputs.append(added.stdout + added.stderr)
            if added.returncode == 0:
                assert added.stdout == (f"Added controller 2 with directory id {dir2} and endpoints: "
                                        f"CONTROLLER://127.0.0.1:{cluster.port(2)}\n")
                break
            # NOT_LEADER_OR_FOLLOWER: the leader lost its leadership while the change was pending
            # (LeaderState.close, KafkaRaftClientReconfigTest.testAddVoterFailsWhenLosingLeadership): ask again.
            assert "REQUEST_TIMED_OUT" in added.stderr or "NOT_LEADER_OR_FOLLOWER" in added.stderr or (
                "DUPLICATE_VOTER" in added.stderr and any("REQUEST_TIMED_OUT" in o or "NOT_LEADER" in o
                                                          for o in outputs[:-1])), outputs
            if "DUPLICATE_VOTER" in added.stderr:
                break
            assert time.monotonic() < deadline, outputs
            time.sleep(0.5)
        # The leader keeps its leadership while the set grows from 1 to 2 voters (testAddVoter answers NONE): the
        # joiner follows leader 1 found through its bootstrap server, and the sole voter's check-quorum timer runs on.
        assert not any("NOT_LEADER_OR_FOLLOWER" in o for o in outputs), outputs
        out = status_until(lambda out: '"id": 2' in out.splitlines()[6], "node 2 a voter")
        assert out.splitlines()[6] == (
            f'CurrentVoters:          [{{"id": 1, "directoryId": "{dir1}", "endpoints": ["CONTROLLER://127.0.0.1:'
            f'{cluster.port(1)}"]}}, {{"id": 2, "directoryId": "{dir2}", "endpoints": ["CONTROLLER://127.0.0.1:'
            f'{cluster.port(2)}"]}}]')
        removed = cli("quorum", "--bootstrap-controller", bootstrap, "remove-controller", "-i", "2", "-d", str(dir2))
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout == f"Removed  KRaft controller 2 with directory id {dir2}\n"
        status_until(lambda out: '"id": 2' not in out.splitlines()[6], "node 2 no longer a voter")
    finally:
        cluster.stop_all()
