"""The safety invariants as Spark jobs over all traces at once (definitions: kraft_tck.traces.checker).

Each check takes the `events` table (or `appends`, or the `_steps` table of `tables.steps_frame`) and
returns violations as rows of (invariant, source, run, node, epoch, seq, detail) — the shape of
`checker.Violation`, so the Spark and the single-process results compare directly. LeaderCompleteness (and
SnapshotAgreement, which needs the same committed batches) is the one sequential check: a replay per run on the
executors (`leader_completeness`). The other snapshot checks (KIP-630) are windows over the nodes whose log ever
starts above 0 or that installed a snapshot: traces without snapshots pay one aggregate for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kraft_tck.traces.checker import (
    CREATE_SNAPSHOT,
    INSTALL_SNAPSHOT,
    Completeness,
    Violation,
    VoterConfigs,
    sorted_violations,
)
from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

COLUMNS = ("invariant", "source", "run", "node", "epoch", "seq", "detail")


def _shape(df: DataFrame, invariant: str, node: Column, epoch: Column, seq: Column, detail: Column) -> DataFrame:
    return df.select(F.lit(invariant).alias("invariant"), "source", "run", node.cast("long").alias("node"),
                     epoch.cast("long").alias("epoch"), seq.cast("long").alias("seq"), detail.alias("detail"))


def _states(events: DataFrame) -> DataFrame:
    return events.where(F.col("role").isNotNull())


def election_safety(events: DataFrame) -> DataFrame:
    # One scan: each state row makes its claims (itself if Leader, the leaderId it names), exploded in
    # place instead of a union of two scans. Each claimant's first claim is one grouping; the epoch's first
    # claim is the least of those few rows, and the join reuses them (10M events: 8.7-15.6 s -> 3.3-4.5 s).
    made = F.array_distinct(F.array_compact(F.array(F.when(F.col("role") == "Leader", F.col("node")),
                                                     F.when(F.col("leaderId") != -1, F.col("leaderId")))))
    claims = _states(events).select("source", "run", "epoch", "seq", "node", F.explode(made).alias("claimant"))
    key = ["source", "run", "epoch"]
    per = claims.groupBy(*key, "claimant").agg(F.min(F.struct("seq", "node")).alias("m")) \
        .select(*key, "claimant", F.col("m.seq").alias("seq"), F.col("m.node").alias("node"))
    first = per.groupBy(*key).agg(F.min(F.struct("seq", "node", "claimant")).alias("f")) \
        .select(*key, F.col("f.claimant").alias("leader"), F.col("f.seq").alias("leaderSeq"))
    bad = per.join(first, key).where(F.col("claimant") != F.col("leader"))
    detail = F.format_string("node %d claims leadership of epoch %d; node %d was its leader first (seq %d)",
                             "claimant", "epoch", "leader", "leaderSeq")
    return _shape(bad, "ElectionSafety", F.col("claimant"), F.col("epoch"), F.col("seq"), detail)


def vote_once(events: DataFrame) -> DataFrame:
    key = ["source", "run", "node", "epoch"]
    votes = _states(events).where(F.col("votedId") != -1).groupBy(*key, "votedId").agg(F.min("seq").alias("seq"))
    first = votes.groupBy(*key).agg(F.min(F.struct("seq", "votedId")).alias("f")) \
        .select(*key, F.col("f.votedId").alias("firstVote"))
    bad = votes.join(first, key).where(F.col("votedId") != F.col("firstVote"))
    detail = F.format_string("node %d voted for %d in epoch %d after voting for %d",
                             "node", "votedId", "epoch", "firstVote")
    return _shape(bad, "VoteOnce", F.col("node"), F.col("epoch"), F.col("seq"), detail)


def per_node_steps(steps: DataFrame) -> DataFrame:
    """EpochMonotonic, HighWatermarkMonotonic and CommittedNeverTruncated, from the `_steps` table (each
    node's state rows in trace order with the previous state's epoch and high watermark:
    `tables.steps_frame`, the window pass the transitions table shares)."""
    epoch = _shape(steps.where(F.col("epoch") < F.col("prevEpoch")), "EpochMonotonic", F.col("node"),
                   F.col("epoch"), F.col("seq"), F.format_string("epoch %d -> %d", "prevEpoch", "epoch"))
    hw = _shape(steps.where((F.col("highWatermark") < F.col("prevHw")) & (F.col("event") != "Restart")),
                "HighWatermarkMonotonic", F.col("node"), F.col("epoch"), F.col("seq"),
                F.format_string("high watermark %d -> %d", "prevHw", "highWatermark"))
    trunc = _shape(steps.where(F.col("truncatedTo") < F.col("prevHw")), "CommittedNeverTruncated", F.col("node"),
                   F.col("epoch"), F.col("seq"),
                   F.format_string("truncated to %d below high watermark %d", "truncatedTo", "prevHw"))
    return epoch.unionByName(hw).unionByName(trunc)


def log_matching(appends: DataFrame) -> DataFrame:
    key = ["source", "run", "baseOffset", "epoch"]
    b = appends.where(F.col("digest").isNotNull())
    per = b.groupBy(*key, "lastOffset", "digest", "node").agg(F.min("seq").alias("seq"))
    first = per.groupBy(*key).agg(F.min(F.struct("seq", "node", "lastOffset", "digest")).alias("f")) \
        .select(*key, F.col("f.seq").alias("fSeq"), F.col("f.node").alias("fNode"),
                F.col("f.lastOffset").alias("fLast"), F.col("f.digest").alias("fDigest"))
    bad = per.join(first, key).where((F.col("lastOffset") != F.col("fLast")) | (F.col("digest") != F.col("fDigest")))
    detail = F.format_string(
        "batch at offset %d epoch %d: digest %s (last offset %d) on node %d, %s (last offset %d) on node %d at seq %d",
        "baseOffset", "epoch", "digest", "lastOffset", "node", "fDigest", "fLast", "fNode", "fSeq")
    return _shape(bad, "LogMatching", F.col("node"), F.col("epoch"), F.col("seq"), detail)


def online_requires_registration(events: DataFrame) -> DataFrame:
    """A BrokerEvent saying Online needs, on the same node and earlier, a BrokerEvent of that broker's
    RegisterBrokerRecord with the same broker epoch, at an offset below the node's highest high watermark so
    far (KIP-631 "Register Flow": a broker starts Fenced and comes online only once registered)."""
    brokers = events.where(F.col("event") == "BrokerEvent")
    node = ["source", "run", "node"]
    key = [*node, "brokerId", "brokerEpoch"]
    regs = brokers.where(F.col("brokerRecord") == "RegisterBrokerRecord").groupBy(*key) \
        .agg(F.min(F.struct("seq", F.coalesce("brokerOffset", "brokerEpoch").alias("offset"))).alias("r")) \
        .select(*key, F.col("r.seq").alias("regSeq"), F.col("r.offset").alias("regOffset"))
    online = brokers.where(F.col("brokerState") == "Online").select(*key, "seq", "file", "line")
    # The highest high watermark up to each Online event: one window over that node's states and its Online
    # events (only nodes that report one: runs without brokers cost nothing here).
    # KIP-630: the largest log start or snapshot end so far; a broker epoch below it was registered in a snapshot.
    covered = F.greatest(F.coalesce("logStartOffset", F.lit(0)), F.coalesce("snapshotEnd", F.lit(0)))
    states = _states(events).join(online.select(*node).distinct(), node, "left_semi") \
        .select(*node, "seq", "file", "line", F.col("highWatermark").alias("hw"), covered.alias("covered"),
                F.lit(None).cast("long").alias("brokerId"), F.lit(None).cast("long").alias("brokerEpoch"))
    w = Window.partitionBy(*node).orderBy("seq", "file", "line").rowsBetween(Window.unboundedPreceding, 0)
    marked = online.select(*node, "seq", "file", "line", F.lit(None).cast("long").alias("hw"),
                           F.lit(None).cast("long").alias("covered"), "brokerId", "brokerEpoch").unionByName(states) \
        .select(*key, "seq", F.max("hw").over(w).alias("maxHw"), F.max("covered").over(w).alias("maxCovered")) \
        .where(F.col("brokerId").isNotNull())
    in_snapshot = F.col("brokerEpoch") < F.coalesce("maxCovered", F.lit(0))
    checked = marked.join(regs, key, "left").withColumn("hw", F.coalesce("maxHw", F.lit(0))) \
        .withColumn("regOffset", F.when((F.col("regSeq").isNull() | (F.col("regSeq") >= F.col("seq"))) & in_snapshot,
                                        F.col("brokerEpoch")).otherwise(F.col("regOffset"))) \
        .withColumn("regSeq", F.when((F.col("regSeq").isNull() | (F.col("regSeq") >= F.col("seq"))) & in_snapshot,
                                     F.lit(-1)).otherwise(F.col("regSeq")))
    missing = F.col("regSeq").isNull() | (F.col("regSeq") >= F.col("seq"))
    uncommitted = ~missing & (F.col("regOffset") >= F.col("hw"))
    detail = F.when(missing, F.format_string(
        "broker %d reported Online with broker epoch %d, but node %d shows no earlier RegisterBrokerRecord for "
        "broker %d epoch %d", "brokerId", "brokerEpoch", "node", "brokerId", "brokerEpoch")).otherwise(
        F.format_string("broker %d reported Online with broker epoch %d, but its RegisterBrokerRecord (offset %d) "
                        "is not below node %d's high watermark %d", "brokerId", "brokerEpoch", "regOffset", "node",
                        "hw"))
    return _shape(checked.where(missing | uncommitted), "OnlineRequiresRegistration", F.col("node"),
                  F.col("brokerEpoch"), F.col("seq"), detail)


_NODE = ["source", "run", "node"]
_ORDER = ["seq", "file", "line"]


def snapshot_at_committed_offset(events: DataFrame) -> DataFrame:
    """A CreateSnapshot above the node's high watermark (KIP-630: a snapshot only of committed records)."""
    bad = _states(events).where((F.col("event") == CREATE_SNAPSHOT) & (F.col("snapshotEnd") > F.col("highWatermark"))
                                & (F.col("snapshotEnd") > 0))
    detail = F.format_string("snapshot (end offset %d, epoch %d) taken above the high watermark %d", "snapshotEnd",
                             "snapshotEpoch", "highWatermark")
    return _shape(bad, "SnapshotAtCommittedOffset", F.col("node"), F.col("epoch"), F.col("seq"), detail)


