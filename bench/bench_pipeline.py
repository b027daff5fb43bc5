"""Benchmark: events/s through the Spark pipeline's ingest + all safety checks, side by side with the
single-process Python checker on the same files; and the per-trace validation fan-out with 1 vs 2 cores.

    .venv/bin/python bench/bench_pipeline.py                       # 200k events (a few minutes)
    .venv/bin/python bench/bench_pipeline.py --events 1000000 --events 10000000

Corpora are synthetic (kraft_tck.traces.pipeline.synth, 3 voters, 20k events per run) and cached under
--dir. The Spark figure includes writing the Parquet tables (part of ingest) and excludes Spark's start-up
(a warm-up run comes first). The checker is timed without JSON Schema validation (its fastest mode) on
every size, and with validation (what `trace.read_trace` does by default) on one file, extrapolated.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth

EVENTS_PER_RUN = 20_000


def corpus(root: Path, events: int) -> Path:
    d = root / f"events-{events}"
    marker = d / "_COMPLETE"
    if not marker.exists():
        shutil.rmtree(d, ignore_errors=True)
        runs = max(1, events // EVENTS_PER_RUN)
        t = time.perf_counter()
        n = synth.write_corpus(d, runs, min(events, EVENTS_PER_RUN), seed=1000)
        marker.write_text(str(n))
        print(f"generated {n:,} events in {runs} files in {time.perf_counter() - t:.1f} s")
    return d


def bench_spark(spark: object, src: Path, out: Path) -> tuple[float, int, dict[str, float]]:
    from kraft_tck.traces.pipeline.run import run_pipeline

    t = time.perf_counter()
    res = run_pipeline(spark, src, out, validator=False, report=False, echo=lambda _: None)
    return time.perf_counter() - t, res.counts["events accepted"], res.timings


def bench_fanout(cores: int, files: list[str]) -> float:
    from kraft_tck.traces.pipeline.session import build_session
    from kraft_tck.traces.pipeline.tlc_fanout import default_validator, fan_out

    name, fn = default_validator()
    spark = build_session(f"local[{cores}]", app_name=f"bench-fanout-{cores}")
    try:
        fan_out(spark, files[:cores], fn, tasks=cores)  # warm the Python workers
        t = time.perf_counter()
        verdicts = fan_out(spark, files, fn, tasks=len(files))
        elapsed = time.perf_counter() - t
    finally:
        spark.stop()
    passed = sum(v.ok for v in verdicts)
    print(f"  fan-out ({name}) with {cores} core(s): {len(files)} traces in {elapsed:.1f} s,"
          f" {passed} passed, {len(files) - passed} failed")
    return len(files) / elapsed * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, action="append", help="corpus size (repeatable); default 200000")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "kraft-tck-bench-pipeline")
    ap.add_argument("--no-fanout", action="store_true")
    ap.add_argument("--only-fanout", action="store_true")
    ap.add_argument("--fanout-traces", type=Path, help="traces for the fan-out (default: 8 synthetic ones)")
    args = ap.parse_args()
    sizes = args.events or [200_000]
    from kraft_tck.traces.pipeline.session import build_session

    rows = []
    spark = build_session(conf={"spark.ui.enabled": "false"})
    try:
        if args.only_fanout:
            sizes = []
        if sizes:
            bench_spark(spark, corpus(args.dir, 20_000), args.dir / "out-warmup")
        for n in sizes:
            src = corpus(args.dir, n)
            secs, accepted, timings = bench_spark(spark, src, args.dir / f"out-{n}")
            files = trace_files(src)
            t = time.perf_counter()
            py = check_paths(files, validate=False)
            py_secs = time.perf_counter() - t
            t = time.perf_counter()
            one = check_paths(files[:1], validate=True)
            val_rate = one.accepted / (time.perf_counter() - t)
            assert py.accepted == accepted, (py.accepted, accepted)
            stages = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
            rows.append((n, accepted, secs, accepted / secs, py_secs, accepted / py_secs, val_rate, stages))
    finally:
        spark.stop()
    print()
    print(f"{'events':>11} | {'spark s':>8} | {'spark ev/s':>10} | {'checker s':>9} | {'checker ev/s':>12} |"
          f" {'checker+schema ev/s':>19} | spark stages")
    for _n, acc, s, r, ps, pr, vr, stages in rows:
        print(f"{acc:>11,} | {s:>8.1f} | {r:>10,.0f} | {ps:>9.1f} | {pr:>12,.0f} | {vr:>19,.0f} | {stages}")
    if not args.no_fanout:
        fan_dir = args.fanout_traces or args.dir / "fanout"
        if not fan_dir.exists():
            synth.write_corpus(fan_dir, 8, 1_000, seed=5000)
        files = [str(p) for p in trace_files(fan_dir)]
        print()
        per_min = {c: bench_fanout(c, files) for c in (1, 2)}
        print(f"{'executor cores':>14} | traces validated per minute")
        for c, r in per_min.items():
            print(f"{c:>14} | {r:,.1f}")


if __name__ == "__main__":
    main()
