"""The core's view of the metadata log: its batches in offset order, plus its epoch cache.

Pure and small on purpose. The shell owns the real segment files and mirrors every change the core
makes here (the core reports each one as an ``AppendBatches`` / ``TruncateTo`` operation in its
``Ready`` bundle), so after a restart the shell can rebuild this object from disk.

Each batch's encoded bytes (RecordBatch v2, as on disk and on the wire) are kept next to it once known:
a batch is encoded once on the leader — or kept as received by a follower — and the same bytes then go
to the segment file, into every Fetch response that carries the batch, and into the trace's digest.
Encoding is pure, so a batch appended without its bytes is encoded on first use (at once, in a log with a
cold store).

Memory is bounded the way etcd-io/raft bounds it, with a storage the application provides: a log
given a ``cold`` store (the node's segment files) lets the shell ``release`` the oldest batches once
they are written there, and reads them back from it when a lagging follower asks. Of a released batch
only its base offset stays in memory (8 bytes). Without a cold store (the core's tests, the simulator)
everything stays in memory. Either way the answers are the same batches: the core stays deterministic.

The epoch cache is Kafka's "leader epoch checkpoint": one ``(epoch, start_offset)`` entry per epoch that
has records in the log, in increasing order. It answers the one question KIP-595's Fetch handling asks
of the log, ``epoch_end_offset`` ("Fetch Request Handling" step 3).

Snapshots (KIP-630): the log may start above offset 0, at ``start_offset``, the end offset of the snapshot
``start_snapshot`` that holds everything below it (a log cleaned by ``advance_start``, emptied by
``reset_to_snapshot``, or restored so). As Kafka's ``KafkaMetadataLog`` does, that snapshot's epoch answers the
epoch questions at the start: ``last_fetched_epoch`` of an empty log, ``epoch_of(start_offset - 1)``, and
``epoch_end_offset`` for an epoch older than every record left. A log that starts at 0 behaves as before.
``MemorySnapshots`` is a snapshot store held in memory (tests, the simulator), the core's ``SnapshotSource``.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from kraft_tck.reference.io import AbortSnapshotDownload, DeleteSnapshot, InstallSnapshot, LogOp, WriteSnapshotChunk
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.spec.records import HEADER_SIZE, RecordBatch, crc32c, encode_batch

NO_EPOCH = -1  # KIP-595: LastFetchedEpoch "-1 if there is none"


def records_digest(encoded: bytes) -> str:
    """``spec.records.batch_digest`` of an encoded batch, from its bytes: the CRC32C of the records
    section, which is everything after the fixed batch header (no re-encoding)."""
    return f"{crc32c(encoded[HEADER_SIZE:]):08x}"


class LogError(ValueError):
    """An append or truncation that would break the log's shape (gaps, overlaps, epochs going back)."""


@dataclass(frozen=True, slots=True)
class EpochStart:
    """One epoch-cache entry: the first offset written in ``epoch``."""

    epoch: int
    start_offset: int


class ColdStore(Protocol):
    """Where a log reads the batches it released from memory: the node's segment files (``LogDir``)."""

    def read_encoded(self, from_offset: int, max_bytes: int) -> tuple[Sequence[RecordBatch], Sequence[bytes]]:
        """Whole batches from the one holding ``from_offset``, up to ``max_bytes`` (at least one)."""
        ...


