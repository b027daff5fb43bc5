"""The single-process Python trace checker: the safety invariants of spec/README.md over a set of traces.

It is the baseline the Spark pipeline is benchmarked against and the oracle its results are compared with
in the tests, so the two share one definition of every check (the rules below) and one result shape
(`Violation`). Lines are classified the same way: line 1 decides whether a file is a trace; every later
line is an event or is quarantined with its file, line and reason (event on line n must have seq n-2).

The invariants, over the events that carry a `state` (grouped by run = (source, run)):

* ElectionSafety — claims of leadership of epoch e: a node whose role is Leader in e, or a state whose
  leaderId (≠ -1) names a node in e. The claim with the smallest (seq, node, claimant) is the leader of e;
  every other claimant is reported once, at its first claim: node = claimant.
* VoteOnce — per (node, epoch) the votedIds (≠ -1); the one first seen (smallest seq) is the vote; every
  other votedId is reported at its first seq.
* EpochMonotonic — per node in seq order, a state epoch lower than the node's previous state epoch.
* HighWatermarkMonotonic — the same for highWatermark, except on a Restart (volatile state, TLA+ allows it).
* CommittedNeverTruncated — a `log.truncatedTo` below the node's high watermark before that step.
* LogMatching — `log.appended` batches with a digest: per (baseOffset, epoch) the batch with the smallest
  (seq, node) sets (lastOffset, digest); every node that appended another one is reported at its first seq.
* LeaderCompleteness (tla/KRaft.tla) — at each BecomeLeader of node l in epoch e (seq s), every batch
  some node counted committed (present in its replayed log, base offset below its highWatermark) at a seq
  < s in an epoch <= e is in l's replayed log at s; reported once per BecomeLeader at its seq, node = l
  (the rules: `Completeness`).
* Snapshots (KIP-630). An event with a `snapshotId` {endOffset, epoch} gives its node that snapshot:
  `CreateSnapshot` (taken from its own state machine), `HandleFetchSnapshotResponse` (installed from the
  leader's), `Restart` (loaded from disk). A node's *snapshot end* is the largest such endOffset so far; a
  node whose first state in the run already has `logStartOffset` > 0 loaded a snapshot before the trace
  began, and its snapshot end starts there. `logStartOffset` absent means 0 (traces before snapshots).
  - SnapshotAtCommittedOffset — a `CreateSnapshot` whose endOffset is above the node's highWatermark in
    that event (KRaftCore.create_snapshot / Kafka's KafkaRaftClient.createSnapshot refuse it): reported at
    its seq.
  - SnapshotAgreement — snapshots with the same endOffset have the same epoch (the first one, least (seq,
    node), sets it), an empty prefix's epoch is 0, and the committed batch holding offset endOffset-1 (a
    batch some node counted committed, as LeaderCompleteness counts them) has the snapshot's epoch.
    Reported at each disagreeing snapshot's seq (part of the per-run replay, `Completeness`).
  - LogStartCoveredBySnapshot — a state whose logStartOffset is above the node's snapshot end (KIP-630:
    records go only once a snapshot holds them; Kafka's KafkaMetadataLog.maybeClean): reported at the first
    such state per (node, logStartOffset).
  - SnapshotInstallResetsLog — the `HandleFetchSnapshotResponse` that installs snapshot (end, epoch) must show
    logStartOffset = logEndOffset = end (Kafka's log.truncateToLatestSnapshot); afterwards the node's states
    keep logStartOffset and logEndOffset >= end and its Fetch requests (`Send`, FetchOffset) never ask below
    end. The first later event breaking it is reported per (node, largest installed end).
  LeaderCompleteness counts a committed batch as held by a new leader when its log has it or the leader's
  snapshot end is past the batch's last offset (the snapshot holds it; SnapshotAgreement checks that it
  agrees); an install removes every batch of the node's replayed log.
* OnlineRequiresRegistration (KIP-631 "Register Flow") — a `BrokerEvent` whose broker state is
  Online is reported at its seq unless the same node's trace shows, at a smaller seq, a `BrokerEvent` of a
  RegisterBrokerRecord for that broker id and broker epoch whose offset is below the highest high watermark
  of that node's states up to the Online event (committed), or the broker epoch (KIP-631: the registration's
  offset) is below the largest logStartOffset or snapshotId endOffset of that node's states so far (the
  registration is in a snapshot it loaded, KIP-630). Reported with epoch = the broker epoch.

* Voter sets (KIP-853), from states that carry `voters` (the sorted ids in force: the latest VotersRecord of the
  node's log, committed or not) and `kraftVersion` >= 1 (absent: kraft.version 0, where none of these apply).
  Each node's *config entries* are replayed in seq order (`VoterConfigs`): a state whose `voters` differ from the
  node's previous state's, in an event that appended batches, adds the entry (offset, voters) with offset = the
  base offset of the last control batch appended (a VotersRecord is a control record; a leader appends each one
  in a step of its own); `log.truncatedTo` t removes entries at offsets >= t; a `Restart` or a snapshot install
  forgets them (the trace no longer shows which of the node's records are VotersRecords). The run's *committed
  prefix* at a seq is the highest highWatermark of any node's state so far (a restarted node's own starts at 0).
  - AtMostOneUncommittedConfig (KAFKA-16580's first simulation invariant; KIP-853 one change at a time) — a
    state whose node holds two or more entries at or above the committed prefix: reported once per (node,
    offsets), at its first seq.
  - CommittedConfigsDifferByOne (KAFKA-16580's second) — an entry is committed when its node's highWatermark
    passes it while it holds it (first one per offset wins); consecutive committed entries (by offset) differ
    by at most one voter; reported at the later one's commit (its node, epoch and seq).
  - SnapshotConfigAgreement (KIP-853 with KIP-630) — the `HandleFetchSnapshotResponse` that installs snapshot (end,
    epoch) empties the node's log, so its `voters` are the snapshot's: they must be those of the latest committed
    entry at an offset < end (Kafka's createSnapshot writes voterSetAtOffset(end - 1) into the header and
    handleFetchSnapshotResponse reloads it in the same step, KRaftControlRecordStateMachine.updateState). Judged only
    when some entry below end is committed (the trace does not name the initial set); reported at the install.
  - ElectionSafety, second half — a BecomeLeader whose state has `voters` V needs votedId = the leader in epoch e
    (states at seqs <= the BecomeLeader's) from a majority of V: the leader's quorum is a majority of its own
    voter set. Judged only when every node of V has states in the run (a node trace shows one node).

Order inside a node is seq order; a node's events of one run are expected in one file (true of node,
harness and simulator traces).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.spec.trace import FORMAT_VERSION, iter_lines, line_errors

SNAPSHOT_INVARIANTS = ("SnapshotAtCommittedOffset", "SnapshotAgreement", "LogStartCoveredBySnapshot",
                       "SnapshotInstallResetsLog")
SNAPSHOT_CONFIG_AGREEMENT = "SnapshotConfigAgreement"
RECONFIG_INVARIANTS = ("AtMostOneUncommittedConfig", "CommittedConfigsDifferByOne", SNAPSHOT_CONFIG_AGREEMENT)
INVARIANTS = ("ElectionSafety", "VoteOnce", "EpochMonotonic", "HighWatermarkMonotonic",
              "CommittedNeverTruncated", "LogMatching", "LeaderCompleteness", "OnlineRequiresRegistration",
              *SNAPSHOT_INVARIANTS, *RECONFIG_INVARIANTS)
REGISTER_BROKER_RECORD = "RegisterBrokerRecord"
CREATE_SNAPSHOT = "CreateSnapshot"
INSTALL_SNAPSHOT = "HandleFetchSnapshotResponse"  # with a snapshotId: the response that completed a download


@dataclass(frozen=True, order=True)
class Violation:
    invariant: str
    source: str
    run: str
    node: int
    epoch: int
    seq: int
    detail: str = field(compare=False, default="")

    def key(self) -> tuple[str, str, str, int, int, int]:
        return (self.invariant, self.source, self.run, self.node, self.epoch, self.seq)


@dataclass(frozen=True)
class FileInfo:
    path: str
    header: dict[str, Any] | None
    refused: str | None  # why the whole file is not a trace (None: it is one)
    newer_format: bool = False


@dataclass(frozen=True)
class Quarantined:
    file: str
    line: int
    reason: str


@dataclass
class CheckResult:
    violations: list[Violation]
    files: list[FileInfo]
    quarantined: list[Quarantined]
    lines_in: int = 0
    header_lines: int = 0
    accepted: int = 0

    @property
    def reconciled(self) -> bool:
        return self.lines_in == self.header_lines + self.accepted + len(self.quarantined)


def check_header(path: str, text: str | None) -> FileInfo:
    """Line 1 decides whether a file is a trace (the rules and messages of `trace.read_trace`)."""
    if text is None:
        return FileInfo(path, None, f"{path}: empty file, not a trace")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return FileInfo(path, None, f"{path}: line 1 is not JSON ({exc.msg}); not a kraft-tck trace")
    if not isinstance(obj, dict) or obj.get("type") != "header":
        return FileInfo(path, None, f"{path}: line 1 is not a trace header (expected {{\"type\": \"header\", ...}})")
    fmt = obj.get("format")
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > FORMAT_VERSION:
        return FileInfo(path, None, f"{path}: trace format {fmt} is newer than this kraft-tck reads"
                                    f" ({FORMAT_VERSION}); upgrade kraft-tck", newer_format=True)
    problems = line_errors(obj)
    if problems:
        return FileInfo(path, None, f"{path}: invalid trace header: {'; '.join(problems)}")
    return FileInfo(path, obj, None)


def event_problems(obj: Any, line: int, validate: bool) -> list[str]:
    if not isinstance(obj, dict):
        return ["not a JSON object (malformed or truncated line)"]
    if obj.get("type") == "header":
        return ["a second header line"]
    problems = line_errors(obj) if validate else []
    seq = obj.get("seq")
    if isinstance(seq, int) and seq != line - 2:
        problems.append(f"seq {seq} where {line - 2} was expected")
    return problems


# Batch identity in a trace: (baseOffset, epoch, lastOffset, digest or "").
Ident = tuple[int, int, int, str]


def batch_ident(b: dict[str, Any]) -> Ident:
    return (b["baseOffset"], b["epoch"], b["lastOffset"], b.get("digest") or "")


class Completeness:
    """LeaderCompleteness over one run (KRaft.tla ``LeaderCompleteness``), from what a trace holds.

    Each node's log is replayed from its state events in seq order: a `log.truncatedTo` t removes the
    batches whose last offset is >= t, then `log.appended` adds batches; a batch is *present* on that node
    from the seq of its append until the seq of the truncation that removes it. A node *counts a batch
    committed* at the first of its state events, while the batch is present, whose highWatermark is above
    the batch's base offset (the online checker's rule), in that state's epoch. Every BecomeLeader (node l,
    epoch e, seq s) then must have present, at s, every batch some node counted committed at a seq < s in
    an epoch <= e. One violation per such BecomeLeader, naming the first missing batch (least identity) and
    its first qualifying commit (least seq, then node).

    Seq orders events of different nodes: true of one-file runs (simulator, harness); a node's events of
    one run must come in seq order (`feed`). The Spark pipeline runs this very replay per run.
    """

    def __init__(self) -> None:
        # node -> present batches in append order: [ident, append seq]
        self.logs: dict[int, list[tuple[Ident, int]]] = defaultdict(list)
        # node -> heap of (baseOffset, append seq, ident) not yet counted committed in their presence
        self.pending: dict[int, list[tuple[int, int, Ident]]] = defaultdict(list)
        self.present: dict[int, set[tuple[Ident, int]]] = defaultdict(set)  # node -> {(ident, append seq)}
        # (node, ident) -> [[append seq, removal seq or None], ...]
        self.spans: dict[tuple[int, Ident], list[list[int | None]]] = defaultdict(list)
        self.commits: dict[Ident, list[tuple[int, int, int]]] = defaultdict(list)  # ident -> (seq, node, epoch)
        self.leaders: list[tuple[int, int, int]] = []  # (seq, node, epoch)
        # node -> the seqs at which its snapshot end rose, and the snapshot end from each on
        self.snap_seqs: dict[int, list[int]] = defaultdict(list)
        self.snap_ends: dict[int, list[int]] = defaultdict(list)
        self.snapshots: list[tuple[int, int, int, int, int]] = []  # (seq, node, endOffset, its epoch, node's epoch)

    def feed(self, node: int, seq: int, event: str, epoch: int, hw: int, truncated_to: int | None,
             appended: Iterable[Ident], snapshot: tuple[int, int] | None = None) -> None:
        """One state event of ``node`` (a node's events in seq order); ``appended``: its `log.appended`
        batches' identities (`batch_ident`); ``snapshot``: its `snapshotId` as (endOffset, epoch). An event
        that changes no log, has no snapshot, is no BecomeLeader and does not raise the node's high
        watermark above its previous state's changes nothing here (the pipeline leaves those out)."""
        log = self.logs[node]
        if snapshot is not None:
            end = snapshot[0]
            self.snapshots.append((seq, node, end, snapshot[1], epoch))
            ends = self.snap_ends[node]
            if not ends or end > ends[-1]:
                self.snap_seqs[node].append(seq)
                ends.append(end)
            if event == INSTALL_SNAPSHOT:  # the log is emptied and starts at the snapshot's end
                truncated_to = -1
        if truncated_to is not None and log:
            keep = []
            for ident, at in log:
                if ident[2] >= truncated_to:
                    self.present[node].discard((ident, at))
                    for span in self.spans[(node, ident)]:
                        if span[0] == at and span[1] is None:
                            span[1] = seq
                else:
                    keep.append((ident, at))
            log[:] = keep
        pending = self.pending[node]
        for ident in appended:
            log.append((ident, seq))
            self.present[node].add((ident, seq))
            self.spans[(node, ident)].append([seq, None])
            heapq.heappush(pending, (ident[0], seq, ident))
        present = self.present[node]
        while pending and pending[0][0] < hw:
            _, at, ident = heapq.heappop(pending)
            if (ident, at) in present:
                self.commits[ident].append((seq, node, epoch))
        if event == "BecomeLeader":
            self.leaders.append((seq, node, epoch))

    def _has(self, node: int, ident: Ident, seq: int) -> bool:
        if self.snapshot_end(node, seq) > ident[2]:
            return True  # the node's snapshot holds it
        return any(a is not None and a <= seq and (r is None or seq < r) for a, r in self.spans.get((node, ident), ()))

    def snapshot_end(self, node: int, seq: int) -> int:
        """The largest end offset of a snapshot ``node`` had at ``seq`` (0: none)."""
        i = bisect.bisect_right(self.snap_seqs.get(node, ()), seq)
        return self.snap_ends[node][i - 1] if i else 0

    def violations(self, src: str, run: str) -> list[Violation]:
        return self.completeness_violations(src, run) + self.agreement_violations(src, run)

    def agreement_violations(self, src: str, run: str) -> list[Violation]:
        """SnapshotAgreement: one per snapshot that disagrees with the first one of its end offset or with the
        committed batch holding its last offset."""
        out = []
        committed = sorted(ident for ident, recs in self.commits.items() if recs)
        bases = [c[0] for c in committed]
        first: dict[int, tuple[int, int, int]] = {}
        for seq, node, end, epoch, node_epoch in sorted(self.snapshots):
            f = first.setdefault(end, (seq, node, epoch))
            detail = None
            if epoch != f[2]:
                detail = snapshot_epochs_differ(end, epoch, f[1], f[2], f[0])
            elif end == 0 and epoch != 0:
                detail = f"snapshot of the empty prefix (end offset 0) has epoch {epoch}, not 0"
            else:
                i = bisect.bisect_right(bases, end - 1)
                for base, b_epoch, last, _ in reversed(committed[max(0, i - 2):i]):
                    if base <= end - 1 <= last and b_epoch != epoch:
                        detail = (f"snapshot (end offset {end}, epoch {epoch}) disagrees with the committed log: "
                                  f"offset {end - 1} is in the committed batch {base}..{last} of epoch {b_epoch}")
                        break
            if detail is not None:
                out.append(Violation("SnapshotAgreement", src, run, node, node_epoch, seq, detail))
        return out

    def completeness_violations(self, src: str, run: str) -> list[Violation]:
        out = []
        for seq, node, epoch in self.leaders:
            missing = []
            for ident, recs in self.commits.items():
                first = min(((q, n, ep) for q, n, ep in recs if q < seq and ep <= epoch), default=None)
                if first is not None and not self._has(node, ident, seq):
                    missing.append((ident, first))
            if missing:
                (base, b_epoch, last, _), (q, n, ep) = min(missing)
                out.append(Violation("LeaderCompleteness", src, run, node, epoch, seq, leader_incomplete(
                    epoch, len(missing), base, last, b_epoch, n, ep, q)))
        return out


def snapshot_epochs_differ(end: int, epoch: int, first_node: int, first_epoch: int, first_seq: int) -> str:
    return (f"snapshot with end offset {end} has epoch {epoch}; node {first_node}'s snapshot with that end offset "
            f"(seq {first_seq}) has epoch {first_epoch}")


def leader_incomplete(epoch: int, count: int, base: int, last: int, b_epoch: int, node: int, c_epoch: int,
                      c_seq: int) -> str:
    return (f"became leader of epoch {epoch} without {count} committed batch(es); the first: offsets {base}.."
            f"{last} of epoch {b_epoch}, counted committed by node {node} in epoch {c_epoch} at seq {c_seq}")


# Appended batch in the voter-set replay: (baseOffset, control).
Appended = tuple[int, bool]


class VoterConfigs:
    """AtMostOneUncommittedConfig and CommittedConfigsDifferByOne over one run (the rules: module docstring).

    Rows are collected as they come (a node's in seq order; the Spark pipeline hands them node by node) and
    judged in (seq, node) order by `violations`, so both callers get the same answer."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, str, int, int, int | None, tuple[Appended, ...], tuple[int, ...] | None,
                              int | None]] = []

    def feed(self, node: int, seq: int, event: str, epoch: int, hw: int, truncated_to: int | None,
             appended: Iterable[Appended], voters: Iterable[int] | None, installed: int | None = None) -> None:
        """One state event of ``node``: ``appended`` its `log.appended` (baseOffset, control) pairs, ``voters`` its
        state's `voters` (None: absent), ``installed``: the end offset of the snapshot the event installed (None:
        it installed none)."""
        self.rows.append((seq, node, event, epoch, hw, truncated_to, tuple(appended),
                          None if voters is None else tuple(voters), installed))

    def violations(self, src: str, run: str) -> list[Violation]:
        out: list[Violation] = []
        committed_prefix = 0
        prev: dict[int, tuple[int, ...]] = {}
        entries: dict[int, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)
        reported: set[tuple[int, tuple[int, ...]]] = set()
        committed: dict[int, tuple[tuple[int, ...], int, int, int]] = {}  # offset -> (voters, seq, node, epoch)
        for seq, node, event, epoch, hw, truncated_to, appended, voters, installed in sorted(self.rows,
                                                                                        key=lambda r: r[:2]):
            committed_prefix = max(committed_prefix, hw)
            if voters is None:
                continue
            mine = entries[node]
            if installed is not None or event == "Restart":
                mine.clear()
            if truncated_to is not None:
                mine[:] = [e for e in mine if e[0] < truncated_to]
            before = prev.get(node)
            prev[node] = voters
            if before is not None and voters != before and appended:
                controls = [base for base, control in appended if control]
                mine.append((controls[-1] if controls else appended[-1][0], voters))
            for off, ids in mine:
                if off < hw and off not in committed:
                    committed[off] = (ids, seq, node, epoch)
            if installed is not None:
                below = [off for off in committed if off < installed]
                if below and tuple(sorted(committed[max(below)][0])) != tuple(sorted(voters)):
                    at = max(below)
                    out.append(Violation(SNAPSHOT_CONFIG_AGREEMENT, src, run, node, epoch, seq, install_config_differs(
                        installed, sorted(voters), at, sorted(committed[at][0]))))
            open_ = tuple(off for off, _ in mine if off >= committed_prefix)
            if len(open_) > 1 and (node, open_) not in reported:
                reported.add((node, open_))
                out.append(Violation("AtMostOneUncommittedConfig", src, run, node, epoch, seq,
                                     configs_uncommitted(list(open_), committed_prefix)))
        ordered = sorted(committed.items())
        for (a_off, (a_ids, *_)), (b_off, (b_ids, b_seq, b_node, b_epoch)) in itertools.pairwise(ordered):
            if len(set(a_ids) ^ set(b_ids)) > 1:
                out.append(Violation("CommittedConfigsDifferByOne", src, run, b_node, b_epoch, b_seq,
                                     configs_differ(a_off, list(a_ids), b_off, list(b_ids))))
        return out


def configs_uncommitted(offsets: list[int], committed: int) -> str:
    """KIP-853 checks' texts, shared by this checker, the Spark pipeline and the simulator."""
    return (f"{len(offsets)} VotersRecords at offsets {offsets} lie at or above the committed prefix ({committed}): "
            "a second voter change before the first one committed")


