"""The core's view of the metadata log: an in-memory list of record batches plus its epoch cache.

Pure and small on purpose. The shell owns the real segment files and mirrors every change the core
makes here (the core reports each one as an ``AppendBatches`` / ``TruncateTo`` operation in its
``Ready`` bundle), so after a restart the shell can rebuild this object from disk.

The epoch cache is Kafka's "leader epoch checkpoint": one ``(epoch, start_offset)`` entry per epoch that
has records in the log, in increasing order. It answers the one question KIP-595's Fetch handling asks
of the log, ``epoch_end_offset`` ("Fetch Request Handling" step 3).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kraft_tck.spec.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch

NO_EPOCH = -1  # KIP-595: LastFetchedEpoch "-1 if there is none"


class LogError(ValueError):
    """An append or truncation that would break the log's shape (gaps, overlaps, epochs going back)."""


@dataclass(frozen=True, slots=True)
class EpochStart:
    """One epoch-cache entry: the first offset written in ``epoch``."""

    epoch: int
    start_offset: int


def approx_batch_size(batch: RecordBatch) -> int:
    """Roughly the encoded size of ``batch``: enough to honour a fetch's MaxBytes without encoding."""
    size = LOG_OVERHEAD + HEADER_SIZE
    for rec in batch.records:
        size += 12 + len(rec.key or b"") + len(rec.value or b"")
    return size


class Log:
    """Batches in offset order, contiguous from offset 0 (this project takes no snapshots)."""

    def __init__(self, batches: Iterable[RecordBatch] = ()) -> None:
        self._batches: list[RecordBatch] = []
        self._bases: list[int] = []  # base offsets, for bisect
        self._epochs: list[EpochStart] = []
        self.append(list(batches))

    # ------------------------------------------------------------------------------------ queries

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next record will get."""
        return self._batches[-1].last_offset + 1 if self._batches else 0

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record, or -1 for an empty log (Fetch's ``LastFetchedEpoch``)."""
        return self._epochs[-1].epoch if self._epochs else NO_EPOCH

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
        keys = [e.epoch for e in self._epochs]
        i = bisect.bisect_right(keys, epoch)  # entries [0, i) have epoch <= requested
        if i == 0:
            return epoch, self._epochs[0].start_offset
        found = self._epochs[i - 1]
        end = self._epochs[i].start_offset if i < len(self._epochs) else self.end_offset
        return found.epoch, end

    def epoch_of(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (-1 if it is not in the log)."""
        if not 0 <= offset < self.end_offset:
            return NO_EPOCH
        return self._batches[self._index_of(offset)].partition_leader_epoch

    def read(self, from_offset: int, max_bytes: int) -> tuple[RecordBatch, ...]:
        """Whole batches from the one holding ``from_offset``, up to ``max_bytes`` (at least one batch).

        Like Kafka, the first batch is returned even when it alone exceeds ``max_bytes`` (KIP-74), so a
        large batch cannot stall a follower.
        """
        if from_offset >= self.end_offset:
            return ()
        if from_offset < 0:
            raise LogError(f"read from negative offset {from_offset}")
        i = self._index_of(from_offset)  # like Kafka, an offset inside a batch returns that whole batch
        out: list[RecordBatch] = []
        used = 0
        for batch in self._batches[i:]:
            size = approx_batch_size(batch)
            if out and used + size > max_bytes:
                break
            out.append(batch)
            used += size
        return tuple(out)

    # ------------------------------------------------------------------------------------ changes

    def append(self, batches: Sequence[RecordBatch]) -> None:
        """Append batches that continue the log exactly (no gap, no overlap, epochs never decrease)."""
        for batch in batches:
            if not batch.records:
                raise LogError(f"empty batch at offset {batch.base_offset}")
            if batch.base_offset != self.end_offset:
                raise LogError(
                    f"batch base offset {batch.base_offset} does not continue log end {self.end_offset}"
                )
            epoch = batch.partition_leader_epoch
            if epoch < self.last_fetched_epoch:
                raise LogError(
                    f"batch at {batch.base_offset} has epoch {epoch} below the log's last epoch "
                    f"{self.last_fetched_epoch}"
                )
            if epoch > self.last_fetched_epoch:
                self._epochs.append(EpochStart(epoch, batch.base_offset))
            self._batches.append(batch)
            self._bases.append(batch.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every record at ``offset`` and beyond. ``offset`` must be a batch boundary.

        A truncation point inside a batch cannot come from the protocol (epochs change only at batch
        boundaries and followers copy the leader's batches as they are), so it is refused loudly.
        """
        if offset >= self.end_offset:
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
        del self._bases[i:]
        while self._epochs and self._epochs[-1].start_offset >= offset:
            self._epochs.pop()

    # ------------------------------------------------------------------------------------ helpers

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1
