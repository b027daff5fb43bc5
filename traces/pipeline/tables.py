"""Normalised Parquet tables from the ingested lines.

The big tables (`events`, `messages`) are partitioned by source and run. The small derived ones
(`appends`, `transitions`) are partitioned by source only, with `run` a column: a directory per run would
hold one tiny file each (a 10M-event corpus of 500 runs has 69k transitions; writing them as 1,007 files
took 10-15 s, as one directory per source 0.4-0.8 s).

* `events`      — one row per accepted event: identity, the state after it (with KIP-630's logStartOffset and
                  KIP-853's voters and kraftVersion),
                  the snapshotId of a snapshot event (snapshotEnd, snapshotEpoch), the log change summary, the
                  message fields of a Send/Receive (also in `messages`), and
                  for a `BrokerEvent` the broker change (brokerId, brokerState, brokerEpoch, brokerRecord,
                  brokerOffset).
* `messages`    — one row per Send/Receive: api, kind, correlation id, from/to, the body as JSON text.
* `appends`     — one row per appended batch (offsets, epoch, digest): what LogMatching compares.
* `transitions` — one row per change of a node's (role, epoch, leaderId): the state machine's path.
* `_steps`      — internal: the state rows where a node's (role, epoch, leaderId) changed or its epoch or
                  high watermark went back or a truncation cut below it, each with the node's previous
                  state. One window pass makes it; `transitions` and `checks.per_node_steps` both read it.
* `quarantine`  — every line that was not accepted, with file, line, reason and the text itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

PARTITIONS = ("source", "run")
SMALL_PARTITIONS = ("source",)
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
        *_snapshot_columns(),
        *_voter_columns(),
        *_broker_columns(F.from_json(F.col("e.broker"), BROKER_TYPE)),
        F.col("e.msg.api").alias("api"), F.col("e.msg.kind").alias("kind"),
        F.col("e.msg.version").alias("version"), F.col("e.msg.correlationId").alias("correlationId"),
        F.col("e.msg.from").alias("from"), F.col("e.msg.to").alias("to"), F.col("e.msg.body").alias("body"),
    )


def _snapshot_columns() -> list[Column]:
    """KIP-630: the state's logStartOffset and the event's snapshotId (null where the trace schema or the
    event has none; the checks read a missing logStartOffset as 0)."""
    from kraft_tck.traces.pipeline.schema import event_type

    fields = {f.name: f.dataType for f in event_type().fields}
    state = fields.get("state")
    has_start = isinstance(state, T.StructType) and "logStartOffset" in state.fieldNames()
    sid = fields.get("snapshotId")
    has_sid = isinstance(sid, T.StructType) and {"endOffset", "epoch"} <= set(sid.fieldNames())
    none = F.lit(None).cast("long")
    return [(F.col("e.state.logStartOffset") if has_start else none).alias("logStartOffset"),
            (F.col("e.snapshotId.endOffset") if has_sid else none).alias("snapshotEnd"),
            (F.col("e.snapshotId.epoch") if has_sid else none).alias("snapshotEpoch")]


def _voter_columns() -> list[Column]:
    """KIP-853: the state's voters (sorted ids in force) and kraftVersion (null where the trace schema or the state
    has none: kraft.version 0)."""
    from kraft_tck.traces.pipeline.schema import event_type

    state = {f.name: f.dataType for f in event_type().fields}.get("state")
    names = state.fieldNames() if isinstance(state, T.StructType) else []
    return [(F.col("e.state.voters") if "voters" in names else F.lit(None).cast("array<long>")).alias("voters"),
            (F.col("e.state.kraftVersion") if "kraftVersion" in names else F.lit(None).cast("long"))
            .alias("kraftVersion")]


def _broker_columns(b: Column) -> list[Column]:
    return [b["brokerId"].alias("brokerId"), b["state"].alias("brokerState"), b["brokerEpoch"].alias("brokerEpoch"),
            b["record"].alias("brokerRecord"), b["offset"].alias("brokerOffset")]


def write_table(df: DataFrame, path: str, partitioned: bool = True, coalesce: bool = True,
                by: tuple[str, ...] = PARTITIONS) -> None:
    if partitioned:
        # No shuffle: tables derive from `events`, whose files each hold one run, so a task writes one file
        # per run it reads (the session allows a few open writers per task instead of a sort).
        df.write.mode("overwrite").partitionBy(*by).parquet(path)
        if not any(Path(path).rglob("*.parquet")):
            # No rows, so no partition and no file: Spark could not read the table back ("unable to infer
            # schema"). One empty file keeps its schema, partition columns included.
            df.limit(0).coalesce(1).write.mode("overwrite").parquet(path)
    else:
        # coalesce(1) makes one file but also runs the whole plan in one task: not for a frame with work in
        # it (a window) that both cores should share.
        (df.coalesce(1) if coalesce else df).write.mode("overwrite").parquet(path)


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
    write_table(appends, paths["appends"], by=SMALL_PARTITIONS)
    # The per-node window (a shuffle and sort of every state row) runs once: its few interesting rows are
    # kept, and both the transitions table and the monotonicity checks read them (10M events: two passes of
    # about 15 s each before).
    write_table(steps_frame(events), paths["_steps"], partitioned=False, coalesce=False)
    steps = spark.read.parquet(paths["_steps"])
    write_table(transitions_frame(steps), paths["transitions"], by=SMALL_PARTITIONS)
    return paths


def steps_frame(events: DataFrame) -> DataFrame:
    """Each node's state rows in trace order (seq, then file and line) with the previous state's role, epoch,
    leaderId and high watermark, kept where the (role, epoch, leaderId) changed (`transition`) or where a
    monotonicity check has something to say (`checks.per_node_steps` decides)."""
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    prev = {k: F.lag(k).over(w) for k in ("role", "epoch", "leaderId", "highWatermark")}
    p = events.where(F.col("role").isNotNull()).select(
        "source", "run", "node", "seq", "ts", "event", "role", "epoch", "leaderId", "highWatermark",
        "truncatedTo", prev["role"].alias("prevRole"), prev["epoch"].alias("prevEpoch"),
        prev["leaderId"].alias("prevLeaderId"), prev["highWatermark"].alias("prevHw"))
    transition = F.col("prevRole").isNull() | (F.col("prevRole") != F.col("role")) \
        | (F.col("prevEpoch") != F.col("epoch")) | (F.col("prevLeaderId") != F.col("leaderId"))
    suspect = (F.col("epoch") < F.col("prevEpoch")) | (F.col("highWatermark") < F.col("prevHw")) \
        | (F.col("truncatedTo") < F.col("prevHw"))
    return p.withColumn("transition", transition).where(F.col("transition") | suspect)


def transitions_frame(steps: DataFrame) -> DataFrame:
    """The transitions table's rows from `steps_frame`'s."""
    return steps.where("transition").select(
        "source", "run", "node", "seq", "ts", "event", F.col("prevRole").alias("fromRole"),
        F.col("role").alias("toRole"), F.col("prevEpoch").alias("fromEpoch"), F.col("epoch").alias("toEpoch"),
        "leaderId")