def configs_differ(a_off: int, a: list[int], b_off: int, b: list[int]) -> str:
    where = "the initial voter set" if a_off < 0 else f"the committed VotersRecord at {a_off}"
    return (f"{where} {a} and the committed VotersRecord at {b_off} {b} differ by "
            f"{len(set(a) ^ set(b))} voters (at most 1 allowed)")


def snapshot_config_differs(end: int, epoch: int, have: list[int] | None, at: int, want: list[int]) -> str:
    where = "the initial voter set" if at < 0 else f"the committed VotersRecord at {at}"
    holds = "no voter set" if have is None else f"the voter set {have}"
    return (f"snapshot (end offset {end}, epoch {epoch}) holds {holds}; the committed log's in force at offset "
            f"{end - 1} is {where} {want}")


def install_config_differs(end: int, have: list[int], at: int, want: list[int]) -> str:
    where = "the initial voter set" if at < 0 else f"the committed VotersRecord at {at}"
    return (f"installed the snapshot with end offset {end} and holds the voter set {have}; the committed log's in "
            f"force at offset {end - 1} is {where} {want}")


def voters_after_load(end: int, epoch: int, have: list[int], want: list[int]) -> str:
    return (f"after loading snapshot (end offset {end}, epoch {epoch}) its voter set in force is {have}, not {want} "
            "(the snapshot's, or a later VotersRecord of its log)")


