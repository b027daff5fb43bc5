"""Simulator throughput: simulated events per wall-clock second, 3 and 5 nodes, without and with simulated
brokers, tracing off vs on.

Run: ``python bench/bench_sim.py`` (``--seeds`` per row, default 5; ``--duration`` virtual seconds per
seed, default 60; ``--profile-top N`` also prints the N hottest functions of one traced 3-node seed
under cProfile). An *event* is one trace line: a core action (with its state), a Send/Receive message
event or a BrokerEvent; with tracing off the same events are counted, not written. Broker requests are
not trace events, so a run with brokers does more work per event. Goal: >= 50,000 events/s.
The numbers are what this machine measures, printed as they are; on a shared machine the CPU-time rate
(events per second of this process's CPU) is the steadier of the two, so the goal is judged on both
(``goal`` on wall-clock time, ``cpu goal`` on CPU time).

The last table splits one traced 3-node row's CPU time between the reference cores (``KRaftCore``'s
step and tick, timed from outside; restarts are rare) and everything else (network, faults, invariants, brokers,
trace encoding): events per core CPU second is the rate the simulator could reach if it cost nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.io import Input, Ready
from kraft_tck.traces.sim import SimConfig, simulate

GOAL = 50_000


def measure(
    nodes: int, brokers: int, seeds: int, duration_ms: int, profile: str, out: Path | None,
    snapshot_bytes: int | None = None,
) -> tuple[int, float, float, int]:
    """(events, wall seconds, CPU seconds, violations) over ``seeds`` seeds."""
    events = violations = 0
    started, cpu = time.perf_counter(), time.process_time()
    for seed in range(seeds):
        config = SimConfig(seed=seed, nodes=nodes, duration_ms=duration_ms, profile=profile, brokers=brokers,
                           snapshot_bytes=snapshot_bytes)
        result = simulate(config, None if out is None else out / f"n{nodes}-b{brokers}-seed-{seed}.ndjson")
        events += result.events
        violations += result.violation is not None
    return events, time.perf_counter() - started, time.process_time() - cpu, violations


class _TimedCore(KRaftCore):
    """The unmodified core, with the CPU time of its entry points added up (one clock read per call end)."""

    cpu = 0.0

    def step(self, inp: Input, now_ms: int) -> Ready:
        started = time.process_time()
        try:
            return super().step(inp, now_ms)
        finally:
            _TimedCore.cpu += time.process_time() - started

    def tick(self, now_ms: int) -> Ready:
        started = time.process_time()
        try:
            return super().tick(now_ms)
        finally:
            _TimedCore.cpu += time.process_time() - started


def core_share(brokers: int, seeds: int, duration_ms: int, profile: str, out: Path,
               snapshot_bytes: int | None = None) -> tuple[int, float, float]:
    """(events, CPU seconds, of which in the cores' step and tick) for traced 3-node seeds."""
    _TimedCore.cpu = 0.0
    events, cpu = 0, time.process_time()
    for seed in range(seeds):
        config = SimConfig(seed=seed, nodes=3, duration_ms=duration_ms, profile=profile, brokers=brokers,
                           snapshot_bytes=snapshot_bytes)
        events += simulate(config, out / f"timed-seed-{seed}.ndjson", core_class=_TimedCore).events
    return events, time.process_time() - cpu, _TimedCore.cpu


def hot_spots(duration_ms: int, profile: str, out: Path, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    simulate(SimConfig(seed=0, nodes=3, duration_ms=duration_ms, profile=profile), out / "profiled.ndjson")
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=60, help="virtual seconds per seed")
    parser.add_argument("--faults", default="default", choices=["none", "default", "heavy", "reconnect", "snapshots"])
    parser.add_argument("--snapshot-bytes", type=int, default=None,
                        help="KIP-630 snapshots every N committed bytes (0: off; default: the fault profile's)")
    parser.add_argument("--brokers", type=int, default=SimConfig(seed=0).brokers,
                        help="simulated brokers in the rows with brokers (default: the simulator's default)")
    parser.add_argument("--profile-top", type=int, default=0, help="print the N hottest functions (cProfile)")
    args = parser.parse_args()
    duration_ms = args.duration * 1000
    snaps = "profile's" if args.snapshot_bytes is None else args.snapshot_bytes
    print(f"simulator: {args.seeds} seeds x {args.duration}s virtual, faults={args.faults}, snapshot bytes {snaps}, "
          f"goal {GOAL:,} events/s")
    print(f"{'nodes':>5} {'brokers':>7} {'tracing':>8} {'events':>10} {'wall s':>8} {'events/s':>10} {'goal':>6} "
          f"{'cpu s':>7} {'events/cpu-s':>12} {'cpu goal':>8} {'violations':>10}")
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        out = Path(tmp)
        for nodes in (3, 5):
            for brokers in (0, args.brokers):
                for tracing in (False, True):
                    events, wall, cpu, bad = measure(
                        nodes, brokers, args.seeds, duration_ms, args.faults, out if tracing else None,
                        args.snapshot_bytes,
                    )
                    rate = events / wall if wall > 0 else 0.0
                    cpu_rate = events / cpu if cpu > 0 else 0.0
                    verdict = "met" if rate >= GOAL else "missed"
                    cpu_verdict = "met" if cpu_rate >= GOAL else "missed"
                    print(
                        f"{nodes:>5} {brokers:>7} {'on' if tracing else 'off':>8} {events:>10,} {wall:>8.2f} "
                        f"{rate:>10,.0f} {verdict:>6} {cpu:>7.2f} {cpu_rate:>12,.0f} {cpu_verdict:>8} {bad:>10}"
                    )
        events, cpu, in_core = core_share(args.brokers, args.seeds, duration_ms, args.faults, out,
                                          args.snapshot_bytes)
        print(f"\nwhere the CPU goes (3 nodes, {args.brokers} brokers, tracing on, core entry points timed):")
        share = in_core / cpu if cpu > 0 else 0.0
        print(f"{'events':>10} {'cpu s':>7} {'in cores':>8} {'elsewhere':>9} {'events/cpu-s':>12} "
              f"{'events/core-cpu-s':>17}")
        print(f"{events:>10,} {cpu:>7.2f} {share:>8.0%} {1 - share:>9.0%} {events / cpu if cpu > 0 else 0:>12,.0f} "
              f"{events / in_core if in_core > 0 else 0:>17,.0f}")
        if args.profile_top:
            print(hot_spots(duration_ms, args.faults, out, args.profile_top))


if __name__ == "__main__":
    main()
