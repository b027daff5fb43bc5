"""A DescribeQuorum client whose output is ``kafka-metadata-quorum describe``'s (KIP-595 "Tooling", KIP-836).

It speaks only the wire protocol, so it works against any controller, not only the reference node.

The output follows ``MetadataQuorumCommand`` of Kafka 3.9 and 4.0 (the describe code is the same in
3.9.0 and 4.0-SNAPSHOT of Oct 2024; 3.8 printed ``CurrentVoters`` as bare ids and had no DirectoryId
column):

* ``--status``: ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag, MaxFollowerLagTimeMs,
  CurrentVoters and CurrentObservers as ``{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://h:p"]}``.
* ``--replication``: the leader's row first, then the other voters, then the observers; Lag is the
  leader's log end offset minus the replica's (KIP-836); each cell padded to its column and followed by
  a tab (``ToolsUtils.prettyPrintTable``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import errno
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.reference.net import KafkaClient, RequestError
from kraft_tck.reference.security import ClientSecurity
from kraft_tck.spec.errors import Errors

DESCRIBE_QUORUM = 55
DESCRIBE_CLUSTER = 60  # KIP-919: a controller answers it with the cluster id and the active controller
FETCH = 1
METADATA_TOPIC = "__cluster_metadata"
ZERO_UUID = uuid.UUID(int=0)

Endpoint = tuple[str, int]


#: The security of every connection this module opens (``--command-config``: TLS, SASL); plaintext when None.
#: Set with :func:`secured` around a call (asyncio.run and tasks copy it).
CLIENT_SECURITY: contextvars.ContextVar[ClientSecurity | None] = contextvars.ContextVar("CLIENT_SECURITY",
                                                                                        default=None)


@contextlib.contextmanager
def secured(security: ClientSecurity | None) -> Iterator[None]:
    """Connections opened inside speak ``security`` (``security.client_security`` of a client properties file)."""
    token = CLIENT_SECURITY.set(security)
    try:
        yield
    finally:
        CLIENT_SECURITY.reset(token)


class QuorumError(Exception):
    """The quorum could not be described; the message says why and what to try."""


@dataclass(frozen=True)
class ReplicaRow:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int  # -1: unknown (Kafka's OptionalLong.empty)
    last_caught_up_timestamp: int  # -1: unknown
    role: str  # Leader, Follower, Observer
    directory_id: uuid.UUID = ZERO_UUID


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaRow, ...]
    observers: tuple[ReplicaRow, ...]
    version: int
    #: DescribeQuorum v2 ``Nodes``: node id -> its listeners as (name, host, port).
    nodes: dict[int, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)
    cluster_id: str | None = None  # from DescribeCluster, when the node answers it


def kafka_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints one (``Uuid.toString``): URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def request_body() -> dict[str, Any]:
    return {"Topics": [{"TopicName": METADATA_TOPIC, "Partitions": [{"PartitionIndex": 0}]}]}


def parse_response(body: dict[str, Any], version: int) -> QuorumInfo:
    """Turn a DescribeQuorum response into QuorumInfo, or QuorumError naming the error."""
    if body["ErrorCode"] != Errors.NONE:
        raise QuorumError(f"DescribeQuorum failed: {Errors(body['ErrorCode']).name}: {body.get('ErrorMessage') or ''}")
    try:
        part = body["Topics"][0]["Partitions"][0]
    except (IndexError, KeyError) as exc:
        raise QuorumError("DescribeQuorum response carries no __cluster_metadata partition") from exc
    if part["ErrorCode"] != Errors.NONE:
        name = Errors(part["ErrorCode"]).name
        # Kafka's error answer leaves LeaderId/LeaderEpoch at 0 (no epoch 0 has a leader): no hint then.
        known = part["LeaderId"] >= 0 and part["LeaderEpoch"] > 0
        hint = f" (leader is node {part['LeaderId']}, epoch {part['LeaderEpoch']})" if known else ""
        raise QuorumError(f"DescribeQuorum: {name}{hint}: ask the leader")

    def rows(items: list[dict[str, Any]], observer: bool) -> tuple[ReplicaRow, ...]:
        return tuple(
            ReplicaRow(
                replica_id=r["ReplicaId"],
                log_end_offset=r["LogEndOffset"],
                last_fetch_timestamp=r.get("LastFetchTimestamp", -1),
                last_caught_up_timestamp=r.get("LastCaughtUpTimestamp", -1),
                role="Observer" if observer else ("Leader" if r["ReplicaId"] == part["LeaderId"] else "Follower"),
                directory_id=r.get("ReplicaDirectoryId") or ZERO_UUID,
            )
            for r in items
        )

    nodes = {
        n["NodeId"]: tuple((lst["Name"], lst["Host"], lst["Port"]) for lst in n.get("Listeners") or ())
        for n in body.get("Nodes") or ()
    }
    return QuorumInfo(
        leader_id=part["LeaderId"],
        leader_epoch=part["LeaderEpoch"],
        high_watermark=part["HighWatermark"],
        voters=rows(part["CurrentVoters"], False),
        observers=rows(part["Observers"], True),
        version=version,
        nodes=nodes,
    )


# ============================================================================================ talking to nodes


def connect_problem(host: str, port: int, exc: BaseException) -> str:
    """One line for a connection that failed: what is wrong and what to do."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError | TimeoutError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve host {host!r} ({cause.strerror}): check the host name"
    if isinstance(cause, ConnectionRefusedError) or (isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED):
        return f"nothing listens on {host}:{port} (connection refused): is the node running on that port?"
    if isinstance(cause, TimeoutError):
        return f"{host}:{port} did not answer in time: is the host reachable and the node running?"
    if isinstance(cause, OSError):
        return f"cannot connect to {host}:{port} ({cause.strerror or cause}): is the node running there?"
    return f"{host}:{port}: {exc}"


