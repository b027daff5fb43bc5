"""Latency percentiles in bounded memory, however long a workload runs.

A list of every latency grows by a float per write (about 115 MB an hour at 1,000 writes/s). This
histogram keeps counts in HdrHistogram's log-linear layout instead: values below 1,024 µs are exact to
the microsecond, larger ones fall in buckets 1/512 of their magnitude wide and are reported at the
bucket's middle (within 0.1%). Its size depends on the range of values seen, not on their number: a
few thousand buckets from 1 µs to an hour. (The ``hdrhistogram`` package would need pbr and a recent
setuptools at run time for these twenty lines.)
"""

from __future__ import annotations

import math

_SUB_BITS = 10  # 2**10 sub-buckets: exact below 1,024 µs


def _bucket(us: int) -> tuple[int, int]:
    """``(shift, mantissa)``: the bucket holds ``[mantissa << shift, (mantissa + 1) << shift)``."""
    shift = max(0, us.bit_length() - _SUB_BITS)
    return shift, us >> shift


class LatencyHistogram:
    """Counts of latencies by log-linear microsecond bucket; percentiles by nearest rank."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], int] = {}
        self.count = 0

    def record(self, ms: float) -> None:
        """Count one latency of ``ms`` milliseconds (negative values count as 0)."""
        key = _bucket(max(0, round(ms * 1000)))
        self._counts[key] = self._counts.get(key, 0) + 1
        self.count += 1

    @property
    def buckets(self) -> int:
        """How many buckets are in use (the histogram's size)."""
        return len(self._counts)

    def percentile(self, q: float) -> float:
        """The nearest-rank ``q``-th percentile in milliseconds (NaN when empty), as
        ``workload.percentile`` computes it from a sorted list."""
        if not self.count:
            return math.nan
        rank = max(0, min(self.count - 1, round(q / 100 * self.count + 0.5) - 1))
        seen = 0
        for shift, mantissa in sorted(self._counts):
            seen += self._counts[shift, mantissa]
            if seen > rank:
                low = mantissa << shift
                return (low + ((1 << shift) - 1) / 2) / 1000  # the bucket's middle (exact when 1 µs wide)
        raise AssertionError("unreachable: the ranks are within count")
