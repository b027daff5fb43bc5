"""Request validation: malformed KRaft requests, sent over the wire by a virtual voter.

Kafka checks every request in one order before it changes anything (``KafkaRaftClient.handleVoteRequest``,
``handleBeginQuorumEpochRequest``, ``handleEndQuorumEpochRequest``, ``handleFetchRequest``,
``handleDescribeQuorumRequest``): the cluster id, then the topic/partition (``RaftUtil.hasValidTopicPartition``:
top-level INVALID_REQUEST; DescribeQuorum: the partition UNKNOWN_TOPIC_OR_PARTITION), then the request's own
fields (partition INVALID_REQUEST), and only then the epoch. KIP-595 says nothing of malformed requests, so
those answers are KAFKA-level checks naming their row of spec/kafka-behaviour.yaml; MUST is kept for what
Raft itself requires (a vote is never granted to a candidate whose log is behind the voter's), so a target
that reads -1 as "an empty log" (the convention before Kafka's) or that adopts any higher epoch still passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import INFO, KAFKA, Scenario
from kraft_tck.conformance.transport import RequestError
from kraft_tck.spec.errors import Errors

FAR = 1_000_000  # a LastOffset no target log reaches in a test
#: The largest int32: the kit refuses an epoch that no later election could go above (vote.epoch-overflow).
EPOCH_MAX = 2**31 - 1
OTHER_TOPIC = "kraft-tck-not-metadata"
OTHER_TOPIC_ID = uuid.UUID("6b726166-742d-7463-6b2d-6f7468657221")  # any id but Uuid.METADATA_TOPIC_ID (1)
#: (topic, partition index) of each wrong partition: another topic, and another partition of __cluster_metadata
WRONG_PARTITIONS = ((OTHER_TOPIC, 0), (B.METADATA_TOPIC, 1))
LOG_CHECK = Clause("KIP-595", "Vote Request Handling", "log check")

Body = dict[str, Any]


def fixed(body: Body) -> Callable[[int], Body]:
    """A request body that is the same at every version."""
    return lambda _version: body


def errors_of(resp: Body) -> tuple[int, int | None]:
    """(top-level ErrorCode, partition ErrorCode or None when the answer has no partition)."""
    part = B.partition_or_none(resp)
    return int(resp.get("ErrorCode", 0)), None if part is None else int(part.get("ErrorCode", 0))


async def ask(
    sc: Scenario, what: str, voter: Any, api_key: int, build: Callable[[int], Body], row: str
) -> tuple[int, Body] | None:
    """Send a (malformed) request; Kafka answers every one, so no answer at all is a KAFKA-level miss."""
    try:
        result: tuple[int, Body] = await voter.request(api_key, build)
    except RequestError as exc:
        sc.fail(
            what, "an answer (Kafka answers a malformed KRaft request)", f"no answer: {exc}", level=KAFKA, kafka=row
        )
        return None
    return result


async def probe_epoch(sc: Scenario, leader: int, epoch: int) -> tuple[int, int, str]:
    """The target's epoch, read without moving it: the leader it follows resends BeginQuorumEpoch(epoch)
    (``begin.resend``: answered NONE in the same epoch). A target that moved past ``epoch`` answers
    FENCED_LEADER_EPOCH naming its epoch. Returns (error, epoch in the answer, summary)."""
    resp = await sc.call(
        f"BeginQuorumEpoch(leader=v{leader}, epoch={epoch}) resent to read the target's epoch",
        sc.q.voters[leader].begin_quorum_epoch(epoch),
    )
    part = B.partition_or_none(resp) or {}
    err = int(resp.get("ErrorCode", 0)) or int(part.get("ErrorCode", 0))
    return err, int(part.get("LeaderEpoch", -1)), B.describe("BeginQuorumEpoch", "response", resp)


async def epoch_kept(sc: Scenario, leader: int, epoch: int, after: str, row: str) -> bool:
    """KAFKA: the target is still in ``epoch`` following ``leader`` after a refused request."""
    err, seen, summary = await probe_epoch(sc, leader, epoch)
    return sc.check(
        err == 0 and seen == epoch,
        f"after {after}, the target is still in epoch {epoch} following v{leader} (no state change)",
        f"BeginQuorumEpoch resend answered NONE, LeaderEpoch={epoch}",
        summary,
        level=KAFKA,
        kafka=row,
    )


# ---------------------------------------------------------------------------------------------- Vote


@case("KIP-595/Validation/1")
async def test_vote_invalid_fields(sc: Scenario) -> None:
    """``KafkaRaftClient.handleVoteRequest`` (``KafkaRaftClientTest.testInvalidVoteRequest``): LastOffsetEpoch < 0,
    LastOffset < 0, LastOffsetEpoch >= CandidateEpoch are INVALID_REQUEST before the epoch step."""
    lead = sc.virtual_ids[0]
    cand = sc.q.voters[sc.bystander]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 2)  # the target's log ends with records of `epoch` >= 1
    log = sc.q.log
    variants: list[tuple[str, Callable[[int], tuple[int, int]], str, bool]] = [
        # (what, candidate epoch -> (LastOffsetEpoch, LastOffset), row, Raft refuses it as a log behind)
        ("LastOffsetEpoch -1", lambda _e: (-1, log.end + FAR), "vote.invalid-last-epoch", True),
        ("LastOffset -1", lambda _e: (log.last_epoch, -1), "vote.invalid-last-offset", True),
        ("LastOffsetEpoch = CandidateEpoch", lambda e: (e, log.end + FAR), "vote.last-epoch-not-below-candidate-epoch",
         False),
    ]  # fmt: skip
    t, cid = sc.target_id, sc.q.cluster_id
    for what, fields, row, behind in variants:
        e = sc.q.next_epoch()
        last_epoch, last_offset = fields(e)
        got = await ask(
            sc,
            f"Vote({what}) is answered",
            cand,
            B.VOTE,
            fixed(B.vote_request(cid, e, cand.node_id, last_epoch, last_offset, t)),
            row,
        )
        if got is not None:
            resp = got[1]
            part = B.partition_or_none(resp) or {}
            summary = B.describe("Vote", "response", resp)
            request = f"Vote(epoch={e}, last={last_epoch}/{last_offset}) from v{cand.node_id}"
            if behind:
                # Raft's election restriction: the candidate's log (last epoch below the voter's, or an end
                # before the voter's end in the same epoch) is not as up-to-date as the voter's.
                sc.check(
                    not part.get("VoteGranted"),
                    f"{request}: its log is behind the target's (last {log.last_epoch}/{log.end})",
                    "VoteGranted=false",
                    summary,
                    LOG_CHECK,
                )
            sc.check(
                errors_of(resp) == (0, Errors.INVALID_REQUEST)
                and not part.get("VoteGranted")
                and (part.get("LeaderEpoch"), part.get("LeaderId")) == (epoch, lead),
                f"{request}: {what} is refused before the epoch step",
                f"partition INVALID_REQUEST, VoteGranted=false, LeaderEpoch={epoch}, LeaderId={lead}",
                summary,
                level=KAFKA,
                kafka=row,
            )
        if not await epoch_kept(sc, lead, epoch, f"Vote({what}) in epoch {e}", row):
            epoch = await sc.make_follower(lead)  # it moved on: follow again before the next variant


# ---------------------------------------------------------------------------------------------- Fetch


@case("KIP-595/Validation/2")
async def test_fetch_invalid_fields(sc: Scenario) -> None:
    """``KafkaRaftClient.handleFetchRequest`` (``KafkaRaftClientTest.testInvalidFetchRequest``): FetchOffset < 0,
    LastFetchedEpoch < 0, LastFetchedEpoch > CurrentLeaderEpoch, MaxWaitMs < 0 are INVALID_REQUEST with
    HighWatermark -1, no records and the current leader, before the epoch step; nothing changes."""
    epoch = await sc.make_leader()
    follower = sc.q.voters[sc.followers[0]]
    log = sc.q.log
    variants = [
        ("FetchOffset -1", -1, log.last_epoch, 0, "fetch.invalid-fetch-offset"),
        ("LastFetchedEpoch -1", log.end, -1, 0, "fetch.invalid-last-fetched-epoch"),
        (f"LastFetchedEpoch {epoch + 1} > CurrentLeaderEpoch {epoch}", log.end, epoch + 1, 0,
         "fetch.last-fetched-epoch-above-leader-epoch"),
        ("MaxWaitMs -1", log.end, log.last_epoch, -1, "fetch.invalid-max-wait"),
    ]  # fmt: skip
    cid, rid = sc.q.cluster_id, follower.node_id
    for what, offset, lfe, max_wait, row in variants:
        got = await ask(
            sc,
            f"Fetch({what}) is answered",
            follower,
            B.FETCH,
            partial(
                B.fetch_request,
                cluster_id=cid,
                replica_id=rid,
                leader_epoch=epoch,
                fetch_offset=offset,
                last_fetched_epoch=lfe,
                max_wait_ms=max_wait,
            ),
            row,
        )
        if got is None:
            continue
        resp = got[1]
        part = B.partition_or_none(resp) or {}
        leader = part.get("CurrentLeader") or {}
        sc.check(
            errors_of(resp) == (0, Errors.INVALID_REQUEST)
            and part.get("HighWatermark") == -1
            and not B.records_of(part)
            and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (sc.target_id, epoch),
            f"Fetch({what}) from v{rid} to the leader of epoch {epoch}",
            f"partition INVALID_REQUEST, HighWatermark=-1, no records, CurrentLeader={sc.target_id}/{epoch}",
            B.describe("Fetch", "response", resp),
            level=KAFKA,
            kafka=row,
        )
    # A malformed fetch changes nothing: Raft's safety does not need the leader to survive one, so KAFKA.
    resp = await sc.call("a well-formed Fetch is answered", follower.follow_once(epoch))
    part = B.partition_or_none(resp) or {}
    leader = part.get("CurrentLeader") or {}
    sc.check(
        errors_of(resp) == (0, 0) and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (sc.target_id, epoch),
        f"after the malformed fetches, v{follower.node_id} fetches from the target, still leader of epoch {epoch}",
        f"NONE, CurrentLeader={sc.target_id}/{epoch}",
        B.describe("Fetch", "response", resp),
        level=KAFKA,
        kafka="fetch.invalid-max-wait",
    )


# ---------------------------------------------------------------------------------------------- wrong partition


def top_level_invalid(resp: Body, topics: str) -> bool:
    """Kafka's answer to a request for another partition: top-level INVALID_REQUEST and no topics at all."""
    return int(resp.get("ErrorCode", 0)) == Errors.INVALID_REQUEST and not resp.get(topics)


