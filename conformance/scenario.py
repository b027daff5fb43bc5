"""One running case: its checks (failures carry the clause, expected vs actual and the last frames) and
the moves every scenario is built from (make the target a follower, make it leader, feed it records).

Scenarios never assume a fresh target: each starts from the epoch the target is in (learned from the
exchange itself) and moves forward. Timing checks use ``bound_ms``: the protocol timeout plus a stated
slack (``Scenario.slack_ms``: 250 ms + half the larger of the target's election/fetch timeouts) that
absorbs scheduling delays of a loaded machine without hiding a missing timer.

Every check has a verdict level (``Level``): MUST (a KIP normative rule or a safety property: a miss
fails the case), KAFKA (Apache Kafka's choice where the KIP leaves room: a miss is recorded on the
case as "differs from Kafka", naming the row of spec/kafka-behaviour.yaml, and the case goes on; only
``--strict`` fails it) and INFO (recorded only, whatever the outcome). A case passes against any
target the KIP allows; KAFKA checks say where the target is not Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, overload

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.catalog import CaseSpec, Clause
from kraft_tck.conformance.target import RestartUnsupported, Target, Timeouts
from kraft_tck.conformance.transport import RequestError
from kraft_tck.conformance.virtual import Frame, FrameLog, Quorum
from kraft_tck.spec.errors import Errors

#: How many frames a failure message shows.
LAST_FRAMES = 12


class Level(enum.StrEnum):
    """How a check's miss counts (see the module docstring)."""

    MUST = "MUST"
    KAFKA = "KAFKA"
    INFO = "INFO"


MUST, KAFKA, INFO = Level.MUST, Level.KAFKA, Level.INFO


class CaseSkipped(Exception):
    """The case cannot run against this target (e.g. it needs a restart); the message says what to pass."""


def format_frames(frames: list[Frame], target_id: int, n: int = LAST_FRAMES) -> str:
    shown = frames[-n:]
    lines = [f"  ... {len(frames) - n} earlier frame(s)"] if len(frames) > n else []
    for fr in shown:

        def name(node: int) -> str:
            return "target" if node == target_id else f"v{node}" if node >= 0 else "?"

        arrow = f"{name(fr.src):>7} -> {name(fr.dst):<7}" if fr.kind != "note" else f"{name(fr.src):>7} ** note  "
        lines.append(f"  {fr.ts_ms:8.1f} ms  {arrow} {fr.summary()}")
    return "\n".join(lines) if lines else "  (no frames exchanged)"


class ConformanceFailure(AssertionError):
    """A clause the target broke: what was checked, expected vs actual, and the exchange that showed it."""

    def __init__(
        self,
        case: CaseSpec,
        what: str,
        expected: str,
        actual: str,
        frames: list[Frame],
        target_id: int,
        clause: Clause | None = None,
    ) -> None:
        self.case = case
        self.what = what
        self.expected = expected
        self.actual = actual
        self.frames = frames
        self.clause = clause or case.clause
        self.target_id = target_id
        #: what the session adds about the harness itself (its event loop stalled while the case ran)
        self.harness_note = ""
        super().__init__(self.render())

    def render(self) -> str:
        return (
            f"{self.case.id} — {self.case.title}\n"
            f"clause:   {self.clause}\n"
            f"check:    {self.what}\n"
            f"expected: {self.expected}\n"
            f"actual:   {self.actual}\n"
            + (f"harness:  {self.harness_note}\n" if self.harness_note else "")
            + f"last messages (harness view):\n{format_frames(self.frames, self.target_id)}"
        )

    def note_harness(self, note: str) -> None:
        self.harness_note = note
        self.args = (self.render(),)


