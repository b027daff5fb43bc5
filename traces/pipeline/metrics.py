"""Behaviour metrics from the tables, per source and implementation (all times in trace milliseconds).

* time to first leader — first BecomeLeader minus the run's first event, per run;
* election duration — StartElection to BecomeLeader of the same node and epoch;
* leader changes — BecomeLeader events per run;
* largest epoch — the largest epoch any node of a run reached (every election bumps it; KIP-996 pre-vote
  keeps a voter that was cut off from bumping it again and again);
* truncation depth — log end offset before a truncation minus `truncatedTo`;
* fetch round trip — a Fetch request's Send to its response's Receive at the same node (correlation id);
* commit latency — a leader's ClientAppend to the first step where its high watermark passes the batch.

`membership_rows` (KIP-853) is the report's "Membership changes" table: per source and implementation, the
AddRaftVoter/RemoveRaftVoter requests a node received, its answers by error (NONE = committed, REQUEST_TIMED_OUT),
and the leaders that resigned because they removed themselves (Resign, cause RemovedFromVoters).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

GROUP = ["source", "implementation"]
#: Values per metric collected to the driver for plots (a deterministic prefix, not the whole table).
PLOT_SAMPLE = 200_000


#: Kafka's error code of REQUEST_TIMED_OUT (spec/errors).
REQUEST_TIMED_OUT = 7
VOTER_CHANGE_APIS = ("AddRaftVoter", "RemoveRaftVoter")
MEMBERSHIP_COLUMNS = ["source", "implementation", "runs with changes", "changes requested", "committed",
                      "timed out", "refused (other errors)", "leader removals"]


def membership_rows(events: DataFrame) -> list[list[Any]]:
    """The "Membership changes" table's rows (empty when no trace holds a voter change)."""
    change = F.col("api").isin(*VOTER_CHANGE_APIS)
    code = F.get_json_object("body", "$.ErrorCode").cast("long")
    answer = (F.col("event") == "Send") & (F.col("kind") == "response") & change
    rows = events.where((change & (F.col("kind").isNotNull())) | (F.col("cause") == "RemovedFromVoters")) \
        .groupBy("source", F.coalesce("implementation", F.lit("?")).alias("implementation")).agg(
            F.countDistinct(F.when(change, F.col("run"))).alias("runs"),
            F.sum(F.when((F.col("event") == "Receive") & (F.col("kind") == "request") & change
                         & F.coalesce(F.col("note") != "duplicate", F.lit(True)), 1).otherwise(0)).alias("req"),
            F.sum(F.when(answer & (code == 0), 1).otherwise(0)).alias("ok"),
            F.sum(F.when(answer & (code == REQUEST_TIMED_OUT), 1).otherwise(0)).alias("timeout"),
            F.sum(F.when(answer & (code != 0) & (code != REQUEST_TIMED_OUT), 1).otherwise(0)).alias("other"),
            F.sum(F.when((F.col("event") == "Resign") & (F.col("cause") == "RemovedFromVoters"), 1).otherwise(0))
            .alias("resigned")).orderBy("source", "implementation").collect()
    return [[r["source"], r["implementation"], int(r["runs"]), int(r["req"]), int(r["ok"]), int(r["timeout"]),
             int(r["other"]), int(r["resigned"])] for r in rows if r["req"] or r["resigned"]]


@dataclass
class Metrics:
    summary: list[dict[str, Any]]  # one row per (source, implementation, metric)
    samples: dict[str, list[float]] = field(default_factory=dict)  # metric -> values for plots
    membership: list[list[Any]] = field(default_factory=list)  # `membership_rows` (KIP-853)


def _impl(events: DataFrame) -> DataFrame:
    return events.select("source", "run", F.coalesce("implementation", F.lit("?")).alias("implementation")).distinct()