async def refused_whole(
    sc: Scenario, api: str, name: str, voter: Any, api_key: int, build: Callable[[int], Body], what: str, row: str
) -> None:
    """KAFKA ``row``: ``api`` for partition ``name`` is answered top-level INVALID_REQUEST with no Topics."""
    got = await ask(sc, f"{api} for {name} is answered", voter, api_key, build, row)
    if got is not None:
        sc.check(
            top_level_invalid(got[1], "Topics"),
            what,
            "top-level INVALID_REQUEST, no Topics",
            B.describe(api, "response", got[1]) + f" topics={got[1].get('Topics')}",
            level=KAFKA,
            kafka=row,
        )


@case("KIP-595/Validation/3")
async def test_wrong_partition_election_rpcs(sc: Scenario) -> None:
    """``RaftUtil.hasValidTopicPartition`` in ``KafkaRaftClient.handleVoteRequest``,
    ``handleBeginQuorumEpochRequest`` and ``handleEndQuorumEpochRequest``: a request for a partition other
    than __cluster_metadata-0 is answered top-level INVALID_REQUEST, with no Topics, and changes nothing."""
    lead = sc.virtual_ids[0]
    other = sc.q.voters[sc.bystander]
    epoch = await sc.make_follower(lead)
    t, log, cid = sc.target_id, sc.q.log, sc.q.cluster_id
    for topic, index in WRONG_PARTITIONS:
        name = f"{topic}-{index}"
        # Vote: otherwise valid (the target's own last epoch and end) and in a newer epoch.
        e = sc.q.next_epoch()
        await refused_whole(
            sc, "Vote", name, other, B.VOTE,
            fixed(B.vote_request(cid, e, other.node_id, log.last_epoch, log.end, t,
                                 topic=topic, partition_index=index)),
            f"Vote(epoch={e}) from v{other.node_id} for {name}", "vote.wrong-topic-partition",
        )  # fmt: skip
        if not await epoch_kept(sc, lead, epoch, f"a Vote for {name}", "vote.wrong-topic-partition"):
            epoch = await sc.make_follower(lead)
        # BeginQuorumEpoch: another voter announces itself leader of a newer epoch.
        e = sc.q.next_epoch()
        await refused_whole(
            sc, "BeginQuorumEpoch", name, other, B.BEGIN_QUORUM_EPOCH,
            fixed(B.begin_quorum_epoch_request(cid, other.node_id, e, t, topic=topic, partition_index=index)),
            f"BeginQuorumEpoch(leader=v{other.node_id}, epoch={e}) for {name}", "begin.wrong-topic-partition",
        )  # fmt: skip
        if not await epoch_kept(sc, lead, epoch, f"a BeginQuorumEpoch for {name}", "begin.wrong-topic-partition"):
            epoch = await sc.make_follower(lead)
        # EndQuorumEpoch: the leader resigns naming the target first; taken, it would stand for election.
        mark = sc.frames.mark()
        await refused_whole(
            sc, "EndQuorumEpoch", name, sc.q.voters[lead], B.END_QUORUM_EPOCH,
            partial(B.end_quorum_epoch_request, cid, lead, epoch, [t, other.node_id],
                    topic=topic, partition_index=index),
            f"EndQuorumEpoch(leader=v{lead}, epoch={epoch}, successors=[{t}, {other.node_id}]) for {name}",
            "end.wrong-topic-partition",
        )  # fmt: skip
        # The first preferred successor of a real EndQuorumEpoch asks for votes within about half an
        # election timeout (KafkaRaftClient.handleEndQuorumEpochRequest); wait longer than that.
        wait_ms = sc.bound_ms(sc.timeouts.election_ms / 2)
        await sc.idle(wait_ms / 1000)
        votes = sc.frames.select(sc.from_target("Vote"), mark)
        sc.check(
            not votes,
            f"the target, first successor in an EndQuorumEpoch for {name}, does not stand for election",
            f"no Vote from the target within {wait_ms:.0f} ms",
            votes[0].summary() if votes else "none",
            level=KAFKA,
            kafka="end.wrong-topic-partition",
        )
        if not await epoch_kept(sc, lead, epoch, f"an EndQuorumEpoch for {name}", "end.wrong-topic-partition"):
            epoch = await sc.make_follower(lead)