def request_problem(host: str, port: int, exc: BaseException) -> str:
    """One line for a request that failed on an open connection."""
    text = str(exc)
    if "undecodable response" in text or "ApiVersions failed" in text:
        return (f"{host}:{port} does not answer as a Kafka node ({text.split(': ', 1)[-1]}): is that the "
                f"controller listener's port?")
    return text if f"{host}:{port}" in text else f"{host}:{port}: {text}"


def new_client(host: str, port: int, client_id: str) -> KafkaClient:
    """A client (not yet connected) that speaks :data:`CLIENT_SECURITY`: TLS and/or SASL, or plaintext."""
    security = CLIENT_SECURITY.get()
    return KafkaClient(host, port, client_id=client_id,
                       ssl=security.ssl_context if security is not None else None,
                       sasl=security.sasl if security is not None else None)


async def _connect(host: str, port: int, timeout_s: float, client_id: str) -> KafkaClient:
    client = new_client(host, port, client_id)
    try:
        await client.connect(timeout_s)
    except RequestError as exc:
        await client.close()
        if "cannot connect" in str(exc):
            raise QuorumError(connect_problem(host, port, exc)) from exc
        raise QuorumError(request_problem(host, port, exc)) from exc
    return client


async def describe_quorum(host: str, port: int, timeout_s: float = 5.0, follow_leader: bool = True,
                          client_id: str = "kraft-tck-quorum") -> QuorumInfo:
    """Describe the quorum via host:port. With ``follow_leader``, a node that is not the leader is asked
    (by a Fetch, see :func:`leader_endpoint`) where the leader is, and the leader is asked instead."""
    client = await _connect(host, port, timeout_s, client_id)
    try:
        version = client.best_version(DESCRIBE_QUORUM)
        body = await client.request(DESCRIBE_QUORUM, version, request_body(), timeout_s)
        info = parse_response(body, version)
    except RequestError as exc:
        raise QuorumError(request_problem(host, port, exc)) from exc
    except QuorumError:
        if not follow_leader:
            raise
        try:
            leader = await leader_endpoint(client, timeout_s)
        except RequestError as exc:
            raise QuorumError(request_problem(host, port, exc)) from exc
        if leader is None or leader == (host, port):
            raise
        return await describe_quorum(leader[0], leader[1], timeout_s, follow_leader=False, client_id=client_id)
    finally:
        await client.close()
    return info


async def leader_endpoint(client: KafkaClient, timeout_s: float) -> Endpoint | None:
    """Where the leader is, as a node that is not the leader says: a Fetch (as an observer, id -1) is
    answered FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER with CurrentLeader and, from Fetch v16
    (KIP-951), the leader's endpoint in NodeEndpoints. None when the node knows no leader or no endpoint.

    (Kafka's admin client asks DescribeCluster for the active controller; a node that does not serve
    DescribeCluster still answers Fetch, which every KRaft voter serves.)"""
    from kraft_tck.reference import wire  # the node's codec glue; only this path needs it
    from kraft_tck.reference.messages import FetchRequest

    version = client.best_version(FETCH)
    # Epoch 0 (every real epoch is newer): FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER, both of which
    # name the leader; a negative epoch would be INVALID_REQUEST (LastFetchedEpoch above it).
    req = FetchRequest(cluster_id=None, replica_id=-1, current_leader_epoch=0, fetch_offset=0,
                       last_fetched_epoch=0, max_wait_ms=0, max_bytes=1)
    body = await client.request(FETCH, version, wire.request_to_body(req, version), timeout_s)
    try:
        part = body["Responses"][0]["Partitions"][0]
        leader_id = part["CurrentLeader"]["LeaderId"]
    except (IndexError, KeyError, TypeError):
        return None
    for node in body.get("NodeEndpoints") or ():
        if node["NodeId"] == leader_id and leader_id >= 0:
            return node["Host"], node["Port"]
    return None


