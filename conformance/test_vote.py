"""KIP-595 "Vote Request Handling": the target as a voter."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario

FAR = 1_000_000  # a LastOffset no target log reaches in a test


def granted(resp: dict[str, object]) -> bool:
    return bool(B.partition(resp).get("VoteGranted"))


def vote_summary(resp: dict[str, object]) -> str:
    return B.describe("Vote", "response", resp)


#: rounds a case may find inconclusive (the target's election timer fired before the harness's question arrived;
#: on a loaded machine a relaunched node can take a few hundred ms to answer) before it fails
ROUNDS = 6


def moved_on(resp: dict[str, object], epoch: int) -> bool:
    """The target refused because its own election timer already took it past `epoch`: the check is inconclusive.

    A slow machine can stretch one round trip past the target's election timeout; that says nothing about the
    clause under test, so the case starts over in a fresh epoch instead of failing.
    """
    return not granted(resp) and int(B.partition(resp).get("LeaderEpoch", -1)) > epoch


async def follower_with_records(sc: Scenario) -> int:
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 2)
    return epoch


@case("KIP-595/Vote/1")
async def test_grant_up_to_date_higher_epoch(sc: Scenario) -> None:
    await follower_with_records(sc)
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(1).vote(e, log.last_epoch, log.end))
    sc.check(
        granted(resp),
        f"vote for v{sc.virtual_ids[1]} in epoch {e} with a log equal to the target's",
        "VoteGranted=true",
        vote_summary(resp),
    )
    sc.check(
        B.partition(resp).get("LeaderEpoch") == e,
        "the voter moved to the candidate's epoch",
        f"LeaderEpoch={e}",
        vote_summary(resp),
    )


@case("KIP-595/Vote/2")
async def test_refuse_older_last_epoch(sc: Scenario) -> None:
    epoch = await follower_with_records(sc)
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(1).vote(e, epoch - 1, log.end + FAR))
    sc.check(
        not granted(resp),
        f"vote with LastOffsetEpoch={epoch - 1} < the target's last epoch {epoch}",
        "VoteGranted=false",
        vote_summary(resp),
    )
    e2 = sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(0).vote(e2, log.last_epoch, log.end))
    sc.check(
        granted(resp),
        "control: a vote with the target's own last epoch/offset in a newer epoch",
        "VoteGranted=true",
        vote_summary(resp),
    )


@case("KIP-595/Vote/3")
async def test_refuse_shorter_log_same_epoch(sc: Scenario) -> None:
    await follower_with_records(sc)
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(1).vote(e, log.last_epoch, log.end - 1))
    sc.check(
        not granted(resp),
        f"vote with LastOffset={log.end - 1} < the target's log end {log.end} (same epoch)",
        "VoteGranted=false",
        vote_summary(resp),
    )
    e2 = sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(0).vote(e2, log.last_epoch, log.end))
    sc.check(
        granted(resp),
        "control: the same last epoch with LastOffset = the target's log end",
        "VoteGranted=true",
        vote_summary(resp),
    )


@case("KIP-595/Vote/4")
async def test_refuse_older_epoch(sc: Scenario) -> None:
    epoch = await sc.make_follower()
    while epoch < 2:  # the stale candidate's epoch must be >= 1 with a last epoch below it
        epoch = await sc.make_follower()
    # LastOffsetEpoch < CandidateEpoch: a candidate cannot hold records of the epoch it stands in
    # (KafkaRaftClient.handleVoteRequest answers INVALID_REQUEST to that, before any epoch check).
    resp = await sc.call("Vote is answered", sc.v(1).vote(epoch - 1, epoch - 2, FAR))
    part = B.partition(resp)
    sc.check(
        not granted(resp),
        f"vote in epoch {epoch - 1} < the voter's epoch {epoch}",
        "VoteGranted=false",
        vote_summary(resp),
    )
    sc.check(
        part.get("LeaderEpoch") == epoch,
        "the refusal names the voter's epoch",
        f"LeaderEpoch={epoch}",
        vote_summary(resp),
    )


@case("KIP-595/Vote/5")
async def test_one_vote_per_epoch(sc: Scenario) -> None:
    last = ""
    for _ in range(ROUNDS):
        await follower_with_records(sc)
        log, e = sc.q.log, sc.q.next_epoch()
        a, b = sc.v(1), sc.v(0)
        resp = await sc.call("Vote is answered", a.vote(e, log.last_epoch, log.end + FAR))
        if moved_on(resp, e):
            last = vote_summary(resp)
            continue
        sc.check(granted(resp), f"first vote in epoch {e} (v{a.node_id})", "VoteGranted=true", vote_summary(resp))
        resp = await sc.call("Vote is answered", b.vote(e, log.last_epoch, log.end + FAR))
        if moved_on(resp, e):
            last = vote_summary(resp)
            continue
        sc.check(
            not granted(resp),
            f"a second candidate v{b.node_id} in the same epoch {e}",
            "VoteGranted=false",
            vote_summary(resp),
        )
        resp = await sc.call("Vote is answered", a.vote(e, log.last_epoch, log.end + FAR))
        if moved_on(resp, e):
            last = vote_summary(resp)
            continue
        sc.check(
            granted(resp),
            f"the same candidate v{a.node_id} asking again in epoch {e}",
            "VoteGranted=true",
            vote_summary(resp),
        )
        return
    sc.fail(
        "ask the target three times within its election timeout",
        "answers in the voted epoch",
        f"it had moved to a newer epoch every time: {last}",
    )


@case("KIP-595/Vote/6")
async def test_leader_refuses_same_epoch(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    # LastOffsetEpoch must be below CandidateEpoch (else INVALID_REQUEST, KafkaRaftClient.handleVoteRequest)
    resp = await sc.call("Vote is answered", sc.v(1).vote(epoch, epoch - 1, sc.q.log.end + FAR))
    sc.check(
        not granted(resp),
        f"the leader of epoch {epoch} asked for a vote in {epoch}",
        "VoteGranted=false",
        vote_summary(resp),
    )


@case("KIP-595/Vote/7")
async def test_follower_refuses_same_epoch(sc: Scenario) -> None:
    # No records in the new epoch: the candidate's log (the target's last epoch, a longer log) is at
    # least as up-to-date, so only "one leader per epoch" refuses; LastOffsetEpoch stays below
    # CandidateEpoch (else INVALID_REQUEST, KafkaRaftClient.handleVoteRequest).
    epoch = await sc.make_follower()
    log = sc.q.log
    resp = await sc.call("Vote is answered", sc.v(1).vote(epoch, log.last_epoch, log.end + FAR))
    sc.check(
        not granted(resp),
        f"a follower of v{sc.virtual_ids[0]} in epoch {epoch} asked for a vote in {epoch}",
        "VoteGranted=false",
        vote_summary(resp),
    )


@case("KIP-595/Vote/8")
async def test_vote_survives_restart(sc: Scenario) -> None:
    sc.require("restart", "the vote must survive kill -9 and a relaunch on the same directory")
    last = ""
    for _ in range(ROUNDS):
        await follower_with_records(sc)
        log, e = sc.q.log, sc.q.next_epoch()
        resp = await sc.call("Vote is answered", sc.v(1).vote(e, log.last_epoch, log.end + FAR))
        sc.check(granted(resp), f"vote for v{sc.virtual_ids[1]} in epoch {e}", "VoteGranted=true", vote_summary(resp))
        await sc.restart_target()
        resp = await sc.call("Vote is answered after the restart", sc.v(0).vote(e, log.last_epoch, log.end + FAR))
        if moved_on(resp, e):
            # The restarted node's election timer fired before the question arrived: inconclusive, again.
            last = vote_summary(resp)
            continue
        sc.check(
            not granted(resp),
            f"after kill -9, another candidate v{sc.virtual_ids[0]} in epoch {e}",
            f"VoteGranted=false, LeaderEpoch={e} (the vote for v{sc.virtual_ids[1]} was persisted)",
            vote_summary(resp),
        )
        return
    sc.fail(
        "ask the restarted target within its election timeout",
        "an answer in the voted epoch",
        f"it had moved to a newer epoch every time: {last}",
    )