@case("KIP-595/Validation/4")
async def test_wrong_partition_fetch_describe(sc: Scenario) -> None:
    """``KafkaRaftClient.handleFetchRequest`` (``RaftUtil.hasValidTopicPartition``, the topic by TopicId from
    Fetch v13): top-level INVALID_REQUEST, no Responses; ``handleDescribeQuorumRequest``
    (``DescribeQuorumRequest.getPartitionLevelErrorResponse``): top-level NONE, the partition
    UNKNOWN_TOPIC_OR_PARTITION. The leader goes on leading."""
    epoch = await sc.make_leader()
    follower = sc.q.voters[sc.followers[0]]
    log, cid, rid = sc.q.log, sc.q.cluster_id, follower.node_id
    wrong = ((OTHER_TOPIC, OTHER_TOPIC_ID, 0), (B.METADATA_TOPIC, B.METADATA_TOPIC_ID, 1))
    for topic, topic_id, index in wrong:
        got = await ask(
            sc,
            f"Fetch for {topic}-{index} is answered",
            follower,
            B.FETCH,
            partial(
                B.fetch_request,
                cluster_id=cid,
                replica_id=rid,
                leader_epoch=epoch,
                fetch_offset=log.end,
                last_fetched_epoch=log.last_epoch,
                topic=topic,
                topic_id=topic_id,
                partition_index=index,
            ),
            "fetch.wrong-topic-partition",
        )
        if got is not None:
            version, resp = got
            named = f"TopicId {topic_id}" if version >= 13 else f"topic {topic}"
            sc.check(
                top_level_invalid(resp, "Responses"),
                f"Fetch v{version} from v{rid} for {named}, partition {index}",
                "top-level INVALID_REQUEST, no Responses",
                B.describe("Fetch", "response", resp) + f" responses={resp.get('Responses')}",
                level=KAFKA,
                kafka="fetch.wrong-topic-partition",
            )
        got = await ask(
            sc,
            f"DescribeQuorum for {topic}-{index} is answered",
            sc.q.voters[sc.bystander],
            B.DESCRIBE_QUORUM,
            fixed(B.describe_quorum_request(topic=topic, partition_index=index)),
            "describe.wrong-topic-partition",
        )
        if got is not None:
            resp = got[1]
            topics = resp.get("Topics") or []
            parts = [(tp.get("TopicName"), p.get("PartitionIndex"), p.get("ErrorCode")) for tp in topics
                     for p in tp.get("Partitions") or []]  # fmt: skip
            sc.check(
                int(resp.get("ErrorCode", 0)) == 0 and parts == [(topic, index, Errors.UNKNOWN_TOPIC_OR_PARTITION)],
                f"DescribeQuorum for {topic}-{index} to the leader",
                f"top-level NONE; {topic}-{index} echoed with UNKNOWN_TOPIC_OR_PARTITION",
                f"top-level {B.error_name(int(resp.get('ErrorCode', 0)))}; partitions {parts}",
                level=KAFKA,
                kafka="describe.wrong-topic-partition",
            )
    resp = await sc.call("a well-formed Fetch is answered", follower.follow_once(epoch))
    part = B.partition_or_none(resp) or {}
    leader = part.get("CurrentLeader") or {}
    sc.check(
        errors_of(resp) == (0, 0) and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (sc.target_id, epoch),
        f"after the requests for other partitions, v{rid} fetches from the target, still leader of epoch {epoch}",
        f"NONE, CurrentLeader={sc.target_id}/{epoch}",
        B.describe("Fetch", "response", resp),
        level=KAFKA,
        kafka="fetch.wrong-topic-partition",
    )


