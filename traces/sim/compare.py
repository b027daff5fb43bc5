"""The same seeds with and without pre-vote (KIP-996): how many leader changes and epoch bumps each has.

KIP-996's motivation is a voter that was cut off and comes back: without pre-vote its timers made it a
Candidate again and again while it was away, and its higher epoch forces an election when it returns. The
``reconnect`` fault profile cuts voters off and reconnects them (``FaultProfile.isolations_per_min``);
``compare_pre_vote`` runs each seed twice, pre-vote off then on, with the same schedule (it is drawn from the
seed before any core runs, so both runs see the same faults at the same times).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kraft_tck.traces.sim.cluster import SimConfig, SimResult, simulate


@dataclass(frozen=True)
class SeedPair:
    seed: int
    off: SimResult
    on: SimResult


@dataclass
class PreVoteComparison:
    pairs: list[SeedPair] = field(default_factory=list)

    def total(self, pre_vote: bool, what: Callable[[SimResult], int]) -> int:
        return sum(what(p.on if pre_vote else p.off) for p in self.pairs)

    def violations(self, pre_vote: bool) -> list[tuple[int, str]]:
        return [(p.seed, str(r.violation)) for p in self.pairs
                for r in [p.on if pre_vote else p.off] if r.violation is not None]

    def rows(self) -> list[tuple[str, str, str]]:
        """(item, pre-vote off, pre-vote on), for the simulator's summary and the closing note."""
        def both(what: Callable[[SimResult], int]) -> tuple[str, str]:
            return f"{self.total(False, what):,}", f"{self.total(True, what):,}"

        def seeds_with(what: Callable[[SimResult], bool]) -> tuple[str, str]:
            return (f"{sum(1 for p in self.pairs if what(p.off)):,}",
                    f"{sum(1 for p in self.pairs if what(p.on)):,}")

        epoch_bumps: Callable[[SimResult], int] = lambda r: max(0, r.max_epoch - 1)  # noqa: E731
        return [
            ("seeds", f"{len(self.pairs):,}", f"{len(self.pairs):,}"),
            ("voters cut off and reconnected", *both(lambda r: _isolations(r))),
            ("leader changes (leaders after the first)", *both(lambda r: r.leader_changes)),
            ("seeds with a leader change", *seeds_with(lambda r: r.leader_changes > 0)),
            ("epoch bumps (largest epoch - 1, summed)", *both(epoch_bumps)),
            ("largest epoch of any seed", str(max((p.off.max_epoch for p in self.pairs), default=0)),
             str(max((p.on.max_epoch for p in self.pairs), default=0))),
            ("seeds with an invariant violation", *seeds_with(lambda r: r.violation is not None)),
        ]


def _isolations(r: SimResult) -> int:
    """Partitions that cut exactly one voter off (the ``reconnect`` profile's faults)."""
    from kraft_tck.traces.sim.faults import Partition

    return sum(1 for f in r.faults if isinstance(f, Partition) and len(f.groups) == 1)


def compare_pre_vote(base: SimConfig, seeds: Iterable[int], out: Path | None = None,
                     on_pair: Callable[[SeedPair], None] | None = None) -> PreVoteComparison:
    """Run every seed with ``base``'s settings twice, pre-vote off then on. With ``out``, the traces go to
    ``out/pre-vote-off/seed-N.ndjson`` and ``out/pre-vote-on/seed-N.ndjson``."""
    result = PreVoteComparison()
    if out is not None:
        (out / "pre-vote-off").mkdir(parents=True, exist_ok=True)
        (out / "pre-vote-on").mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        runs = []
        for pre_vote in (False, True):
            config = replace(base, seed=seed, pre_vote=pre_vote)
            sub = "pre-vote-on" if pre_vote else "pre-vote-off"
            trace = None if out is None else out / sub / f"seed-{seed}.ndjson"
            runs.append(simulate(config, trace))
        pair = SeedPair(seed, runs[0], runs[1])
        result.pairs.append(pair)
        if on_pair is not None:
            on_pair(pair)
    return result
