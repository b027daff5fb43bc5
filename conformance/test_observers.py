"""An observer fetching from the target leader (KIP-595 "Fetch Request Handling" for a replica outside the
voter set; KIP-836 DescribeQuorum "Observers"): served like a follower, never a voter.

The target is configured as a voter (controller.quorum.voters names it), so it cannot be run as an
observer itself; the harness plays the observer: ReplicaId 99, not in the voter set, fetching through a
virtual voter's connection. That it never counts toward the high watermark is KIP-595/HighWatermark/2,
toward check quorum KIP-595/CheckQuorum/1."""

from __future__ import annotations

import time

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import Scenario

OBSERVER = 99
ROWS = Clause("KIP-836", "Public Interfaces (ReplicaState)", "Observers")


@case("KIP-836/Observer/1")
async def test_observer_served_and_listed(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    via = sc.q.voters[sc.bystander]
    offset = max(0, log.end - 1)  # one record behind: its own offset, not the log end a voter reached
    t0 = int(time.time() * 1000)
    resp = await sc.call(
        f"observer {OBSERVER}'s Fetch is answered",
        via.fetch(epoch, offset, log.epoch_at(offset - 1) if offset else 0, replica_id=OBSERVER),
    )
    t1 = int(time.time() * 1000)
    part = B.partition(resp)
    leader = part.get("CurrentLeader") or {}
    sc.check(
        not resp.get("ErrorCode") and not part.get("ErrorCode") and leader.get("LeaderId") in (None, sc.target_id),
        "the leader answers an observer's Fetch as any replica's",
        f"no error, records from {offset}",
        B.describe("Fetch", "response", resp),
        Clause("KIP-595", "Fetch Request Handling"),
    )
    records = B.records_of(part)
    sc.check(
        bool(records) and records[0].base_offset <= offset <= records[-1].last_offset,
        "the observer is served the records from its FetchOffset",
        f"a batch holding offset {offset}",
        B.describe("Fetch", "response", resp),
        Clause("KIP-595", "Fetch Request Handling"),
    )
    dq = await sc.call("DescribeQuorum is answered", via.describe_quorum())
    dpart = B.partition(dq)
    summary = B.describe("DescribeQuorum", "response", dq)
    voters = sorted(int(r["ReplicaId"]) for r in dpart.get("CurrentVoters", []))
    observers = {int(r["ReplicaId"]): r for r in dpart.get("Observers", [])}
    sc.check(voters == sc.q.voter_ids, "CurrentVoters lists the voters only", sc.q.voter_ids, voters, ROWS)
    sc.check(
        OBSERVER in observers,
        f"observer {OBSERVER}, which fetched from the leader, is listed under Observers",
        f"an Observers row with ReplicaId {OBSERVER}",
        summary,
        ROWS,
    )
    row = observers[OBSERVER]
    sc.check(
        row.get("LogEndOffset") == offset,
        f"observer {OBSERVER}'s LogEndOffset is its own last FetchOffset",
        f"LogEndOffset={offset}",
        row,
        ROWS,
    )
    skew = sc.slack_ms
    sc.check(
        "LastFetchTimestamp" in row and t0 - skew <= int(row["LastFetchTimestamp"]) <= t1 + skew,
        f"observer {OBSERVER}'s LastFetchTimestamp: it fetched between {t0} and {t1} (wall clock, ms)",
        f"in [{t0 - skew}, {t1 + skew}] (± {skew} ms)",
        row,
        ROWS,
    )
