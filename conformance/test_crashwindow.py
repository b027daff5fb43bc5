"""Crash windows: kill -9 the target the instant a response or an acknowledgement leaves it, then relaunch it
on the same directory and check that what it announced was durable (KIP-595 "Vote Request Handling": the
vote is persisted before the response; "Fetch Request Handling" step 4: a follower's FetchOffset tells the
leader which records it holds, and the leader commits on it), and that it comes back in the role Kafka's
QuorumState.initialize gives it (a follower follows its leader again, a leader comes back Resigned).

How "the instant" is reached, and what a repetition buys. The harness kills the target's process group with
SIGKILL from its event loop as soon as the frame is parsed: a Vote grant right after the response to its
request is decoded; an acknowledging Fetch from inside the virtual leader's request handler, before it is
answered. Between the target's send and the SIGKILL there is a delay ``d``: the loopback hop, the harness's
decode and one kill(2): 1.2 to 3.0 ms on a loaded 2-core machine, measured against the reference node's own
trace of the send (each kill's wall-clock time is noted in the frames). A node that makes its state durable
only ``w`` after announcing it (a write-behind store, a write queued behind the send) loses it to a kill that
lands inside that window, i.e. when ``d < w``. With ``p`` the probability that one kill lands inside (1 when
``w`` always exceeds ``d``), ``N`` kills all miss it with probability ``(1 - p) ** N``: for the mutants of
tests/mutants (a window of 300 ms; one drawn uniformly in [0, 20] ms, where ``p >= 1 - d / 20 ms`` >= 0.85
with ``d`` <= 3 ms) the cases below, with ``N`` = 4, miss with probability 0 and at most ``0.15 ** 4`` =
0.0005. A window shorter than the harness's reaction (a write issued microseconds after the send, in the same
step) cannot be seen by a kill from outside; and kill -9 does not empty the page cache, so a missing fsync is
not seen either (that needs a power cut).
"""

from __future__ import annotations

import time
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.conformance.test_vote import FAR, granted, moved_on, vote_summary
from kraft_tck.spec.errors import Errors

#: kills per case: see the module docstring for the probability they buy
KILLS = 4
VOTE = Clause("KIP-595", "Vote Request Handling", "persisted before the response")
ACKED = Clause("KIP-595", "Fetch Request Handling", "4 (FetchOffset acknowledges the records before it)")
HINT = Clause("KIP-595", "Fetch Request Handling", "2 (a follower names its leader)")
#: spec/kafka-behaviour.yaml rows
ROW_FOLLOWER = "restart.follower-follows"
ROW_LEADER = "restart.leader-resigns"


def kill_now(sc: Scenario, what: str) -> float:
    """kill -9 the target at once, from the harness's event loop; returns when it is dead (seconds taken)."""
    wall, t0 = time.time(), time.monotonic()
    sc.target.kill()
    took = time.monotonic() - t0
    sc.frames.note(sc.target_id, f"kill -9 the instant {what}: SIGKILL at wall clock {wall * 1000:.1f} ms, "
                                 f"{took * 1000:.1f} ms to dead")
    return took


def errors_of(resp: dict[str, Any]) -> int:
    return int(resp.get("ErrorCode", 0)) or int(B.partition(resp).get("ErrorCode", 0))