def log_start_covered(events: DataFrame) -> DataFrame:
    """LogStartCoveredBySnapshot: each node's largest snapshot end so far (its first state's log start when that
    is above 0 and the state has no snapshotId: a snapshot loaded before the trace began) must reach its log
    start; reported at the first state per (node, logStartOffset). Only nodes whose log ever starts above 0."""
    start = F.coalesce(F.col("logStartOffset"), F.lit(0))
    states = _states(events).select(*_NODE, *_ORDER, "epoch", "snapshotEnd", start.alias("start"))
    moved = states.groupBy(*_NODE).agg(F.max("start").alias("m")).where(F.col("m") > 0).select(*_NODE)
    w = Window.partitionBy(*_NODE).orderBy(*_ORDER)
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    rows = states.join(moved, _NODE, "left_semi").withColumn("rn", F.row_number().over(w))
    cover = F.when(F.col("snapshotEnd").isNotNull(), F.col("snapshotEnd")) \
        .when((F.col("rn") == 1) & (F.col("start") > 0), F.col("start"))
    rows = rows.withColumn("snapEnd", F.coalesce(F.max(cover).over(upto), F.lit(0)))
    first = rows.where(F.col("start") > F.col("snapEnd")).groupBy(*_NODE, "start") \
        .agg(F.min(F.struct("seq", "epoch", "snapEnd")).alias("f"))
    detail = F.format_string("log start offset %d is above the end of its latest snapshot (%d)", "start", "f.snapEnd")
    return _shape(first, "LogStartCoveredBySnapshot", F.col("node"), F.col("f.epoch"), F.col("f.seq"), detail)


