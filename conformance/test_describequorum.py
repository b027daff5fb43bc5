"""DescribeQuorum: KIP-595 "DescribeQuorum Request Handling" with the KIP-836 timestamps."""

from __future__ import annotations

import time

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.errors import Errors


@case("KIP-836/DescribeQuorum/1")
async def test_leader_reports_progress(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    v2, v3 = sc.v(0), sc.v(1)
    t0 = int(time.time() * 1000)
    await sc.call("Fetch is answered", v2.follow_once(epoch))
    t1 = int(time.time() * 1000)
    resp = await sc.call("DescribeQuorum is answered", v3.describe_quorum())
    part = B.partition(resp)
    summary = B.describe("DescribeQuorum", "response", resp)
    sc.check(not resp.get("ErrorCode") and not part.get("ErrorCode"), "the leader answers DescribeQuorum",
             "no error", summary)
    sc.check((part.get("LeaderId"), part.get("LeaderEpoch")) == (sc.target_id, epoch), "who leads, in which epoch",
             f"LeaderId={sc.target_id}, LeaderEpoch={epoch}", summary)
    sc.check(part.get("HighWatermark") == log.end, "the high watermark (v2 holds everything)",
             f"HighWatermark={log.end}", summary)
    rows = {int(r["ReplicaId"]): r for r in part.get("CurrentVoters", [])}
    sc.check(sorted(rows) == sc.q.voter_ids, "CurrentVoters lists every voter", sc.q.voter_ids, sorted(rows))
    sc.check(rows[sc.target_id]["LogEndOffset"] == log.end, "the leader's own LogEndOffset",
             f"LogEndOffset={log.end}", rows[sc.target_id])
    r2 = rows[v2.node_id]
    skew = sc.slack_ms
    sc.check(r2["LogEndOffset"] == log.end, f"v{v2.node_id}'s LogEndOffset (its last FetchOffset)",
             f"LogEndOffset={log.end}", r2)
    if "LastFetchTimestamp" in r2:
        sc.check(t0 - skew <= r2["LastFetchTimestamp"] <= t1 + skew,
                 f"v{v2.node_id}'s LastFetchTimestamp: it fetched between {t0} and {t1} (wall clock, ms)",
                 f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)", r2["LastFetchTimestamp"])
        sc.check(t0 - skew <= r2["LastCaughtUpTimestamp"] <= t1 + skew,
                 f"v{v2.node_id}'s LastCaughtUpTimestamp: that fetch reached the leader's log end",
                 f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)", r2["LastCaughtUpTimestamp"])
        r3 = rows[v3.node_id]
        sc.check((r3["LogEndOffset"], r3["LastFetchTimestamp"], r3["LastCaughtUpTimestamp"]) == (-1, -1, -1),
                 f"v{v3.node_id} never fetched from this leader", "LogEndOffset, LastFetchTimestamp, "
                 "LastCaughtUpTimestamp all -1 (unknown)", r3)
    else:
        sc.fail("DescribeQuorum v1+ carries the KIP-836 timestamps", "LastFetchTimestamp in ReplicaState",
                f"the target answered a version without them: {r2}")


@case("KIP-595/DescribeQuorum/1")
async def test_non_leader_refuses(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    resp = await sc.call("DescribeQuorum is answered", sc.v(1).describe_quorum())
    part = B.partition_or_none(resp)
    err = int(resp.get("ErrorCode", 0)) or int((part or {}).get("ErrorCode", 0))
    summary = B.describe("DescribeQuorum", "response", resp)
    sc.check(err == Errors.NOT_LEADER_OR_FOLLOWER, "a follower asked DescribeQuorum", "NOT_LEADER_OR_FOLLOWER",
             summary)
    if part is not None:
        sc.check((part.get("LeaderId"), part.get("LeaderEpoch")) == (a, epoch),
                 "the answer names the leader the node knows", f"LeaderId={a}, LeaderEpoch={epoch}", summary)
