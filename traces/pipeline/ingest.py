"""Ingest NDJSON traces: every line is kept with its file and line number, and ends up exactly once as a
header, an accepted event, or a quarantined line with a reason. Counts reconcile or the run stops.

Two passes over the text, one JSON parse per line:

1. Numbering. The text reader tags each row with its file and the byte offset of the split it came from
   (`_metadata.file_block_start`), and `monotonically_increasing_id` numbers rows consecutively inside a
   partition. Counting rows per (file, split) and summing the earlier splits of the same file gives every
   row its exact line number, whatever the number and size of the files (a file bigger than a split is
   read by several tasks). Only the counts come back to the driver.
2. Classification, in the JVM: each line is parsed once against the explicit schema and cleared by
   `schema.conforms` (plus seq = line - 2), with the JVM counting helper when the session has it. Rows
   are written once, as Parquet partitioned by status and run; the `event` partition becomes the events
   table as it is. Lines the fast path cannot clear ("suspects": malformed, schema-invalid, or merely
   unusual) are few; the single-process checker's own rules (`checker.event_problems`, the JSON Schema
   validator) decide them in a Python UDF and write the reason, so quarantine reasons are the checker's,
   word for word.

File headers (line 1, one per file) are read and validated on the driver with the checker's `check_header`.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kraft_tck.traces.checker import FileInfo, check_header, event_problems
from kraft_tck.traces.pipeline import schema as S
from kraft_tck.traces.pipeline.files import BadInput, list_trace_files
from kraft_tck.traces.pipeline.jvm import FUNCTION
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

#: Reason for a line the JSON Schema accepts but Spark's typed reader cannot hold exactly.
UNREADABLE = ("schema-valid, but not readable exactly by the Spark JSON reader (e.g. an integer written as 1.0"
              " or beyond 64 bits)")


@dataclass
class Counts:
    lines_in: int
    header_lines: int
    accepted: int
    quarantined: int
    suspects: int = 0  # lines the JVM fast path handed to the Python validator (accepted or quarantined)

    @property
    def reconciled(self) -> bool:
        return self.lines_in == self.header_lines + self.accepted + self.quarantined

    def line(self) -> str:
        return (f"lines in {self.lines_in} = header lines {self.header_lines} + events accepted {self.accepted}"
                f" + quarantined {self.quarantined}")


@dataclass
class Ingested:
    events: str  # Parquet: the events table (tables.events_frame columns), partitioned by source and run
    quarantine: str  # Parquet: file, line, reason, text, sorted by file and line
    files: list[FileInfo]
    counts: Counts
    refused: list[FileInfo] = field(default_factory=list)


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


def display_path(uri: str) -> str:
    return _local_path(uri)


def first_line(path: Path) -> str | None:
    """Line 1 of a trace file as the checker reads it (None when the file is empty)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        line = fh.readline()
    return line.rstrip("\n") if line else None


def _text(spark: SparkSession, files: list[Path]) -> DataFrame:
    return spark.read.format("text").load([str(p) for p in files]).select(
        F.col("value"), F.col("_metadata.file_path").alias("uri"),
        F.col("_metadata.file_block_start").alias("block"), F.monotonically_increasing_id().alias("rid"))