def install_resets_log(events: DataFrame) -> DataFrame:
    """SnapshotInstallResetsLog: the installing HandleFetchSnapshotResponse shows logStartOffset = logEndOffset =
    the snapshot's end; afterwards the node's states stay at or above the largest end it installed and its Fetch
    requests never ask below it (the first later event breaking it per (node, installed end))."""
    start = F.coalesce(F.col("logStartOffset"), F.lit(0))
    install = (F.col("event") == INSTALL_SNAPSHOT) & F.col("snapshotEnd").isNotNull()
    installs = _states(events).where(install)
    bad_installs = installs.where(~((start == F.col("logEndOffset")) & (F.col("logEndOffset") == F.col("snapshotEnd"))))
    reset = _shape(bad_installs, "SnapshotInstallResetsLog", F.col("node"), F.col("epoch"), F.col("seq"),
                   F.format_string("installed snapshot with end offset %d but its log starts at %d and ends at %d "
                                   "(both must be %d)", F.col("snapshotEnd"), start, F.col("logEndOffset"),
                                   F.col("snapshotEnd")))
    nodes = installs.select(*_NODE).distinct()
    states = _states(events).select(*_NODE, *_ORDER, "epoch", start.alias("start"), "logEndOffset",
                                    F.when(install, F.col("snapshotEnd")).alias("inst"),
                                    F.lit(None).cast("long").alias("fetchOffset"))
    def field(name: str) -> Column:  # `checker.fetch_position`: the first partition's, or the body's own
        nested = F.get_json_object("body", f"$.Topics[0].Partitions[0].{name}")
        return F.when(F.get_json_object("body", "$.Topics").isNotNull(), nested) \
            .otherwise(F.get_json_object("body", f"$.{name}")).cast("long")

    fetches = events.where((F.col("event") == "Send") & (F.col("api") == "Fetch") & (F.col("kind") == "request")
                           & (F.col("from") == F.col("node"))).select(
        *_NODE, *_ORDER, F.coalesce(field("CurrentLeaderEpoch"), F.lit(-1)).alias("epoch"),
        F.lit(None).cast("long").alias("start"), F.lit(None).cast("long").alias("logEndOffset"),
        F.lit(None).cast("long").alias("inst"), field("FetchOffset").alias("fetchOffset"))
    rows = states.unionByName(fetches).join(nodes, _NODE, "left_semi")
    upto = Window.partitionBy(*_NODE).orderBy(*_ORDER).rowsBetween(Window.unboundedPreceding, 0)
    rows = rows.withColumn("installed", F.max("inst").over(upto)).where(F.col("inst").isNull())
    below = F.when(F.col("fetchOffset").isNotNull(), F.col("fetchOffset") < F.col("installed")) \
        .otherwise((F.col("start") < F.col("installed")) | (F.col("logEndOffset") < F.col("installed")))
    first = rows.where(F.col("installed").isNotNull() & F.coalesce(below, F.lit(False))).groupBy(*_NODE, "installed") \
        .agg(F.min(F.struct("seq", "epoch", "start", "logEndOffset", "fetchOffset")).alias("f"))
    detail = F.when(F.col("f.fetchOffset").isNotNull(), F.format_string(
        "fetches at offset %d, below the end offset %d of the snapshot it installed", "f.fetchOffset", "installed")) \
        .otherwise(F.format_string("log start %d / log end %d below the end offset %d of the snapshot it installed",
                                   "f.start", "f.logEndOffset", "installed"))
    later = _shape(first, "SnapshotInstallResetsLog", F.col("node"), F.col("f.epoch"), F.col("f.seq"), detail)
    return reset.unionByName(later)