@case("KIP-595/CrashWindow/1")
async def test_vote_durable_when_granted(sc: Scenario) -> None:
    sc.require("restart", "kill -9 the target as its vote grant arrives, and relaunch it on the same directory")
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 1)
    log = sc.q.log
    conclusive, last = 0, ""
    for _ in range(KILLS + 3):  # up to three inconclusive rounds (the restarted node's timer won the race)
        e = sc.q.next_epoch()
        mark = sc.frames.mark()
        resp = await sc.call("Vote is answered", sc.v(1).vote(e, log.last_epoch, log.end + FAR))
        if moved_on(resp, e) or await stood_itself(sc, resp, e, mark):
            last = vote_summary(resp)
            continue
        # the grant is decoded: kill before anything else happens
        kill_now(sc, f"its grant to v{sc.virtual_ids[1]} in epoch {e} arrived")
        sc.check(granted(resp), f"setup: vote for v{sc.virtual_ids[1]} in epoch {e} (an up-to-date candidate)",
                 "VoteGranted=true", vote_summary(resp), VOTE)
        await sc.restart_target()
        again = await sc.call("Vote is answered after the restart", sc.v(0).vote(e, log.last_epoch, log.end + FAR))
        if moved_on(again, e):
            last = vote_summary(again)
            continue
        sc.check(
            not granted(again),
            f"kill -9 the instant the grant to v{sc.virtual_ids[1]} (epoch {e}) left it; after the relaunch "
            f"v{sc.virtual_ids[0]} asks in the same epoch",
            f"VoteGranted=false, LeaderEpoch={e} (the vote was durable before it was sent)",
            vote_summary(again),
            VOTE,
        )
        conclusive += 1
        if conclusive >= KILLS:
            return
    sc.fail("kill -9 at the grant, then ask again in the voted epoch", f"{KILLS} conclusive rounds",
            f"{conclusive}; the relaunched node had moved past the voted epoch: {last}", VOTE)


async def stood_itself(sc: Scenario, resp: dict[str, Any], epoch: int, mark: int) -> bool:
    """The target refused because its own election timer made it a candidate of ``epoch`` (the next epoch is the
    harness's next epoch too) just before the harness's candidate asked: it voted for itself, so the round is
    inconclusive, as when it moved past the epoch. Seen in its own Vote requests of that epoch."""
    if granted(resp):
        return False
    own = await sc.frames.wait_for(
        lambda f: sc.from_target("Vote")(f) and f.part.get("CandidateId", sc.target_id) == sc.target_id
        and int(f.part.get("CandidateEpoch", -1)) >= epoch,
        sc.slack_ms / 1000,
        mark,
    )
    return own is not None


@case("KIP-595/CrashWindow/2")
async def test_acknowledged_records_durable(sc: Scenario) -> None:
    sc.require("restart", "kill -9 the target as its acknowledging Fetch arrives, and relaunch it")
    lead = sc.virtual_ids[0]
    voter = sc.q.voters[lead]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 1)
    log = sc.q.log
    t = sc.timeouts
    for round_ in range(KILLS):
        log.append_metadata(epoch, 2, commit=False)
        acked = log.end
        killed: list[float] = []

        def hook(body: dict[str, Any], _version: int, acked: int = acked, killed: list[float] = killed) -> None:
            part = B.partition(body)
            if not killed and int(part.get("FetchOffset", -1)) >= acked:
                # the Fetch that says "I hold everything before `acked`": kill before answering it
                killed.append(kill_now(sc, f"its Fetch(FetchOffset={part.get('FetchOffset')}) reached v{lead}"))
            return None

        voter.fetch_hook = hook
        sc.q.changed()  # a parked long-poll sees the new records
        await sc.expect_frame(
            lambda f, acked=acked: sc._fetch_to(lead, epoch)(f) and int(f.part.get("FetchOffset", -1)) >= acked,
            sc.bound_ms(3000),
            "setup: the follower fetches the new records and acknowledges them with its next Fetch",
            f"Fetch(FetchOffset={acked}) to v{lead}",
            0,
            ACKED,
        )
        voter.fetch_hook = None
        sc.check(bool(killed), "setup: the target was killed at its acknowledging Fetch", "killed", killed)
        mark = sc.frames.mark()
        await sc.restart_target()
        first = await sc.expect_frame(
            lambda f: f.src == sc.target_id and f.kind == "request" and f.api in ("Fetch", "Vote"),
            sc.bound_ms(t.request_timeout_ms + t.fetch_ms),
            f"round {round_ + 1}: the relaunched follower asks something",
            f"Fetch(epoch={epoch}, FetchOffset>={acked}) to v{lead}",
            mark,
        )
        fetches = sc.frames.select(lambda f: sc._fetch_to(lead, epoch)(f), mark)
        if fetches:
            sc.check(
                int(fetches[0].part.get("FetchOffset", -1)) >= acked,
                f"round {round_ + 1}: kill -9 the instant its Fetch acknowledged offset {acked}; the relaunched "
                "follower still holds every record it acknowledged",
                f"FetchOffset >= {acked}",
                fetches[0].summary(),
                ACKED,
            )
        # It still knows its leader: a Fetch to it in the epoch is refused naming v{lead} (a restarted node
        # that forgot quorum-state's LeaderId names nobody).
        other = sc.q.voters[sc.virtual_ids[1]]
        resp = await sc.call("Fetch to the relaunched follower is answered",
                             other.fetch(epoch, log.end, log.last_epoch))
        leader = B.partition(resp).get("CurrentLeader") or {}
        sc.check(
            errors_of(resp) == Errors.NOT_LEADER_OR_FOLLOWER
            and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (lead, epoch),
            f"round {round_ + 1}: the relaunched follower of v{lead} (quorum-state LeaderId) names its leader",
            f"NOT_LEADER_OR_FOLLOWER, CurrentLeader=({lead}, {epoch})",
            B.describe("Fetch", "response", resp),
            HINT,
        )
        if not sc.check(
            first.api == "Fetch" and first.dst == lead and first.part.get("CurrentLeaderEpoch") == epoch,
            f"round {round_ + 1}: the relaunched follower fetches from its leader again at once, without a new "
            "BeginQuorumEpoch (Kafka's QuorumState.initialize: FollowerState of the persisted leader)",
            f"Fetch(epoch={epoch}) to v{lead} first",
            first.summary(),
            level=KAFKA,
            kafka=ROW_FOLLOWER,
        ):
            return