class Log:
    """Batches in offset order, contiguous from ``start_offset`` (0 unless a snapshot holds the records below).

    Batches ``[start_offset, held_from)`` have been released to the cold store; the rest are held in memory.
    ``start``: the snapshot at the log start (KIP-630); ``batches`` then begin at its end offset.
    """

    def __init__(
        self,
        batches: Iterable[RecordBatch] = (),
        encoded: Sequence[bytes] | None = None,
        *,
        cold: ColdStore | None = None,
        start: SnapshotId | None = None,
    ) -> None:
        self._bases = array("q")  # every batch's base offset, for bisect: all a released batch leaves here
        self._first_held = 0  # the index of the first batch held in memory
        self._batches: list[RecordBatch] = []  # the held batches, from index ``_first_held``
        self._encoded: list[bytes | None] = []  # their bytes, None until first needed
        self._held_bytes = 0  # the held bytes' total size (of those known)
        self._cold = cold
        self._epochs: list[EpochStart] = []
        self._epoch_keys: list[int] = []  # each entry's epoch, for bisect (Fetch validation asks per fetch)
        self._epoch_starts: list[int] = []  # each entry's start offset, for bisect (``epoch_of``)
        self._end = 0  # the log end offset, kept because the core asks for it on every step
        # KIP-853: the base offsets of the control batches, so that the core finds the KRaftVersion/Voters records
        # at start-up without reading the whole log (Kafka's KRaftControlRecordStateMachine reads them all).
        self._control_bases: list[int] = []
        # KIP-630: the log start and the snapshot there (None: the log starts at 0, no snapshot below it).
        self._start = 0
        self._start_snapshot: SnapshotId | None = None
        if start is not None:
            if start.end_offset < 0 or start.epoch < 0:
                raise LogError(f"invalid start snapshot {start}")
            self._start = self._end = start.end_offset
            self._start_snapshot = start if start.end_offset > 0 else None
        self.append(list(batches), encoded)

    # ------------------------------------------------------------------------------------ queries

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next record will get."""
        return self._end

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset still in the log (KIP-630; 0 without snapshots)."""
        return self._start

    @property
    def start_snapshot(self) -> SnapshotId | None:
        """The snapshot at the log start (its end offset is ``start_offset``), None when the log starts at 0."""
        return self._start_snapshot

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record (Fetch's ``LastFetchedEpoch``); with no records, the epoch of the snapshot
        at the log start (Kafka's ``KafkaMetadataLog.lastFetchedEpoch``), or -1 for an empty log from 0."""
        if self._epoch_keys:
            return self._epoch_keys[-1]
        snap = self._start_snapshot
        return snap.epoch if snap is not None else NO_EPOCH

    @property
    def held_from(self) -> int:
        """The first offset held in memory (the log end offset when nothing is)."""
        return self._bases[self._first_held] if self._batches else self._end

    @property
    def held_bytes(self) -> int:
        """The encoded size of the batches held in memory (those encoded so far)."""
        return self._held_bytes

    @property
    def batches(self) -> Sequence[RecordBatch]:
        """Every batch, released ones read back from the cold store (for tests and small logs)."""
        return tuple(self.iter_batches())

    def iter_batches(self, from_offset: int = 0, chunk_bytes: int = 1 << 20) -> Iterator[RecordBatch]:
        """The batches from the one holding ``from_offset`` (at least the log start) to the end, released ones
        read from the cold store ``chunk_bytes`` at a time: memory stays bounded however long the log is."""
        offset = max(self._start, from_offset)
        while offset < self._end:
            batches = self.read(offset, chunk_bytes)
            yield from batches
            offset = batches[-1].last_offset + 1

    def iter_sized(self, from_offset: int, until: int) -> Iterable[tuple[RecordBatch, int]]:
        """The batches holding an offset in ``[from_offset, until)`` (from the log start at the earliest), each with
        its encoded size: what a state machine applying the committed prefix
        (``until`` = the high watermark) reads on every commit. Held batches are walked in place, nothing past
        ``until`` is looked at (a leader may hold thousands of uncommitted batches), and the sizes are the kept
        bytes' lengths, not recomputed from the records."""
        offset, until = max(self._start, from_offset), min(until, self._end)
        bases, held = self._bases, self._batches
        if offset < until and held and offset >= bases[-1]:
            # The last batch alone (a commit of the batch just appended): what the bisections below find, without
            # them. (Held batches are the newest, so a log holding any holds its last.)
            return [(held[-1], len(self._encoded[-1] or self.encoded_at(len(bases) - 1)))]
        first = self._first_held
        if offset < until and held and offset >= bases[first]:
            # All held (every commit of a log that keeps up): a list of the range, found by bisection, with no
            # generator resumed per batch.
            encoded = self._encoded
            lo = bisect.bisect_right(bases, offset, first) - 1
            hi = bisect.bisect_left(bases, until, lo)
            return [(held[i - first], len(encoded[i - first] or self.encoded_at(i))) for i in range(lo, hi)]
        return self._iter_sized(offset, until)

    def _iter_sized(self, offset: int, until: int) -> Iterator[tuple[RecordBatch, int]]:
        """``iter_sized`` from released batches on (read back a chunk at a time), into the held ones."""
        while offset < until:
            first = self._first_held
            if self._batches and offset >= self._bases[first]:
                bases, held, index = self._bases, self._batches, bisect.bisect_right(self._bases, offset, first) - 1
                while index < len(bases) and bases[index] < until:
                    yield held[index - first], len(self.encoded_at(index))
                    index += 1
                return
            batches, encoded = self.read_encoded(offset, 1 << 20)  # released: read back, a chunk at a time
            for batch, data in zip(batches, encoded, strict=True):
                if batch.base_offset >= until:
                    return
                yield batch, len(data)
            offset = batches[-1].last_offset + 1

    def control_batches(self) -> Iterator[RecordBatch]:
        """The control batches of the log, in offset order (KIP-853: where KRaftVersion/Voters records are)."""
        for base in list(self._control_bases):
            yield self.read(base, 1)[0]

    @property
    def epoch_cache(self) -> tuple[EpochStart, ...]:
        return tuple(self._epochs)

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """``(E, end)``: the largest epoch ``E <= epoch`` in the log and the offset where ``E`` ends.

        KIP-595 "Fetch Request Handling" step 3: the end of epoch E is the start offset of the next
        epoch in the log, or the log end offset when E is the latest epoch. Two edge cases follow
        Kafka's leader-epoch cache: when every epoch in the log is larger than ``epoch``, the answer is
        ``(epoch, start of the first epoch)`` — "nothing of yours is known here, diverge from the
        start"; an empty log answers ``(-1, 0)``.

        A log that starts at a snapshot (KIP-630) answers an epoch older than every record left, and any epoch
        when no record is left, with the snapshot: ``(snapshot epoch, start offset)`` (Kafka's
        ``KafkaMetadataLog.endOffsetForEpoch``, which overrides the cache's answer at the log start).
        """
        keys = self._epoch_keys
        if keys and epoch >= keys[-1]:
            # The latest epoch or a later one (every Fetch of a follower that keeps up): the bisection below would
            # find the last entry, which ends at the log end.
            return keys[-1], self._end
        snap = self._start_snapshot
        if not self._epochs:
            return (NO_EPOCH, 0) if snap is None else (snap.epoch, self._start)
        i = bisect.bisect_right(keys, epoch)  # entries [0, i) have epoch <= requested
        if i == 0:
            if snap is not None:
                return snap.epoch, self._start
            return epoch, self._epochs[0].start_offset
        found = self._epochs[i - 1]
        end = self._epochs[i].start_offset if i < len(self._epochs) else self._end
        return found.epoch, end

    def epoch_of(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (-1 if it is not in the log), from the epoch cache; the record
        just below the log start has the start snapshot's epoch (it is the snapshot's last record)."""
        if not self._start <= offset < self._end:
            snap = self._start_snapshot
            if snap is not None and offset == self._start - 1:
                return snap.epoch
            return NO_EPOCH
        return self._epoch_keys[bisect.bisect_right(self._epoch_starts, offset) - 1]

    def read(self, from_offset: int, max_bytes: int) -> tuple[RecordBatch, ...]:
        """Whole batches from the one holding ``from_offset``, up to ``max_bytes`` (at least one batch).

        Like Kafka, the first batch is returned even when it alone exceeds ``max_bytes`` (KIP-74), so a
        large batch cannot stall a follower. Sizes are the batches' encoded sizes, as Kafka counts them.
        A read that starts among released batches stops where the held ones begin.
        """
        return self.read_encoded(from_offset, max_bytes)[0]

    def read_encoded(self, from_offset: int, max_bytes: int) -> tuple[tuple[RecordBatch, ...], tuple[bytes, ...]]:
        """``read`` together with each batch's encoded bytes (what a Fetch response carries)."""
        if from_offset >= self._end:
            return (), ()
        held, bases = self._batches, self._bases
        if held and from_offset >= bases[-1]:
            # The last batch (held: the held ones are the newest), alone whatever ``max_bytes`` says: what a parked
            # Fetch is answered with in the step that appends a client write. No search, no size walk, and neither
            # test below applies (the offset is in the log: not below its start, so not negative).
            return (held[-1],), (self._encoded[-1] or self.encoded_at(len(bases) - 1),)
        if from_offset < 0:
            raise LogError(f"read from negative offset {from_offset}")
        if from_offset < self._start:
            raise LogError(f"read from offset {from_offset}, below the log start offset {self._start}")
        # Like Kafka, an offset inside a batch reads that whole batch.
        first = self._first_held
        if self._batches and from_offset >= self._bases[first]:
            start = bisect.bisect_right(self._bases, from_offset, first) - 1
        else:
            start = bisect.bisect_right(self._bases, from_offset, 0, first) - 1
            return self._read_cold(start, max_bytes)
        encoded = [self.encoded_at(start)]
        used, stop = len(encoded[0]), start + 1
        while stop < len(self._bases):
            data = self.encoded_at(stop)
            used += len(data)
            if used > max_bytes:
                break
            encoded.append(data)
            stop += 1
        return tuple(self._batches[start - first : stop - first]), tuple(encoded)

    def encoded_at(self, index: int) -> bytes:
        """The bytes of the ``index``-th batch (encoded now if it was appended without them)."""
        held = index - self._first_held
        if held < 0:
            return self._read_cold(index, 0)[1][0]
        data = self._encoded[held]
        if data is None:
            data = self._encoded[held] = encode_batch(self._batches[held])
            self._held_bytes += len(data)
        return data

    def digest_at(self, index: int) -> str:
        """``spec.records.batch_digest`` of the ``index``-th batch (see ``records_digest``)."""
        return records_digest(self.encoded_at(index))

    def __len__(self) -> int:
        """The number of batches."""
        return len(self._bases)

    # ------------------------------------------------------------------------------------ changes

    def append(self, batches: Sequence[RecordBatch], encoded: Sequence[bytes] | None = None) -> None:
        """Append batches that continue the log exactly (no gap, no overlap, epochs never decrease).

        ``encoded``, when given, holds each batch's bytes (one per batch, in order).
        """
        batch: RecordBatch | None
        data: bytes | None = None
        try:  # one batch (and one encoded form, if given)? Unpacking asks at the cost of no call.
            (batch,) = batches
            if encoded is not None:
                (data,) = encoded
        except ValueError:
            batch = None  # more or fewer: the loop below (which names a count mismatch)
        if batch is not None:
            # One batch in the epoch of the log's last one (every commit but an epoch's first: the leader's write,
            # a follower's Fetch): the loop below in straight line, with no epoch entry to add. Anything else (an
            # error included: it is named below) takes the loop.
            keys = self._epoch_keys
            if batch.records and batch.base_offset == self._end and keys and batch.partition_leader_epoch == keys[-1]:
                self._keep(batch, data if encoded is not None else self._bytes_to_keep(batch))
                return
        if encoded is not None and len(encoded) != len(batches):
            raise LogError(f"{len(batches)} batches but {len(encoded)} encoded forms")
        last_epoch = self.last_fetched_epoch
        for i, batch in enumerate(batches):
            base, records = batch.base_offset, batch.records
            if not records:
                raise LogError(f"empty batch at offset {base}")
            if base != self._end:
                raise LogError(f"batch base offset {base} does not continue log end {self._end}")
            epoch = batch.partition_leader_epoch
            if epoch < last_epoch:
                raise LogError(f"batch at {base} has epoch {epoch} below the log's last epoch {last_epoch}")
            if epoch > last_epoch or not self._epoch_keys:
                # (A log that starts at a snapshot has no entry yet for its first record's epoch.)
                self._epochs.append(EpochStart(epoch, base))
                self._epoch_keys.append(epoch)
                self._epoch_starts.append(base)
                last_epoch = epoch
            self._keep(batch, encoded[i] if encoded is not None else self._bytes_to_keep(batch))

    def _bytes_to_keep(self, batch: RecordBatch) -> bytes | None:
        """A batch appended without its bytes: with a cold store they are needed at once (the shell writes them,
        ``release`` counts them); without one they may wait for their first use."""
        return encode_batch(batch) if self._cold is not None else None

    def _keep(self, batch: RecordBatch, data: bytes | None) -> None:
        """Hold ``batch`` (checked to continue the log, its epoch entered) and its bytes at the log end."""
        self._batches.append(batch)
        self._encoded.append(data)
        if data is not None:
            self._held_bytes += len(data)
        base = batch.base_offset
        self._bases.append(base)
        if batch.is_control:
            self._control_bases.append(base)
        self._end = base + batch.records[-1].offset_delta + 1  # the batch's last offset + 1

    def batch_start_at_or_below(self, offset: int) -> int:
        """Where a truncation to ``offset`` cuts the log: ``offset`` itself at a batch boundary, at or
        beyond the log end or below 0, else the base offset of the batch holding it."""
        if offset >= self._end or offset <= 0 or not self._bases:
            return offset
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._bases[i] if i >= 0 else offset

    def truncate_to(self, offset: int) -> int:
        """Remove every record at ``offset`` and beyond; return the new log end offset.

        Like Kafka's log (``UnifiedLog.truncateTo`` → ``LogSegment.truncateTo``, which cuts the segment
        at the position of the first batch whose last offset is at or beyond the target), a truncation
        point inside a batch removes that whole batch: the log ends at the batch's base offset, never
        inside it.  Followers copy the leader's batches as they are and epochs change only at batch
        boundaries, so a correct leader's DivergingEpoch never falls inside a batch; a faulty one's may,
        and the follower then keeps only whole batches below it.
        """
        if offset >= self._end:
            return self._end
        if offset < 0:
            raise LogError(f"truncate to negative offset {offset}")
        if offset < self._start:
            raise LogError(f"truncate to offset {offset}, below the log start offset {self._start}")
        offset = self.batch_start_at_or_below(offset)
        i = bisect.bisect_left(self._bases, offset)
        held = max(0, i - self._first_held)
        self._held_bytes -= sum(len(d) for d in self._encoded[held:] if d is not None)
        del self._batches[held:]
        del self._encoded[held:]
        del self._bases[i:]
        self._first_held = min(self._first_held, i)
        self._end = offset
        del self._control_bases[bisect.bisect_left(self._control_bases, offset):]
        while self._epochs and self._epochs[-1].start_offset >= offset:
            self._epochs.pop()
            self._epoch_keys.pop()
            self._epoch_starts.pop()
        return offset

    def advance_start(self, snapshot_id: SnapshotId) -> int:
        """KIP-630 ``CleanLog``: the log now starts at ``snapshot_id.end_offset``, a batch boundary at or below the
        log end; the batches below it go (Kafka's ``UnifiedLog.maybeIncrementLogStartOffset`` and
        ``deleteOldSegments``) and the epoch cache keeps the entry covering the new start, moved there
        (Kafka's ``LeaderEpochFileCache.truncateFromStart``). Returns how many batches went."""
        offset = snapshot_id.end_offset
        if offset <= self._start:
            return 0
        if offset > self._end:
            raise LogError(f"log start {offset} beyond the log end offset {self._end}")
        if self.epoch_of(offset - 1) != snapshot_id.epoch:
            raise LogError(f"snapshot {snapshot_id} does not match the log (epoch {self.epoch_of(offset - 1)} "
                           f"at offset {offset - 1})")
        i = bisect.bisect_left(self._bases, offset)
        if i < len(self._bases) and self._bases[i] != offset:
            raise LogError(f"log start {offset} is inside the batch at {self._bases[i - 1]}")
        held = max(0, i - self._first_held)
        self._held_bytes -= sum(len(d) for d in self._encoded[:held] if d is not None)
        del self._batches[:held]
        del self._encoded[:held]
        del self._bases[:i]
        del self._control_bases[: bisect.bisect_left(self._control_bases, offset)]
        self._first_held = max(0, self._first_held - i)
        if offset == self._end:
            keep = len(self._epochs)  # no record left: the snapshot answers every epoch question
        else:
            keep = bisect.bisect_right(self._epoch_starts, offset) - 1  # the entry covering the new start
            self._epochs[keep] = EpochStart(self._epochs[keep].epoch, offset)
            self._epoch_starts[keep] = offset
        del self._epochs[:keep]
        del self._epoch_keys[:keep]
        del self._epoch_starts[:keep]
        self._start, self._start_snapshot = offset, snapshot_id
        return i

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """KIP-630 snapshot install (Kafka's ``truncateToLatestSnapshot`` → ``truncateFullyAndStartAt``): every
        record goes; the log starts and ends at the snapshot's end offset, the snapshot's epoch its last."""
        if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
            raise LogError(f"invalid snapshot id {snapshot_id}")
        self._bases = array("q")
        self._control_bases.clear()
        self._first_held = 0
        self._batches.clear()
        self._encoded.clear()
        self._held_bytes = 0
        self._epochs.clear()
        self._epoch_keys.clear()
        self._epoch_starts.clear()
        self._start = self._end = snapshot_id.end_offset
        self._start_snapshot = snapshot_id if snapshot_id.end_offset > 0 else None

    def release(self, keep_bytes: int) -> int:
        """Let the oldest held batches go from memory, down to ``keep_bytes`` held; return how many went.

        The shell's call, between steps, once every batch of the log is in the cold store. It acts only
        when more than twice ``keep_bytes`` are held, so a steady writer pays for it once per
        ``keep_bytes`` written rather than on every step (the list shifts are then amortised).
        """
        if self._cold is None:
            raise LogError("release: this log has no cold store to read released batches back from")
        if self._held_bytes <= 2 * keep_bytes:
            return 0
        drop, freed, held = 0, 0, self._held_bytes
        while drop < len(self._batches) and held - freed > keep_bytes:
            data = self._encoded[drop]
            freed += 0 if data is None else len(data)
            drop += 1
        del self._batches[:drop]
        del self._encoded[:drop]
        self._first_held += drop
        self._held_bytes -= freed
        return drop

    # ------------------------------------------------------------------------------------ helpers

    def _read_cold(self, index: int, max_bytes: int) -> tuple[tuple[RecordBatch, ...], tuple[bytes, ...]]:
        """Released batches from the ``index``-th one, up to ``max_bytes`` (at least one), read from the
        cold store and cut where the held batches begin: those are read from memory, by the next read."""
        if self._cold is None:
            raise LogError(f"batch {index} was released but this log has no cold store")
        base = self._bases[index]
        batches, encoded = self._cold.read_encoded(base, max_bytes)
        if not batches or batches[0].base_offset != base:
            got = batches[0].base_offset if batches else "nothing"
            raise LogError(f"the cold store returned {got} for the released batch at offset {base}")
        n = min(len(batches), self._first_held - index)
        return tuple(batches[:n]), tuple(encoded[:n])


# ---------------------------------------------------------------------------------------------- snapshots


class MemorySnapshot:
    """One snapshot's bytes in memory (``io.RawSnapshotReader``; the simulator's store serves these too)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def size_in_bytes(self) -> int:
        return len(self.data)

    def slice(self, position: int, max_bytes: int) -> bytes:
        return self.data[position : position + max(0, max_bytes)]


class MemorySnapshots:
    """Snapshots held in memory: the core's ``io.SnapshotSource`` for tests and the simulator, which also applies
    a follower's download ops (``apply_op``: ``WriteSnapshotChunk``, ``InstallSnapshot`` freezes the partial
    bytes, ``AbortSnapshotDownload``, ``DeleteSnapshot``). A node keeps its snapshots in files instead."""

    def __init__(self) -> None:
        self._frozen: dict[SnapshotId, MemorySnapshot] = {}
        self._partial: dict[SnapshotId, bytearray] = {}

    def put(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A frozen snapshot (what a shell writes before ``SnapshotWritten``)."""
        self._frozen[snapshot_id] = MemorySnapshot(bytes(data))

    def read_snapshot(self, snapshot_id: SnapshotId) -> MemorySnapshot | None:
        return self._frozen.get(snapshot_id)

    def data(self, snapshot_id: SnapshotId) -> bytes | None:
        snap = self._frozen.get(snapshot_id)
        return None if snap is None else snap.data

    def ids(self) -> list[SnapshotId]:
        """The frozen snapshots, oldest first."""
        return sorted(self._frozen)

    def partial(self, snapshot_id: SnapshotId) -> bytes | None:
        part = self._partial.get(snapshot_id)
        return None if part is None else bytes(part)

    def apply_op(self, op: LogOp) -> None:
        """Apply one of the core's snapshot ops; other ops (the log's) are ignored."""
        if isinstance(op, WriteSnapshotChunk):
            if op.position == 0:
                self._partial[op.snapshot_id] = bytearray()
            part = self._partial.get(op.snapshot_id)
            if part is None or len(part) != op.position:
                have = None if part is None else len(part)
                raise LogError(f"chunk of {op.snapshot_id} at {op.position}, but the partial file has {have} bytes")
            part += op.data
        elif isinstance(op, AbortSnapshotDownload):
            self._partial.pop(op.snapshot_id, None)
        elif isinstance(op, DeleteSnapshot):
            self._frozen.pop(op.snapshot_id, None)
        elif isinstance(op, InstallSnapshot):
            sid = op.snapshot_id
            part = self._partial.pop(sid, None)
            if part is not None:
                self._frozen[sid] = MemorySnapshot(bytes(part))
            elif sid not in self._frozen:
                raise LogError(f"install of {sid}: no such snapshot or download")