def _replay_runs(rows: Iterable[Row]) -> Iterator[tuple[str, str, str, int, int, int, str]]:
    """One partition's state rows, sorted by (source, run, node, seq): `checker.Completeness` per run."""
    key: tuple[str, str] | None = None
    lc = Completeness()
    for source, run, node, seq, event, epoch, hw, truncated_to, appended, snap_end, snap_epoch in rows:
        if (source, run) != key:
            if key is not None:
                yield from _rows(lc.violations(*key))
            key, lc = (source, run), Completeness()
        if epoch is None or hw is None:
            continue  # not a state the trace schema allows (ingest quarantines those): nothing to replay
        lc.feed(node, seq, event, epoch, hw, truncated_to, [(b, e, last, d or "") for b, last, e, d in appended or ()],
                None if snap_end is None else (snap_end, snap_epoch))
    if key is not None:
        yield from _rows(lc.violations(*key))


def _rows(vs: list[Violation]) -> Iterator[tuple[str, str, str, int, int, int, str]]:
    for v in vs:
        yield (v.invariant, v.source, v.run, v.node, v.epoch, v.seq, v.detail)


def leader_completeness(events: DataFrame) -> DataFrame:
    """KRaft.tla LeaderCompleteness. It needs each node's log replayed in order (which batches are present
    when the high watermark passes them, and at each BecomeLeader), a sequential pass per run: the state
    rows are partitioned by run and sorted in the JVM, and each partition replays its runs with the very
    rules of the Python checker (`checker.Completeness`), so the two cannot drift apart. Only the rows the
    replay can act on cross into Python: a log change, a BecomeLeader, or a high watermark above the node's
    previous state's (the window reuses the run partitioning: one shuffle)."""
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    batch = F.transform("appended", lambda b: F.struct(b["baseOffset"], b["lastOffset"], b["epoch"], b["digest"]))
    rows = _states(events).select("source", "run", "node", "seq", "file", "line", "event", "epoch",
                                  "highWatermark", "truncatedTo", batch.alias("appended"), "snapshotEnd",
                                  "snapshotEpoch") \
        .repartition("source", "run").withColumn("prevHw", F.lag("highWatermark").over(w)) \
        .where((F.size("appended") > 0) | F.col("truncatedTo").isNotNull() | (F.col("event") == "BecomeLeader")
               | F.col("prevHw").isNull() | (F.col("highWatermark") > F.col("prevHw"))
               | F.col("snapshotEnd").isNotNull()) \
        .sortWithinPartitions("source", "run", "node", "seq", "file", "line") \
        .select("source", "run", "node", "seq", "event", "epoch", "highWatermark", "truncatedTo", "appended",
                "snapshotEnd", "snapshotEpoch")
    return events.sparkSession.createDataFrame(rows.rdd.mapPartitions(_replay_runs), _VIOLATION_SCHEMA)