def too_few_votes(node: int, epoch: int, granted: list[int], voters: list[int]) -> str:
    return (f"node {node} became leader of epoch {epoch} with votes from {granted}, not a majority of its voter "
            f"set {voters}")


class _State:
    """Everything the checks keep between events: small per-node and per-epoch summaries."""

    def __init__(self) -> None:
        self.out: list[Violation] = []
        # (src, run, epoch) -> claimant -> first (seq, reporting node); and the overall first claim.
        self.claims: dict[tuple[str, str, int], dict[int, int]] = defaultdict(dict)
        self.first_claim: dict[tuple[str, str, int], tuple[int, int, int]] = {}
        self.votes: dict[tuple[str, str, int, int], dict[int, int]] = defaultdict(dict)
        self.last: dict[tuple[str, str, int], tuple[int, int]] = {}  # node -> (epoch, hw) of previous state
        # (src, run, baseOffset, epoch) -> (lastOffset, digest) -> node -> first seq
        self.batches: dict[tuple[str, str, int, int], dict[tuple[int, str], dict[int, int]]] = {}
        self.max_hw: dict[tuple[str, str, int], int] = {}  # node -> highest high watermark so far
        # (src, run, node, broker id, broker epoch) -> offset of the RegisterBrokerRecord the node reported
        self.registrations: dict[tuple[str, str, int, int, int], int] = {}
        self.completeness: dict[tuple[str, str], Completeness] = {}
        # KIP-853: the voter-set replay per run; BecomeLeaders with their voter set, (seq, node, epoch, voters);
        # the nodes that report states in each run.
        self.configs: dict[tuple[str, str], VoterConfigs] = {}
        self.leaders: dict[tuple[str, str], list[tuple[int, int, int, tuple[int, ...]]]] = defaultdict(list)
        self.nodes: dict[tuple[str, str], set[int]] = defaultdict(set)
        # Snapshots, per (src, run, node): the largest snapshot end, the largest installed snapshot end, and
        # what was reported once already ((node, logStartOffset) / (node, installed end)).
        self.snap_end: dict[tuple[str, str, int], int] = {}
        self.installed: dict[tuple[str, str, int], int] = {}
        self.uncovered: set[tuple[str, str, int, int]] = set()
        self.below_install: set[tuple[str, str, int, int]] = set()
        # The largest snapshot end or log start each node showed so far: registrations below it are in a snapshot.
        self.covered: dict[tuple[str, str, int], int] = {}

    def event(self, src: str, run: str, ev: dict[str, Any]) -> None:
        st = ev.get("state")
        if st is None:
            if ev.get("event") == "BrokerEvent":
                self.broker_event(src, run, ev)
            elif ev.get("event") == "Send":
                self.fetch_sent(src, run, ev)
            return
        seq, node, epoch = ev["seq"], ev["node"], st["epoch"]
        hw = st["highWatermark"]
        self.snapshots(src, run, ev, st, (src, run, node) not in self.last)
        if hw > self.max_hw.get((src, run, node), 0):
            self.max_hw[(src, run, node)] = hw
        claimants = set()
        if st["role"] == "Leader":
            claimants.add(node)
        if st["leaderId"] != -1:
            claimants.add(st["leaderId"])
        for c in claimants:
            key = (src, run, epoch)
            per = self.claims[key]
            if c not in per or seq < per[c]:
                per[c] = seq
            cand = (seq, node, c)
            if key not in self.first_claim or cand < self.first_claim[key]:
                self.first_claim[key] = cand
        if st["votedId"] != -1:
            per_vote = self.votes[(src, run, node, epoch)]
            v = st["votedId"]
            if v not in per_vote or seq < per_vote[v]:
                per_vote[v] = seq
        prev = self.last.get((src, run, node))
        log = ev.get("log") or {}
        if prev is not None:
            p_epoch, p_hw = prev
            if epoch < p_epoch:
                self.out.append(Violation("EpochMonotonic", src, run, node, epoch, seq,
                                          f"epoch {p_epoch} -> {epoch}"))
            if hw < p_hw and ev["event"] != "Restart":
                self.out.append(Violation("HighWatermarkMonotonic", src, run, node, epoch, seq,
                                          f"high watermark {p_hw} -> {hw}"))
            t = log.get("truncatedTo")
            if t is not None and t < p_hw:
                self.out.append(Violation("CommittedNeverTruncated", src, run, node, epoch, seq,
                                          f"truncated to {t} below high watermark {p_hw}"))
        self.last[(src, run, node)] = (epoch, hw)
        lc = self.completeness.get((src, run))
        if lc is None:
            lc = self.completeness[(src, run)] = Completeness()
        sid = ev.get("snapshotId")
        lc.feed(node, seq, ev["event"], epoch, hw, log.get("truncatedTo"),
                [batch_ident(b) for b in log.get("appended") or ()],
                None if sid is None else (sid["endOffset"], sid["epoch"]))
        self.nodes[(src, run)].add(node)
        voters = st.get("voters") if st.get("kraftVersion", 0) >= 1 else None
        if voters is not None:
            vc = self.configs.get((src, run))
            if vc is None:
                vc = self.configs[(src, run)] = VoterConfigs()
            vc.feed(node, seq, ev["event"], epoch, hw, log.get("truncatedTo"),
                    [(b["baseOffset"], bool(b.get("control"))) for b in log.get("appended") or ()], voters,
                    sid["endOffset"] if sid is not None and ev["event"] == INSTALL_SNAPSHOT else None)
            if ev["event"] == "BecomeLeader":
                self.leaders[(src, run)].append((seq, node, epoch, tuple(voters)))
        for b in log.get("appended") or ():
            digest = b.get("digest")
            if digest is None:
                continue
            sigs = self.batches.setdefault((src, run, b["baseOffset"], b["epoch"]), {})
            nodes = sigs.setdefault((b["lastOffset"], digest), {})
            if node not in nodes or seq < nodes[node]:
                nodes[node] = seq

    def snapshots(self, src: str, run: str, ev: dict[str, Any], st: dict[str, Any], first: bool) -> None:
        """SnapshotAtCommittedOffset, LogStartCoveredBySnapshot and SnapshotInstallResetsLog on one state event
        (``first``: the node's first state in the run)."""
        seq, node, epoch, name = ev["seq"], ev["node"], st["epoch"], ev["event"]
        key = (src, run, node)
        start, end_offset = st.get("logStartOffset", 0), st["logEndOffset"]
        sid = ev.get("snapshotId")
        covered = max(start, sid["endOffset"] if sid is not None else 0)
        if covered > self.covered.get(key, 0):
            self.covered[key] = covered
        if sid is not None:
            end = sid["endOffset"]
            if name == CREATE_SNAPSHOT and end > st["highWatermark"] and end > 0:
                self.out.append(Violation("SnapshotAtCommittedOffset", src, run, node, epoch, seq,
                                          snapshot_uncommitted(end, sid["epoch"], st["highWatermark"])))
            self.snap_end[key] = max(self.snap_end.get(key, 0), end)
            if name == INSTALL_SNAPSHOT:
                if not start == end_offset == end:
                    self.out.append(Violation("SnapshotInstallResetsLog", src, run, node, epoch, seq,
                                              install_not_reset(end, start, end_offset)))
                self.installed[key] = max(self.installed.get(key, 0), end)
        elif first and start > 0:
            self.snap_end[key] = start  # loaded from disk before the trace began
        if start > self.snap_end.get(key, 0) and (*key, start) not in self.uncovered:
            self.uncovered.add((*key, start))
            self.out.append(Violation("LogStartCoveredBySnapshot", src, run, node, epoch, seq,
                                      log_start_uncovered(start, self.snap_end.get(key, 0))))
        inst = self.installed.get(key)
        if (inst is not None and not (sid is not None and name == INSTALL_SNAPSHOT)
                and (start < inst or end_offset < inst) and (*key, inst) not in self.below_install):
            self.below_install.add((*key, inst))
            self.out.append(Violation("SnapshotInstallResetsLog", src, run, node, epoch, seq,
                                      log_below_install(start, end_offset, inst)))

    def fetch_sent(self, src: str, run: str, ev: dict[str, Any]) -> None:
        """SnapshotInstallResetsLog: a node that installed a snapshot never fetches below its end."""
        msg = ev.get("msg") or {}
        key = (src, run, ev["node"])
        inst = self.installed.get(key)
        if inst is None or msg.get("api") != "Fetch" or msg.get("kind") != "request" or msg.get("from") != ev["node"]:
            return
        offset, epoch = fetch_position(msg.get("body"))
        if offset is not None and offset < inst and (*key, inst) not in self.below_install:
            self.below_install.add((*key, inst))
            self.out.append(Violation("SnapshotInstallResetsLog", src, run, ev["node"], -1 if epoch is None else epoch,
                                      ev["seq"], fetch_below_install(offset, inst)))

    def broker_event(self, src: str, run: str, ev: dict[str, Any]) -> None:
        b: dict[str, Any] = ev.get("broker") or {}
        node, seq = ev["node"], ev["seq"]
        broker: int = b.get("brokerId", -1)
        epoch: int = b.get("brokerEpoch", -1)
        key = (src, run, node, broker, epoch)
        if b.get("state") == "Online":
            offset = self.registrations.get(key)
            if offset is None and epoch < self.covered.get((src, run, node), 0):
                offset = epoch  # KIP-630: registered in the snapshot the node loaded (broker epoch = its offset)
            hw = self.max_hw.get((src, run, node), 0)
            if offset is None:
                self.out.append(Violation("OnlineRequiresRegistration", src, run, node, epoch, seq,
                                          online_unregistered(broker, epoch, node)))
            elif offset >= hw:
                self.out.append(Violation("OnlineRequiresRegistration", src, run, node, epoch, seq,
                                          online_uncommitted(broker, epoch, node, offset, hw)))
        if b.get("record") == REGISTER_BROKER_RECORD and key not in self.registrations:
            self.registrations[key] = b.get("offset", epoch)

    def finish(self) -> list[Violation]:
        out = list(self.out)
        for (src, run, epoch), per in self.claims.items():
            first_seq, _, leader = self.first_claim[(src, run, epoch)]
            for c, seq in per.items():
                if c != leader:
                    out.append(Violation("ElectionSafety", src, run, c, epoch, seq,
                                         f"node {c} claims leadership of epoch {epoch};"
                                         f" node {leader} was its leader first (seq {first_seq})"))
        for (src, run, node, epoch), per_vote in self.votes.items():
            first = min(per_vote.items(), key=lambda kv: (kv[1], kv[0]))
            for v, seq in per_vote.items():
                if v != first[0]:
                    out.append(Violation("VoteOnce", src, run, node, epoch, seq,
                                         f"node {node} voted for {v} in epoch {epoch} after voting for {first[0]}"))
        for (src, run, base, epoch), sigs in self.batches.items():
            if len(sigs) < 2:
                continue
            first_seq, first_node, first_sig = min((seq, n, sig) for sig, nodes in sigs.items()
                                                   for n, seq in nodes.items())
            for sig, nodes in sigs.items():
                if sig == first_sig:
                    continue
                for n, seq in nodes.items():
                    out.append(Violation("LogMatching", src, run, n, epoch, seq,
                                         f"batch at offset {base} epoch {epoch}: digest {sig[1]} (last offset"
                                         f" {sig[0]}) on node {n}, {first_sig[1]} (last offset {first_sig[0]})"
                                         f" on node {first_node} at seq {first_seq}"))
        for (src, run), lc in self.completeness.items():
            out.extend(lc.violations(src, run))
        for (src, run), vc in self.configs.items():
            out.extend(vc.violations(src, run))
        for (src, run), leaders in self.leaders.items():
            out.extend(self.leader_quorums(src, run, leaders))
        return sorted_violations(out)

    def leader_quorums(self, src: str, run: str, leaders: list[tuple[int, int, int, tuple[int, ...]]]
                       ) -> list[Violation]:
        """ElectionSafety's second half (KIP-853): each BecomeLeader holds votes of a majority of its voter set."""
        out = []
        seen = self.nodes[(src, run)]
        for seq, node, epoch, voters in leaders:
            if not set(voters) <= seen:
                continue  # not every voter's states are in this run: its votes cannot be counted
            granted = sorted(v for v in voters
                             if self.votes.get((src, run, v, epoch), {}).get(node, seq + 1) <= seq)
            if len(granted) <= len(voters) // 2:
                out.append(Violation("ElectionSafety", src, run, node, epoch, seq,
                                     too_few_votes(node, epoch, granted, list(voters))))
        return out


