"""hypothesis drives fault schedules: the correct core keeps every invariant; a broken core is caught,
and hypothesis shrinks the schedule that catches it (RaftEventSimulationTest / VOPR style)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.roles import Candidate, Leader, Voted
from kraft_tck.traces.sim import Crash, Fault, Lossy, OneWay, Partition, SimConfig, simulate

NODES = (1, 2, 3)
DURATION_MS = 10_000


def _partition(draw: st.DrawFn) -> Partition:
    order = draw(st.permutations(NODES))
    cut = draw(st.integers(1, len(NODES) - 1))
    groups = (tuple(sorted(order[:cut])), tuple(sorted(order[cut:])))
    return Partition(draw(st.integers(0, DURATION_MS)), draw(st.integers(100, 5_000)), groups)


@st.composite
def faults(draw: st.DrawFn) -> Fault:
    at = st.integers(0, DURATION_MS)
    kind = draw(st.sampled_from(["crash", "partition", "oneway", "lossy"]))
    if kind == "crash":
        return Crash(draw(at), draw(st.sampled_from(NODES)), draw(st.integers(0, 4_000)), draw(st.booleans()))
    if kind == "partition":
        return _partition(draw)
    if kind == "oneway":
        src, dst = draw(st.permutations(NODES))[:2]
        return OneWay(draw(at), draw(st.integers(100, 5_000)), src, dst)
    return Lossy(draw(at), draw(st.integers(100, 5_000)), draw(st.floats(0.05, 0.9)))


schedules = st.lists(faults(), max_size=6).map(tuple)
seeds = st.integers(0, 2**16)


def _config(seed: int, schedule: tuple[Fault, ...]) -> SimConfig:
    # The "default" profile: FIFO links with some loss and duplication, skewed clocks, jittery timers.
    return SimConfig(seed=seed, duration_ms=DURATION_MS, faults=schedule, write_rate=20)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=seeds, schedule=schedules)
def test_no_invariant_breaks_on_the_reference_core(seed: int, schedule: tuple[Fault, ...]) -> None:
    result = simulate(_config(seed, schedule))
    assert result.violation is None, f"{result.violation} with schedule {schedule}"
    assert result.events > 0


# ------------------------------------------------------------------------------------ broken cores


class DoubleVote(KRaftCore):
    """Bug: a node that already voted in this epoch — for itself as a candidate, or for another —
    grants the next candidate as well. Followers of a crashed leader time out together, so two
    candidates in one epoch (and this second vote) follow most leader crashes."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Voted | Candidate):
            return True
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class CommitWithoutMajority(KRaftCore):
    """Bug: the leader treats its own log end as committed, without waiting for a majority."""

    def _maybe_advance_high_watermark(self) -> None:
        role = self.role
        if isinstance(role, Leader) and self.log.end_offset > role.epoch_start_offset:
            self._set_high_watermark(self.log.end_offset)


def _violation(core: type[KRaftCore], seed: int, schedule: tuple[Fault, ...]) -> str | None:
    result = simulate(_config(seed, schedule), core_class=core)
    return None if result.violation is None else result.violation.invariant


def _shrunk(core: type[KRaftCore], invariant: str | frozenset[str]) -> tuple[Any, ...]:
    """hypothesis.find: search seeds and schedules for the violation (of ``invariant``, or of any one of a
    set), then shrink to a minimal example."""
    wanted = frozenset({invariant}) if isinstance(invariant, str) else invariant
    return find(
        st.tuples(seeds, schedules),
        lambda example: _violation(core, *example) in wanted,
        settings=settings(max_examples=300, deadline=None, database=None),
    )


def test_a_second_vote_is_caught_as_vote_once() -> None:
    seed, schedule = _shrunk(DoubleVote, "VoteOnce")
    assert _violation(DoubleVote, seed, schedule) == "VoteOnce"  # the shrunk example reproduces
    assert len(schedule) <= 2, f"hypothesis shrank to {schedule}"
    assert _violation(KRaftCore, seed, schedule) is None  # and the correct core passes it


# A leader that commits without a majority breaks LeaderCompleteness (a later leader lacks an entry it
# committed) and CommittedNeverTruncated (another node commits other records at that offset); which one the
# checker meets first depends on the run: since the leader's BeginQuorumEpoch heartbeat (Kafka 3.9+) a
# deposed leader hears of its successor sooner, and it is mostly the first.
COMMIT_WITHOUT_MAJORITY_BREAKS = frozenset({"LeaderCompleteness", "CommittedNeverTruncated"})


def test_committing_without_a_majority_is_caught() -> None:
    seed, schedule = _shrunk(CommitWithoutMajority, COMMIT_WITHOUT_MAJORITY_BREAKS)
    assert _violation(CommitWithoutMajority, seed, schedule) in COMMIT_WITHOUT_MAJORITY_BREAKS
    assert len(schedule) <= 2, f"hypothesis shrank to {schedule}"
    assert _violation(KRaftCore, seed, schedule) is None
