"""Kafka request/response bodies of the KRaft RPCs, built and read the way the harness needs them.

Bodies are dicts keyed by the field names of spec/messages/*.json (the codec's form). KRaft talks about
one partition only, ``__cluster_metadata``-0; these helpers nest and un-nest it so scenario code reads
like the KIP ("CandidateEpoch", "LastFetchedEpoch") and never like ``Topics[0].Partitions[0]``.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, decode_batches, encode_batches

API_VERSIONS = 18
FETCH = 1
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
DESCRIBE_QUORUM = 55
#: KIP-853's voter-change RPCs (not in ``KRAFT_APIS``: a static quorum's target need not serve them)
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
KRAFT_APIS: dict[str, int] = {
    "Vote": VOTE,
    "BeginQuorumEpoch": BEGIN_QUORUM_EPOCH,
    "EndQuorumEpoch": END_QUORUM_EPOCH,
    "Fetch": FETCH,
    "DescribeQuorum": DESCRIBE_QUORUM,
}
#: LastFetchedEpoch/DivergingEpoch need Fetch v12+ (KIP-595); older versions cannot carry KRaft fetches.
MIN_FETCH_VERSION = 12

METADATA_TOPIC = "__cluster_metadata"
#: Kafka's fixed topic id of the metadata log (Uuid.METADATA_TOPIC_ID), used by Fetch v13+.
METADATA_TOPIC_ID = uuid.UUID(int=1)

Body = dict[str, Any]


class BodyError(ValueError):
    """A response whose shape is not the single-partition form KRaft uses."""


# ---------------------------------------------------------------------------------------------- requests


def vote_request(
    cluster_id: str | None,
    candidate_epoch: int,
    candidate_id: int,
    last_epoch: int,
    last_offset: int,
    voter_id: int,
    *,
    topic: str = METADATA_TOPIC,
    partition_index: int = 0,
) -> Body:
    """``topic``/``partition_index``: another partition than ``__cluster_metadata``-0 (a malformed request)."""
    return {
        "ClusterId": cluster_id,
        "VoterId": voter_id,
        "Topics": [
            {
                "TopicName": topic,
                "Partitions": [
                    {
                        "PartitionIndex": partition_index,
                        "CandidateEpoch": candidate_epoch,
                        "CandidateId": candidate_id,
                        "LastOffsetEpoch": last_epoch,
                        "LastOffset": last_offset,
                    }
                ],
            }
        ],
    }


def begin_quorum_epoch_request(
    cluster_id: str | None,
    leader_id: int,
    epoch: int,
    voter_id: int,
    *,
    topic: str = METADATA_TOPIC,
    partition_index: int = 0,
) -> Body:
    return {
        "ClusterId": cluster_id,
        "VoterId": voter_id,
        "Topics": [
            {
                "TopicName": topic,
                "Partitions": [{"PartitionIndex": partition_index, "LeaderId": leader_id, "LeaderEpoch": epoch}],
            }
        ],
        "LeaderEndpoints": [],
    }


def end_quorum_epoch_request(
    cluster_id: str | None,
    leader_id: int,
    epoch: int,
    successors: list[int],
    version: int,
    *,
    topic: str = METADATA_TOPIC,
    partition_index: int = 0,
) -> Body:
    part: Body = {"PartitionIndex": partition_index, "LeaderId": leader_id, "LeaderEpoch": epoch}
    if version == 0:
        part["PreferredSuccessors"] = list(successors)
    else:
        part["PreferredCandidates"] = [{"CandidateId": s, "CandidateDirectoryId": uuid.UUID(int=0)} for s in successors]
    return {
        "ClusterId": cluster_id,
        "Topics": [{"TopicName": topic, "Partitions": [part]}],
        "LeaderEndpoints": [],
    }


def fetch_request(
    version: int,
    cluster_id: str | None,
    replica_id: int,
    leader_epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    max_wait_ms: int = 0,
    *,
    topic: str = METADATA_TOPIC,
    topic_id: uuid.UUID = METADATA_TOPIC_ID,
    partition_index: int = 0,
) -> Body:
    """``topic`` (v12) / ``topic_id`` (v13+) and ``partition_index``: another partition (a malformed request)."""
    if version < MIN_FETCH_VERSION:
        raise BodyError(f"Fetch v{version} cannot carry LastFetchedEpoch; KRaft needs v{MIN_FETCH_VERSION}+")
    body: Body = {"ClusterId": cluster_id, "MaxWaitMs": max_wait_ms, "MinBytes": 0, "ForgottenTopicsData": []}
    if version >= 15:
        body["ReplicaState"] = {"ReplicaId": replica_id, "ReplicaEpoch": -1}
    else:
        body["ReplicaId"] = replica_id
    named: Body = {"TopicId": topic_id} if version >= 13 else {"Topic": topic}
    named["Partitions"] = [
        {
            "Partition": partition_index,
            "CurrentLeaderEpoch": leader_epoch,
            "FetchOffset": fetch_offset,
            "LastFetchedEpoch": last_fetched_epoch,
            "PartitionMaxBytes": 1 << 20,
        }
    ]
    body["Topics"] = [named]
    return body


def describe_quorum_request(*, topic: str = METADATA_TOPIC, partition_index: int = 0) -> Body:
    return {"Topics": [{"TopicName": topic, "Partitions": [{"PartitionIndex": partition_index}]}]}


# ---------------------------------------------------------------------------------------------- responses


def election_response(
    api_key: int, leader_id: int, epoch: int, error: int = 0, top_error: int = 0, granted: bool | None = None
) -> Body:
    """Vote / BeginQuorumEpoch / EndQuorumEpoch responses share one layout (Vote adds VoteGranted)."""
    part: Body = {"PartitionIndex": 0, "ErrorCode": int(error), "LeaderId": leader_id, "LeaderEpoch": epoch}
    if api_key == VOTE:
        part["VoteGranted"] = bool(granted)
    return {"ErrorCode": int(top_error), "Topics": [{"TopicName": METADATA_TOPIC, "Partitions": [part]}]}


def fetch_response(
    version: int,
    *,
    error: int = 0,
    top_error: int = 0,
    high_watermark: int = -1,
    batches: list[RecordBatch] | tuple[RecordBatch, ...] = (),
    diverging: tuple[int, int] | None = None,
    leader: tuple[int, int] = (-1, -1),
    snapshot_id: tuple[int, int] | None = None,
    log_start: int = 0,
) -> Body:
    """``snapshot_id``: (EndOffset, Epoch) of the snapshot a follower must fetch (KIP-630), ``log_start``:
    the leader's log start offset."""
    part: Body = {
        "PartitionIndex": 0,
        "ErrorCode": int(error),
        "HighWatermark": high_watermark,
        "LogStartOffset": log_start,
        "CurrentLeader": {"LeaderId": leader[0], "LeaderEpoch": leader[1]},
        "Records": encode_batches(batches) if batches else b"",
    }
    if diverging is not None:
        part["DivergingEpoch"] = {"Epoch": diverging[0], "EndOffset": diverging[1]}
    if snapshot_id is not None:
        part["SnapshotId"] = {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]}
    topic: Body = {"TopicId": METADATA_TOPIC_ID} if version >= 13 else {"Topic": METADATA_TOPIC}
    topic["Partitions"] = [part]
    return {"ThrottleTimeMs": 0, "ErrorCode": int(top_error), "SessionId": 0, "Responses": [topic]}


