"""The simulated state machine and its snapshots (KIP-630).

Each simulated node applies its committed log, whole batches in offset order, to a small state machine: a
running SHA-256 over every committed data record (key and value) and their count, plus, with simulated
brokers, the broker registry its ``BrokerDriver`` keeps (``reference/broker_driver.py``). A snapshot holds that
state at a batch boundary at or below the high watermark, in Kafka's snapshot format (``reference/snapshot.py``:
SnapshotHeaderRecord batch, data batches, SnapshotFooterRecord batch; every batch in the snapshot's epoch): one
record keyed ``DIGEST_KEY`` (digest and count), then the registry's records (``BrokerDriver.snapshot_records``).
KIP-853: in a kraft.version 1 run the header batch also holds the KRaftVersionRecord and VotersRecord in force at
the snapshot's last offset, as the reference node writes them (Kafka's ``KafkaRaftClient.createSnapshot``:
``kraftVersionAtOffset``, ``voterSetAtOffset``); ``decode`` returns them (``SimSnapshot``).

The digest is what makes "a snapshot agrees with the committed log" checkable: the online checker keeps the
same running digest over the batches it saw committed (``commit_digest``), and every snapshot's digest record
must equal it at the snapshot's end offset, whoever took or installed it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.snapshot import decode_snapshot, footer_batch, header_batch
from kraft_tck.reference.voters import VoterSet
from kraft_tck.spec.records import HEADER_SIZE, Record, RecordBatch, encode_batch

#: The key of a snapshot's digest record.
DIGEST_KEY = b"kraft-tck/sim/digest"
#: The digest of nothing committed.
EMPTY_DIGEST = hashlib.sha256(b"kraft-tck/sim").digest()


def commit_digest(digest: bytes, batch: RecordBatch) -> bytes:
    """The running digest after one more committed batch (control batches change nothing)."""
    if batch.is_control:
        return digest
    h = hashlib.sha256(digest)
    for rec in batch.records:
        for part in (rec.key, rec.value):
            if part is None:
                h.update(b"\xff\xff\xff\xff")
            else:
                h.update(len(part).to_bytes(4, "big"))
                h.update(part)
    return h.digest()


def approx_size(batch: RecordBatch) -> int:
    """About a batch's RecordBatch v2 size: what the snapshot trigger and the retention rule count (the exact size,
    ``broker_driver.batch_size``, costs a varint walk per record, on every commit of every node)."""
    size = HEADER_SIZE
    for rec in batch.records:
        size += 8 + (len(rec.value) if rec.value is not None else 0) + (len(rec.key) if rec.key is not None else 0)
    return size


class SimStateMachine:
    """What a node applied of its committed log: ``applied`` (every whole batch below it), the digest and the
    number of data records."""

    __slots__ = ("applied", "count", "digest")

    def __init__(self) -> None:
        self.applied = 0
        self.digest = EMPTY_DIGEST
        self.count = 0

    def apply(self, batches: Iterable[RecordBatch], high_watermark: int) -> list[RecordBatch]:
        """Apply the whole batches of ``batches`` (from the one holding ``applied``) that lie below
        ``high_watermark``; returns them."""
        done = []
        for batch in batches:
            if batch.last_offset >= high_watermark:
                break
            if batch.base_offset < self.applied:
                continue
            self.digest = commit_digest(self.digest, batch)
            if not batch.is_control:
                self.count += len(batch.records)
            self.applied = batch.last_offset + 1
            done.append(batch)
        return done

    def record(self) -> tuple[bytes, bytes]:
        """The snapshot's digest record (key, value)."""
        return DIGEST_KEY, self.digest + self.count.to_bytes(8, "big")

    def load(self, end_offset: int, digest: bytes, count: int) -> None:
        self.applied, self.digest, self.count = end_offset, digest, count


def encode(sid: SnapshotId, records: Sequence[tuple[bytes | None, bytes]], timestamp_ms: int = 0, *,
           kraft_version: int = 0, voters: VoterSet | None = None) -> bytes:
    """A snapshot file: header batch (with ``kraft_version`` >= 1 its KRaftVersionRecord and ``voters``' VotersRecord,
    KIP-853), one data batch of ``records`` (key, value), footer batch."""
    header = header_batch(sid, timestamp_ms, timestamp_ms, kraft_version=kraft_version, voters=voters)
    base = header.last_offset + 1  # 1 without the KIP-853 records
    data = RecordBatch(
        base_offset=base,
        partition_leader_epoch=sid.epoch,
        records=tuple(Record(i, value, key) for i, (key, value) in enumerate(records)),
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
    )
    return b"".join(encode_batch(b) for b in (header, data, footer_batch(sid, base + len(records), timestamp_ms)))


class SimSnapshot(NamedTuple):
    """A decoded snapshot file: the digest record's digest and record count, the other data records, and (KIP-853) the
    header batch's kraft.version (0: no KRaftVersionRecord) and voter set (None: no VotersRecord)."""

    digest: bytes
    record_count: int  # the data records the digest covers
    records: list[Record]
    kraft_version: int = 0
    voters: VoterSet | None = None


def decode(sid: SnapshotId, data: bytes) -> SimSnapshot:
    """A snapshot file's content (``SimSnapshot``: unpacks as (digest, count, records, kraft_version, voters)); raises
    ``storage.CorruptFileError`` when the file is not a whole, valid snapshot of ``sid``, or ValueError when it has
    no digest record first."""
    snap = decode_snapshot(Path(f"<simulated {sid.end_offset}-{sid.epoch}.checkpoint>"), data, sid)
    records = [r for b in snap.batches if not b.is_control for r in b.records]
    if not records or records[0].key != DIGEST_KEY or records[0].value is None or len(records[0].value) != 40:
        raise ValueError(f"snapshot {sid}: the first record is not the simulator's digest record")
    value = records[0].value
    return SimSnapshot(value[:32], int.from_bytes(value[32:], "big"), records[1:], snap.kraft_version, snap.voters)