#: DescribeCluster's EndpointType (KIP-919): Kafka's admin client asks for brokers with bootstrap servers
#: and for controllers with bootstrap controllers; a node refuses the other kind (MISMATCHED_ENDPOINT_TYPE).
BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2


async def describe_cluster_id(host: str, port: int, timeout_s: float,
                              endpoint_type: int = CONTROLLER_ENDPOINTS) -> str | None:
    """The cluster id by DescribeCluster (what ``kafka-metadata-quorum`` prints), or None when the node
    does not serve DescribeCluster or refuses the request."""
    from kraft_tck.spec import codec

    try:
        ours = codec.supported_versions(DESCRIBE_CLUSTER)
    except (KeyError, ValueError):
        return None
    client = await _connect(host, port, timeout_s, "kraft-tck-quorum")
    try:
        theirs = client.versions.get(DESCRIBE_CLUSTER)
        if theirs is None:
            return None
        version = min(ours[1], theirs[1])
        req: dict[str, Any] = {"IncludeClusterAuthorizedOperations": False}
        if version >= 1:
            req["EndpointType"] = endpoint_type
        body = await client.request(DESCRIBE_CLUSTER, version, req, timeout_s)
    except RequestError:
        return None
    finally:
        await client.close()
    if body.get("ErrorCode", 0) != Errors.NONE:
        return None
    cid = body.get("ClusterId")
    return cid if isinstance(cid, str) else None


async def find_leader(endpoints: Sequence[Endpoint], timeout_s: float,
                      client_id: str = "kraft-tck-quorum") -> tuple[Endpoint, QuorumInfo]:
    """The leader's endpoint and its DescribeQuorum answer, from any of ``endpoints`` (KIP-595 "Tooling":
    the request goes to the leader). Each endpoint is asked in turn; one that is not the leader is asked
    where the leader is. QuorumError names what every endpoint said."""
    problems: list[str] = []
    for host, port in endpoints:
        try:
            info = await describe_quorum(host, port, timeout_s, follow_leader=False, client_id=client_id)
            return (host, port), info
        except QuorumError as exc:
            problems.append(str(exc) if f"{host}:{port}" in str(exc) or host in str(exc) else f"{host}:{port}: {exc}")
            if "NOT_LEADER_OR_FOLLOWER" not in str(exc):
                continue
        client: KafkaClient | None = None
        try:
            client = await _connect(host, port, timeout_s, client_id)
            leader = await leader_endpoint(client, timeout_s)
        except (QuorumError, RequestError):
            leader = None
        finally:
            if client is not None:
                await client.close()
        if leader is None:
            problems[-1] += " (and it knows no leader: an election is under way, or too few voters are running)"
        elif leader != (host, port):
            try:
                return leader, await describe_quorum(*leader, timeout_s, follow_leader=False, client_id=client_id)
            except QuorumError as exc:
                problems.append(f"leader at {leader[0]}:{leader[1]}: {exc}")
    if len(problems) == 1:
        raise QuorumError(problems[0])
    raise QuorumError("no controller answered as leader: " + "; ".join(problems))


async def describe(endpoints: Sequence[Endpoint], timeout_s: float, with_cluster_id: bool = False,
                   endpoint_type: int = CONTROLLER_ENDPOINTS) -> QuorumInfo:
    """What ``kafka-metadata-quorum describe`` shows: the leader's DescribeQuorum answer (and, for
    ``--status``, the cluster id by DescribeCluster, asking for ``endpoint_type``)."""
    # KIP-595 "DescribeQuorum Response Handling" 2: no leader known (an election under way): back off and
    # ask again, until the timeout. A node that cannot be reached is not asked again.
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            (host, port), info = await find_leader(endpoints, timeout_s)
            break
        except QuorumError as exc:
            if "NOT_LEADER_OR_FOLLOWER" not in str(exc) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)
    if not with_cluster_id:
        return info
    cid = await describe_cluster_id(host, port, timeout_s, endpoint_type)
    return QuorumInfo(info.leader_id, info.leader_epoch, info.high_watermark, info.voters, info.observers,
                      info.version, info.nodes, cid)