def number_lines(spark: SparkSession, files: list[Path], info: dict[str, FileInfo]
                 ) -> tuple[DataFrame, dict[str, int]]:
    """(file, line, value, source, run, implementation, refused) for every line, line numbers 1-based and
    exact; and the number of lines of each file (by URI), counted before any parsing.

    The same scan is planned twice (counting, then reading): file splits and their order depend only on
    the file listing and settings, so `rid` is the same in both."""
    text = _text(spark, files)
    blocks = text.groupBy("uri", "block").agg(F.min("rid").alias("first"), F.count("*").alias("n")).collect()
    rows: list[tuple[str, int, int, int, str | None, str | None, str | None, str | None]] = []
    per_file: dict[str, int] = {}
    for b in sorted(blocks, key=lambda r: (r["uri"], r["block"])):
        uri = b["uri"]
        before = per_file.get(uri, 0)
        f = info.get(_local_path(uri))
        head = (f.header if f else None) or {}
        refused = f.refused if f else f"{uri}: not found among the listed input files"
        rows.append((uri, int(b["block"]), int(b["first"]), before, head.get("source"), head.get("run"),
                     head.get("implementation"), refused))
        per_file[uri] = before + int(b["n"])
    schema = T.StructType([T.StructField("uri", T.StringType()), T.StructField("block", T.LongType()),
                           T.StructField("first", T.LongType()), T.StructField("before", T.LongType()),
                           T.StructField("source", T.StringType()), T.StructField("run", T.StringType()),
                           T.StructField("implementation", T.StringType()), T.StructField("refused", T.StringType())])
    offsets = spark.createDataFrame(rows, schema)
    numbered = text.join(F.broadcast(offsets), ["uri", "block"]).select(
        F.col("uri").alias("file"), (F.col("rid") - F.col("first") + F.col("before") + 1).alias("line"), "value",
        "source", "run", "implementation", "refused")
    return numbered, per_file


def classify(lines: DataFrame) -> DataFrame:
    """Each numbered line → status `header` | `event` | `quarantined` | `suspect`, with the parsed event `e`,
    `readable` (the typed parse held every value) and, for refused files, the reason."""
    e = F.col("e")
    refused = F.col("refused").isNotNull()
    parsed = lines.withColumn("e", S.parse(F.col("value")))
    counts = None
    if lines.sparkSession.catalog.functionExists(FUNCTION):  # the JVM helper: one pass for all counts
        parsed, counts = parsed.withColumn("counts", S.char_counts(F.col("value"))), F.col("counts")
    ok = S.conforms(e, F.col("value"), counts) & (e["seq"] == F.col("line") - 2)
    status = F.when(refused, "quarantined").when(F.col("line") == 1, "header").when(ok, "event") \
        .otherwise("suspect")
    # `status` is a column of its own before anything reads it twice (Spark would otherwise evaluate the
    # whole check once per reference).
    return parsed.withColumn("status", status).select(
        "file", "line", "source", "run", "implementation", "status",
        F.when(refused, F.concat(F.lit("file refused: "), F.col("refused"))).alias("reason"),
        F.when(F.col("status") != "event", F.col("value")).alias("text"),
        e[S.CORRUPT].isNull().alias("readable"),
        F.when(~refused & (F.col("line") > 1), e).alias("e"))


@lru_cache(maxsize=1)
def _event_validator() -> Any:
    """JSON Schema validator of the event definition alone: its messages name the field at fault (the
    whole-line schema is a oneOf of header and event, whose message would only say "not valid under any")."""
    import jsonschema

    root = S.root()
    return jsonschema.Draft202012Validator({k: v for k, v in root.items() if k != "oneOf"} | {"$ref": "#/$defs/event"})


def suspect_reason(text: str | None, line: int) -> str | None:
    """The verdict on one line the fast path did not clear (None: it conforms after all), with the checker's
    rules (`checker.check_paths`, `checker.event_problems`) and the JSON Schema validator's words."""
    if text is None or not text.strip():
        return "empty line"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or obj.get("type") == "header":
        return "; ".join(event_problems(obj, line, False))
    problems = [f"{'/'.join(str(p) for p in err.absolute_path) or '<line>'}: {err.message}"
                for err in sorted(_event_validator().iter_errors(obj), key=lambda e: list(e.absolute_path))]
    problems += event_problems(obj, line, False)  # seq n-2 on line n
    return "; ".join(problems) or None


def _exists(path: Path) -> bool:
    return path.is_dir() and any(path.rglob("*.parquet"))