# ---------------------------------------------------------------------------------------------- epoch overflow


@case("KIP-595/Validation/5")
async def test_vote_epoch_overflow(sc: Scenario) -> None:
    """The kit's own choice (``vote.epoch-overflow``, INFO): a Vote in epoch 2^31-1 is refused with
    INVALID_REQUEST, since no election could follow it. Kafka has no such check
    (``KafkaRaftClient.handleVoteRequest`` adopts the epoch); the case records what the target did, and a
    target that took the epoch is restarted on a wiped directory, as no later case could go above it."""
    sc.require("restart", "a target that adopts epoch 2^31-1 can never elect again: the harness must wipe it after")
    lead = sc.virtual_ids[0]
    cand = sc.q.voters[sc.bystander]
    epoch = await sc.make_follower(lead)
    saved = sc.q.known_epoch
    moved = True
    try:
        log = sc.q.log
        resp = await sc.call(f"Vote(epoch={EPOCH_MAX}) is answered", cand.vote(EPOCH_MAX, log.last_epoch, log.end))
        sc.check(
            errors_of(resp) == (0, Errors.INVALID_REQUEST) and not B.partition(resp).get("VoteGranted"),
            f"Vote(epoch={EPOCH_MAX}, last={log.last_epoch}/{log.end}) from v{cand.node_id}, otherwise valid",
            "partition INVALID_REQUEST, VoteGranted=false (the kit's choice; Kafka adopts the epoch)",
            B.describe("Vote", "response", resp),
            level=INFO,
            kafka="vote.epoch-overflow",
        )
        err, seen, summary = await probe_epoch(sc, lead, epoch)
        moved = not (err == 0 and seen == epoch)
        sc.check(
            not moved,
            f"after the Vote in epoch {EPOCH_MAX}, the target is still in epoch {epoch}",
            f"BeginQuorumEpoch resend answered NONE, LeaderEpoch={epoch}",
            summary,
            level=INFO,
            kafka="vote.epoch-overflow",
        )
    finally:
        sc.q.known_epoch = saved  # the harness's next epochs stay below int32's limit
        if moved:
            sc.retire_life()
