"""KIP-595 "Leader Progress Timeout" (check quorum) with observers fetching and with only a minority of
voters fetching: both a lower and an upper time bound, taken from the target's configured fetch timeout.

Kafka counts only voters (LeaderState.updateCheckQuorumForFollowingVoter -> updateFetchedVoters ignores a
replica outside the voter set) and resets the timer once voters that fetched plus the leader make a
majority; it resigns 1.5 x fetch.timeout after the last reset (KafkaRaftClient.pollLeader)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.conformance.test_leaderprogress import (
    CHECK_QUORUM_FACTOR,
    EARLY_FACTOR,
    ROW_CHECK_QUORUM,
    declared_factor,
    gives_up,
    leads,
)
from kraft_tck.conformance.transport import RequestError

#: A replica id outside the voter set: the harness's observer (a broker, say) fetching from the leader.
OBSERVER = 99
#: How long a majority keeps the leader in office in the lower-bound phase, in fetch timeouts: twice
#: Kafka's check-quorum timeout, so a timer that is never reset by fetches has fired by then.
HOLD_FACTOR = 3


class Fetchers:
    """Virtual voters fetching from the target leader in the background every fetch.timeout/3, the
    observer every fetch.timeout/2, until ``stop`` (a flag, not a cancel: no request is cut off
    mid-flight). Either is several fetches per check-quorum window (Kafka's 1.5 x fetch.timeout, the
    KIP's 1.0 x), and few enough frames to keep the session trace cheap for black-box TLC."""

    def __init__(self, sc: Scenario, epoch: int) -> None:
        self.sc, self.epoch = sc, epoch
        self.voter_period_s = max(20, sc.timeouts.fetch_ms // 3) / 1000
        self.observer_period_s = max(20, sc.timeouts.fetch_ms // 2) / 1000
        self._stops: dict[int, asyncio.Event] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def start_voters(self, voter_ids: Iterable[int]) -> None:
        for vid in voter_ids:
            self._start(vid, self._voter_once(vid), self.voter_period_s)

    def start_observer(self, via: int) -> None:
        """The observer's fetches go through ``via``'s connection, ReplicaId=OBSERVER, at the harness log end."""
        self._start(OBSERVER, self._observer_once(via), self.observer_period_s)

    def _start(self, key: int, step: Callable[[], Awaitable[None]], period_s: float) -> None:
        stop = asyncio.Event()
        self._stops[key] = stop

        async def loop() -> None:
            while not stop.is_set():
                with contextlib.suppress(RequestError):
                    await step()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), period_s)

        self._tasks[key] = self.sc.q.spawn(loop())

    def _voter_once(self, vid: int) -> Callable[[], Awaitable[None]]:
        voter = self.sc.q.voters[vid]

        async def once() -> None:
            await voter.follow_once(self.epoch)

        return once

    def _observer_once(self, via: int) -> Callable[[], Awaitable[None]]:
        voter, log = self.sc.q.voters[via], self.sc.q.log

        async def once() -> None:
            await voter.fetch(self.epoch, log.end, log.last_epoch, replica_id=OBSERVER)

        return once

    async def stop(self, keys: Iterable[int]) -> None:
        for key in keys:
            self._stops[key].set()
        for key in keys:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._tasks[key]


def voter_fetch_answers(sc: Scenario, voters: Iterable[int], start: int = 0) -> list[float]:
    """When the target answered a fetch of one of ``voters`` (ms, frame log clock)."""
    wanted = set(voters)
    return [
        f.ts_ms
        for f in sc.frames.select(lambda f: f.src == sc.target_id and f.api == "Fetch" and f.kind == "response", start)
        if f.dst in wanted
    ]


async def expect_resignation(sc: Scenario, epoch: int, last_majority_ms: float, who: str) -> None:
    """The upper bound (MUST: Kafka's 1.5 x fetch.timeout, which holds the KIP's 1.0 x, plus the slack), the
    lower bound (KAFKA: not before 1.25 x after the last majority fetch), then DescribeQuorum."""
    t = sc.timeouts
    limit = max(CHECK_QUORUM_FACTOR, declared_factor(sc)) * t.fetch_ms
    first = await sc.expect_frame(
        gives_up(sc, epoch),
        sc.bound_ms(limit),
        f"the leader, fetched only by {who}, gives up (neither observers nor a minority of voters keep it leader)",
        f"EndQuorumEpoch or Vote(epoch>{epoch}) within {limit / t.fetch_ms:g} x fetch.timeout = {limit:.0f} ms "
        f"+ slack {sc.slack_ms} ms",
    )
    waited = first.ts_ms - last_majority_ms
    sc.frames.note(sc.target_id, f"gave up with {first.api}, {waited:.0f} ms after the last majority fetch")
    early = EARLY_FACTOR * t.fetch_ms
    sc.check(
        waited >= early,
        "the leader gives up after Kafka's check-quorum timeout, 1.5 x fetch.timeout after the last majority fetch",
        f"at least {early:.0f} ms after it (1.5 x {t.fetch_ms} ms, less scheduling)",
        f"{waited:.0f} ms",
        level=KAFKA,
        kafka=ROW_CHECK_QUORUM,
    )
    resp = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    sc.check(
        not leads(resp, sc.target_id, epoch),
        "after the check-quorum timeout the node no longer acts as leader",
        f"not leader of epoch {epoch}",
        B.describe("DescribeQuorum", "response", resp),
    )


@case("KIP-595/CheckQuorum/1")
async def test_observer_does_not_keep_leader(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    t = sc.timeouts
    fetchers = Fetchers(sc, epoch)
    fetchers.start_voters(sc.followers)
    fetchers.start_observer(sc.bystander)
    # Lower bound: a majority of voters (and the observer) fetching keeps it in office for 3 x fetch.timeout,
    # twice Kafka's check-quorum timeout: the timer is reset by their fetches, not run from the election.
    mark = sc.frames.mark()
    await sc.idle(HOLD_FACTOR * t.fetch_ms / 1000)
    quit_ = sc.frames.select(gives_up(sc, epoch), mark)
    sc.check(
        not quit_,
        f"a leader fetched by a majority of voters for {HOLD_FACTOR} x fetch.timeout keeps leading",
        f"no EndQuorumEpoch, no Vote(epoch>{epoch}) for {HOLD_FACTOR * t.fetch_ms} ms",
        quit_[0].summary() if quit_ else "",
    )
    resp = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    sc.check(
        leads(resp, sc.target_id, epoch),
        "the node still leads while a majority fetches",
        f"LeaderId={sc.target_id}, LeaderEpoch={epoch}",
        B.describe("DescribeQuorum", "response", resp),
    )
    # Upper bound: the voters stop, the observer goes on fetching.
    await fetchers.stop(sc.followers)
    answered = voter_fetch_answers(sc, sc.followers)
    sc.check(bool(answered), "setup: the target answered the voters' fetches", "some", answered)
    await expect_resignation(sc, epoch, answered[-1], f"observer {OBSERVER}")
    await fetchers.stop([OBSERVER])


@case("KIP-595/CheckQuorum/2")
async def test_minority_does_not_keep_leader(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    minority = sc.followers[:-1]  # with the leader, one voter short of a majority (none of 3; v2 of 5)
    stopped = [v for v in sc.virtual_ids if v not in minority]
    last = voter_fetch_answers(sc, stopped)
    sc.check(bool(last), "setup: a majority fetched from the new leader", "some fetch answers", last)
    fetchers = Fetchers(sc, epoch)
    fetchers.start_voters(minority)
    fetchers.start_observer(sc.bystander)
    who = f"voters {minority} and observer {OBSERVER}" if minority else f"observer {OBSERVER} (no voter)"
    await expect_resignation(sc, epoch, last[-1], who)
    await fetchers.stop([*minority, OBSERVER])
