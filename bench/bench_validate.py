"""Trace validation time (tla/TraceKRaft.tla under TLC) against trace length: 1k, 5k, 10k, 20k events.

Run: ``python bench/bench_validate.py`` (``--quick``: 1k and 5k only; ``--sizes 1000,10000`` to choose;
``--tlc`` also runs ``make tlc``'s bounded model check and prints its distinct states and time).

The traces are prefixes of one simulator run (seed ``--seed``, 3 nodes, the default fault profile:
loss, duplication, reordering, crashes), generated in the run; an *event* is one trace line (an action
with its state, or a Send/Receive). A prefix is itself a trace (what is in flight at its end counts as
lost). Side by side, measured in the same run:

* ``baseline``: the same TLC invocation on a trace of one event (the first node's Restart: JVM start,
  parsing KRaft.tla and TraceKRaft.tla, TLC set-up): the fixed cost every validation pays;
* ``growth vs linear``: (seconds above the baseline per event) / (the same for the smallest size);
  1.0 is linear growth, 2.0 means each event costs twice what it cost in the smallest trace.

* ``batch``: ``--batch K`` (default 8) traces of 200 events (prefixes of the same run, cut at different
  places), validated one TLC run each and then all in one TLC run (``validate_traces``): a conformance run
  validates dozens of short lives, and one run pays TLC's start-up once for all of them.

* ``--lives DIR``: real lives of a conformance run (``session-life-*.ndjson``, black-box, and
  ``node-life-*.ndjson``, node traces, e.g. ``pytest conformance --report DIR``'s ``DIR`` or ``traces/``; with the
  report's results.json there, only the lives the harness validated): each alone (events/s with and without
  TLC's start-up), then all of a kind in batches as a conformance run validates them (``validate_traces``).

Every time is also given in CPU seconds of TLC (user + system of the JVM: what a loaded machine does not
distort); ``events/s`` counts trace lines (``--lives``: of the lives' files) per second.

Goals: linear growth and 10k events in under 60 s on this machine; (#25) >= 1,000 events/s of validation.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from kraft_tck.tla.tlc import DEFAULT_CONFIG, SMALL_CONFIG, run_tlc
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import DEFAULT_JAVA_OPTS, validate_trace, validate_traces
from kraft_tck.traces.sim import SimConfig, simulate

GOAL_EVENTS, GOAL_SECONDS = 10_000, 60.0


def simulator_trace(out: Path, seed: int, events: int) -> Path:
    """A simulator trace of at least ``events`` events (longer virtual time until it is)."""
    duration_ms = max(10_000, events * 15)
    while True:
        path = out / f"seed-{seed}-{duration_ms}.ndjson"
        result = simulate(SimConfig(seed=seed, nodes=3, duration_ms=duration_ms, profile="default"), path)
        result.raise_for_violation()
        if result.events >= events:
            return path
        duration_ms *= 2


def prefix(source: Path, events: int, out: Path) -> Path:
    """The header and the first ``events`` events of ``source``."""
    lines = source.read_text().splitlines()[: events + 1]
    path = out / f"prefix-{events}.ndjson"
    path.write_text("\n".join(lines) + "\n")
    return path


def child_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: the TLC runs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(path: Path) -> tuple[float, bool, int, float]:
    """Wall seconds, verdict, rows, CPU seconds of one validation."""
    cpu = child_cpu()
    started = time.perf_counter()
    verdict = validate_trace(path, timeout=1800)
    seconds = time.perf_counter() - started
    if not verdict.passed:
        print(f"  FAIL {path.name}: {verdict.reason}")
    return seconds, verdict.passed, verdict.events, child_cpu() - cpu


def events_of(path: Path) -> int:
    """Trace lines but the header."""
    return sum(1 for line in path.read_text().splitlines() if line.strip()) - 1


def harness_validated(directory: Path) -> set[Path] | None:
    """The lives a conformance run validated, from its report's results.json (in ``directory`` or up to two levels
    above it), or None without one. Its traces/ also holds lives the harness does not validate (an observer's
    life, one the black-box model has no steps for: conformance/target.py unmodelled_lives): they fail, and a
    batch holding a failing black-box life explores its whole state space."""
    for up in (directory, *list(directory.resolve().parents)[:2]):
        results = up / "results.json"
        if results.is_file():
            data = json.loads(results.read_text())
            files = [life.get("file") for life in (data.get("tlcBlackBox") or {}).get("lives", [])]
            files += [life.get("merged") for life in (data.get("tlcValidation") or {}).get("lives", [])]
            return {Path(f).resolve() for f in files if f}
    return None


def lives(directory: Path, base_cpu: float, java_opts: tuple[str, ...] = (), rounds: int = 1) -> None:
    """Real lives: each alone, then each kind in batches (``validate_traces``, as a conformance run), with the
    default JVM options and, if given, with ``java_opts`` beside them."""
    kinds = {"black-box (session-life)": sorted(directory.rglob("session-life-*.ndjson")),
             "node trace (node-life)": sorted(directory.rglob("node-life-*.ndjson"))}  # fmt: skip
    validated = harness_validated(directory)
    if validated is not None:
        for kind, paths in kinds.items():
            skipped = [p.name for p in paths if p.resolve() not in validated]
            kinds[kind] = [p for p in paths if p.resolve() in validated]
            if skipped:
                print(f"{kind}: {len(skipped)} lives the harness did not validate, left out: {', '.join(skipped)}")
    for kind, paths in kinds.items():
        paths = [p for p in paths if translate(p).events]
        if not paths:
            continue
        print(f"\n{kind}: {len(paths)} lives of {directory}, each alone (CPU s of TLC; start-up {base_cpu:.2f})")
        print(f"{'life':>22} {'events':>7} {'rows':>6} {'CPU s':>6} {'events/s':>9} {'w/o start-up':>12} "
              f"{'verdict':>7}")
        for path in sorted(paths, key=events_of, reverse=True)[:6]:
            _, passed, rows, cpu = timed(path)
            n = events_of(path)
            print(f"{path.name:>22} {n:>7,} {rows:>6,} {cpu:>6.2f} {n / cpu:>9.0f} "
                  f"{n / max(cpu - base_cpu, 1e-3):>12.0f} {'PASS' if passed else 'FAIL':>7}", flush=True)
        # the default JVM options and, side by side (alternating, --rounds), --java-opts
        options = [("all, batched", DEFAULT_JAVA_OPTS)] + ([("batched, --java-opts", java_opts)] if java_opts else [])
        for _ in range(rounds):
            for label, opts in options:
                cpu = child_cpu()
                started = time.perf_counter()
                verdicts = validate_traces(paths, timeout=1800, java_opts=opts)
                wall, cpu = time.perf_counter() - started, child_cpu() - cpu
                n = sum(events_of(p) for p in paths)
                ok = sum(v.passed for v in verdicts)
                print(f"{label:>22} {n:>7,} {sum(v.events for v in verdicts):>6,} {cpu:>6.2f} {n / cpu:>9.0f} "
                      f"{'':>12} {ok}/{len(paths)} PASS (wall {wall:.1f} s)", flush=True)  # fmt: skip


def batch(source: Path, out: Path, k: int, events: int = 200) -> None:
    """``k`` traces of ``events`` events: one TLC run each, then one TLC run for all."""
    lines = source.read_text().splitlines()
    paths = []
    for j in range(k):
        path = out / f"batch-{j}.ndjson"
        path.write_text("\n".join(lines[: events + 1 + 7 * j]) + "\n")  # different lengths, same run
        paths.append(path)
    total = sum(len(translate(p).events) for p in paths)
    cpu, started = child_cpu(), time.perf_counter()
    alone = [validate_trace(p, timeout=1800).passed for p in paths]
    each, each_cpu = time.perf_counter() - started, child_cpu() - cpu
    cpu, started = child_cpu(), time.perf_counter()
    together = [v.passed for v in validate_traces(paths, timeout=1800)]
    one, one_cpu = time.perf_counter() - started, child_cpu() - cpu
    ok = "PASS" if all(alone) and all(together) else "FAIL"
    events = k * events + 7 * k * (k - 1) // 2
    print(f"batch: {k} traces, {events:,} events, {total:,} rows: one TLC run each {each:.1f} s, {each_cpu:.1f} CPU s "
          f"({events / each_cpu:.0f} events/s of CPU); all in one TLC run {one:.1f} s, {one_cpu:.1f} CPU s "
          f"({events / one_cpu:.0f} events/s of CPU); {ok}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,10000,20000", help="trace lengths in events")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1k and 5k events only, no TLC model check")
    parser.add_argument("--tlc", action="store_true", help="also model-check MCKRaft.cfg (make tlc)")
    parser.add_argument("--tlc-config", default=DEFAULT_CONFIG, help=f"config for --tlc (e.g. {SMALL_CONFIG})")
    parser.add_argument("--batch", type=int, default=8, help="short traces for the one-run-each vs one-run line")
    parser.add_argument("--lives", type=Path, help="also validate the session-life-*/node-life-* traces under DIR")
    parser.add_argument("--java-opts", default="", help="--lives: also batch-validate with these JVM options (one "
                        f"string, e.g. '-XX:+UseParallelGC -XX:TieredStopAtLevel=1'; default {DEFAULT_JAVA_OPTS})")
    parser.add_argument("--rounds", type=int, default=1, help="--lives: batched runs per JVM option set, alternating")
    args = parser.parse_args()
    sizes = [1000, 5000] if args.quick else [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        out = Path(tmp)
        source = simulator_trace(out, args.seed, max(sizes))
        # one event: a trace of none is NOT CHECKED and never reaches TLC
        base, _, _, base_cpu = timed(prefix(source, 1, out))
        print(
            f"trace validation: simulator seed {args.seed}, 3 nodes, default faults; goal {GOAL_EVENTS:,} events "
            f"< {GOAL_SECONDS:.0f} s, linear growth"
        )
        print(f"baseline (TLC on a trace of one event: JVM, parsing, set-up): {base:.1f} s, {base_cpu:.2f} CPU s")
        print(
            f"{'events':>7} {'rows':>7} {'seconds':>8} {'events/s':>9} {'above base':>10} "
            f"{'growth vs linear':>16} {'CPU s':>6} {'ev/s CPU':>8} {'w/o start-up':>12} {'verdict':>7}"
        )
        first_rate: float | None = None
        for n in sizes:
            path = prefix(source, n, out)
            rows = len(translate(path).events)
            seconds, passed, _, cpu = timed(path)
            above = max(seconds - base, 1e-3)
            per_event = above / n
            first_rate = first_rate or per_event
            print(
                f"{n:>7,} {rows:>7,} {seconds:>8.1f} {n / seconds:>9.0f} {above:>10.1f} "
                f"{per_event / first_rate:>16.2f} {cpu:>6.1f} {n / cpu:>8.0f} {n / max(cpu - base_cpu, 1e-3):>12.0f} "
                f"{'PASS' if passed else 'FAIL':>7}",
                flush=True,
            )
            if n == GOAL_EVENTS:
                print(
                    f"        goal {GOAL_EVENTS:,} events < {GOAL_SECONDS:.0f} s: "
                    f"{'met' if seconds < GOAL_SECONDS else 'NOT met'} ({seconds:.1f} s)"
                )
        if args.batch > 1:
            batch(source, out, args.batch)
        if args.lives is not None:
            lives(args.lives, base_cpu, tuple(args.java_opts.split()), args.rounds)
    if args.tlc and not args.quick:
        result = run_tlc(config=args.tlc_config, workers=2)
        print(f"\nmake tlc ({args.tlc_config}, 2 workers): {result.summary()}")
        print(
            json.dumps(
                {
                    "distinct": result.distinct_states,
                    "generated": result.states_generated,
                    "depth": result.depth,
                    "seconds": round(result.seconds, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