def metric_frames(events: DataFrame, messages: DataFrame, appends: DataFrame) -> dict[str, DataFrame]:
    """metric name -> DataFrame(source, run, value)."""
    runs = events.groupBy("source", "run").agg(F.min("ts").alias("t0"))
    leaders = events.where(F.col("event") == "BecomeLeader")
    first_leader = leaders.groupBy("source", "run").agg(F.min("ts").alias("t1")).join(runs, ["source", "run"]) \
        .select("source", "run", (F.col("t1") - F.col("t0")).alias("value"))
    starts = events.where(F.col("event") == "StartElection").groupBy("source", "run", "node", "epoch") \
        .agg(F.min("ts").alias("t0"))
    election = leaders.select("source", "run", "node", "epoch", F.col("ts").alias("t1")) \
        .join(starts, ["source", "run", "node", "epoch"]) \
        .select("source", "run", (F.col("t1") - F.col("t0")).alias("value"))
    changes = events.groupBy("source", "run") \
        .agg(F.sum(F.when(F.col("event") == "BecomeLeader", 1).otherwise(0)).cast("double").alias("value"))
    largest_epoch = events.where(F.col("epoch").isNotNull()).groupBy("source", "run") \
        .agg(F.max("epoch").cast("double").alias("value"))
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    st = events.where(F.col("role").isNotNull())
    trunc = st.select("source", "run", "truncatedTo", F.lag("logEndOffset").over(w).alias("leo")) \
        .where(F.col("truncatedTo").isNotNull() & F.col("leo").isNotNull()) \
        .select("source", "run", (F.col("leo") - F.col("truncatedTo")).cast("double").alias("value"))
    fetch = messages.where(F.col("api") == "Fetch")
    req = fetch.where((F.col("direction") == "Send") & (F.col("kind") == "request")) \
        .select("source", "run", "node", "correlationId", F.col("ts").alias("t0"))
    resp = fetch.where((F.col("direction") == "Receive") & (F.col("kind") == "response")) \
        .groupBy("source", "run", "node", "correlationId").agg(F.min("ts").alias("t1"))
    rtt = req.join(resp, ["source", "run", "node", "correlationId"]) \
        .select("source", "run", (F.col("t1") - F.col("t0")).alias("value"))
    return {
        "time to first leader (ms)": first_leader,
        "election duration (ms)": election,
        "leader changes per run": changes,
        "largest epoch per run": largest_epoch,
        "truncation depth (offsets)": trunc,
        "fetch round trip (ms)": rtt,
        "commit latency (ms)": commit_latency(events, appends),
    }


def commit_latency(events: DataFrame, appends: DataFrame) -> DataFrame:
    """Commit latency per committed client batch: DataFrame(source, run, value)."""
    return commit_latency_points(events, appends).select("source", "run", "value")


def commit_latency_points(events: DataFrame, appends: DataFrame) -> DataFrame:
    """DataFrame(source, run, ts, value): when each client batch was appended, and its commit latency.

    Each HW advance on a node is exploded into the offsets it commits, so matching a batch's last offset
    to its commit is an equi-join (linear), not a range join over every later event of the node."""
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    adv = events.where(F.col("role").isNotNull()) \
        .select("source", "run", "node", "seq", "ts", "highWatermark",
                F.coalesce(F.lag("highWatermark").over(w), F.lit(0)).alias("prevHw")) \
        .where(F.col("highWatermark") > F.col("prevHw")) \
        .select("source", "run", "node", F.col("seq").alias("cSeq"), F.col("ts").alias("cTs"),
                F.explode(F.sequence("prevHw", F.col("highWatermark") - 1)).alias("offset"))
    mine = events.where(F.col("event") == "ClientAppend").select("source", "run", "node", "seq")
    batches = appends.join(mine, ["source", "run", "node", "seq"]) \
        .select("source", "run", "node", "seq", "ts", F.col("lastOffset").alias("offset"))
    return batches.join(adv, ["source", "run", "node", "offset"]).where(F.col("cSeq") > F.col("seq")) \
        .groupBy("source", "run", "node", "offset", "ts").agg(F.min("cTs").alias("cTs")) \
        .select("source", "run", "ts", (F.col("cTs") - F.col("ts")).alias("value"))


def compute(events: DataFrame, messages: DataFrame, appends: DataFrame) -> Metrics:
    impl = _impl(events)
    summary: list[dict[str, Any]] = []
    samples: dict[str, list[float]] = {}
    for name, df in metric_frames(events, messages, appends).items():
        rows = df.join(impl, ["source", "run"]).groupBy(*GROUP).agg(
            F.count("value").alias("n"), F.min("value").alias("min"),
            F.percentile_approx("value", [0.5, 0.95, 0.99], 1000).alias("p"),
            F.max("value").alias("max"), F.mean("value").alias("mean")).orderBy(*GROUP).collect()
        for r in rows:
            p = r["p"] or [None, None, None]
            summary.append({"metric": name, "source": r["source"], "implementation": r["implementation"],
                            "n": int(r["n"]), "min": r["min"], "p50": p[0], "p95": p[1], "p99": p[2],
                            "max": r["max"], "mean": r["mean"]})
        samples[name] = [float(x["value"]) for x in df.select("value").where("value IS NOT NULL")
                         .limit(PLOT_SAMPLE).collect()]
    return Metrics(summary, samples, membership_rows(events))
