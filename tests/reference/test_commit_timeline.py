"""bench/bench_commit_timeline.py: its probe loads in real node processes and every commit's path is found, segment
by segment, in the timestamps they wrote (a 3-process cluster, real sockets; the figures are the script's to print,
not asserted here)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _timeline() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the script imports bench_cluster beside it
    spec = importlib.util.spec_from_file_location("bench_commit_timeline", BENCH / "bench_commit_timeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_commit_path_is_timed_segment_by_segment(tmp_path: Path) -> None:
    tl = _timeline()
    plan = dataclasses.replace(tl.bc.QUICK, warmup_seconds=0.5, window_seconds=1.0, echo_round_trips=200)
    echo_ms, p50_ms, out_dir = asyncio.run(tl.one_round(tmp_path, plan, False, None, 0))
    assert len(list(out_dir.glob("*.json"))) == 3, "every node process wrote its timeline (the probe loaded)"
    seg = tl.chains(out_dir)
    whole = seg[tl.SEGMENTS[-1]]
    assert len(whole) >= 50, f"only {len(whole)} commits' paths found"
    for name in tl.SEGMENTS:
        assert len(seg[name]) == len(whole), name
        assert min(seg[name]) > 0, f"{name}: a segment ends before it starts"
    # The five segments are consecutive: they add up to each commit's whole path.
    for k in range(len(whole)):
        parts = sum(seg[name][k] for name in tl.SEGMENTS[:-1])
        assert abs(parts - whole[k]) < 0.01, (k, parts, whole[k])
    # A commit's path crosses the network twice, so it is longer than one hop of the echo, and the report agrees.
    assert tl.bc.pct(whole, 50) > tl.bc.pct(seg[tl.SEGMENTS[1]], 50)
    assert echo_ms > 0 and p50_ms > 0
