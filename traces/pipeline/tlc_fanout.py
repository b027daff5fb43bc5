"""TLA+ trace validation fanned out over Spark executors: the scale-out of validating each file in turn.

The file list is spread over `tasks` partitions; each task validates its files one after another with
`validate` (a picklable function: trace path → TraceVerdict-like result) and yields one row per file.
The rows come back to the driver and are joined into the report by file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

#: validate(path) -> (ok, first bad event seq or None, message); ok None: the file was NOT CHECKED
#: (nothing in it to check), which is neither a pass nor a failure
Validator = Callable[[str], tuple[bool | None, int | None, str]]


@dataclass(frozen=True)
class Verdict:
    file: str
    ok: bool | None
    first_bad_seq: int | None
    message: str
    seconds: float


def _run_partition(
    validate: Validator, paths: Iterable[str]
) -> Iterator[tuple[str, bool | None, int | None, str, float]]:
    for path in paths:
        started = time.perf_counter()
        try:
            ok, seq, message = validate(path)
        except Exception as exc:  # a crashing validator is a verdict about this file, not the whole job
            ok, seq, message = False, None, f"validator failed: {type(exc).__name__}: {exc}"
        yield path, None if ok is None else bool(ok), seq, str(message), time.perf_counter() - started


def fan_out(spark: SparkSession, files: list[str], validate: Validator, tasks: int | None = None) -> list[Verdict]:
    """Validate every file on the executors (`tasks` partitions; default: one per core), sorted by file."""
    if not files:
        return []
    sc = spark.sparkContext
    n = max(1, min(len(files), tasks or sc.defaultParallelism))

    def part(it: Iterable[str]) -> Iterator[tuple[str, bool | None, int | None, str, float]]:
        return _run_partition(validate, it)

    rows: list[Any] = sc.parallelize(sorted(files), n).mapPartitions(part).collect()
    return sorted((Verdict(*r) for r in rows), key=lambda v: v.file)


def schema_validator(path: str) -> tuple[bool, int | None, str]:
    """A real validator that exists today: the trace's JSON Schema and seq order (`trace.read_trace`).

    The fan-out takes any `Validator`; TLA+ trace validation plugs in the same way once it exists.
    """
    from kraft_tck.spec.trace import TraceError, read_trace

    try:
        trace = read_trace(path)
    except TraceError as exc:
        return False, None, str(exc)
    if trace.bad:
        first = trace.bad[0]
        seq = first.line - 2 if first.line >= 2 else None
        return False, seq, f"line {first.line}: {first.reason}"
    return True, None, f"{len(trace.events)} events conform"


def tla_validator(path: str) -> tuple[bool | None, int | None, str]:
    """TLA+ trace validation (`kraft_tck.tla.trace_validate.validate_trace`: TLC on TraceKRaft, one worker —
    the parallelism is the fan-out's, one TLC per task). A trace with nothing to check: ok None."""
    from kraft_tck.tla.trace_validate import validate_trace

    v = validate_trace(path, workers=1)
    seq = v.failed_event.seq if v.failed_event is not None else None
    return (bool(v.passed) if v.checked else None), seq, v.reason


def default_validator() -> tuple[str, Validator]:
    """TLA+ trace validation when `kraft_tck.tla.trace_validate` is importable, else the schema validator."""
    try:
        from kraft_tck.tla.trace_validate import validate_trace  # noqa: F401 - probing that it exists
    except ImportError:
        return "trace schema (TLA+ trace validation not available)", schema_validator
    return "TLA+ trace validation (TLC)", tla_validator