# ============================================================================================ voter changes (KIP-853)


ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 80, 81
_CHANGE_NAMES = {ADD_RAFT_VOTER: "AddRaftVoter", REMOVE_RAFT_VOTER: "RemoveRaftVoter"}


def kafka_uuid_value(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: URL-safe base64 (padding optional) of 16 bytes; ValueError otherwise."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError as exc:
        raise ValueError(f"Input string `{text}` is not valid base64 ({exc})") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the expected "
                         "16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def error_text(code: int, message: str | None) -> str:
    """``ApiError.exception().getMessage()``: the response's ErrorMessage, else Kafka's text for the code."""
    if message:
        return message
    try:
        return Errors(code).message
    except ValueError:
        return ""


async def change_voters(endpoints: Sequence[Endpoint], timeout_s: float, api_key: int, body: dict[str, Any],
                        client_id: str = "kraft-tck-quorum") -> Endpoint:
    """Send AddRaftVoter (80) or RemoveRaftVoter (81) to the leader found from ``endpoints`` (Kafka's admin
    client sends both to the active controller, ``LeastLoadedBrokerOrActiveKController``) and wait for its
    answer, once: an error answer is not retried (``KafkaAdminClient.addRaftVoter``/``removeRaftVoter``
    complete the future with the error). Returns the leader's endpoint; QuorumError names the error code and
    Kafka's message otherwise, or says that the leader does not serve the RPC (a static quorum)."""
    name = _CHANGE_NAMES[api_key]
    (host, port), _ = await find_leader(endpoints, timeout_s, client_id)
    client = await _connect(host, port, timeout_s, client_id)
    try:
        if api_key not in client.versions:
            raise QuorumError(f"the leader at {host}:{port} does not serve {name} (api key {api_key}): its voters "
                              f"are fixed by controller.quorum.voters (a static quorum, kraft.version 0)")
        version = client.best_version(api_key)
        answer = await client.request(api_key, version, body, timeout_s)
    except RequestError as exc:
        raise QuorumError(request_problem(host, port, exc)) from exc
    finally:
        await client.close()
    code = int(answer.get("ErrorCode", 0))
    if code != Errors.NONE:
        try:
            label = Errors(code).name
        except ValueError:
            label = f"error code {code}"
        text = error_text(code, answer.get("ErrorMessage"))
        raise QuorumError(f"{name} failed at the leader {host}:{port}: {label}" + (f": {text}" if text else ""))
    return host, port


def add_raft_voter_body(voter_id: int, directory_id: str, listeners: Sequence[tuple[str, str, int]],
                        timeout_ms: int, cluster_id: str | None = None) -> dict[str, Any]:
    """AddRaftVoterRequest v0 as Kafka's admin client fills it (ClusterId null unless given; TimeoutMs = the
    call's timeout; one Listener per controller listener)."""
    return {"ClusterId": cluster_id, "TimeoutMs": timeout_ms, "VoterId": voter_id,
            "VoterDirectoryId": kafka_uuid_value(directory_id),
            "Listeners": [{"Name": n, "Host": h, "Port": p} for n, h, p in listeners]}


def remove_raft_voter_body(voter_id: int, directory_id: str, cluster_id: str | None = None) -> dict[str, Any]:
    """RemoveRaftVoterRequest v0 as Kafka's admin client fills it."""
    return {"ClusterId": cluster_id, "VoterId": voter_id, "VoterDirectoryId": kafka_uuid_value(directory_id)}


def add_raft_voter_sync(endpoints: Sequence[Endpoint], timeout_s: float, voter_id: int, directory_id: str,
                        listeners: Sequence[tuple[str, str, int]]) -> Endpoint:
    body = add_raft_voter_body(voter_id, directory_id, listeners, int(timeout_s * 1000))
    return asyncio.run(change_voters(endpoints, timeout_s, ADD_RAFT_VOTER, body))


def remove_raft_voter_sync(endpoints: Sequence[Endpoint], timeout_s: float, voter_id: int,
                           directory_id: str) -> Endpoint:
    body = remove_raft_voter_body(voter_id, directory_id)
    return asyncio.run(change_voters(endpoints, timeout_s, REMOVE_RAFT_VOTER, body))


def describe_sync(endpoints: Sequence[Endpoint], timeout_s: float, with_cluster_id: bool = False,
                  endpoint_type: int = CONTROLLER_ENDPOINTS) -> QuorumInfo:
    return asyncio.run(describe(endpoints, timeout_s, with_cluster_id, endpoint_type))


# ============================================================================================ rendering


def _leader(info: QuorumInfo) -> ReplicaRow:
    leader = next((r for r in info.voters if r.replica_id == info.leader_id), None)
    if leader is None:
        raise QuorumError(f"the leader {info.leader_id} is not among the voters "
                          f"{[r.replica_id for r in info.voters]} the answer lists")
    return leader


def max_follower_lag(info: QuorumInfo) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as ``MetadataQuorumCommand.handleDescribeStatus`` computes them.

    The voter with the smallest log end offset (the first such voter, in the answer's order) is "the
    most lagging follower"; the lag is the leader's log end offset minus its. The lag time is 0 when that
    voter is the leader itself, else the leader's LastCaughtUpTimestamp minus that voter's (-1 when
    either is unknown). On an idle cluster every voter has the same log end offset, so the first voter is
    taken: 0 when it is the leader, else how long ago that follower's last fetch caught up (up to one
    fetch wait, as Kafka shows too)."""
    leader = _leader(info)
    laggard = min(info.voters, key=lambda r: r.log_end_offset)  # min() keeps the first of equals, as Java's
    lag = leader.log_end_offset - laggard.log_end_offset
    if laggard is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp != -1 and laggard.last_caught_up_timestamp != -1:
        lag_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    else:
        lag_ms = -1
    return lag, lag_ms


def _replica_json(info: QuorumInfo, r: ReplicaRow) -> str:
    directory = "null" if r.directory_id == ZERO_UUID else f'"{kafka_uuid(r.directory_id)}"'
    text = f'{{"id": {r.replica_id}, "directoryId": {directory}'
    listeners = info.nodes.get(r.replica_id, ())
    if listeners:
        eps = ", ".join(f'"{name}://{f"[{host}]" if ":" in host else host}:{port}"' for name, host, port in listeners)
        text += f", \"endpoints\": [{eps}]"
    return text + "}"


def render_status(info: QuorumInfo) -> str:
    """``describe --status``, line for line as Kafka prints it."""
    lag, lag_ms = max_follower_lag(info)
    return "\n".join([
        f"ClusterId:              {info.cluster_id or 'null'}",  # as Java prints a missing one
        f"LeaderId:               {info.leader_id}",
        f"LeaderEpoch:            {info.leader_epoch}",
        f"HighWatermark:          {info.high_watermark}",
        f"MaxFollowerLag:         {lag}",
        f"MaxFollowerLagTimeMs:   {lag_ms}",
        f"CurrentVoters:          [{', '.join(_replica_json(info, r) for r in info.voters)}]",
        f"CurrentObservers:       [{', '.join(_replica_json(info, r) for r in info.observers)}]",
    ])


def relative_time_ms(timestamp_ms: int, now_ms: int, desc: str) -> int:
    """``MetadataQuorumCommand.relativeTimeMs``: how long ago, refused for a time after now or not after
    the epoch (a clock drift between the leader and this tool)."""
    if not (0 < timestamp_ms <= now_ms):
        raise QuorumError(f"Error while computing relative time, possible drift in system clock. "
                          f"Current timestamp is {now_ms}, {desc} timestamp is {timestamp_ms}")
    return now_ms - timestamp_ms


REPLICATION_HEADER = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                      "LastCaughtUpTimestamp", "Status")


def replication_rows(info: QuorumInfo, human_readable: bool = False, now_ms: int = 0) -> list[tuple[str, ...]]:
    leader = _leader(info)
    ordered = [(leader, "Leader")]
    ordered += [(r, "Follower") for r in info.voters if r.replica_id != info.leader_id]
    ordered += [(r, "Observer") for r in info.observers]

    def stamp(value: int, desc: str) -> str:
        if value == -1:
            return "-1"
        return f"{relative_time_ms(value, now_ms, desc)} ms ago" if human_readable else str(value)

    return [(str(r.replica_id), kafka_uuid(r.directory_id), str(r.log_end_offset),
             str(leader.log_end_offset - r.log_end_offset), stamp(r.last_fetch_timestamp, "last fetch"),
             stamp(r.last_caught_up_timestamp, "last caught up"), status) for r, status in ordered]


def pretty_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``ToolsUtils.prettyPrintTable``: every cell padded to its column's width, then a tab."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(header)]
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
                     for row in [tuple(header), *rows])


def render_replication(info: QuorumInfo, human_readable: bool = False, now_ms: int = 0) -> str:
    """``describe --replication [--human-readable]``, as Kafka prints it."""
    return pretty_table(REPLICATION_HEADER, replication_rows(info, human_readable, now_ms))