def update_raft_voter_response(
    error: int, leader_id: int, epoch: int, endpoint: tuple[str, int] | None = None
) -> Body:
    """UpdateRaftVoterResponse v0 (KIP-853): the error and, tagged, the current leader (id, epoch and its endpoint on
    the request's listener when known), as Kafka's RaftUtil.updateVoterResponse fills it."""
    leader: Body = {"LeaderId": leader_id, "LeaderEpoch": epoch}
    if endpoint is not None:
        leader["Host"], leader["Port"] = endpoint
    return {"ThrottleTimeMs": 0, "ErrorCode": int(error), "CurrentLeader": leader}


def describe_quorum_response(leader_id: int, epoch: int, error: int) -> Body:
    part = {
        "PartitionIndex": 0, "ErrorCode": int(error), "LeaderId": leader_id, "LeaderEpoch": epoch,
        "HighWatermark": -1, "CurrentVoters": [], "Observers": [],
    }  # fmt: skip
    return {"ErrorCode": 0, "Topics": [{"TopicName": METADATA_TOPIC, "Partitions": [part]}], "Nodes": []}


# ---------------------------------------------------------------------------------------------- reading


def partition(body: Body) -> Body:
    """The one partition of a KRaft request or response body."""
    topics = body.get("Topics", body.get("Responses"))
    if not isinstance(topics, list) or len(topics) != 1:
        raise BodyError(f"expected exactly one topic, got {topics!r}")
    parts = topics[0].get("Partitions")
    if not isinstance(parts, list) or len(parts) != 1:
        raise BodyError(f"expected exactly one partition of {METADATA_TOPIC}, got {parts!r}")
    return dict(parts[0])


