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

#: validate(path) -> (ok, first bad event seq or None, message)
Validator = Callable[[str], tuple[bool, int | None, str]]


@dataclass(frozen=True)
class Verdict:
    file: str
    ok: bool
    first_bad_seq: int | None
    message: str
    seconds: float


def _run_partition(validate: Validator, paths: Iterable[str]) -> Iterator[tuple[str, bool, int | None, str, float]]:
    for path in paths:
        started = time.perf_counter()
        try:
            ok, seq, message = validate(path)
        except Exception as exc:  # a crashing validator is a verdict about this file, not the whole job
            ok, seq, message = False, None, f"validator failed: {type(exc).__name__}: {exc}"
        yield path, bool(ok), seq, str(message), time.perf_counter() - started


def fan_out(spark: SparkSession, files: list[str], validate: Validator, tasks: int | None = None) -> list[Verdict]:
    """Validate every file on the executors (`tasks` partitions; default: one per core), sorted by file."""
    if not files:
        return []
    sc = spark.sparkContext
    n = max(1, min(len(files), tasks or sc.defaultParallelism))

    def part(it: Iterable[str]) -> Iterator[tuple[str, bool, int | None, str, float]]:
        return _run_partition(validate, it)

    rows: list[Any] = sc.parallelize(sorted(files), n).mapPartitions(part).collect()
    return sorted((Verdict(*r) for r in rows), key=lambda v: v.file)


def schema_validator(path: str) -> tuple[bool, int | None, str]:
    """A real validator that exists today: the trace's JSON Schema and seq order (`trace.read_trace`).

    The fan-out takes any `Validator`; TLA+ trace validation plugs in the same way once it exists.
    """
    from kraft_tck.traces.trace import TraceError, read_trace

    try:
        trace = read_trace(path)
    except TraceError as exc:
        return False, None, str(exc)
    if trace.bad:
        first = trace.bad[0]
        seq = first.line - 2 if first.line >= 2 else None
        return False, seq, f"line {first.line}: {first.reason}"
    return True, None, f"{len(trace.events)} events conform"


def default_validator() -> tuple[str, Validator]:
    """The TLA+ trace validator when `kraft_tck.tla` provides one, else the schema validator (named)."""
    try:
        from kraft_tck.tla import trace_validation  # type: ignore[attr-defined]
    except ImportError:
        return "trace schema (TLA+ trace validation not available)", schema_validator
    fn = getattr(trace_validation, "validate_trace_file", None)
    if fn is None:
        return "trace schema (TLA+ trace validation not available)", schema_validator
    return "TLA+ trace validation", _adapt(fn)


def _adapt(fn: Callable[[str], Any]) -> Validator:
    def validate(path: str) -> tuple[bool, int | None, str]:
        res = fn(path)
        if isinstance(res, tuple):
            return res  # type: ignore[return-value]
        ok = bool(getattr(res, "ok", getattr(res, "passed", False)))
        seq = getattr(res, "first_bad_seq", getattr(res, "seq", None))
        return ok, seq, str(getattr(res, "message", res))

    return validate
