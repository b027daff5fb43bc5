"""Append throughput of the reference node's log (reference/storage.py), with and without fsync.

Each case appends batches of 100-byte records and calls ``flush()`` after every batch, as the node does
once per appended batch. Like the node, it hands storage each batch's bytes (the core's log encodes a
batch once; storage writes those bytes), so the encoding is timed apart: reported per case are
batches/s, records/s and MB/s of storage alone, the mean latency of one append+flush, the mean time to
encode the batch (done once per batch in the whole node, not by storage), and fsyncs per batch
(machine-independent: 1 with fsync, 0 without, plus the rare segment roll). ``--seconds`` bounds each
case, so the whole run stays well under a minute.

    .venv/bin/python bench/bench_storage.py [--dir D] [--seconds 2.5]

Use ``--dir`` on the disk you care about: fsync on a tmpfs costs nothing and measures nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kraft_tck.reference.storage import LogDir
from kraft_tck.spec.records import data_batch, encode_batch

RECORD = b"r" * 100


@dataclass(frozen=True)
class Result:
    records_per_batch: int
    fsync: bool
    batches: int
    seconds: float
    bytes_written: int
    fsyncs: int
    encode_seconds: float

    def row(self) -> list[str]:
        records = self.batches * self.records_per_batch
        return [
            str(self.records_per_batch),
            "on" if self.fsync else "off",
            f"{self.batches / self.seconds:,.0f}",
            f"{records / self.seconds:,.0f}",
            f"{self.bytes_written / self.seconds / 1e6:,.1f}",
            f"{self.seconds / self.batches * 1e6:,.0f}",
            f"{self.encode_seconds / self.batches * 1e6:,.0f}",
            f"{self.fsyncs / self.batches:.3f}",
        ]


def run_case(root: Path, records_per_batch: int, fsync: bool, seconds: float, max_batches: int) -> Result:
    d = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=root))
    try:
        log = LogDir.open(d, fsync=fsync)
        log.append([data_batch(0, 1, [RECORD])])  # first epoch: its checkpoint write is not measured
        log.flush()
        values = [RECORD] * records_per_batch
        fsyncs_before = log.fsync_count
        batches = 0
        elapsed = encoding = 0.0
        deadline = time.perf_counter() + seconds
        while batches < max_batches and (batches % 64 or time.perf_counter() < deadline):
            t0 = time.perf_counter()
            batch = data_batch(log.end_offset, 1, values)
            data = encode_batch(batch)
            t1 = time.perf_counter()
            log.append([batch], [data])
            log.flush()
            elapsed += time.perf_counter() - t1
            encoding += t1 - t0
            batches += 1
        fsyncs = log.fsync_count - fsyncs_before
        log.close()
        size = sum(p.stat().st_size for p in (d / "__cluster_metadata-0").glob("*.log"))
        return Result(records_per_batch, fsync, batches, elapsed, size, fsyncs, encoding)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where to create the scratch logs")
    parser.add_argument("--seconds", type=float, default=2.5, help="time budget per case (default 2.5)")
    parser.add_argument("--max-batches", type=int, default=200_000, help="cap on batches per case")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)

    header = ["recs/batch", "fsync", "batches/s", "records/s", "MB/s", "µs/batch", "encode µs/batch", "fsyncs/batch"]
    rows = [header]
    for records_per_batch in (1, 100):
        for fsync in (True, False):
            rows.append(run_case(args.dir, records_per_batch, fsync, args.seconds, args.max_batches).row())
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print(f"storage append+flush, 100-byte records, dir={args.dir} (pid {os.getpid()})")
    for i, r in enumerate(rows):
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