def partition_or_none(body: Body) -> Body | None:
    try:
        return partition(body)
    except BodyError:
        return None


def fetch_replica_id(body: Body) -> int:
    state = body.get("ReplicaState")
    if isinstance(state, dict) and state.get("ReplicaId", -1) != -1:
        return int(state["ReplicaId"])
    return int(body.get("ReplicaId", -1))


def records_of(part: Body) -> list[RecordBatch]:
    raw = part.get("Records")
    if not raw:
        return []
    return decode_batches(bytes(raw))


def diverging_of(part: Body) -> tuple[int, int] | None:
    div = part.get("DivergingEpoch")
    if not isinstance(div, dict):
        return None
    epoch, end = int(div.get("Epoch", -1)), int(div.get("EndOffset", -1))
    return None if epoch == -1 and end == -1 else (epoch, end)


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error {code}"


def describe(api: str, kind: str, body: Body) -> str:
    """A one-line summary of a message for sequence diagrams and failure text."""
    if api == "FetchSnapshot":
        from kraft_tck.conformance.snapshots import describe as describe_fetch_snapshot

        return describe_fetch_snapshot(kind, body)
    part = partition_or_none(body) or {}
    if kind == "request":
        if api == "Vote":
            return (
                f"Vote(epoch={part.get('CandidateEpoch')}, candidate={part.get('CandidateId')}, "
                f"last={part.get('LastOffsetEpoch')}/{part.get('LastOffset')}, cid={body.get('ClusterId')})"
            )
        if api in ("BeginQuorumEpoch", "EndQuorumEpoch"):
            extra = ""
            if api == "EndQuorumEpoch":
                succ = part.get("PreferredSuccessors") or [
                    c.get("CandidateId") for c in part.get("PreferredCandidates", [])
                ]
                extra = f", successors={succ}"
            return f"{api}(leader={part.get('LeaderId')}, epoch={part.get('LeaderEpoch')}{extra})"
        if api == "Fetch":
            return (
                f"Fetch(replica={fetch_replica_id(body)}, epoch={part.get('CurrentLeaderEpoch')}, "
                f"offset={part.get('FetchOffset')}, lastFetchedEpoch={part.get('LastFetchedEpoch')})"
            )
        if api in VOTER_CHANGE_APIS:
            return _describe_voter_change_request(api, body)
        if api == "BrokerRegistration":
            return (
                f"BrokerRegistration(broker={body.get('BrokerId')}, incarnation={str(body.get('IncarnationId'))[:8]}, "
                f"cid={body.get('ClusterId')})"
            )
        if api == "BrokerHeartbeat":
            return (
                f"BrokerHeartbeat(broker={body.get('BrokerId')}, epoch={body.get('BrokerEpoch')}, "
                f"offset={body.get('CurrentMetadataOffset')}, wantShutDown={body.get('WantShutDown')})"
            )
        return f"{api}()"
    top = body.get("ErrorCode", 0)
    if api == "BrokerRegistration":
        return f"BrokerRegistration→({error_name(top) if top else 'NONE'}, epoch={body.get('BrokerEpoch')})"
    if api == "BrokerHeartbeat":
        return (
            f"BrokerHeartbeat→({error_name(top) if top else 'NONE'}, caughtUp={body.get('IsCaughtUp')}, "
            f"fenced={body.get('IsFenced')}, shutDown={body.get('ShouldShutDown')})"
        )
    if api in VOTER_CHANGE_APIS:
        return _describe_voter_change_response(api, body)
    err = f"{error_name(top)} " if top else ""
    perr = part.get("ErrorCode", 0)
    perr_s = f"{error_name(perr)}, " if perr else ""
    if api == "Vote":
        return (
            f"{err}Vote→({perr_s}granted={part.get('VoteGranted')}, epoch={part.get('LeaderEpoch')}, "
            f"leader={part.get('LeaderId')})"
        )
    if api == "Fetch":
        try:
            batches = records_of(part)
        except Exception:
            batches = []
        recs = f"[{batches[0].base_offset}..{batches[-1].last_offset}]" if batches else "[]"
        div = diverging_of(part)
        leader = part.get("CurrentLeader") or {}
        sid = part.get("SnapshotId") or {}
        snap = (sid.get("EndOffset"), sid.get("Epoch")) if sid and sid.get("EndOffset", -1) != -1 else None
        start = part.get("LogStartOffset")
        return (
            f"{err}Fetch→({perr_s}HW={part.get('HighWatermark')}, records={recs}"
            f"{f', diverging={div}' if div else ''}{f', snapshotId={snap}' if snap else ''}"
            f"{f', logStart={start}' if isinstance(start, int) and start > 0 else ''}"
            f", leader={leader.get('LeaderId')}/{leader.get('LeaderEpoch')})"
        )
    if api == "DescribeQuorum":
        return (
            f"{err}DescribeQuorum→({perr_s}leader={part.get('LeaderId')}, epoch={part.get('LeaderEpoch')}, "
            f"HW={part.get('HighWatermark')})"
        )
    if api == "ApiVersions":
        return f"ApiVersions→({error_name(top) if top else 'NONE'}, {len(body.get('ApiKeys', []))} apis)"
    return f"{err}{api}→({perr_s}leader={part.get('LeaderId')}, epoch={part.get('LeaderEpoch')})"


