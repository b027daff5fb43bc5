"""The core's view of the metadata log: an in-memory list of record batches plus its epoch cache.

Pure and small on purpose. The shell owns the real segment files and mirrors every change the core
makes here (the core reports each one as an ``AppendBatches`` / ``TruncateTo`` operation in its
``Ready`` bundle), so after a restart the shell can rebuild this object from disk.

Each batch's encoded bytes (RecordBatch v2, as on disk and on the wire) are kept next to it once known:
a batch is encoded once on the leader — or kept as received by a follower — and the same bytes then go
to the segment file, into every Fetch response that carries the batch, and into the trace's digest.
Encoding is pure, so a batch appended without its bytes is encoded on first use.

The epoch cache is Kafka's "leader epoch checkpoint": one ``(epoch, start_offset)`` entry per epoch that
has records in the log, in increasing order. It answers the one question KIP-595's Fetch handling asks
of the log, ``epoch_end_offset`` ("Fetch Request Handling" step 3).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


class Log:
    """Batches in offset order, contiguous from offset 0 (this project takes no snapshots)."""

    def __init__(self, batches: Iterable[RecordBatch] = (), encoded: Sequence[bytes] | None = None) -> None:
        self._batches: list[RecordBatch] = []
        self._encoded: list[bytes | None] = []  # each batch's bytes, None until first needed
        self._bases: list[int] = []  # base offsets, for bisect
        self._epochs: list[EpochStart] = []
        self._epoch_keys: list[int] = []  # each entry's epoch, for bisect (Fetch validation asks per fetch)
        self._end = 0  # the log end offset, kept because the core asks for it on every step
        self.append(list(batches), encoded)

    # ------------------------------------------------------------------------------------ queries

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next record will get."""
        return self._end

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record, or -1 for an empty log (Fetch's ``LastFetchedEpoch``)."""
        return self._epoch_keys[-1] if self._epoch_keys else NO_EPOCH

    @property
    def batches(self) -> Sequence[RecordBatch]:
        return tuple(self._batches)

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
        """
        if not self._epochs:
            return NO_EPOCH, 0
        i = bisect.bisect_right(self._epoch_keys, epoch)  # entries [0, i) have epoch <= requested
        if i == 0:
            return epoch, self._epochs[0].start_offset
        found = self._epochs[i - 1]
        end = self._epochs[i].start_offset if i < len(self._epochs) else self._end
        return found.epoch, end

    def epoch_of(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (-1 if it is not in the log)."""
        if not 0 <= offset < self._end:
            return NO_EPOCH
        return self._batches[self._index_of(offset)].partition_leader_epoch

    def read(self, from_offset: int, max_bytes: int) -> tuple[RecordBatch, ...]:
        """Whole batches from the one holding ``from_offset``, up to ``max_bytes`` (at least one batch).

        Like Kafka, the first batch is returned even when it alone exceeds ``max_bytes`` (KIP-74), so a
        large batch cannot stall a follower. Sizes are the batches' encoded sizes, as Kafka counts them.
        """
        if from_offset >= self._end:
            return ()
        start, stop = self._read_range(from_offset, max_bytes)
        return tuple(self._batches[start:stop])

    def read_encoded(self, from_offset: int, max_bytes: int) -> tuple[tuple[RecordBatch, ...], tuple[bytes, ...]]:
        """``read`` together with each batch's encoded bytes (what a Fetch response carries)."""
        if from_offset >= self._end:
            return (), ()
        start, stop = self._read_range(from_offset, max_bytes)
        return tuple(self._batches[start:stop]), tuple(self.encoded_at(i) for i in range(start, stop))

    def encoded_at(self, index: int) -> bytes:
        """The bytes of the ``index``-th batch (encoded now if it was appended without them)."""
        data = self._encoded[index]
        if data is None:
            data = self._encoded[index] = encode_batch(self._batches[index])
        return data

    def digest_at(self, index: int) -> str:
        """``spec.records.batch_digest`` of the ``index``-th batch (see ``records_digest``)."""
        return records_digest(self.encoded_at(index))

    def __len__(self) -> int:
        """The number of batches."""
        return len(self._batches)

    # ------------------------------------------------------------------------------------ changes

    def append(self, batches: Sequence[RecordBatch], encoded: Sequence[bytes] | None = None) -> None:
        """Append batches that continue the log exactly (no gap, no overlap, epochs never decrease).

        ``encoded``, when given, holds each batch's bytes (one per batch, in order).
        """
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
            if epoch > last_epoch:
                self._epochs.append(EpochStart(epoch, base))
                self._epoch_keys.append(epoch)
                last_epoch = epoch
            self._batches.append(batch)
            self._encoded.append(None if encoded is None else encoded[i])
            self._bases.append(base)
            self._end = base + records[-1].offset_delta + 1  # the batch's last offset + 1

    def truncate_to(self, offset: int) -> None:
        """Remove every record at ``offset`` and beyond. ``offset`` must be a batch boundary.

        A truncation point inside a batch cannot come from the protocol (epochs change only at batch
        boundaries and followers copy the leader's batches as they are), so it is refused loudly.
        """
        if offset >= self._end:
            return
        if offset < 0:
            raise LogError(f"truncate to negative offset {offset}")
        i = bisect.bisect_left(self._bases, offset)
        if i == len(self._bases) or self._bases[i] != offset:
            prev = self._batches[i - 1]
            raise LogError(
                f"truncate_to({offset}) falls inside batch [{prev.base_offset}..{prev.last_offset}]"
            )
        del self._batches[i:]
        del self._encoded[i:]
        del self._bases[i:]
        self._end = offset
        while self._epochs and self._epochs[-1].start_offset >= offset:
            self._epochs.pop()
            self._epoch_keys.pop()

    # ------------------------------------------------------------------------------------ helpers

    def _read_range(self, from_offset: int, max_bytes: int) -> tuple[int, int]:
        if from_offset < 0:
            raise LogError(f"read from negative offset {from_offset}")
        start = self._index_of(from_offset)  # like Kafka, an offset inside a batch returns that whole batch
        stop, used = start + 1, len(self.encoded_at(start))
        while stop < len(self._batches):
            used += len(self.encoded_at(stop))
            if used > max_bytes:
                break
            stop += 1
        return start, stop

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1
