"""DescribeQuorum: KIP-595 "DescribeQuorum Request Handling" with the KIP-836 timestamps."""

from __future__ import annotations

import time

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.spec.errors import Errors

#: spec/kafka-behaviour.yaml: a non-leader's DescribeQuorum answer names no leader.
ROW_NO_HINT = "describe.non-leader"


@case("KIP-836/DescribeQuorum/1")
async def test_leader_reports_progress(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    t0 = int(time.time() * 1000)
    for vid in sc.followers:
        await sc.call("Fetch is answered", sc.q.voters[vid].follow_once(epoch))
    t1 = int(time.time() * 1000)
    resp = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    part = B.partition(resp)
    summary = B.describe("DescribeQuorum", "response", resp)
    sc.check(
        not resp.get("ErrorCode") and not part.get("ErrorCode"),
        "the leader answers DescribeQuorum",
        "no error",
        summary,
    )
    sc.check(
        (part.get("LeaderId"), part.get("LeaderEpoch")) == (sc.target_id, epoch),
        "who leads, in which epoch",
        f"LeaderId={sc.target_id}, LeaderEpoch={epoch}",
        summary,
    )
    sc.check(
        part.get("HighWatermark") == log.end,
        "the high watermark (a majority holds everything)",
        f"HighWatermark={log.end}",
        summary,
    )
    rows = {int(r["ReplicaId"]): r for r in part.get("CurrentVoters", [])}
    sc.check(sorted(rows) == sc.q.voter_ids, "CurrentVoters lists every voter", sc.q.voter_ids, sorted(rows))
    sc.check(
        rows[sc.target_id]["LogEndOffset"] == log.end,
        "the leader's own LogEndOffset",
        f"LogEndOffset={log.end}",
        rows[sc.target_id],
    )
    skew = sc.slack_ms
    for vid in sc.followers:
        row = rows[vid]
        sc.check(
            row["LogEndOffset"] == log.end,
            f"v{vid}'s LogEndOffset (its last FetchOffset)",
            f"LogEndOffset={log.end}",
            row,
        )
        sc.check(
            "LastFetchTimestamp" in row,
            "DescribeQuorum v1+ carries the KIP-836 timestamps",
            "LastFetchTimestamp in ReplicaState",
            f"the target answered a version without them: {row}",
        )
        sc.check(
            t0 - skew <= row["LastFetchTimestamp"] <= t1 + skew,
            f"v{vid}'s LastFetchTimestamp: it fetched between {t0} and {t1} (wall clock, ms)",
            f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)",
            row["LastFetchTimestamp"],
        )
        sc.check(
            t0 - skew <= row["LastCaughtUpTimestamp"] <= t1 + skew,
            f"v{vid}'s LastCaughtUpTimestamp: that fetch reached the leader's log end",
            f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)",
            row["LastCaughtUpTimestamp"],
        )
    for vid in sc.virtual_ids:
        if vid in sc.followers:
            continue
        row = rows[vid]
        sc.check(
            (row["LogEndOffset"], row["LastFetchTimestamp"], row["LastCaughtUpTimestamp"]) == (-1, -1, -1),
            f"v{vid} never fetched from this leader",
            "LogEndOffset, LastFetchTimestamp, LastCaughtUpTimestamp all -1 (unknown)",
            row,
        )


@case("KIP-595/DescribeQuorum/1")
async def test_non_leader_refuses(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    resp = await sc.call("DescribeQuorum is answered", sc.v(1).describe_quorum())
    part = B.partition_or_none(resp)
    err = int(resp.get("ErrorCode", 0)) or int((part or {}).get("ErrorCode", 0))
    summary = B.describe("DescribeQuorum", "response", resp)
    sc.check(err == Errors.NOT_LEADER_OR_FOLLOWER, "a follower asked DescribeQuorum", "NOT_LEADER_OR_FOLLOWER", summary)
    if part is None:
        return
    hint = (int(part.get("LeaderId", 0)), int(part.get("LeaderEpoch", 0)))
    hinted = hint[0] >= 0 and hint[1] > 0  # no leader of epoch 0 exists: (0, 0) / (-1, ...) name none
    # KIP-595 "DescribeQuorum Request Handling" 1 includes the known leader; Kafka does not: it answers
    # DescribeQuorumResponse.singletonErrorResponse, LeaderId and LeaderEpoch left at 0
    # (KafkaRaftClient.handleDescribeQuorumRequest).
    sc.check(
        not hinted,
        "the refusal carries no leader hint (Kafka's answer)",
        "LeaderId/LeaderEpoch unset (0/0)",
        summary,
        level=KAFKA,
        kafka=ROW_NO_HINT,
    )
    if hinted:
        sc.check(
            hint == (a, epoch),
            "a leader hint, when given, names the leader the node knows",
            f"LeaderId={a}, LeaderEpoch={epoch}",
            summary,
        )
