"""Normalised Parquet tables from the ingested lines, partitioned by source and run.

* `events`      — one row per accepted event: identity, the state after it, the log change summary, the
                  message fields of a Send/Receive (also in `messages`), and
                  for a `BrokerEvent` the broker change (brokerId, brokerState, brokerEpoch, brokerRecord,
                  brokerOffset; issue 7).
* `messages`    — one row per Send/Receive: api, kind, correlation id, from/to, the body as JSON text.
* `appends`     — one row per appended batch (offsets, epoch, digest): what LogMatching compares.
* `transitions` — one row per change of a node's (role, epoch, leaderId): the state machine's path.
* `quarantine`  — every line that was not accepted, with file, line, reason and the text itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

PARTITIONS = ("source", "run")
STATE_FIELDS = ("role", "epoch", "votedId", "leaderId", "logEndOffset", "lastFetchedEpoch", "highWatermark",
                "clusterId")
# A BrokerEvent's `broker` object (reference/registry.py BrokerChange.to_json). The trace schema keeps it
# free-form, so ingest hands it over as JSON text; these are the fields the checks and reports read.
BROKER_TYPE = "brokerId LONG, state STRING, brokerEpoch LONG, record STRING, offset LONG"


@dataclass(frozen=True)
class TablePaths:
    root: Path

    def __getitem__(self, name: str) -> str:
        return str(self.root / name)


def events_frame(lines: DataFrame, *, accepted_only: bool = True, carry: tuple[str, ...] = ()) -> DataFrame:
    """The events table's columns from ingested lines; ingest stages every line in this shape at once
    (`accepted_only=False`, carrying its status columns) and keeps the accepted ones as the table."""
    accepted = lines.where(F.col("status") == "event") if accepted_only else lines
    return accepted.select(
        *carry, "source", "run", "implementation", "file", "line",
        F.col("e.seq").alias("seq"), F.col("e.ts").alias("ts"), F.col("e.node").alias("node"),
        F.col("e.event").alias("event"), F.col("e.cause").alias("cause"), F.col("e.note").alias("note"),
        *[F.col(f"e.state.{k}").alias(k) for k in STATE_FIELDS],
        F.col("e.log.truncatedTo").alias("truncatedTo"), F.col("e.log.persisted").alias("persisted"),
        F.col("e.log.appended").alias("appended"),
        *_broker_columns(F.from_json(F.col("e.broker"), BROKER_TYPE)),
        F.col("e.msg.api").alias("api"), F.col("e.msg.kind").alias("kind"),
        F.col("e.msg.version").alias("version"), F.col("e.msg.correlationId").alias("correlationId"),
        F.col("e.msg.from").alias("from"), F.col("e.msg.to").alias("to"), F.col("e.msg.body").alias("body"),
    )


def _broker_columns(b: Column) -> list[Column]:
    return [b["brokerId"].alias("brokerId"), b["state"].alias("brokerState"), b["brokerEpoch"].alias("brokerEpoch"),
            b["record"].alias("brokerRecord"), b["offset"].alias("brokerOffset")]


def write_table(df: DataFrame, path: str, partitioned: bool = True) -> None:
    if partitioned:
        # No shuffle: tables derive from `events`, whose files each hold one run, so a task writes one file
        # per run it reads (the session allows a few open writers per task instead of a sort).
        df.write.mode("overwrite").partitionBy(*PARTITIONS).parquet(path)
    else:
        df.coalesce(1).write.mode("overwrite").parquet(path)


def write_tables(spark: SparkSession, out: Path) -> TablePaths:
    """Write messages, appends and transitions under `out/tables/` from the `events` table that ingest
    wrote there (with `quarantine`); later stages read them back (columnar, pruned)."""
    paths = TablePaths(out / "tables")
    events = spark.read.parquet(paths["events"])
    msgs = events.where(F.col("event").isin("Send", "Receive")).select(
        "source", "run", "file", "line", "seq", "ts", "node", F.col("event").alias("direction"),
        "api", "kind", "version", "correlationId", "from", "to", "body")
    write_table(msgs, paths["messages"])
    appends = events.where(F.size("appended") > 0).select(
        "source", "run", "node", "seq", "ts", F.posexplode("appended").alias("pos", "b")).select(
        "source", "run", "node", "seq", "ts", "pos", F.col("b.baseOffset").alias("baseOffset"),
        F.col("b.lastOffset").alias("lastOffset"), F.col("b.epoch").alias("epoch"),
        F.col("b.control").alias("control"), F.col("b.digest").alias("digest"))
    write_table(appends, paths["appends"])
    write_table(transitions_frame(events), paths["transitions"])
    return paths


def transitions_frame(events: DataFrame) -> DataFrame:
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    st = events.where(F.col("role").isNotNull())
    prev = {k: F.lag(k).over(w) for k in ("role", "epoch", "leaderId")}
    changed = prev["role"].isNull() | (prev["role"] != F.col("role")) | (prev["epoch"] != F.col("epoch")) \
        | (prev["leaderId"] != F.col("leaderId"))
    return st.select("source", "run", "node", "seq", "ts", "event",
                     prev["role"].alias("fromRole"), F.col("role").alias("toRole"),
                     prev["epoch"].alias("fromEpoch"), F.col("epoch").alias("toEpoch"),
                     F.col("leaderId"), changed.alias("changed")) \
        .where("changed").drop("changed")