def fetch_position(body: Any) -> tuple[int | None, int | None]:
    """A Fetch request body's (FetchOffset, CurrentLeaderEpoch) of its first partition (None when absent); a
    body without Topics (a synthetic trace's) has them at the top."""
    try:
        part = body["Topics"][0]["Partitions"][0] if "Topics" in body else body
    except (KeyError, IndexError, TypeError):
        return None, None
    if not isinstance(part, dict):
        return None, None
    offset, epoch = part.get("FetchOffset"), part.get("CurrentLeaderEpoch")
    return (offset if isinstance(offset, int) else None), (epoch if isinstance(epoch, int) else None)


# The snapshot checks' texts, shared by this checker, the Spark pipeline and the simulator.
def snapshot_uncommitted(end: int, epoch: int, hw: int) -> str:
    return f"snapshot (end offset {end}, epoch {epoch}) taken above the high watermark {hw}"


def install_not_reset(end: int, start: int, log_end: int) -> str:
    return (f"installed snapshot with end offset {end} but its log starts at {start} and ends at {log_end} "
            f"(both must be {end})")


def log_start_uncovered(start: int, snap_end: int) -> str:
    return f"log start offset {start} is above the end of its latest snapshot ({snap_end})"


def log_below_install(start: int, log_end: int, inst: int) -> str:
    return f"log start {start} / log end {log_end} below the end offset {inst} of the snapshot it installed"


