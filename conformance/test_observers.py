"""An observer fetching from the target leader (KIP-595 "Fetch Request Handling" for a replica outside the
voter set; KIP-836 DescribeQuorum "Observers"): served like a follower, never a voter.

In KIP-836/Observer/1 the target is a voter and the harness plays the observer: ReplicaId 99, not in the
voter set, fetching through a virtual voter's connection. That it never counts toward the high watermark is
KIP-595/HighWatermark/2, toward check quorum KIP-595/CheckQuorum/1. KIP-595/Observer/1 turns it round: the
target is relaunched as an observer (its id left out of controller.quorum.voters, process.roles=broker;
capability ``observer``) and must fetch from the leader it finds but never stand for election."""

from __future__ import annotations

import time
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import Level, Scenario
from kraft_tck.conformance.virtual import Frame

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


ONLY_VOTERS = Clause("KIP-595", "Leader Election", "only voters become candidates; observers only fetch")


@case("KIP-595/Observer/1", own_life=True)
async def test_target_as_observer_never_stands(sc: Scenario) -> None:
    sc.require("observer", "relaunch the target with its id outside controller.quorum.voters")
    sc.require("restart", "relaunch the target as an observer and back")
    target = sc.target
    target.observer = True
    try:
        await sc.restart_target(wipe=True)  # a fresh directory: an observer's first life
        # tla/ models the target as a voter: this life is judged by the checks below, not by TLC
        target.unmodelled_lives.add(sc.q.session.life)
        await observer_follows_then_stays_out(sc)
    finally:
        target.observer = False
        sc.retire_life()  # the next case gets a voter again, on a fresh directory


async def observer_follows_then_stays_out(sc: Scenario) -> None:
    t = sc.timeouts
    me = sc.target_id
    lead = sc.virtual_ids[0]
    log = sc.q.log
    epoch = sc.q.next_epoch()
    sc.q.set_leader(lead, epoch)  # no BeginQuorumEpoch: a leader sends it to voters only
    log.append_metadata(epoch, 1)
    sc.q.changed()

    def fetch_to_lead(f: Frame) -> bool:
        return sc.from_target("Fetch", dst=lead)(f) and f.part.get("CurrentLeaderEpoch") == epoch

    found = await sc.expect_frame(
        fetch_to_lead,
        sc.bound_ms(2 * t.request_timeout_ms + t.fetch_ms),
        f"the observer finds the leader v{lead} (asking the voters with Fetch) and fetches from it",
        f"Fetch(epoch={epoch}) to v{lead}",
        0,
        Clause("KIP-595", "Fetch Response Handling", "1 (the leader named by NOT_LEADER_OR_FOLLOWER)"),
    )
    rid = B.fetch_replica_id(found.body)
    sc.check(rid == me, "the observer's Fetch names it (ReplicaId = its node.id)", f"ReplicaId={me}", found.summary())
    await sc.catch_up(lead, epoch)
    mark = sc.frames.mark()
    sc.q.partition(lead)  # the leader goes quiet: a voter would stand for election after fetch.timeout
    quiet = sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms) / 1000
    await sc.idle(quiet)
    votes: list[Any] = sc.frames.select(
        lambda f: f.src == me and f.api in ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch"), mark
    )
    sc.check(
        not votes,
        f"observer {me}, its leader silent for {quiet * 1000:.0f} ms (fetch.timeout + 2 x election.timeout + "
        "backoff + slack), never stands for election",
        "no Vote (nor BeginQuorumEpoch / EndQuorumEpoch) from it",
        votes[0].summary() if votes else "",
        ONLY_VOTERS,
    )
    looks = sc.frames.select(lambda f: sc.from_target("Fetch")(f) and f.dst != lead, mark)
    sc.check(
        bool(looks),
        f"observer {me} looks for a leader among the other voters with Fetch",
        f"a Fetch to a voter other than v{lead}",
        f"{len(sc.frames.select(sc.from_target('Fetch'), mark))} fetches, all to v{lead}",
        ONLY_VOTERS,
        level=Level.INFO,  # how soon an observer gives up on a silent leader is the implementation's choice
    )
