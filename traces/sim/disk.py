"""One node's durable log as the simulator keeps it: what survives a crash, and what the online checks read.

The core's ``Log`` already validates every append and truncation (and the simulator compares log ends
after each step), so this mirror is only a list of batches with their base offsets for bisecting: the
checks walk it on every high-watermark move, which must not copy or re-measure the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from kraft_tck.spec.records import RecordBatch


class DiskLog:
    __slots__ = ("_bases", "batches", "end_offset")

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self._bases: list[int] = []
        self.end_offset = 0

    def append(self, batches: Sequence[RecordBatch]) -> None:
        for b in batches:
            self.batches.append(b)
            self._bases.append(b.base_offset)
            self.end_offset = b.last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that starts at ``offset`` or later (the core truncates at batch boundaries)."""
        i = bisect.bisect_left(self._bases, offset)
        del self.batches[i:]
        del self._bases[i:]
        self.end_offset = self.batches[-1].last_offset + 1 if self.batches else 0

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """The batch holding ``offset`` and every later one (``Log.read`` without a size limit)."""
        if offset >= self.end_offset:
            return iter(())
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return iter(self.batches[i:]) if i else iter(self.batches)

    def batch_at(self, offset: int) -> RecordBatch | None:
        """The batch holding ``offset``, or None."""
        if not 0 <= offset < self.end_offset:
            return None
        return self.batches[bisect.bisect_right(self._bases, offset) - 1]