def ingest(spark: SparkSession, input_dir: str | os.PathLike[str], tables_dir: str | os.PathLike[str]) -> Ingested:
    """Read, number, parse and classify every line under `input_dir`; write the events and quarantine
    tables under `tables_dir` (a local directory); assert that the counts reconcile."""
    from kraft_tck.traces.pipeline.tables import events_frame, write_table

    paths = list_trace_files(input_dir)
    files = [check_header(p.as_uri(), first_line(p)) for p in paths]
    refused = [f for f in files if f.refused]
    if len(refused) == len(files):
        why = "; ".join(f.refused or "" for f in refused[:3])
        more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
        raise BadInput(f"{input_dir}: none of the {len(files)} files is a kraft-tck trace: {why}{more}")
    info = {_local_path(f.path): f for f in files}
    lines, per_file = number_lines(spark, paths, info)
    lines_in = sum(per_file.values())
    per_local = {_local_path(u): n for u, n in per_file.items()}
    headers = sum(1 for f in files if not f.refused and per_local.get(_local_path(f.path), 0) > 0)
    root = Path(tables_dir)
    stage = root / "_ingest"
    # One pass writes every line once (headers too: a filter here would be pushed below the parse and make
    # Spark inline `from_json` into every reference to the event); the `event` partition is already the
    # events table. Header lines (read on the driver already, never a table row) go to one `run` partition
    # instead of one per run: a file per run costs ~10 ms each on the write, for one line.
    staged = events_frame(classify(lines), accepted_only=False, carry=("status", "reason", "text", "readable"))
    staged = staged.withColumn("run", F.when(F.col("status") != "header", F.col("run")))
    staged.write.mode("overwrite").partitionBy("status", "source", "run").parquet(str(stage))
    events_dir, quarantine_dir = root / "events", root / "quarantine"
    shutil.rmtree(events_dir, ignore_errors=True)
    reader = spark.read.option("basePath", str(stage))
    event_part = stage / "status=event"
    if _exists(event_part):
        event_part.rename(events_dir)
    else:  # no event made it: an empty table with the events schema, so later stages still read it
        write_table(staged.limit(0).drop("status", "reason", "text", "readable"), str(events_dir),
                    partitioned=False)
    quarantined = reader.parquet(str(stage / "status=quarantined")).select("file", "line", "reason", "text") \
        if _exists(stage / "status=quarantined") else None
    suspects = 0
    if _exists(stage / "status=suspect"):
        sus = reader.parquet(str(stage / "status=suspect"))
        verdict = F.udf(suspect_reason, T.StringType(), useArrow=False)(F.col("text"), F.col("line"))
        resolved = sus.withColumn("reason", F.when(verdict.isNull() & ~F.col("readable"), F.lit(UNREADABLE))
                                  .otherwise(verdict))
        resolved.write.mode("overwrite").parquet(str(stage / "_resolved"))
        resolved = spark.read.parquet(str(stage / "_resolved"))
        suspects = resolved.count()
        good = resolved.where(F.col("reason").isNull()).drop("status", "reason", "text", "readable")
        good.write.mode("append").partitionBy("source", "run").parquet(str(events_dir))
        bad = resolved.where(F.col("reason").isNotNull()).select("file", "line", "reason", "text")
        quarantined = bad if quarantined is None else quarantined.unionByName(bad)
    if quarantined is None:
        quarantined = spark.createDataFrame([], "file string, line long, reason string, text string")
    write_table(quarantined.orderBy("file", "line"), str(quarantine_dir), partitioned=False)
    accepted = spark.read.parquet(str(events_dir)).count()
    n_quarantined = spark.read.parquet(str(quarantine_dir)).count()
    shutil.rmtree(stage, ignore_errors=True)
    counts = Counts(lines_in, headers, accepted, n_quarantined, suspects)
    if not counts.reconciled:  # cannot happen unless a stage loses rows: refuse to report on a lossy ingest
        raise AssertionError(f"ingest does not reconcile: {counts.line()}")
    return Ingested(str(events_dir), str(quarantine_dir), files, counts, refused)