@case("KIP-595/CrashWindow/3", own_life=True)
async def test_leader_comes_back_resigned(sc: Scenario) -> None:
    sc.require("restart", "kill -9 the target leader as its Fetch answer arrives, and relaunch it")
    # A life of its own: what the killed leader sent just before the kill may be read after its relaunch
    # (tla/TraceKRaft.tla lets the incarnation before a TargetRestart take hidden steps for it).
    await sc.restart_target(wipe=True)
    try:
        await leader_comes_back_resigned(sc)
    finally:
        sc.retire_life()  # later cases: a life the black-box check validates


async def leader_comes_back_resigned(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    follower = sc.q.voters[sc.followers[0]]
    await sc.call("Fetch is answered", follower.follow_once(epoch))
    kill_now(sc, f"its Fetch answer to v{follower.node_id} arrived")
    mark = sc.frames.mark()
    await sc.restart_target()
    resp = await sc.call(
        "Fetch to the relaunched leader is answered", follower.fetch(epoch, log.end, log.last_epoch)
    )
    err = errors_of(resp)
    sc.check(
        err != 0,
        f"kill -9 the leader of epoch {epoch} the instant a Fetch answer left it; after the relaunch a voter "
        f"fetches in epoch {epoch}: Kafka's QuorumState.initialize brings a leader back Resigned (it never leads "
        "an epoch again after a restart: unflushed records of that epoch may be gone)",
        "an error (NOT_LEADER_OR_FOLLOWER), not a leader's answer",
        B.describe("Fetch", "response", resp),
        level=KAFKA,
        kafka=ROW_LEADER,
    )
    begins = sc.frames.select(
        lambda f: sc.from_target("BeginQuorumEpoch")(f) and f.part.get("LeaderEpoch") == epoch, mark
    )
    sc.check(
        not begins,
        f"the relaunched node does not announce itself leader of epoch {epoch} again",
        "no BeginQuorumEpoch of that epoch",
        begins[0].summary() if begins else "",
        level=KAFKA,
        kafka=ROW_LEADER,
    )
