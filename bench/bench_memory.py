"""Memory in a long run: the node's log cache (``reference.log.cache.bytes``) against keeping the whole log in
memory (the baseline: what the node did before the cache, and still does with a cache as large as the log).

Each variant runs in its own process, so that its resident memory is its own: a 3-node cluster in one
event loop (real sockets and segment files, no fsync, linger 5 ms) with one follower stopped, writes
``--records`` 100-byte records on the leader, then restarts the follower and times its catch-up. With
the cache, the leader reads what the follower missed back from its segment files; the table shows what
that costs next to reading it from memory. Rounds alternate the variants.

    .venv/bin/python bench/bench_memory.py [--quick] [--records N] [--rounds N]

Columns: RSS growth of the process while writing (two running nodes), the bytes the leader's log holds
in memory at the end, and the follower's catch-up rate.

A second table soaks real node processes (``kraft-tck node --throughput``, fsync off) for
``--soak-seconds`` per variant and samples the leader's resident memory as its log grows: flat with the
cache, rising with the log without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port

KEEP_ALL = 2**31 - 1  # the largest cache the setting allows: the whole log of this run stays in memory
VARIANTS = {"cache 8 MiB": 8 * 1024 * 1024, "keep all (baseline)": KEEP_ALL}
PER_WRITE = 100  # records per write; linger batches a few writes together
RECORD = b"m" * 100
SOAK_RECORDS_S = 50_000
SOAK_RECORD_ON_DISK = 108  # bytes a 100-byte record takes in a batch of many (for the log size column)


async def one_run(root: Path, cache_bytes: int, records: int) -> dict[str, float]:
    settings = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.max.wait.ms": 100,
                "controller.quorum.append.linger.ms": 5, "reference.log.cache.bytes": cache_bytes}
    cluster = LocalCluster(root, base_port=free_base_port(3), settings=settings)
    configs = {cfg.node_id: cfg for cfg in cluster.node_configs()}
    nodes = {i: Node(cfg, fsync=False, seed=i) for i, cfg in configs.items()}
    for n in nodes.values():
        await n.start()
    try:
        while not any(n.core and n.core.status().is_leader and n.high_watermark for n in nodes.values()):
            await asyncio.sleep(0.01)
        leader = next(n for n in nodes.values() if n.core and n.core.status().is_leader)
        lagging = next(i for i, n in nodes.items() if n is not leader)
        await nodes[lagging].stop(graceful=True, grace_s=0.2)
        rss0 = process_rss()
        t0 = time.perf_counter()
        inflight: set[asyncio.Task[object]] = set()
        for _ in range(records // PER_WRITE):
            if len(inflight) >= 16:
                _done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            inflight.add(asyncio.create_task(leader.write([RECORD] * PER_WRITE)))
        await asyncio.gather(*inflight)
        write_s = time.perf_counter() - t0
        rss1 = process_rss()
        assert leader.core is not None and leader.metadata_log is not None
        log = leader.metadata_log
        end = leader.core.status().log_end_offset
        behind = Node(configs[lagging], fsync=False, seed=lagging)
        nodes[lagging] = behind
        t1 = time.perf_counter()
        await behind.start()
        while behind.core is None or behind.core.status().log_end_offset < end:
            await asyncio.sleep(0.005)
        catch_up_s = time.perf_counter() - t1
        return {"records": end, "write_s": write_s, "rss_growth": rss1 - rss0,
                "held_bytes": log.held_bytes, "catch_up_s": catch_up_s}
    finally:
        for n in nodes.values():
            await n.stop(graceful=True, grace_s=0.2)


def process_rss(pid: int | str = "self") -> int:
    """A process's resident memory (Linux /proc), this one's by default."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def soak(root: Path, cache_bytes: int, seconds: float, samples: int) -> list[tuple[float, int, int]]:
    """``(seconds, leader log end offset, leader RSS)`` at ``samples`` moments of a process soak."""
    settings = {"controller.quorum.append.linger.ms": 5, "reference.log.cache.bytes": cache_bytes}
    c = LocalCluster(root, voters=3, base_port=free_base_port(3), settings=settings,
                     extra_args=["--throughput", str(SOAK_RECORDS_S), "--record-size", str(len(RECORD)),
                                 "--no-fsync"])
    c.prepare()
    c.start_all()
    try:
        leader = (await c.wait_for_leader(30, min_hw=2)).leader_id
        out = []
        t0 = time.monotonic()
        for k in range(1, samples + 1):
            await asyncio.sleep(max(0.0, t0 + seconds * k / samples - time.monotonic()))
            info = await c.describe()
            if info is None or info.leader_id != leader:
                raise RuntimeError("the leader changed during the soak: its memory is no longer one process's")
            out.append((time.monotonic() - t0, info.high_watermark, process_rss(c.procs[leader].pid)))
        return out
    finally:
        c.stop_all()


