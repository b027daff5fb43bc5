"""One node's durable state as the simulator keeps it: what survives a crash, and what the online checks read.

``DiskLog``: the core's ``Log`` already validates every append and truncation (and the simulator compares log
ends after each step), so this mirror is only a list of batches with their base offsets for bisecting: the
checks walk it on every high-watermark move, which must not copy or re-measure the log. With snapshots
(KIP-630) it starts at ``start`` (records below are gone, a snapshot holds them).

``SnapshotFiles``: the node's snapshot directory in memory, the core's ``SnapshotSource`` (it serves
FetchSnapshot from it). Frozen snapshots (``<id>.checkpoint``) and partial ones (``<id>.checkpoint.part``: a
download in progress, or a snapshot whose writer died) are kept apart, as Kafka keeps them apart by name: only a
frozen snapshot is ever read, listed or loaded, and a restart deletes the partial ones (Kafka's
``Snapshots.deleteIfExists`` of stray ``.part`` files when the log opens).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from kraft_tck.reference.log import MemorySnapshot
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.spec.records import ControlType, RecordBatch, decode_control

_VOTERS_KEY = int(ControlType.KRAFT_VOTERS).to_bytes(2, "big")


def voters_in(batch: RecordBatch) -> frozenset[int] | None:
    """KIP-853: the voter ids of the last VotersRecord in ``batch`` (None: the batch holds none). Only control
    batches can hold one; a record's key is int16 version + int16 type (``spec.records.control_batch``)."""
    if not batch.is_control:
        return None
    found = None
    for rec in batch.records:
        key = rec.key
        if key is not None and key[2:4] == _VOTERS_KEY:
            found = frozenset(v["VoterId"] for v in decode_control(rec)[1]["Voters"])
    return found


class DiskLog:
    """``configs``: KIP-853, the (base offset, voter ids) of every batch of the log that holds a VotersRecord, in
    offset order (what AtMostOneUncommittedConfig counts)."""

    __slots__ = ("_bases", "batches", "configs", "end_offset", "start")

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self._bases: list[int] = []
        self.end_offset = 0
        self.start = 0  # the log start offset (KIP-630)
        self.configs: list[tuple[int, frozenset[int]]] = []

    def append(self, batches: Sequence[RecordBatch]) -> None:
        for b in batches:
            self.batches.append(b)
            self._bases.append(b.base_offset)
            self.end_offset = b.last_offset + 1
            if b.is_control:
                ids = voters_in(b)
                if ids is not None:
                    self.configs.append((b.base_offset, ids))

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that starts at ``offset`` or later (the core truncates at batch boundaries)."""
        i = bisect.bisect_left(self._bases, offset)
        del self.batches[i:]
        del self._bases[i:]
        self.end_offset = self.batches[-1].last_offset + 1 if self.batches else self.start
        while self.configs and self.configs[-1][0] >= offset:
            self.configs.pop()

    def advance_start(self, offset: int) -> None:
        """CleanLog: the batches wholly below ``offset`` go; the log starts there (a snapshot's end, a batch
        boundary)."""
        i = bisect.bisect_left(self._bases, offset)
        del self.batches[:i]
        del self._bases[:i]
        self.start = offset
        self.configs = [c for c in self.configs if c[0] >= offset]
        if not self.batches:
            self.end_offset = max(self.end_offset, offset)

    def reset_to(self, offset: int) -> None:
        """An installed snapshot: the log is emptied and starts and ends at ``offset``."""
        self.batches.clear()
        self._bases.clear()
        self.configs.clear()
        self.start = self.end_offset = offset

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """The batch holding ``offset`` and every later one (``Log.read`` without a size limit); from the log
        start when ``offset`` is below it."""
        if offset >= self.end_offset:
            return iter(())
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return iter(self.batches[i:]) if i else iter(self.batches)

    def batch_at(self, offset: int) -> RecordBatch | None:
        """The batch holding ``offset``, or None (also below the log start)."""
        if not self.start <= offset < self.end_offset or not self.batches:
            return None
        return self.batches[bisect.bisect_right(self._bases, offset) - 1]


class SnapshotFiles:
    """A node's snapshots in memory: ``frozen`` (complete, renamed into place) and ``partial`` (being written or
    downloaded). Durable: a crash keeps both; ``recover`` (at restart) drops the partial ones."""

    __slots__ = ("frozen", "partial")

    def __init__(self) -> None:
        self.frozen: dict[SnapshotId, bytes] = {}
        self.partial: dict[SnapshotId, bytearray] = {}

    def read_snapshot(self, snapshot_id: SnapshotId) -> MemorySnapshot | None:
        data = self.frozen.get(snapshot_id)
        return None if data is None else MemorySnapshot(data)

    def ids(self) -> list[SnapshotId]:
        return sorted(self.frozen)

    def latest(self) -> SnapshotId | None:
        return max(self.frozen) if self.frozen else None

    def at(self, end_offset: int) -> SnapshotId | None:
        """The frozen snapshot ending at ``end_offset`` (the newest epoch if several)."""
        found = [s for s in self.frozen if s.end_offset == end_offset]
        return max(found) if found else None

    def write_chunk(self, snapshot_id: SnapshotId, position: int, data: bytes) -> None:
        """A download's chunk at ``position`` (0 starts the partial file over)."""
        part = self.partial.get(snapshot_id)
        if position == 0 or part is None:
            part = self.partial[snapshot_id] = bytearray()
        if position != len(part):
            raise ValueError(f"snapshot {snapshot_id}: chunk at {position}, the partial file holds {len(part)} bytes")
        part += data

    def freeze(self, snapshot_id: SnapshotId) -> bytes:
        """The partial file is complete: rename it into place."""
        data = bytes(self.partial.pop(snapshot_id))
        self.frozen[snapshot_id] = data
        return data

    def abort(self, snapshot_id: SnapshotId) -> None:
        self.partial.pop(snapshot_id, None)

    def delete(self, snapshot_id: SnapshotId) -> None:
        self.frozen.pop(snapshot_id, None)

    def recover(self) -> list[SnapshotId]:
        """At restart: the partial files go (never read); returns their ids."""
        gone = sorted(self.partial)
        self.partial.clear()
        return gone