def fetch_below_install(offset: int, inst: int) -> str:
    return f"fetches at offset {offset}, below the end offset {inst} of the snapshot it installed"


def online_unregistered(broker: int, epoch: int, node: int) -> str:
    """OnlineRequiresRegistration's texts, shared by this checker, the Spark pipeline and the simulator."""
    return (f"broker {broker} reported Online with broker epoch {epoch}, but node {node} shows no earlier "
            f"RegisterBrokerRecord for broker {broker} epoch {epoch}")


def online_uncommitted(broker: int, epoch: int, node: int, offset: int, hw: int) -> str:
    return (f"broker {broker} reported Online with broker epoch {epoch}, but its RegisterBrokerRecord (offset "
            f"{offset}) is not below node {node}'s high watermark {hw}")


def sorted_violations(vs: Iterable[Violation]) -> list[Violation]:
    return sorted(vs, key=lambda v: (v.invariant, v.source, v.run, v.seq, v.node, v.epoch))


def trace_files(input_dir: str | os.PathLike[str]) -> list[Path]:
    from kraft_tck.traces.pipeline.files import list_trace_files

    return list_trace_files(input_dir)


def check_paths(paths: Iterable[Path], *, validate: bool = True) -> CheckResult:
    """Check every trace file in `paths` in this process; `validate=False` skips JSON Schema validation."""
    state = _State()
    result = CheckResult([], [], [])
    for path in paths:
        lines = iter_lines(Path(path))
        first = next(lines, None)
        info = check_header(str(path), first[1] if first else None)
        result.files.append(info)
        if first is not None:
            result.lines_in += 1
            if info.refused:
                result.quarantined.append(Quarantined(str(path), 1, f"file refused: {info.refused}"))
            else:
                result.header_lines += 1
        head = info.header or {}
        src, run = head.get("source", ""), head.get("run", "")
        for n, text in lines:
            result.lines_in += 1
            if info.refused:
                result.quarantined.append(Quarantined(str(path), n, f"file refused: {info.refused}"))
                continue
            if not text.strip():
                result.quarantined.append(Quarantined(str(path), n, "empty line"))
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                obj = None
            problems = event_problems(obj, n, validate)
            if problems:
                result.quarantined.append(Quarantined(str(path), n, "; ".join(problems)))
                continue
            result.accepted += 1
            state.event(src, run, obj)
    result.violations = state.finish()
    return result
