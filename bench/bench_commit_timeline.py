"""Where a commit's time goes: one commit's path through a 3-process cluster, in microseconds per segment.

A pinned, one-write-at-a-time process cluster (bench_cluster's goal rounds: leader alone on the first CPU, the
followers on the others, no fsync unless ``--fsync``), its node processes loading the probe in
``bench/timeline_hook`` (socket reads and writes, client writes and commits, timestamped on the machine's one
clock). For each commit after the first third of the run, the path that committed it:

    client write -> the leader writes the Fetch answer -> the follower reads it -> the follower writes its next
    Fetch -> the leader reads it -> the write's waiter is released

(the follower whose Fetch moved the high watermark; a hop's time includes the sender's write() call, which on
loopback delivers the bytes). Printed: p10/p50/p90 per segment, beside the pinned echo round trip of the same run
(bench_cluster's floor) and the cluster's own commit p50 from the workload report, for the same placement::

    .venv/bin/python bench/bench_commit_timeline.py [--rounds N] [--fsync] [--tree DIR]

``--tree DIR`` times the node processes of another tree (as bench_cluster's ``--baseline-tree``). Each probe costs
about half a microsecond, so segments are a little longer than in the benchmark's rounds."""

from __future__ import annotations

import argparse
import asyncio
import bisect
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cluster as bc
from kraft_tck.reference.procs import imports_from

HOOK = Path(__file__).resolve().parent / "timeline_hook"
SEGMENTS = ("leader: client write -> Fetch answer written", "hop: leader -> follower",
            "follower: answer read -> next Fetch written", "hop: follower -> leader",
            "leader: Fetch read -> write released", "client write -> released")


def chains(out_dir: Path) -> dict[str, list[float]]:
    """Per segment, the µs of every commit after the first third (see the module's docstring)."""
    procs = {f: json.loads(f.read_text()) for f in out_dir.glob("*.json")}
    if not procs:
        raise SystemExit(f"no timeline in {out_dir}: did the node processes load {HOOK}?")
    leader = max(procs, key=lambda f: sum(1 for e in procs[f] if e[1] == "client write"))
    events = sorted((t, "L" if f == leader else f.stem, what, conn) for f, es in procs.items() for t, what, conn in es)
    writes = [e[0] for e in events if e[1] == "L" and e[2] == "client write"]
    released = [e[0] for e in events if e[1] == "L" and e[2] == "committed"]
    times = [e[0] for e in events]
    out: dict[str, list[float]] = {s: [] for s in SEGMENTS}
    for k in range(len(writes) // 3, len(writes) - 1):
        t0 = writes[k]
        i = bisect.bisect_right(released, t0)
        if i >= len(released) or released[i] > writes[k + 1]:
            continue
        end = released[i]
        window = events[bisect.bisect_left(times, t0):bisect.bisect_right(times, end)]
        fetch_in = [e for e in window if e[1] == "L" and e[2] == "request in"]
        if not fetch_in:
            continue
        fin = fetch_in[-1]  # the Fetch whose high watermark released the write
        fout = next((e for e in reversed(window) if e[2] == "request out" and e[3] == fin[3] and e[0] <= fin[0]), None)
        if fout is None:
            continue
        ain = next((e for e in reversed(window) if e[1] == fout[1] and e[2] == "answer in" and e[0] <= fout[0]), None)
        if ain is None:
            continue
        aout = next((e for e in reversed(window) if e[1] == "L" and e[2] == "answer out" and e[3] == ain[3]
                     and e[0] <= ain[0]), None)
        if aout is None:
            continue
        for name, a, b in zip(SEGMENTS, (t0, aout[0], ain[0], fout[0], fin[0], t0),
                              (aout[0], ain[0], fout[0], fin[0], end, end), strict=True):
            out[name].append((b - a) / 1000)
    return out


async def one_round(root: Path, plan: bc.Plan, fsync: bool, tree: Path | None, k: int) -> tuple[float, float, Path]:
    """The pinned echo's p50 (ms), the cluster's commit p50 (ms) and its timeline directory."""
    placement = bc.spread_placement() or bc.UNPINNED
    request, _ = bc.fetch_frames()
    echo = await bc.echo_cross_process(request, plan.echo_round_trips, cpus=placement.echo_cpus)
    out_dir = root / f"timeline-{k}"
    out_dir.mkdir()
    saved = {name: os.environ.get(name) for name in ("KRAFT_TCK_TIMELINE_DIR", "PYTHONPATH")}
    os.environ["KRAFT_TCK_TIMELINE_DIR"] = str(out_dir)
    try:
        with imports_from(tree), imports_from(HOOK):  # the hook's directory first: its sitecustomize loads
            result = await bc.process_workload(root / f"cluster-{k}", f"timeline{k}", fsync, 0, 0, plan,
                                               placement=placement)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return bc.pct(echo, 50), result.p50, out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="clusters to time, one after the other (default 1)")
    parser.add_argument("--fsync", action="store_true", help="fsync on (the goal's rounds run without)")
    parser.add_argument("--tree", type=Path, default=None, help="time the node processes of this tree")
    parser.add_argument("--seconds", type=float, default=3.0, help="each cluster's measured window (default 3)")
    args = parser.parse_args()
    plan = dataclasses.replace(bc.QUICK, warmup_seconds=1.0, window_seconds=args.seconds)
    root = Path(tempfile.mkdtemp(prefix="commit-timeline-"))
    try:
        pooled: dict[str, list[float]] = {s: [] for s in SEGMENTS}
        rows = []
        for k in range(args.rounds):
            echo_ms, p50_ms, out_dir = asyncio.run(one_round(root, plan, args.fsync, args.tree, k))
            seg = chains(out_dir)
            for s in SEGMENTS:
                pooled[s] += seg[s]
            rows.append([str(k + 1), f"{echo_ms * 1000:.0f}", f"{p50_ms * 1000:.0f}",
                         f"{bc.pct(seg[SEGMENTS[-1]], 50):.0f}" if seg[SEGMENTS[-1]] else "-",
                         str(len(seg[SEGMENTS[-1]]))])
        bc.table(f"rounds ({'fsync on' if args.fsync else 'no fsync'}; pinned as bench_cluster's goal rounds; µs)",
                 ["round", "echo p50", "commit p50 (report)", "commit p50 (timeline)", "commits timed"], rows)
        total = bc.pct(pooled[SEGMENTS[-1]], 50) if pooled[SEGMENTS[-1]] else float("nan")
        bc.table("a commit's path, µs (all rounds' commits pooled; p50 share of the whole path's p50)",
                 ["segment", "p10", "p50", "p90", "share"],
                 [[s, f"{bc.pct(v, 10):.1f}", f"{bc.pct(v, 50):.1f}", f"{bc.pct(v, 90):.1f}",
                   f"{bc.pct(v, 50) / total:.0%}"] for s, v in pooled.items() if v])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