def child(cache_bytes: int, records: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as d:
        print(json.dumps(asyncio.run(one_run(Path(d), cache_bytes, records))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer records, one round, no soak (a smoke run)")
    ap.add_argument("--records", type=int, default=None, help="records written per run (default 400,000)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of both variants (default 2)")
    ap.add_argument("--soak-seconds", type=float, default=None,
                    help="process soak per variant (default 30; none with --quick)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    records = args.records or (200_000 if args.quick else 400_000)  # quick: still past twice the cache
    if args.child is not None:
        child(args.child, records)
        return
    rounds = args.rounds or (1 if args.quick else 2)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, cache in VARIANTS.items():
            out = subprocess.run([sys.executable, __file__, "--child", str(cache), "--records", str(records)],
                                 check=True, capture_output=True, text=True).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    mib = 1024 * 1024
    print(f"memory in a long run: {records:,} records of 100 bytes on a 3-node in-process cluster, one follower "
          f"behind; median of {rounds} round(s)")
    header = ("variant", "RSS growth MiB", "per 100k records MiB", "leader log held MiB", "write rec/s",
              "catch-up rec/s")
    print("  ".join(f"{h:>22}" for h in header))
    for name, runs in results.items():
        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)
        n = med("records")
        row = (name, f"{med('rss_growth') / mib:,.1f}", f"{med('rss_growth') / mib / n * 1e5:,.2f}",
               f"{med('held_bytes') / mib:,.1f}", f"{n / med('write_s'):,.0f}", f"{n / med('catch_up_s'):,.0f}")
        print("  ".join(f"{c:>22}" for c in row))
    print("(RSS counts both running nodes' logs: the cache bounds each node's held batches to twice its size in "
          "encoded bytes, their decoded objects beside them come to about as much again. A follower further "
          "behind than the cache is served batches the leader decodes from its segment files: the catch-up "
          "column shows that cost)")
    soak_s = args.soak_seconds if args.soak_seconds is not None else (0 if args.quick else 30)
    if soak_s > 0:
        print_soak(soak_s)


def print_soak(seconds: float, samples: int = 6) -> None:
    series = {}
    for name, cache in VARIANTS.items():
        with tempfile.TemporaryDirectory(prefix="bench-memory-soak-") as d:
            series[name] = asyncio.run(soak(Path(d), cache, seconds, samples))
    mib = 1024 * 1024
    print(f"\nprocess soak: 3 node processes, {SOAK_RECORDS_S:,} records/s offered (fsync off), the leader's RSS "
          f"as its log grows")
    print(f"{'':>6}  " + "  ".join(f"{name:>33}" for name in series))
    print(f"{'s':>6}  " + "  ".join(f"{'log MiB':>16} {'leader RSS MiB':>16}" for _ in series))
    for k in range(samples):
        row = [f"{series[next(iter(series))][k][0]:6.0f}"]
        for points in series.values():
            _t, hw, rss = points[k]
            row.append(f"{hw * SOAK_RECORD_ON_DISK / mib:>16,.0f} {rss / mib:>16,.0f}")
        print("  ".join(row))


if __name__ == "__main__":
    main()