#: KIP-853's voter-change RPCs: no partition, so their summaries name the voter key, the error and the leader.
VOTER_CHANGE_APIS = ("AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter")


def short_uuid(value: Any) -> str:
    """A directory id as Kafka prints a Uuid (URL-safe base64, no padding), first 8 characters; "none" for
    Kafka's ZERO_UUID or a missing one."""
    if value is None or (isinstance(value, uuid.UUID) and value.int == 0):
        return "none"
    if not isinstance(value, uuid.UUID):
        return str(value)[:8]
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")[:8]


def _listeners(body: Body) -> str:
    return ",".join(f"{e.get('Name')}://{e.get('Host')}:{e.get('Port')}" for e in body.get("Listeners") or [])


def _describe_voter_change_request(api: str, body: Body) -> str:
    """AddRaftVoter(voter=4, dir=…, listeners=CONTROLLER://h:p) / RemoveRaftVoter(voter=3, dir=…) /
    UpdateRaftVoter(voter=1, dir=…, epoch=5, listeners=…, kraft=0-1)."""
    key = f"voter={body.get('VoterId')}, dir={short_uuid(body.get('VoterDirectoryId'))}"
    if api == "RemoveRaftVoter":
        return f"RemoveRaftVoter({key})"
    if api == "AddRaftVoter":
        return f"AddRaftVoter({key}, listeners={_listeners(body)})"
    feature = body.get("KRaftVersionFeature") or {}
    return (
        f"UpdateRaftVoter({key}, epoch={body.get('CurrentLeaderEpoch')}, listeners={_listeners(body)}, "
        f"kraft={feature.get('MinSupportedVersion')}-{feature.get('MaxSupportedVersion')})"
    )


def _describe_voter_change_response(api: str, body: Body) -> str:
    """AddRaftVoter→(REQUEST_TIMED_OUT: message) / UpdateRaftVoter→(NONE, leader=1/5 at h:p)."""
    code = int(body.get("ErrorCode", 0))
    text = error_name(code) if code else "NONE"
    message = body.get("ErrorMessage")
    if message and message != text:
        text += f": {message}"
    current = body.get("CurrentLeader")
    if api == "UpdateRaftVoter" and isinstance(current, dict):
        at = f" at {current.get('Host')}:{current.get('Port')}" if current.get("Host") else ""
        text += f", leader={current.get('LeaderId')}/{current.get('LeaderEpoch')}{at}"
    return f"{api}→({text})"