_VIOLATION_SCHEMA = T.StructType([T.StructField("invariant", T.StringType()), T.StructField("source", T.StringType()),
                                  T.StructField("run", T.StringType()), T.StructField("node", T.LongType()),
                                  T.StructField("epoch", T.LongType()), T.StructField("seq", T.LongType()),
                                  T.StructField("detail", T.StringType())])


def _replay_configs(rows: Iterable[Row]) -> Iterator[tuple[str, str, str, int, int, int, str]]:
    """One partition's state rows with voters, sorted by (source, run, node, seq): `checker.VoterConfigs` per run."""
    key: tuple[str, str] | None = None
    vc = VoterConfigs()
    for source, run, node, seq, event, epoch, hw, truncated_to, appended, voters, installed in rows:
        if (source, run) != key:
            if key is not None:
                yield from _rows(vc.violations(*key))
            key, vc = (source, run), VoterConfigs()
        if epoch is None or hw is None:
            continue
        vc.feed(node, seq, event, epoch, hw, truncated_to, [(b, bool(c)) for b, c in appended or ()], voters,
                installed)
    if key is not None:
        yield from _rows(vc.violations(*key))


def voter_configs(events: DataFrame) -> DataFrame:
    """AtMostOneUncommittedConfig, CommittedConfigsDifferByOne and SnapshotConfigAgreement (KIP-853; rules:
    `checker.VoterConfigs`): the states that carry voters, partitioned by run and replayed in Python by the checker's
    own class. Only the rows the replay acts on cross: a log change, a Restart, a snapshot install, or a high
    watermark above the previous state's."""
    w = Window.partitionBy("source", "run", "node").orderBy("seq", "file", "line")
    batch = F.transform("appended", lambda b: F.struct(b["baseOffset"], b["control"]))
    # the end offset of the snapshot the event installed (null: none)
    installed = F.when(F.col("event") == INSTALL_SNAPSHOT, F.col("snapshotEnd"))
    rows = _states(events).where(_dynamic()) \
        .select("source", "run", "node", "seq", "file", "line", "event", "epoch", "highWatermark", "truncatedTo",
                batch.alias("appended"), "voters", installed.alias("installed")) \
        .repartition("source", "run").withColumn("prevHw", F.lag("highWatermark").over(w)) \
        .withColumn("prevVoters", F.lag("voters").over(w)) \
        .where((F.size("appended") > 0) | F.col("truncatedTo").isNotNull() | F.col("installed").isNotNull()
               | F.col("event").isin("Restart", "BecomeLeader") | F.col("prevHw").isNull()
               | (F.col("highWatermark") > F.col("prevHw")) | ~F.col("voters").eqNullSafe(F.col("prevVoters"))) \
        .sortWithinPartitions("source", "run", "node", "seq", "file", "line") \
        .select("source", "run", "node", "seq", "event", "epoch", "highWatermark", "truncatedTo", "appended",
                "voters", "installed")
    return events.sparkSession.createDataFrame(rows.rdd.mapPartitions(_replay_configs), _VIOLATION_SCHEMA)


