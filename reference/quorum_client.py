"""A DescribeQuorum client whose output follows kafka-metadata-quorum (KIP-595 "Tooling", KIP-836).

It speaks only the wire protocol, so it works against any controller, not only the reference node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraft_tck.reference.net import KafkaClient, RequestError
from kraft_tck.spec.errors import Errors

DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"


class QuorumError(Exception):
    """The quorum could not be described; the message says why and what to try."""


@dataclass(frozen=True)
class ReplicaRow:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    role: str  # Leader, Follower, Observer


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaRow, ...]
    observers: tuple[ReplicaRow, ...]
    version: int


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
            )
            for r in items
        )

    return QuorumInfo(
        leader_id=part["LeaderId"],
        leader_epoch=part["LeaderEpoch"],
        high_watermark=part["HighWatermark"],
        voters=rows(part["CurrentVoters"], False),
        observers=rows(part["Observers"], True),
        version=version,
    )


async def describe_quorum(host: str, port: int, timeout_s: float = 5.0, follow_leader: bool = True) -> QuorumInfo:
    """Describe the quorum via host:port; follows the leader once when a v2 response names its endpoint."""
    client = KafkaClient(host, port, client_id="kraft-tck-quorum")
    try:
        await client.connect(timeout_s)
        version = client.best_version(DESCRIBE_QUORUM)
        body = await client.request(DESCRIBE_QUORUM, version, request_body(), timeout_s)
    except RequestError as exc:
        raise QuorumError(str(exc)) from exc
    finally:
        await client.close()
    try:
        return parse_response(body, version)
    except QuorumError:
        part = (body.get("Topics") or [{}])[0].get("Partitions", [{}])[0]
        leader = part.get("LeaderId", -1)
        for node in body.get("Nodes", []):
            if follow_leader and node["NodeId"] == leader and node["Listeners"]:
                lst = node["Listeners"][0]
                return await describe_quorum(lst["Host"], lst["Port"], timeout_s, follow_leader=False)
        raise


def _lag(info: QuorumInfo, row: ReplicaRow) -> int:
    return max(0, info.high_watermark - row.log_end_offset)


def _lag_time(row: ReplicaRow, leader_now: int) -> int:
    # KIP-836: lag time is how long ago the replica was last caught up with the leader.
    if row.role == "Leader":
        return 0
    if row.last_caught_up_timestamp < 0:
        return -1
    return max(0, leader_now - row.last_caught_up_timestamp)


def render_status(info: QuorumInfo, now_ms: int | None = None) -> str:
    leader_row = next((r for r in info.voters if r.role == "Leader"), None)
    now = leader_row.last_caught_up_timestamp if leader_row and leader_row.last_caught_up_timestamp > 0 else now_ms
    followers = [r for r in info.voters if r.role != "Leader"]
    max_lag = max((_lag(info, r) for r in followers), default=0)
    lag_times = [_lag_time(r, now) for r in followers] if now is not None and info.version >= 1 else []
    max_lag_time = max(lag_times, default=0) if lag_times else -1
    lines = [
        "ClusterId:              n/a (DescribeQuorum does not carry it)",
        f"LeaderId:               {info.leader_id}",
        f"LeaderEpoch:            {info.leader_epoch}",
        f"HighWatermark:          {info.high_watermark}",
        f"MaxFollowerLag:         {max_lag}",
        f"MaxFollowerLagTimeMs:   {max_lag_time}",
        f"CurrentVoters:          [{', '.join(str(r.replica_id) for r in info.voters)}]",
        f"CurrentObservers:       [{', '.join(str(r.replica_id) for r in info.observers)}]",
    ]
    return "\n".join(lines)


def render_replication(info: QuorumInfo, now_ms: int) -> str:
    leader_row = next((r for r in info.voters if r.role == "Leader"), None)
    now = leader_row.last_caught_up_timestamp if leader_row and leader_row.last_caught_up_timestamp > 0 else now_ms
    header = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
    table = [header]
    for r in (*info.voters, *info.observers):
        table.append((str(r.replica_id), str(r.log_end_offset), str(_lag(info, r)), str(r.last_fetch_timestamp),
                      str(r.last_caught_up_timestamp), r.role))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    out.append(f"(lag times relative to the leader clock {now})")
    return "\n".join(out)
