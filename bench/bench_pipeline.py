"""Benchmark: events/s through the Spark pipeline's ingest + all safety checks, side by side with the
single-process Python checker (kraft_tck.traces.checker) on the same files; and the per-trace validation
fan-out with 1 vs 2 executor cores.

    .venv/bin/python bench/bench_pipeline.py                  # 1M and 10M events (10M: ~2.3 GB, long)
    .venv/bin/python bench/bench_pipeline.py --events 1000000 --repeat 2 --no-fanout
    .venv/bin/python bench/bench_pipeline.py --quick          # make bench: 100k events, small fan-out

Corpora are synthetic (kraft_tck.traces.pipeline.synth, 3 voters, 20k events per run), generated once and
cached under --dir; generation is not timed. The Spark figure is wall time of ingest (numbering, JSON
parse, schema check, events and quarantine tables) + the other tables + every safety check, after a
warm-up run (JVM start-up and JIT excluded). The checker is timed on every size twice: with JSON Schema
validation (what it does by default, and what the pipeline does; fastjsonschema clears valid lines) and
without (its fastest mode). CPU seconds are printed too: other work on a shared machine slows
the wall clock of both, CPU time much less. "growth" is (seconds per event at this size) / (seconds per
event at the smallest size): 1.0 is linear.

The comparison is printed both ways, because the two checkers do different work: the pipeline validates
every line against the trace schema (and quarantines what fails), as the checker does by default
(`check_paths(validate=True)`); the checker's `validate=False` mode skips that validation and only parses
and checks. "x checker" is the checker's seconds over the pipeline's seconds (above 1: the pipeline is
faster).

The last two columns put the pipeline beside its floor: reading the text, parsing every line with the explicit
schema and writing the events table's columns as Parquet, with nothing else (`bench_floor`). What the
pipeline takes above the floor is its own work (line numbers, the schema check, quarantine, the other
tables, the checks), the part that can still get cheaper.

The fan-out traces are simulated (kraft_tck.traces.sim, the seeds 0.. of `kraft-tck simulate`), validated
by the pipeline's default validator (TLC trace validation when available) on local Spark with 1 and 2
executor cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth

EVENTS_PER_RUN = 20_000


def corpus(root: Path, events: int, snapshots: bool = False) -> Path:
    """``snapshots``: histories with KIP-630 snapshots, cleaned logs and installs (``synth_run(snapshots=True)``),
    which the snapshot checks' windows then have to look at (without, they cost one aggregate each)."""
    d = root / (f"events-{events}" + ("-snapshots" if snapshots else ""))
    marker = d / "_COMPLETE"
    if not marker.exists():
        shutil.rmtree(d, ignore_errors=True)
        runs = max(1, events // EVENTS_PER_RUN)
        t = time.perf_counter()
        n = synth.write_corpus(d, runs, min(events, EVENTS_PER_RUN), seed=1000, snapshots=snapshots)
        marker.write_text(str(n))
        print(f"generated {n:,} events in {runs} files in {time.perf_counter() - t:.1f} s (not timed)", flush=True)
    return d


def simulated(out: Path, seeds: int, duration: str) -> None:
    """Seeds 0..seeds-1 of the simulator (default faults, 3 voters), as `kraft-tck simulate` writes them."""
    from kraft_tck.traces.cli import parse_duration_ms
    from kraft_tck.traces.sim import SimConfig, simulate

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    events = 0
    for seed in range(seeds):
        events += simulate(SimConfig(seed=seed, nodes=3, duration_ms=parse_duration_ms(duration)),
                           tmp / f"seed-{seed}.ndjson").events
    tmp.rename(out)  # only a complete set is reused by later runs
    print(f"simulated {seeds} traces ({events:,} events, {duration} each) for the fan-out (not timed)", flush=True)


def jvm_cpu_seconds(spark: Any) -> float | None:
    """CPU time of the local Spark JVM (driver + executors in local mode) and its children; Linux only."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        total = 0.0
        for p in [str(pid), *kids]:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total
    except (OSError, AttributeError, ValueError):
        return None


def bench_spark(spark: Any, src: Path, out: Path) -> tuple[float, float | None, int, dict[str, float]]:
    from kraft_tck.traces.pipeline.run import run_pipeline

    c0 = jvm_cpu_seconds(spark)
    t = time.perf_counter()
    res = run_pipeline(spark, src, out, validator=False, report=False, echo=lambda _: None)
    wall = time.perf_counter() - t
    c1 = jvm_cpu_seconds(spark)
    assert res.exit_code == 0 and not res.quarantine, (res.exit_code, res.quarantine[:3])
    return wall, (c1 - c0 if c0 is not None and c1 is not None else None), res.counts["events accepted"], res.timings


def bench_floor(spark: Any, src: Path, out: Path) -> float:
    """Seconds for what any Spark ingest of these files must do: read the text, parse each line with the
    explicit schema and write the events table's columns as Parquet (no line numbers, schema check,
    quarantine, other tables or checks). The pipeline's seconds above it are what the rest costs."""
    from kraft_tck.traces.pipeline import schema as S
    from kraft_tck.traces.pipeline.tables import events_frame
    from pyspark.sql import functions as F

    t = time.perf_counter()
    text = spark.read.format("text").load([str(p) for p in trace_files(src)])
    lines = text.select(F.lit("bench").alias("source"), F.lit("floor").alias("run"),
                        F.lit(None).cast("string").alias("implementation"), F.lit("").alias("file"),
                        F.lit(0).cast("long").alias("line"), F.lit("event").alias("status"),
                        S.parse(F.col("value")).alias("e"))
    events_frame(lines).write.mode("overwrite").parquet(str(out))
    elapsed = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return elapsed


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
    passed = sum(v.ok is True for v in verdicts)
    failed = sum(v.ok is False for v in verdicts)
    print(f"  fan-out ({name}) with {cores} core(s): {len(files)} traces in {elapsed:.1f} s,"
          f" {passed} passed, {failed} failed, {len(files) - passed - failed} not checked", flush=True)
    return len(files) / elapsed * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, action="append", help="corpus size (repeatable); default 1M and 10M")
    ap.add_argument("--repeat", type=int, default=1, help="time each size this many times (each is printed)")
    ap.add_argument("--quick", action="store_true", help="100k events and a small fan-out (make bench)")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "kraft-tck-bench-pipeline")
    ap.add_argument("--no-fanout", action="store_true")
    ap.add_argument("--snapshots", action="store_true", help="corpora with KIP-630 snapshots, cleanings and installs")
    ap.add_argument("--only-fanout", action="store_true")
    ap.add_argument("--fanout-traces", type=Path, help="traces for the fan-out (default: simulated ones)")
    ap.add_argument("--fanout-seeds", type=int, help="simulated traces for the fan-out (default 20; --quick 4)")
    ap.add_argument("--fanout-duration", default="5s", help="virtual time per simulated trace (default 5s)")
    args = ap.parse_args()
    args.fanout_seeds = args.fanout_seeds or (4 if args.quick else 20)
    sizes = [] if args.only_fanout else args.events or ([100_000] if args.quick else [1_000_000, 10_000_000])
    for n in sizes:  # generate first: generation is not part of any figure
        corpus(args.dir, n, args.snapshots)
    from kraft_tck.traces.pipeline.session import build_session

    rows = []
    spark = build_session()
    try:
        if sizes:
            bench_spark(spark, corpus(args.dir, 20_000, args.snapshots), args.dir / "out-warmup")
        for n in sizes:
            src = corpus(args.dir, n, args.snapshots)
            files = trace_files(src)
            for _ in range(args.repeat):
                secs, cpu, accepted, timings = bench_spark(spark, src, args.dir / f"out-{n}")
                floor = bench_floor(spark, src, args.dir / f"floor-{n}")
                c, t = time.process_time(), time.perf_counter()
                py = check_paths(files, validate=False)
                py_secs, py_cpu = time.perf_counter() - t, time.process_time() - c
                t = time.perf_counter()
                full = check_paths(files, validate=True)
                val_secs = time.perf_counter() - t
                assert py.accepted == accepted == full.accepted and py.reconciled, (py.accepted, accepted)
                assert full.violations == py.violations and not full.quarantined
                stages = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
                rows.append((accepted, secs, cpu, py_secs, py_cpu, val_secs, stages, floor))
                print(f"  {accepted:,} events: spark {secs:.1f} s, checker {py_secs:.1f} s ({stages})", flush=True)
    finally:
        spark.stop()
    if rows:
        base = min(rows, key=lambda r: r[0])
        print()
        print(f"{'events':>11} | {'spark s':>7} | {'spark cpu s':>11} | {'spark ev/s':>10} | {'growth':>6} |"
              f" {'checker s':>9} | {'checker cpu s':>13} | {'checker ev/s':>12} | {'checker+schema ev/s':>19} |"
              f" {'checker+schema s':>16} | spark stages")
        for acc, s, cpu, ps, pc, vs, stages, _ in rows:
            growth = (s / acc) / (base[1] / base[0])
            cpu_s = f"{cpu:>11.1f}" if cpu is not None else f"{'n/a':>11}"
            print(f"{acc:>11,} | {s:>7.1f} | {cpu_s} | {acc / s:>10,.0f} | {growth:>6.2f} | {ps:>9.1f} | {pc:>13.1f} |"
                  f" {acc / ps:>12,.0f} | {acc / vs:>19,.0f} | {vs:>16.1f} | {stages}")
        print()
        print("pipeline (schema-validated) against the single-process checker, same files, same run; Spark floor:"
              " text read + JSON parse + Parquet write of the events columns alone (bench_floor):")
        print(f"{'events':>11} | {'pipeline s':>10} | {'checker + JSON Schema s':>23} | {'x checker':>9} |"
              f" {'checker, no schema s':>20} | {'x checker':>9} | {'Spark floor s':>13} | {'floor x checker':>15}")
        for acc, s, _, ps, _, with_schema, _, floor in rows:
            print(f"{acc:>11,} | {s:>10.1f} | {with_schema:>23.1f} | {with_schema / s:>9.2f} | {ps:>20.1f} |"
                  f" {ps / s:>9.2f} | {floor:>13.1f} | {with_schema / floor:>15.2f}")
    if not args.no_fanout:
        fan_dir = args.fanout_traces or args.dir / f"fanout-sim-{args.fanout_seeds}-{args.fanout_duration}"
        if not fan_dir.exists():
            simulated(fan_dir, args.fanout_seeds, args.fanout_duration)
        files = [str(p) for p in trace_files(fan_dir)]
        print()
        per_min = {c: bench_fanout(c, files) for c in (1, 2)}
        print(f"{'executor cores':>14} | traces validated per minute | speed-up")
        for c, r in per_min.items():
            print(f"{c:>14} | {r:>27,.1f} | {r / per_min[1]:>8.2f}")

if __name__ == "__main__":
    main()