@dataclass
class Scenario:
    case: CaseSpec
    quorum: Quorum
    target: Target
    timeouts: Timeouts
    #: KAFKA-level misses: the target took another choice than Kafka's (check, expected, actual, kafka row)
    kafka_differences: list[dict[str, Any]] = field(default_factory=list)
    #: INFO-level checks, met or not (check, expected, actual, met)
    observations: list[dict[str, Any]] = field(default_factory=list)
    #: seconds spent relaunching the target (restart_target): not counted against the case's time budget
    relaunch_s: float = 0.0
    relaunch_started: float | None = None  # the event loop's time a relaunch in progress began
    #: the event loop's (start, end) of each relaunch: the harness's stalls in them judged nothing (the target is down)
    relaunch_windows: list[tuple[float, float]] = field(default_factory=list)

    def relaunch_time(self, now: float) -> float:
        """Seconds spent relaunching the target so far, one in progress included."""
        return self.relaunch_s + (now - self.relaunch_started if self.relaunch_started is not None else 0.0)

    @property
    def q(self) -> Quorum:
        return self.quorum

    @property
    def frames(self) -> FrameLog:
        return self.quorum.frames

    @property
    def target_id(self) -> int:
        return self.target.node_id

    @property
    def virtual_ids(self) -> list[int]:
        return sorted(self.quorum.voters)

    @property
    def slack_ms(self) -> int:
        return 250 + max(self.timeouts.election_ms, self.timeouts.fetch_ms) // 2

    def bound_ms(self, base_ms: float) -> float:
        return base_ms + self.slack_ms

    @property
    def followers(self) -> list[int]:
        """The virtual voters that, with the target, make a bare majority (v2 of 3 voters; v2, v3 of 5)."""
        majority = len(self.quorum.voter_ids) // 2 + 1
        return self.virtual_ids[: majority - 1]

    @property
    def bystander(self) -> int:
        """A virtual voter outside ``followers``: never fetches unless a case says so."""
        return self.virtual_ids[-1]

    def v(self, index: int = 0) -> Any:
        """The ``index``-th virtual voter (0: the lowest id)."""
        return self.quorum.voters[self.virtual_ids[index]]

    # ---------------------------------------------------------------- failing

    @overload
    def fail(
        self,
        what: str,
        expected: str,
        actual: str,
        clause: Clause | None = None,
        level: Literal[Level.MUST] = Level.MUST,
        kafka: str | None = None,
    ) -> NoReturn: ...

    @overload
    def fail(
        self,
        what: str,
        expected: str,
        actual: str,
        clause: Clause | None = None,
        *,
        level: Level,
        kafka: str | None = None,
    ) -> None: ...

    def fail(
        self,
        what: str,
        expected: str,
        actual: str,
        clause: Clause | None = None,
        level: Level = Level.MUST,
        kafka: str | None = None,
    ) -> None:
        """A miss: MUST fails the case; KAFKA records a difference from Kafka (``kafka``: the row id of
        spec/kafka-behaviour.yaml) and returns; INFO records an observation and returns."""
        if level == Level.MUST:
            frames = list(self.frames.frames)
            raise ConformanceFailure(self.case, what, expected, actual, frames, self.target_id, clause)
        self._record(level, False, what, expected, actual, clause, kafka)

    def check(
        self,
        ok: bool,
        what: str,
        expected: str,
        actual: Any,
        clause: Clause | None = None,
        level: Level = Level.MUST,
        kafka: str | None = None,
    ) -> bool:
        """``ok`` or a miss at ``level`` (see ``fail``); returns ``ok``. An INFO check is recorded either way."""
        if not ok:
            self.fail(what, expected, str(actual), clause, level=level, kafka=kafka)
        elif level == Level.INFO:
            self._record(level, True, what, expected, str(actual), clause, kafka)
        return ok

    def _record(
        self, level: Level, met: bool, what: str, expected: str, actual: str, clause: Clause | None, kafka: str | None
    ) -> None:
        if level == Level.KAFKA and kafka is None:
            raise ValueError(f"a KAFKA-level check names its spec/kafka-behaviour.yaml row: {what}")
        entry = {
            "level": str(level), "check": what, "expected": expected, "actual": actual, "kafka": kafka,
            "clause": str(clause or self.case.clause), "met": met,
        }  # fmt: skip
        (self.kafka_differences if level == Level.KAFKA else self.observations).append(entry)
        text = "differs from Kafka" if level == Level.KAFKA else ("INFO" if met else "INFO (not met)")
        self.frames.note(self.target_id, f"{text}: {what}: expected {expected}, actual {actual}")

    def skip(self, reason: str) -> NoReturn:
        raise CaseSkipped(reason)

    def require(self, capability: str, why: str) -> None:
        """Skip the case unless the target has ``capability`` (conformance/target.py ``CAPABILITIES``):
        its profile (``--target-profile``) states it and, for ``restart``, the adapter can kill -9 and
        relaunch it. The reason names the capability, the profile and what to pass."""
        missing = self.target.capability_missing(capability)
        if missing is not None:
            self.skip(f"needs capability {capability!r} ({why}): {missing}")

    async def expect_frame(
        self,
        pred: Callable[[Frame], bool],
        timeout_ms: float,
        what: str,
        expected: str,
        start: int | None = None,
        clause: Clause | None = None,
    ) -> Frame:
        fr = await self.frames.wait_for(pred, timeout_ms / 1000, self.frames.mark() if start is None else start)
        if fr is None:
            self.fail(what, expected, f"nothing matching within {timeout_ms:.0f} ms", clause)
        return fr

    async def call(self, what: str, coro: Any, clause: Clause | None = None) -> dict[str, Any]:
        """Await a request to the target; no answer at all is a failure of ``what``."""
        try:
            resp: dict[str, Any] = await coro
        except RequestError as exc:
            self.fail(what, "a response", f"no response: {exc}", clause)
        return resp

    async def target_pre_vote(self) -> bool:
        """Does the target run KIP-996 pre-vote? Decided by its ApiVersions: Vote v2 advertised (Kafka 4.x)."""
        client = await self.v(0).connect()
        return client.versions.get(B.VOTE, (0, 0))[1] >= 2

    # ---------------------------------------------------------------- frame predicates

    def from_target(self, api: str, kind: str = "request", dst: int | None = None) -> Callable[[Frame], bool]:
        def pred(fr: Frame) -> bool:
            return fr.src == self.target_id and fr.api == api and fr.kind == kind and (dst is None or fr.dst == dst)

        return pred

    def _fetch_to(self, leader: int, epoch: int) -> Callable[[Frame], bool]:
        def pred(fr: Frame) -> bool:
            return self.from_target("Fetch", dst=leader)(fr) and fr.part.get("CurrentLeaderEpoch") == epoch

        return pred

    # ---------------------------------------------------------------- moves

    async def make_follower(self, leader: int | None = None) -> int:
        """A virtual voter announces itself leader of a fresh epoch (BeginQuorumEpoch); returns the epoch
        once the target fetches from it in that epoch."""
        lid = self.virtual_ids[0] if leader is None else leader
        voter = self.quorum.voters[lid]
        setup = Clause("KIP-595", "BeginQuorumEpoch Request Handling")
        last, misses = "", 0
        for _ in range(8):
            epoch = self.quorum.next_epoch()
            self.quorum.set_leader(lid, epoch)
            mark = self.frames.mark()
            resp = await self.call(
                f"setup: BeginQuorumEpoch(epoch={epoch}) from v{lid} is answered",
                voter.begin_quorum_epoch(epoch),
                setup,
            )
            part = B.partition(resp)
            err = int(resp.get("ErrorCode", 0)) or int(part.get("ErrorCode", 0))
            if err == Errors.FENCED_LEADER_EPOCH or int(part.get("LeaderEpoch", -1)) > epoch:
                self.quorum.observe_epoch(int(part.get("LeaderEpoch", -1)))
                last = f"fenced: target is at epoch {part.get('LeaderEpoch')}"
                continue  # the target moved on meanwhile (its own election); go above it
            self.check(
                err == 0,
                f"setup: target accepts BeginQuorumEpoch(leader=v{lid}, epoch={epoch})",
                "ErrorCode NONE",
                B.error_name(err),
                setup,
            )
            bound = self.bound_ms(self.timeouts.request_timeout_ms + self.timeouts.fetch_max_wait_ms)
            got = await self.frames.wait_for(self._fetch_to(lid, epoch), bound / 1000, mark)
            if got is not None:
                return epoch
            # A node still in reconnect backoff towards v{lid} may miss its fetch timeout and move on to
            # an election; announcing a fresh epoch again is a legitimate next step, a few times.
            misses += 1
            last = f"no Fetch(CurrentLeaderEpoch={epoch}) to v{lid} within {bound:.0f} ms ({misses} time(s))"
            self.frames.note(lid, last)
            if misses >= 3:
                break
        self.fail(
            "setup: the target follows a virtual leader announced with BeginQuorumEpoch",
            f"Fetch to v{lid} in the announced epoch",
            last,
            setup,
        )

    async def catch_up(self, leader: int, epoch: int) -> None:
        """Wait until the target has fetched the whole harness log and learned its high watermark (the
        Fetch after the one that reached the log end proves the answer was processed)."""
        log = self.quorum.log
        clause = Clause("KIP-595", "Fetch Response Handling")

        def at_end(f: Frame) -> bool:
            p = f.part
            # an empty log: Kafka sends LastFetchedEpoch 0; -1 (no KIP text fixes it) is told apart below
            last_ok = p.get("LastFetchedEpoch") == log.last_epoch or (log.end == 0 and p.get("LastFetchedEpoch") == -1)
            return (
                self.from_target("Fetch", dst=leader)(f)
                and p.get("CurrentLeaderEpoch") == epoch
                and p.get("FetchOffset") == log.end
                and last_ok
            )

        fr = await self.expect_frame(
            at_end,
            self.bound_ms(3000),
            "target appends what its leader serves",
            f"Fetch(offset={log.end}, lastFetchedEpoch={log.last_epoch})",
            0,
            clause,
        )
        self.check(
            fr.part.get("LastFetchedEpoch") == log.last_epoch,
            "a follower with an empty log fetches with LastFetchedEpoch 0 (Kafka refuses -1 as INVALID_REQUEST)",
            f"Fetch(offset={log.end}, lastFetchedEpoch={log.last_epoch})",
            fr.summary(),
            level=KAFKA,
            kafka="fetch.empty-log-sentinel",
        )
        # the virtual leader answers the Fetch at the log end at once (not after its MaxWaitMs park): the next
        # Fetch then comes a round trip later
        self.quorum.answer_at_once = True
        self.quorum.changed()
        try:
            await self.expect_frame(
                self.from_target("Fetch", dst=leader),
                self.bound_ms(1000),
                "target keeps fetching",
                "another Fetch",
                fr.seq + 1,
                clause,
            )
        finally:
            self.quorum.answer_at_once = False

    async def make_leader(self, follow: bool = True) -> int:
        """Elect the target: it follows v_a, v_a resigns naming it first (EndQuorumEpoch), the virtual
        voters grant its votes; returns its leader epoch once it sent BeginQuorumEpoch and a virtual
        follower mirrored its log (LeaderChange included)."""
        lead = self.virtual_ids[0]
        epoch = await self.make_follower(lead)
        await self.catch_up(lead, epoch)
        target = self.target_id
        for v in self.quorum.voters.values():
            v.vote_policy = lambda cand, _e, _p: cand == target
        mark = self.frames.mark()
        others = [vid for vid in self.virtual_ids if vid != lead]
        await self.call(
            "setup: EndQuorumEpoch is answered", self.quorum.voters[lead].end_quorum_epoch(epoch, [target, *others])
        )
        self.quorum.set_leader(-1, -1)
        t = self.timeouts
        bqe = await self.expect_frame(
            lambda f: self.from_target("BeginQuorumEpoch")(f) and int(f.part.get("LeaderEpoch", -1)) > epoch,
            self.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms),
            "setup: the target, granted every vote, becomes leader",
            "BeginQuorumEpoch from the target",
            mark,
            Clause("KIP-595", "Vote Response Handling", "2"),
        )
        new_epoch = int(bqe.part["LeaderEpoch"])
        for v in self.quorum.voters.values():
            v.vote_policy = lambda _c, _e, _p: False
        if self.quorum.log.end == 0:  # it campaigned with an empty log: Kafka's sentinel is (0, 0)
            votes = self.frames.select(
                lambda f: self.from_target("Vote")(f) and f.part.get("CandidateEpoch") == new_epoch, mark
            )
            for f in votes[:1]:
                self.check(
                    (f.part.get("LastOffsetEpoch"), f.part.get("LastOffset")) == (0, 0),
                    "a candidate with an empty log asks with LastOffsetEpoch 0, LastOffset 0 (Kafka refuses -1)",
                    "Vote(last=0/0)",
                    f.summary(),
                    level=KAFKA,
                    kafka="vote.empty-log-sentinel",
                )
        if follow:
            for vid in self.followers:
                await self.follow_all(vid, new_epoch)
        return new_epoch

    async def follow_all(self, voter_id: int, epoch: int, rounds: int = 20) -> dict[str, Any]:
        """Fetch from the target leader until nothing new comes back; returns the last response."""
        voter = self.quorum.voters[voter_id]
        resp: dict[str, Any] = {}
        for _ in range(rounds):
            resp = await self.call(f"v{voter_id} fetches from the target leader", voter.follow_once(epoch))
            part = B.partition(resp)
            if part.get("ErrorCode", 0) or resp.get("ErrorCode", 0):
                return resp
            if not B.records_of(part) and B.diverging_of(part) is None:
                return resp
        return resp

    def keep_fetching(self, voter_id: int, epoch: int, every_ms: int | None = None) -> asyncio.Task[Any]:
        """A virtual follower fetching from the target leader in the background until the case ends."""
        voter = self.quorum.voters[voter_id]
        period = (every_ms or max(20, self.timeouts.fetch_ms // 6)) / 1000

        async def loop() -> None:
            while True:
                with contextlib.suppress(RequestError):
                    await voter.follow_once(epoch)
                await asyncio.sleep(period)

        return self.quorum.spawn(loop())

    async def feed(self, leader: int, epoch: int, values: int, commit: bool = True) -> None:
        """The virtual leader appends ``values`` metadata records in ``epoch`` (``VLog.append_metadata``: what
        a Kafka controller can replay); waits until the target holds them."""
        self.quorum.log.append_metadata(epoch, values, commit)
        self.quorum.changed()
        await self.catch_up(leader, epoch)

    async def idle(self, seconds: float) -> None:
        """Let the target's timers run (counted as protocol wait in the benchmark)."""
        await asyncio.sleep(seconds)
        self.frames.waited_s += seconds

    def retire_life(self) -> None:
        """The case is done with the target's current life (it ran with other properties, as an observer, on an
        unformatted directory, or left it where no later case may start): no later case runs in it. The wiped
        relaunch that gives the next case a plain, formatted target is made when that case starts
        (``Session.run_case``), and spared when that case relaunches on a wiped directory itself first (``@case(...,
        own_life=True)``) or no case follows. A target the harness cannot relaunch keeps its life."""
        if self.target.capability_missing("restart") is None:
            self.target.retired = True

    async def restart_target(self, wipe: bool = False, formatted: bool = True) -> None:
        """kill -9 and start again on the same data (or a wiped one); skips when the adapter cannot."""
        self.require("restart", "kill -9 and restart the target")
        if not formatted:
            self.require("unformatted-start", "start the target on an unformatted directory")
        self.frames.note(self.target_id, f"kill -9 and restart the target{' on a wiped directory' if wipe else ''}")
        for v in self.quorum.voters.values():
            if v.server is not None:
                self.frames.killed_peers |= v.server.open_peers()
        for v in self.quorum.voters.values():
            if v.client is not None:
                await v.client.close()
        loop = asyncio.get_running_loop()
        self.relaunch_started = loop.time()
        try:
            await loop.run_in_executor(None, lambda: self.target.restart(wipe=wipe, formatted=formatted))
        except RestartUnsupported as exc:
            self.skip(str(exc))
        finally:
            self.relaunch_windows.append((self.relaunch_started, loop.time()))
            self.relaunch_s, self.relaunch_started = self.relaunch_time(loop.time()), None
