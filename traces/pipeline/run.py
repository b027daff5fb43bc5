"""The whole pipeline, in order: ingest → Parquet tables → safety checks → trace validation → metrics → report.

Exit codes (`PipelineResult.exit_code`): 0 clean; 1 safety violations found (or a trace failed
validation); 2 bad input — nothing checkable (empty input, no traces), or lines quarantined / files refused
(a newer format, not a trace). Violations outrank bad input: a run that finds both exits 1 and reports both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_tck.tla.progress import Progress
from kraft_tck.traces.checker import Violation
from kraft_tck.traces.pipeline.files import BadInput

if TYPE_CHECKING:
    from kraft_tck.traces.pipeline.tlc_fanout import Validator, Verdict
    from pyspark.sql import DataFrame, SparkSession

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_BAD_INPUT = 0, 1, 2


@dataclass
class PipelineResult:
    violations: list[Violation]
    quarantine: list[dict[str, Any]]
    refused: list[str]
    counts: dict[str, int]
    verdicts: list[Verdict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    bad_input: str | None = None
    report: Path | None = None

    @property
    def exit_code(self) -> int:
        if self.violations or any(not v.ok for v in self.verdicts):
            return EXIT_VIOLATIONS
        if self.bad_input or self.quarantine or self.refused:
            return EXIT_BAD_INPUT
        return EXIT_CLEAN


def run_pipeline(spark: SparkSession, input_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 validator: Validator | bool | None = True, metrics: bool = True, report: bool = True,
                 echo: Callable[[str], None] = print) -> PipelineResult:
    """Run every stage; `validator=True` picks the default (TLA+ if available), False/None skips it."""
    from kraft_tck.traces.pipeline import checks, tables
    from kraft_tck.traces.pipeline.ingest import display_path, ingest
    from kraft_tck.traces.pipeline.session import counting

    out_dir = Path(out)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    try:
        with Progress("pipeline: ingest", write=echo):
            ing = ingest(spark, input_dir, out_dir / "tables")
    except BadInput as exc:
        echo(f"bad input: {exc}")
        return PipelineResult([], [], [], {}, bad_input=str(exc))
    timings["ingest"] = time.perf_counter() - t
    t = time.perf_counter()
    with Progress("pipeline: tables", write=echo):
        paths = tables.write_tables(spark, out_dir)
    timings["tables"] = time.perf_counter() - t
    quarantine = [{"file": display_path(r["file"]), "line": int(r["line"]), "reason": r["reason"]}
                  for r in spark.read.parquet(ing.quarantine).orderBy("file", "line").collect()]
    events = spark.read.parquet(paths["events"])
    appends = spark.read.parquet(paths["appends"])
    steps = spark.read.parquet(paths["_steps"])
    t = time.perf_counter()
    with Progress("pipeline: checks", write=echo):
        violations = checks.collect_violations(checks.all_checks(events, appends, steps))
    timings["checks"] = time.perf_counter() - t
    refused = [f.refused for f in ing.refused if f.refused]
    counts = {"files": len(ing.files), "traces": len(ing.files) - len(refused), "lines in": ing.counts.lines_in,
              "header lines": ing.counts.header_lines, "events accepted": ing.counts.accepted,
              "quarantined": ing.counts.quarantined, "suspect lines (Python-validated)": ing.counts.suspects}
    result = PipelineResult(violations, quarantine, refused, counts, timings=timings)
    validator_name = None
    if validator:
        from kraft_tck.traces.pipeline.tlc_fanout import default_validator, fan_out

        if validator is True:
            validator_name, fn = default_validator()
        else:
            validator_name, fn = getattr(validator, "__name__", "validator"), validator
        good = [display_path(f.path) for f in ing.files if not f.refused]
        t = time.perf_counter()
        with Progress(f"pipeline: {validator_name} validation of {len(good)} traces", write=echo):
            result.verdicts = fan_out(spark, good, fn)
        timings["validation"] = time.perf_counter() - t
    if report:
        from kraft_tck.traces.pipeline.metrics import Metrics, compute
        from kraft_tck.traces.pipeline.report import write_report

        t = time.perf_counter()
        with Progress("pipeline: metrics", write=echo):
            m = compute(events, spark.read.parquet(paths["messages"]), appends) if metrics else Metrics([])
        timings["metrics"] = time.perf_counter() - t
        summary: dict[str, Any] = {**counts, "schema check counts with": counting(spark),
                                   "violations": len(violations), "exit code": result.exit_code,
                                   **{f"{k} (s)": round(v, 2) for k, v in timings.items()}}
        for r in refused:
            summary.setdefault("refused files", "")
            summary["refused files"] += r + " "
        with Progress("pipeline: pictures", write=echo):
            pictures = draw_pictures(spark, paths, events, appends, ing.files, violations, out_dir)
        md, _ = write_report(out_dir, summary=summary, violations=violations, quarantine=quarantine,
                             metrics=m, verdicts=result.verdicts, validator_name=validator_name,
                             pictures=pictures)
        result.report = md
    for r in refused:
        echo(f"refused: {r}")
    for q in quarantine[:20]:
        echo(f"quarantined: {q['file']}:{q['line']}: {q['reason']}")
    if len(quarantine) > 20:
        echo(f"... and {len(quarantine) - 20} more quarantined lines (see the report)")
    for v in violations[:50]:
        echo(f"VIOLATION {v.invariant}: run {v.source}/{v.run} node {v.node} epoch {v.epoch} seq {v.seq}: {v.detail}")
    for vd in result.verdicts:
        if not vd.ok:
            echo(f"VALIDATION FAILED {vd.file} (first bad seq {vd.first_bad_seq}): {vd.message}")
    echo(ing.counts.line())
    echo(f"{len(violations)} violations; exit code {result.exit_code}")
    return result


#: Runs drawn as timelines: those with a violation first, then the first ones by name.
TIMELINE_RUNS = 6


def draw_pictures(spark: SparkSession, paths: Any, events: DataFrame, appends: DataFrame,
                  files: list[Any], violations: list[Violation], out_dir: Path) -> list[tuple[str, str, str]]:
    """(title, PNG file, caption) of the report's pictures: role/epoch timelines of a few runs with their
    fault windows, commit latency over time for the same runs, and the invariants' results."""
    from kraft_tck.traces.checker import INVARIANTS
    from kraft_tck.traces.pipeline import pictures as P
    from kraft_tck.traces.pipeline.metrics import commit_latency_points
    from pyspark.sql import functions as F

    runs = [(r["source"], r["run"]) for r in events.select("source", "run").distinct().orderBy("source", "run")
            .limit(10_000).collect()]
    bad = list(dict.fromkeys((v.source, v.run) for v in violations))
    chosen = (bad + [r for r in runs if r not in bad])[:TIMELINE_RUNS]
    out: list[tuple[str, str, str]] = []
    counts = {name: sum(v.invariant == name for v in violations) for name in INVARIANTS}
    out.append(("Invariants", P.plot_invariants(counts, out_dir),
                f"Violations per safety invariant over {len(runs)} runs."))
    if not chosen:
        return out
    keys = [f"{s}\u0000{r}" for s, r in chosen]
    key = F.concat_ws("\u0000", "source", "run")
    spans = {(r["source"], r["run"]): (float(r["t0"]), float(r["t1"])) for r in events.where(key.isin(keys))
             .groupBy("source", "run").agg(F.min("ts").alias("t0"), F.max("ts").alias("t1")).collect()}
    rows = spark.read.parquet(paths["transitions"]).where(key.isin(keys)) \
        .select("source", "run", "node", "ts", "toRole", "toEpoch").collect()
    headers = {((f.header or {}).get("source"), (f.header or {}).get("run")): f.header for f in files if f.header}
    latency: dict[str, list[tuple[float, float]]] = {}
    points = commit_latency_points(events.where(key.isin(keys)), appends.where(key.isin(keys))) \
        .orderBy("ts").limit(200_000).collect()
    for source, run in chosen:
        t0, t1 = spans.get((source, run), (0.0, 0.0))
        # A simulator's fault schedule is in the run's own milliseconds from 0; other traces carry wall time.
        origin = 0.0 if source == "simulator" else t0
        steps = [P.Step(int(r["node"]), float(r["ts"]) - origin, str(r["toRole"]), int(r["toEpoch"] or 0))
                 for r in rows if (r["source"], r["run"]) == (source, run)]
        header = headers.get((source, run))
        nodes = sorted({s.node for s in steps})
        windows = P.fault_windows(header, nodes)
        title = f"{source} {run}"
        fname, _ = P.plot_timeline(title, steps, t1 - origin, windows, out_dir)
        where = " (has violations)" if (source, run) in bad else ""
        out.append((f"Timeline: {title}{where}", fname,
                    f"Each node's role over time; the leader's epoch is written on its bars; "
                    f"{len(windows)} fault window(s) shaded on the nodes they hit."))
        latency[title] = [(float(p["ts"]) - origin, float(p["value"])) for p in points
                          if (p["source"], p["run"]) == (source, run)]
    fname_lat = P.plot_commit_latency(latency, out_dir)
    if fname_lat:
        out.append(("Commit latency over time", fname_lat,
                    "Each committed client batch: when it was appended and how long until the leader's high "
                    "watermark passed it."))
    return out
