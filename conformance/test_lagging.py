"""KIP-836 DescribeQuorum for a replica that fetches but lags.

LastCaughtUpTimestamp is "the last time a replica caught up to the leader": a fetch whose offset reached
the leader's log end offset at the time of that fetch, or (Kafka's refinement, LeaderState.ReplicaState
.updateFollowerState) reached the log end the leader had at the replica's previous fetch, which credits
that previous fetch's time. A fetch below both leaves it where it was; LastFetchTimestamp and
LogEndOffset (the FetchOffset) move with every fetch."""

from __future__ import annotations

import time
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario


async def row_of(sc: Scenario, vid: int) -> dict[str, Any]:
    dq = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.virtual_ids[0]].describe_quorum())
    part = B.partition(dq)
    rows = {int(r["ReplicaId"]): r for r in part.get("CurrentVoters", [])}
    sc.check(
        vid in rows and "LastCaughtUpTimestamp" in rows[vid],
        f"DescribeQuorum (v1+, KIP-836) has v{vid}'s row with its timestamps",
        "CurrentVoters row with LastFetchTimestamp, LastCaughtUpTimestamp",
        B.describe("DescribeQuorum", "response", dq),
    )
    return dict(rows[vid])


@case("KIP-836/Lagging/1")
async def test_lagging_replica_not_caught_up(sc: Scenario) -> None:
    epoch = await sc.make_leader()  # the followers mirror the leader's log: sc.q.log.end is its log end
    log = sc.q.log
    vid = sc.bystander  # has not fetched from this leader yet
    lagger = sc.q.voters[vid]
    behind = log.end - 1  # one record short of the leader's log end, at every fetch
    lfe = log.epoch_at(behind - 1) if behind else 0
    skew = sc.slack_ms
    gap_s = max(0.1, sc.timeouts.fetch_ms / 4000)
    rows = []
    for k in range(2):
        t0 = int(time.time() * 1000)
        await sc.call(f"v{vid}'s lagging Fetch #{k + 1} is answered", lagger.fetch(epoch, behind, lfe))
        t1 = int(time.time() * 1000)
        row = await row_of(sc, vid)
        rows.append(row)
        sc.check(
            row["LogEndOffset"] == behind,
            f"v{vid}'s LogEndOffset is its last FetchOffset",
            f"LogEndOffset={behind} (the leader's end is {log.end})",
            row,
        )
        sc.check(
            t0 - skew <= row["LastFetchTimestamp"] <= t1 + skew,
            f"v{vid}'s LastFetchTimestamp: its lagging fetch #{k + 1} came between {t0} and {t1} (wall clock, ms)",
            f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)",
            row["LastFetchTimestamp"],
        )
        sc.check(
            row["LastCaughtUpTimestamp"] < row["LastFetchTimestamp"],
            f"v{vid} fetched one record short of the leader's log end: that fetch did not catch it up",
            f"LastCaughtUpTimestamp before LastFetchTimestamp ({row['LastFetchTimestamp']}); -1 when never caught up",
            row,
        )
        if k == 0:
            await sc.idle(gap_s)
    sc.check(
        rows[1]["LastFetchTimestamp"] > rows[0]["LastFetchTimestamp"],
        f"v{vid}'s LastFetchTimestamp advances with each fetch",
        f"after {rows[0]['LastFetchTimestamp']}",
        rows[1]["LastFetchTimestamp"],
    )
    sc.check(
        rows[1]["LastCaughtUpTimestamp"] == rows[0]["LastCaughtUpTimestamp"],
        f"v{vid}'s LastCaughtUpTimestamp does not advance while it lags (below the leader's end at this fetch "
        "and at its previous one)",
        f"still {rows[0]['LastCaughtUpTimestamp']}",
        rows[1]["LastCaughtUpTimestamp"],
    )
    # Control: reaching the log end catches it up, at the time of that fetch.
    t0 = int(time.time() * 1000)
    await sc.follow_all(vid, epoch)
    t1 = int(time.time() * 1000)
    row = await row_of(sc, vid)
    sc.check(
        row["LogEndOffset"] == log.end and t0 - skew <= row["LastCaughtUpTimestamp"] <= t1 + skew,
        f"control: v{vid} fetched up to the leader's log end between {t0} and {t1}: now caught up",
        f"LogEndOffset={log.end}, LastCaughtUpTimestamp in [{t0 - skew}, {t1 + skew}]",
        row,
    )
