"""reference/histogram.py: the workload's commit-latency percentiles in bounded memory."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st
from kraft_tck.reference.histogram import LatencyHistogram
from kraft_tck.reference.workload import WorkloadStats, percentile

QS = (0, 1, 50, 75, 99, 99.9, 100)


def filled(values_ms: list[float]) -> LatencyHistogram:
    h = LatencyHistogram()
    for v in values_ms:
        h.record(v)
    return h


@given(st.lists(st.integers(0, 1023), min_size=1, max_size=300))
def test_below_1024_us_the_percentiles_are_exact(values_us: list[int]) -> None:
    h = filled([v / 1000 for v in values_us])
    exact = sorted(v / 1000 for v in values_us)
    assert [h.percentile(q) for q in QS] == [percentile(exact, q) for q in QS]
    assert h.count == len(values_us)


@given(st.lists(st.floats(0.0, 3.6e6), min_size=1, max_size=300))
def test_every_percentile_is_within_0_1_percent_of_the_exact_one(values_ms: list[float]) -> None:
    h = filled(values_ms)
    exact = sorted(round(v * 1000) / 1000 for v in values_ms)  # recorded to the microsecond
    for q in QS:
        want = percentile(exact, q)
        assert math.isclose(h.percentile(q), want, rel_tol=1e-3, abs_tol=1e-3), (q, h.percentile(q), want)


def test_its_size_depends_on_the_range_not_on_the_number_of_writes() -> None:
    rng = random.Random(7)
    h = filled([rng.lognormvariate(-1, 1.5) for _ in range(200_000)])
    assert h.count == 200_000
    assert h.buckets < 12_000  # a list would hold 200,000 floats
    assert LatencyHistogram().buckets == 0 and math.isnan(LatencyHistogram().percentile(50))


def test_the_workload_report_reads_its_percentiles_from_the_histogram() -> None:
    stats = WorkloadStats()
    for v in (0.2, 0.3, 0.4, 5.0):
        stats.latencies.record(v)
    report = stats.report()
    # Exact below 1,024 µs; 5 ms is reported at the middle of its 8 µs bucket.
    assert "p50=0.300ms" in report and "p99=5.003ms" in report and "over 4 writes" in report
    stats.reset()
    assert stats.latencies.count == 0
