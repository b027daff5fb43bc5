"""Ingest NDJSON traces: every line is kept with its file and line number, and ends up exactly once as a
header, an accepted event, or a quarantined line with a reason. Counts reconcile or the run stops.

Line numbers survive Spark's parallel read like this: the text reader tags each row with its file and the
byte offset of the split it came from (`_metadata`), and `monotonically_increasing_id` numbers rows
consecutively inside a split. Counting rows per split and summing the earlier splits of the same file
gives every row its line number, whatever the number and size of the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from kraft_tck.traces.checker import FileInfo, check_header
from kraft_tck.traces.pipeline import schema as S
from kraft_tck.traces.pipeline.files import BadInput, list_trace_files
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T


@dataclass
class Counts:
    lines_in: int
    header_lines: int
    accepted: int
    quarantined: int

    @property
    def reconciled(self) -> bool:
        return self.lines_in == self.header_lines + self.accepted + self.quarantined

    def line(self) -> str:
        return (f"lines in {self.lines_in} = header lines {self.header_lines} + events accepted {self.accepted}"
                f" + quarantined {self.quarantined}")


@dataclass
class Ingested:
    lines: DataFrame  # persisted; columns: see `classify`
    files: list[FileInfo]
    counts: Counts
    refused: list[FileInfo] = field(default_factory=list)

    def release(self) -> None:
        self.lines.unpersist()


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


def read_lines(spark: SparkSession, files: list[Path]) -> tuple[DataFrame, DataFrame, int]:
    """(uri, line, value) for every line of every file, line numbers 1-based and exact; also the raw text
    (persisted; unpersist when done) and the number of lines read, counted before any parsing."""
    text = (spark.read.format("text").load([str(p) for p in files])
            .select(F.col("value"), F.col("_metadata.file_path").alias("uri"),
                    F.col("_metadata.file_block_start").alias("block"),
                    F.monotonically_increasing_id().alias("rid"))
            .persist(StorageLevel.MEMORY_AND_DISK))
    blocks = text.groupBy("uri", "block").agg(F.min("rid").alias("first"), F.count("*").alias("n")).collect()
    base: list[tuple[str, int, int, int]] = []
    seen: dict[str, int] = {}
    for b in sorted(blocks, key=lambda r: (r["uri"], r["block"])):
        before = seen.get(b["uri"], 0)
        base.append((b["uri"], int(b["block"]), int(b["first"]), before))
        seen[b["uri"]] = before + int(b["n"])
    schema = T.StructType([T.StructField("uri", T.StringType()), T.StructField("block", T.LongType()),
                           T.StructField("first", T.LongType()), T.StructField("before", T.LongType())])
    offsets = spark.createDataFrame(base, schema)
    numbered = (text.join(F.broadcast(offsets), ["uri", "block"])
                .select("uri", (F.col("rid") - F.col("first") + F.col("before") + 1).alias("line"), "value"))
    return numbered, text, sum(seen.values())


def classify(lines: DataFrame, files: list[FileInfo]) -> DataFrame:
    """Each line → status `header` | `event` | `quarantined`, with reason, run identity and parsed event."""
    spark = lines.sparkSession
    info_schema = T.StructType([
        T.StructField("uri", T.StringType()), T.StructField("source", T.StringType()),
        T.StructField("run", T.StringType()), T.StructField("implementation", T.StringType()),
        T.StructField("refused", T.StringType()),
    ])
    rows = [(f.path, (f.header or {}).get("source"), (f.header or {}).get("run"),
             (f.header or {}).get("implementation"), f.refused) for f in files]
    info = spark.createDataFrame(rows, info_schema)
    typed = F.from_json("value", S.event_type())
    raw = F.from_json("value", S.RAW_OBJECT)
    df = S.with_raw_columns(lines.join(F.broadcast(info), "uri").withColumn("raw", raw).withColumn("e", typed))
    seq_problem = F.when(F.col("e.seq").isNotNull() & (F.col("e.seq") != F.col("line") - 2),
                         F.concat(F.lit("seq "), F.col("e.seq").cast("string"), F.lit(" where "),
                                  (F.col("line") - 2).cast("string"), F.lit(" was expected")))
    problems = F.when(F.trim("value") == "", F.lit("empty line")) \
        .when(F.col("raw").isNull(), F.lit("not a JSON object (malformed or truncated line)")) \
        .when(F.col("raw")["type"] == "header", F.lit("a second header line")) \
        .otherwise(F.concat_ws("; ", F.nullif(S.event_problems(F.col("e"), F.col("raw")), F.lit("")), seq_problem))
    # Each stage is its own column so the (large) problem expression is evaluated once per line, not once
    # per place that reads the verdict.
    df = df.withColumn("problems", F.when((F.col("line") > 1) & F.col("refused").isNull(), problems))
    refused = F.concat(F.lit("file refused: "), F.col("refused"))
    df = df.withColumn("reason", F.when(F.col("refused").isNotNull(), refused)
                       .when(F.col("line") == 1, F.lit(None).cast("string"))
                       .otherwise(F.nullif(F.col("problems"), F.lit(""))))
    ok = F.col("reason").isNull()
    status = F.when(~ok, "quarantined").when(F.col("line") == 1, "header").otherwise("event")
    return df.select(
        F.col("uri").alias("file"), "line", status.alias("status"), "reason",
        F.when(~ok, F.col("value")).alias("text"),
        "source", "run", "implementation",
        F.when(ok & (F.col("line") > 1), F.col("e")).alias("e"),
    )


def ingest(spark: SparkSession, input_dir: str | os.PathLike[str]) -> Ingested:
    """Read, number, parse and classify every line under `input_dir`; assert that the counts reconcile."""
    paths = list_trace_files(input_dir)
    lines, text, lines_in = read_lines(spark, paths)
    heads = {r["uri"]: r["value"] for r in lines.where("line = 1").select("uri", "value").collect()}
    by_local = {_local_path(u): u for u in heads}
    files = []
    for p in paths:
        uri = by_local.get(str(p))
        files.append(check_header(uri or p.as_uri(), heads.get(uri) if uri else None))
    refused = [f for f in files if f.refused]
    if len(refused) == len(files):
        text.unpersist()
        why = "; ".join(f.refused or "" for f in refused[:3])
        more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
        raise BadInput(f"{input_dir}: none of the {len(files)} files is a kraft-tck trace: {why}{more}")
    classified = classify(lines, files).persist(StorageLevel.MEMORY_AND_DISK)
    by_status = {r["status"]: int(r["count"]) for r in classified.groupBy("status").count().collect()}
    text.unpersist()
    counts = Counts(lines_in, by_status.get("header", 0), by_status.get("event", 0), by_status.get("quarantined", 0))
    if not counts.reconciled:  # cannot happen unless classify loses rows: refuse to report on a lossy ingest
        raise AssertionError(f"ingest does not reconcile: {counts.line()}")
    return Ingested(classified, files, counts, refused)


def display_path(uri: str) -> str:
    return _local_path(uri)