def leader_quorum(events: DataFrame) -> DataFrame:
    """ElectionSafety's second half (KIP-853 "Leader election"): a BecomeLeader whose state has voters V needs
    votedId = the leader in its epoch, at a seq <= the BecomeLeader's, from a majority of V; judged only when every
    node of V has states in the run (`checker._State.leader_quorums`)."""
    states = _states(events)
    key = ["source", "run"]
    leaders = states.where((F.col("event") == "BecomeLeader") & _dynamic()) \
        .select(*key, F.col("node").alias("leader"), "epoch", F.col("seq").alias("lseq"), "voters")
    per_voter = leaders.select(*key, "leader", "epoch", "lseq", "voters", F.explode("voters").alias("voter"))
    seen = states.select(*key, F.col("node").alias("voter")).distinct().withColumn("seen", F.lit(True))
    votes = states.where(F.col("votedId") != -1).groupBy(*key, F.col("node").alias("voter"), "epoch", "votedId") \
        .agg(F.min("seq").alias("vseq"))
    joined = per_voter.join(seen, [*key, "voter"], "left") \
        .join(votes, [*key, "voter", "epoch"], "left") \
        .withColumn("granted", (F.col("votedId") == F.col("leader")) & (F.col("vseq") <= F.col("lseq")))
    per = joined.groupBy(*key, "leader", "epoch", "lseq", "voters").agg(
        F.min(F.coalesce("seen", F.lit(False))).alias("allSeen"),
        F.array_sort(F.collect_set(F.when(F.col("granted"), F.col("voter")))).alias("granted"))
    bad = per.where(F.col("allSeen") & (F.size("granted") <= F.floor(F.size("voters") / 2)))
    detail = F.format_string("node %d became leader of epoch %d with votes from %s, not a majority of its voter "
                             "set %s", "leader", "epoch", _ids("granted"), _ids("voters"))
    return _shape(bad, "ElectionSafety", F.col("leader"), F.col("epoch"), F.col("lseq"), detail)


def _ids(col: str) -> Column:
    """A list of ids as Python prints it: [1, 2, 3]."""
    return F.concat(F.lit("["), F.array_join(F.col(col).cast("array<string>"), ", "), F.lit("]"))


def has_voters(events: DataFrame) -> bool:
    """Does any state carry KIP-853's voters (kraft.version >= 1)? (One pass that stops at the first.)"""
    return bool(events.where(_dynamic()).limit(1).count())


def _dynamic() -> Column:
    """A state of a kraft.version >= 1 node with its voter set (KIP-853)."""
    return F.col("voters").isNotNull() & (F.coalesce(F.col("kraftVersion"), F.lit(0)) >= 1)


def has_snapshots(events: DataFrame) -> bool:
    """Does any event carry a snapshot id or a log start above 0? (One pass that stops at the first.)"""
    return bool(events.where(F.col("snapshotEnd").isNotNull() | (F.col("logStartOffset") > 0)).limit(1).count())


def all_checks(events: DataFrame, appends: DataFrame, steps: DataFrame) -> DataFrame:
    out = election_safety(events).unionByName(vote_once(events)).unionByName(per_node_steps(steps)) \
        .unionByName(log_matching(appends)).unionByName(online_requires_registration(events)) \
        .unionByName(leader_completeness(events))
    if has_snapshots(events):  # KIP-630: traces without snapshots have nothing these could find
        out = out.unionByName(snapshot_at_committed_offset(events)).unionByName(log_start_covered(events)) \
            .unionByName(install_resets_log(events))
    if has_voters(events):  # KIP-853: kraft.version 0 traces have no voter sets to judge
        out = out.unionByName(voter_configs(events)).unionByName(leader_quorum(events))
    return out


def collect_violations(df: DataFrame) -> list[Violation]:
    return sorted_violations(Violation(r["invariant"], r["source"], r["run"], int(r["node"]), int(r["epoch"]),
                                       int(r["seq"]), r["detail"]) for r in df.collect())
