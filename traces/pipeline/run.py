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
    from pyspark.sql import SparkSession

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
        md, _ = write_report(out_dir, summary=summary, violations=violations, quarantine=quarantine,
                             metrics=m, verdicts=result.verdicts, validator_name=validator_name)
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
