"""The pipeline report's pictures, drawn from a real simulator run under faults (no Spark needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kraft_tck.spec.trace import read_trace
from kraft_tck.traces.pipeline.pictures import (
    FaultWindow,
    Step,
    fault_windows,
    plot_commit_latency,
    plot_invariants,
    plot_timeline,
    role_segments,
)
from kraft_tck.traces.sim.cluster import SimConfig, simulate


def _run(tmp_path: Path) -> tuple[dict[str, Any], list[Step], float]:
    path = tmp_path / "seed.ndjson"
    simulate(SimConfig(seed=5, nodes=3, duration_ms=20_000, profile="heavy"), path)
    trace = read_trace(path)
    last: dict[int, tuple[str, int]] = {}
    steps: list[Step] = []
    for e in trace.events:
        st = e.get("state")
        if st and last.get(e["node"]) != (st["role"], st["epoch"]):
            last[e["node"]] = (st["role"], st["epoch"])
            steps.append(Step(e["node"], float(e["ts"]), st["role"], st["epoch"]))
    return trace.header, steps, float(trace.events[-1]["ts"])


def test_fault_windows_come_from_the_simulators_schedule(tmp_path: Path) -> None:
    header, _, _ = _run(tmp_path)
    schedule = header["config"]["schedule"]
    windows = fault_windows(header, [1, 2, 3])
    assert schedule and len(windows) == len(schedule)
    crash = next(f for f in schedule if f["kind"] == "Crash")
    w = next(w for w in windows if w.kind == "Crash")
    assert (w.start_ms, w.end_ms, w.nodes) == (crash["at_ms"], crash["at_ms"] + crash["down_ms"], (crash["node"],))
    assert fault_windows({"source": "node"}, [1]) == []  # a node trace has no schedule


def test_the_timeline_shades_each_fault_on_the_nodes_it_hits(tmp_path: Path) -> None:
    header, steps, t_end = _run(tmp_path)
    windows = fault_windows(header, [1, 2, 3])
    fname, ax = plot_timeline("simulator seed-5", steps, t_end, windows, tmp_path)
    assert (tmp_path / fname).stat().st_size > 10_000
    shaded = [p for p in ax.patches if (p.get_gid() or "").startswith("fault-")]
    assert len(shaded) == sum(len(w.nodes) for w in windows)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "Leader" in labels and "Follower" in labels and any("(fault)" in x for x in labels)
    assert ax.get_xlabel() == "time (s)" and ax.get_title() == "simulator seed-5"


def test_role_segments_last_until_the_next_step() -> None:
    segs = role_segments([Step(1, 0, "Unattached", 0), Step(1, 500, "Candidate", 1), Step(1, 700, "Leader", 1)], 2000)
    assert segs[1] == [(0, 500, "Unattached", 0), (500, 700, "Candidate", 1), (700, 2000, "Leader", 1)]


def test_latency_and_invariant_pictures(tmp_path: Path) -> None:
    assert plot_commit_latency({"a": []}, tmp_path) is None
    name = plot_commit_latency({"seed-1": [(1000.0, 4.0), (2000.0, 9.5)]}, tmp_path)
    assert name and (tmp_path / name).exists()
    assert (tmp_path / plot_invariants({"ElectionSafety": 0, "VoteOnce": 2}, tmp_path)).exists()
    assert FaultWindow("Lossy", 0, 1, (1,), "loss 10%").label == "loss 10%"
