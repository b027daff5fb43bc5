"""Snapshots (KIP-630): a new voter's catch-up through a snapshot against replaying the whole log, and the leader's
memory and disk over a long run with cleaning on and off.

Catch-up: a 3-node cluster in one event loop (real sockets and segment files, fsync off, linger 5 ms) registers
``--brokers`` brokers (KIP-631 BrokerRegistration, heartbeats to unfence them: the state a snapshot holds), then writes
``--records`` 100-byte records (100 per write) while one voter is down; its directory is then wiped and formatted
again, and the time until it holds the leader's whole log (log end and high watermark) is measured, with the bytes
it received: snapshot chunks (FetchSnapshot) plus record batches (Fetch). Variant "snapshot": the nodes snapshot
every ``metadata.log.max.record.bytes.between.snapshots`` = 1 MiB and clean with ``metadata.max.retention.bytes``
= 0 (the leader's log starts at its latest snapshot), 1 MiB segments. Baseline "replay": no snapshots (the
byte threshold out of reach, the interval off), so the newcomer fetches the log from offset 0.

Soak: 3 node processes (``kraft-tck node --throughput``, fsync off) for ``--soak-seconds`` per variant; the
leader's resident memory and the size of its partition directory are sampled. "cleaning on": snapshots every
4 MiB, 4 MiB segments, retention 0; baseline "cleaning off": no snapshots.

    .venv/bin/python bench/bench_snapshot.py [--quick] [--records N] [--brokers N] [--soak-seconds S] [--rate R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kraft_tck.reference.broker_client import BrokerClient
from kraft_tck.reference.io import WriteSnapshotChunk
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.storage import format_dir

PER_WRITE = 100
RECORD = b"s" * 100
MIB = 1024 * 1024
NO_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": 2**62, "metadata.log.max.snapshot.interval.ms": 0,
                "metadata.max.retention.bytes": -1, "metadata.max.retention.ms": -1}
CATCH_UP = {
    "snapshot": {"metadata.log.max.record.bytes.between.snapshots": MIB, "metadata.log.segment.bytes": MIB,
                 "metadata.max.retention.bytes": 0, "metadata.max.retention.ms": -1},
    "replay (baseline)": {**NO_SNAPSHOTS, "metadata.log.segment.bytes": MIB},
}
SOAK = {
    "cleaning on": {"metadata.log.max.record.bytes.between.snapshots": 4 * MIB, "metadata.log.segment.bytes": 4 * MIB,
                    "metadata.max.retention.bytes": 0, "metadata.max.retention.ms": -1},
    "cleaning off (baseline)": {**NO_SNAPSHOTS, "metadata.log.segment.bytes": 4 * MIB},
}
BASE = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.max.wait.ms": 100,
        "controller.quorum.append.linger.ms": 5}


async def register_brokers(cluster: LocalCluster, count: int) -> None:
    endpoints = [("127.0.0.1", cluster.port(i)) for i in range(1, cluster.voters + 1)]
    for k in range(count):
        b = BrokerClient(1000 + k, cluster.cluster_id, endpoints, request_timeout_ms=2000, rack=f"rack-{k % 3}")
        try:
            if (await b.register()).error != 0:
                raise RuntimeError(f"broker {1000 + k} was not registered")
            await b.heartbeat(metadata_offset=2**40)  # caught up: unfenced
        finally:
            await b.stop()


async def catch_up(root: Path, records: int, brokers: int, settings: dict[str, Any]) -> dict[str, float]:
    cluster = LocalCluster(root, base_port=free_base_port(3), settings={**BASE, **settings})
    configs = {cfg.node_id: cfg for cfg in cluster.node_configs()}
    nodes = {i: Node(cfg, fsync=False, seed=i) for i, cfg in configs.items()}
    for n in nodes.values():
        await n.start()
    try:
        while not any(n.core and n.core.status().is_leader and n.high_watermark for n in nodes.values()):
            await asyncio.sleep(0.01)
        leader = next(n for n in nodes.values() if n.core and n.core.status().is_leader)
        newcomer = next(i for i, n in nodes.items() if n is not leader)
        await register_brokers(cluster, brokers)
        await nodes[newcomer].stop(graceful=True, grace_s=0.2)
        t0 = time.perf_counter()
        inflight: set[asyncio.Task[object]] = set()
        for _ in range(records // PER_WRITE):
            if len(inflight) >= 16:
                _done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
            inflight.add(asyncio.create_task(leader.write([RECORD] * PER_WRITE)))
        await asyncio.gather(*inflight)
        write_s = time.perf_counter() - t0
        assert leader.core is not None and leader.storage is not None
        await asyncio.sleep(0.3)  # the last snapshot and cleaning run from the loop, after the commit
        shutil.rmtree(cluster.data_dir(newcomer))
        format_dir(cluster.data_dir(newcomer), newcomer, cluster.cluster_id)
        fresh = nodes[newcomer] = Node(configs[newcomer], fsync=False, seed=newcomer)
        received = {"snapshot": 0, "records": 0}
        t1 = time.perf_counter()
        await fresh.start()
        assert fresh.storage is not None
        storage_append = fresh.storage.append
        apply_op = fresh._apply_snapshot_op

        def append(batches: Any, encoded: Any = None) -> None:
            received["records"] += sum(len(e) for e in encoded) if encoded else 0
            storage_append(batches, encoded)

        def snapshot_op(op: Any) -> None:
            if isinstance(op, WriteSnapshotChunk):
                received["snapshot"] += len(op.data)
            apply_op(op)

        fresh.storage.append = append
        fresh._apply_snapshot_op = snapshot_op
        end = leader.core.status().log_end_offset
        while fresh.core is None or fresh.core.status().log_end_offset < end or fresh.high_watermark < end:
            await asyncio.sleep(0.002)
        catch_up_s = time.perf_counter() - t1
        if len(fresh.brokers.registry) != brokers:
            raise RuntimeError(f"the newcomer holds {len(fresh.brokers.registry)} brokers, not {brokers}")
        return {"records": end, "write_s": write_s, "catch_up_s": catch_up_s,
                "snapshot_bytes": received["snapshot"], "record_bytes": received["records"],
                "leader_log_start": leader.storage.start_offset, "leader_snapshots": leader.snapshots_written,
                "snapshot_write_ms": max(leader.snapshot_write_ms, default=0.0),
                "snapshot_write_p50_ms": statistics.median(leader.snapshot_write_ms or [0.0]),
                "leader_disk": sum(p.stat().st_size for p in leader.storage.partition_dir.iterdir() if p.is_file())}
    finally:
        for n in nodes.values():
            await n.stop(graceful=False)


def process_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def dir_bytes(path: Path) -> int:
    total = 0
    for p in path.iterdir():
        with contextlib.suppress(FileNotFoundError):  # deleted by the cleaner meanwhile
            total += p.stat().st_size if p.is_file() else 0
    return total


async def soak(root: Path, settings: dict[str, Any], seconds: float, rate: int,
               samples: int) -> list[tuple[float, int, int, int]]:
    """``(seconds, high watermark, leader partition dir bytes, leader RSS)`` at ``samples`` moments."""
    c = LocalCluster(root, voters=3, base_port=free_base_port(3), settings={**BASE, **settings},
                     extra_args=["--throughput", str(rate), "--record-size", str(len(RECORD)), "--no-fsync"])
    c.prepare()
    c.start_all()
    try:
        leader = (await c.wait_for_leader(30, min_hw=2)).leader_id
        part = c.data_dir(leader) / "__cluster_metadata-0"
        out = []
        t0 = time.monotonic()
        for k in range(1, samples + 1):
            await asyncio.sleep(max(0.0, t0 + seconds * k / samples - time.monotonic()))
            info = await c.describe()
            if info is None or info.leader_id != leader:
                raise RuntimeError("the leader changed during the soak: its memory is no longer one process's")
            out.append((time.monotonic() - t0, info.high_watermark, dir_bytes(part), process_rss(c.procs[leader].pid)))
        return out
    finally:
        c.stop_all()


def child(variant: str, records: int, brokers: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as d:
        print(json.dumps(asyncio.run(catch_up(Path(d), records, brokers, CATCH_UP[variant]))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50,000 records and a 10 s soak per variant")
    ap.add_argument("--records", type=int, default=None, help="records before the newcomer joins (default 500,000)")
    ap.add_argument("--brokers", type=int, default=None, help="brokers registered first (default 100; quick 20)")
    ap.add_argument("--soak-seconds", type=float, default=None, help="process soak per variant (default 60)")
    ap.add_argument("--rate", type=int, default=20_000, help="records/s offered in the soak (default 20,000)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    records = args.records or (50_000 if args.quick else 500_000)
    brokers = args.brokers if args.brokers is not None else (20 if args.quick else 100)
    if args.child is not None:
        child(args.child, records, brokers)
        return
    results = {}
    for name in CATCH_UP:  # each in its own process: one run's memory and threads do not slow the other
        out = subprocess.run([sys.executable, __file__, "--child", name, "--records", str(records),
                              "--brokers", str(brokers)],
                             check=True, capture_output=True, text=True).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
    print(f"catch-up of a wiped voter after {records:,} committed records of 100 bytes and {brokers} registered "
          "brokers (3 nodes in one process, fsync off)")
    header = ("variant", "catch-up s", "snapshot bytes", "records MiB", "total MiB", "leader log start",
              "leader disk MiB", "write rec/s")
    print("  ".join(f"{h:>18}" for h in header))
    for name, r in results.items():
        row = (name, f"{r['catch_up_s']:.2f}", f"{int(r['snapshot_bytes']):,}", f"{r['record_bytes'] / MIB:.2f}",
               f"{(r['snapshot_bytes'] + r['record_bytes']) / MIB:.2f}", f"{int(r['leader_log_start']):,}",
               f"{r['leader_disk'] / MIB:.1f}", f"{r['records'] / r['write_s']:,.0f}")
        print("  ".join(f"{c:>18}" for c in row))
    snap = results["snapshot"]
    print(f"(the leader wrote {int(snap['leader_snapshots'])} snapshots, each holding its event loop "
          f"{snap['snapshot_write_p50_ms']:.1f} ms (median), the slowest {snap['snapshot_write_ms']:.1f} ms; bytes are "
          "what the newcomer wrote: FetchSnapshot chunks and Fetch batches)")
    soak_s = args.soak_seconds if args.soak_seconds is not None else (10 if args.quick else 60)
    if soak_s > 0:
        print_soak(soak_s, args.rate)


def print_soak(seconds: float, rate: int, samples: int = 6) -> None:
    series = {}
    for name, settings in SOAK.items():
        with tempfile.TemporaryDirectory(prefix="bench-snapshot-soak-") as d:
            series[name] = asyncio.run(soak(Path(d), settings, seconds, rate, samples))
    print(f"\nprocess soak: 3 node processes, {rate:,} records/s of 100 bytes offered (fsync off): the leader")
    print(f"{'':>6}  " + "  ".join(f"{name:>44}" for name in series))
    print(f"{'s':>6}  " + "  ".join(f"{'records':>12} {'disk MiB':>14} {'RSS MiB':>14}" for _ in series))
    for k in range(samples):
        row = [f"{series[next(iter(series))][k][0]:6.0f}"]
        for points in series.values():
            _t, hw, disk, rss = points[k]
            row.append(f"{hw:>12,} {disk / MIB:>14,.1f} {rss / MIB:>14,.1f}")
        print("  ".join(row))


if __name__ == "__main__":
    main()
