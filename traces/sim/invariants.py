"""Online safety checks: run after every step of every node, stop the seed at the first violation.

Names are the vocabulary's (spec/README.md "Invariants"); the Spark pipeline checks the same properties
offline over trace files, this checker checks them on the live objects while the simulation runs.

KIP-853 (dynamic voter sets): AtMostOneUncommittedConfig, CommittedConfigsDifferByOne, and ElectionSafety's
second half (a leader holds the votes of a majority of its own voter set) — ``check_configs``,
``_committed_config``, ``check_leader_quorum``.

OnlineRequiresRegistration (KIP-631 "Register Flow" / "Controller Action"): a node reports a
broker Online only after it reported that broker's RegisterBrokerRecord with the same broker epoch, at an
offset below the node's high watermark — and the log itself holds that committed registration.

HighWatermarkMonotonic is checked per node *incarnation*: the high watermark is volatile (Kafka keeps
it in memory; a restarted node starts from 0 and relearns it from the leader), so a restart may lower
it. What must survive a restart — that a committed entry is never lost — is CommittedNeverTruncated,
checked across all nodes and all time.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.registry import REGISTER, BrokerChange, BrokerState, decode_broker_record
from kraft_tck.spec.records import RecordBatch, batch_digest
from kraft_tck.traces.checker import (
    RECONFIG_INVARIANTS,
    SNAPSHOT_INVARIANTS,
    configs_differ,
    configs_uncommitted,
    fetch_below_install,
    install_config_differs,
    install_not_reset,
    log_below_install,
    log_start_uncovered,
    online_uncommitted,
    online_unregistered,
    snapshot_config_differs,
    snapshot_epochs_differ,
    snapshot_uncommitted,
    too_few_votes,
)
from kraft_tck.traces.sim.disk import DiskLog, voters_in
from kraft_tck.traces.sim.statemachine import EMPTY_DIGEST, commit_digest

INVARIANTS: tuple[str, ...] = (
    "ElectionSafety",
    "VoteOnce",
    "LogMatching",
    "LeaderCompleteness",
    "CommittedNeverTruncated",
    "HighWatermarkMonotonic",
    "EpochMonotonic",
    "OnlineRequiresRegistration",
    *SNAPSHOT_INVARIANTS,
    *RECONFIG_INVARIANTS,
)


class InvariantViolation(Exception):
    """A safety property broke. Carries everything needed to reproduce and locate it."""

    def __init__(self, invariant: str, seed: int, node: int, epoch: int, seq: int, ts: int, detail: str):
        self.invariant = invariant
        self.seed = seed
        self.node = node
        self.epoch = epoch
        self.seq = seq
        self.ts = ts
        self.detail = detail
        super().__init__(
            f"{invariant} violated: seed {seed}, node {node}, epoch {epoch}, trace seq {seq}, "
            f"t={ts}ms: {detail}"
        )


@dataclass
class _BatchSeen:
    batch: RecordBatch
    digest: str | None = None

    def digest_of(self) -> str:
        if self.digest is None:
            self.digest = batch_digest(self.batch)
        return self.digest


def _same_batch(seen: _BatchSeen, other: RecordBatch) -> bool:
    """Are these the same log entries?  KRaft.tla's entries are equal when their epoch and value are
    (``spec.records.batch_digest``: same epoch, same digest), so two batches at one offset are the same
    exactly when they have the same epoch, the same offset range and the same records digest.  Records
    byte-identical to another epoch's at the same offset are other entries (an older leader's uncommitted
    batch that a follower truncates is not the newer leader's committed one).  Identity first (followers
    share the leader's batch objects in the simulator): digests only when two objects could be equal."""
    mine = seen.batch
    if mine is other:
        return True
    return (
        mine.partition_leader_epoch == other.partition_leader_epoch
        and mine.base_offset == other.base_offset
        and mine.last_offset == other.last_offset
        and seen.digest_of() == batch_digest(other)
    )


@dataclass
class InvariantChecker:
    """Global history of one run; ``seed`` is only carried into the violation report."""

    seed: int
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader id
    votes: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, epoch) -> candidate
    epochs: dict[int, int] = field(default_factory=dict)  # node -> last epoch seen
    hws: dict[int, int] = field(default_factory=dict)  # node -> high watermark in this incarnation
    batches: dict[tuple[int, int], _BatchSeen] = field(default_factory=dict)  # (base, epoch) -> first seen
    committed: dict[int, _BatchSeen] = field(default_factory=dict)  # base offset -> committed batch
    committed_end: int = 0  # every offset below this was below some node's high watermark
    # base offset of a committed batch -> the lowest epoch a node was in when it counted it committed
    committed_epoch: dict[int, int] = field(default_factory=dict)
    max_hws: dict[int, int] = field(default_factory=dict)  # node -> highest high watermark, across restarts
    # (node, broker id, broker epoch) -> offset of the RegisterBrokerRecord the node reported for it
    registrations: dict[tuple[int, int, int], int] = field(default_factory=dict)
    _last_state: dict[int, tuple[int, str, int, int]] = field(default_factory=dict)  # check_state's fast path
    # KIP-630. The committed log's running digest (``statemachine.commit_digest``) at each committed batch's end,
    # the committed batches' base offsets in order (for lookups below a node's log start), and the first snapshot
    # seen per end offset: (epoch, digest, count, node, seq).
    commit_digests: dict[int, bytes] = field(default_factory=lambda: {0: EMPTY_DIGEST})
    committed_bases: list[int] = field(default_factory=list)
    _digest: bytes = EMPTY_DIGEST
    _digest_end: int = 0
    snapshots: dict[int, tuple[int, bytes, int, int, int]] = field(default_factory=dict)
    # KIP-853. The voter set the cluster was formatted with (offset -1; None: kraft.version 0, static voters), and
    # the committed VotersRecords as (base offset, voter ids), in offset order.
    initial_voters: frozenset[int] | None = None
    committed_configs: list[tuple[int, frozenset[int]]] = field(default_factory=list)

    def fail(
        self, invariant: str, node: int, epoch: int, seq: int, ts: int, detail: str
    ) -> InvariantViolation:
        return InvariantViolation(invariant, self.seed, node, epoch, seq, ts, detail)

    # ------------------------------------------------------------------------------------- per event

    def restarted(self, node: int) -> None:
        """The node lost its volatile state; its high watermark starts over."""
        self.hws.pop(node, None)
        self._last_state.pop(node, None)

    def check_state(self, node: int, state: Mapping[str, Any], seq: int, ts: int) -> None:
        """The state a node reports right after one of its actions."""
        # Most steps leave these four as they were, and then every check below passed already.
        key = (state["epoch"], state["role"], state["votedId"], state["highWatermark"])
        if self._last_state.get(node) == key:
            return
        self._last_state[node] = key
        epoch = state["epoch"]
        last = self.epochs.get(node)
        if last is not None and epoch < last:
            raise self.fail("EpochMonotonic", node, epoch, seq, ts, f"epoch went from {last} to {epoch}")
        self.epochs[node] = epoch
        if state["role"] == "Leader":
            leader = self.leaders.setdefault(epoch, node)
            if leader != node:
                raise self.fail(
                    "ElectionSafety",
                    node,
                    epoch,
                    seq,
                    ts,
                    f"nodes {leader} and {node} both led epoch {epoch}",
                )
        voted = state["votedId"]
        if voted >= 0:
            self._record_vote(node, epoch, voted, seq, ts, "voted for")
        hw = state["highWatermark"]
        prev_hw = self.hws.get(node)
        if prev_hw is not None and hw < prev_hw:
            raise self.fail(
                "HighWatermarkMonotonic", node, epoch, seq, ts, f"high watermark went from {prev_hw} to {hw}"
            )
        self.hws[node] = hw

    def check_vote_granted(self, node: int, epoch: int, candidate: int, seq: int, ts: int) -> None:
        """A granted VoteResponse leaving ``node``: the vote itself, whether or not the state shows it."""
        self._record_vote(node, epoch, candidate, seq, ts, "granted a vote to")

    def check_restart_vote(self, node: int, epoch: int, leader_id: int, voted_id: int, seq: int, ts: int,
                           what: str) -> None:
        """VoteOnce across a restart: a node that granted a vote in epoch e and is back in e knowing no leader must
        still hold that vote — in what it reads back from its disk (``what`` "read back": its ElectionState) and in
        the state its core resumes in (``what`` "resumed"). KIP-595 "Vote Request Handling" and "Persistence": the
        vote is durable before the response leaves and is read back at a restart; KRaft.tla's Restart restores
        votedId, the durable half of VoteOnce's evidence. Without it the voter may grant another candidate of e, a
        second vote (a later step shows it, if some candidate of e still asks). A node that learned the leader of e
        (leaderId set: Kafka's FollowerState keeps no vote) refuses every other candidate of e anyway."""
        vote = self.votes.get((node, epoch))
        if vote is None or leader_id >= 0 or voted_id == vote:
            return
        raise self.fail(
            "VoteOnce", node, epoch, seq, ts,
            f"restarted: {what} epoch {epoch} with votedId {voted_id} and no leader, after granting its vote of "
            f"epoch {epoch} to {vote}: it can vote again in epoch {epoch}",
        )

    def _record_vote(self, node: int, epoch: int, candidate: int, seq: int, ts: int, what: str) -> None:
        """VoteOnce: one candidate per (node, epoch), across restarts."""
        prev = self.votes.setdefault((node, epoch), candidate)
        if prev != candidate:
            raise self.fail(
                "VoteOnce", node, epoch, seq, ts, f"{what} {candidate} in epoch {epoch} after voting for {prev}"
            )

    # ------------------------------------------------------------------------------------- log changes

    def check_append(self, node: int, batch: RecordBatch, seq: int, ts: int) -> None:
        epoch, base = batch.partition_leader_epoch, batch.base_offset
        key = (base, epoch)
        seen = self.batches.get(key)
        if seen is None:
            self.batches[key] = _BatchSeen(batch)
        elif not _same_batch(seen, batch):
            raise self.fail(
                "LogMatching",
                node,
                epoch,
                seq,
                ts,
                f"offset {base} epoch {epoch} holds batch [{base}..{batch.last_offset}] digest "
                f"{batch_digest(batch)}, elsewhere [{base}..{seen.batch.last_offset}] "
                f"digest {seen.digest_of()}",
            )
        # CommittedNeverTruncated as KRaft.tla states it: no step removes or rewrites an entry below the
        # node's own high watermark.  An append rewrites nothing above its log end, so only an append
        # below the node's high watermark breaks it.  A deposed leader that still appends in its old
        # epoch at an offset a newer leader has committed meanwhile breaks nothing: it never held those
        # entries as committed, and it truncates its own batch once it follows the new leader (should it
        # ever count it as committed, ``note_high_watermark`` finds it differs from the committed one).
        hw = self.hws.get(node, 0)
        if base < hw:
            raise self.fail(
                "CommittedNeverTruncated",
                node,
                epoch,
                seq,
                ts,
                f"appended a batch at offset {base}, below its own high watermark {hw}: it rewrites "
                "committed entries",
            )

    def check_truncate(self, node: int, offset: int, log: DiskLog, epoch: int, seq: int, ts: int) -> None:
        """``log``: the node's durable log before the truncation.

        Only removing a *committed* entry is a violation: a node may hold a stale, never-committed entry
        at an offset that was committed elsewhere with other records, and truncating that is the repair. So is
        removing an entry first counted committed in a later epoch than the node's, below the node's own high
        watermark never: a node behind in epochs that follows a deposed leader (which need not hold entries committed
        after its epoch: Leader Completeness binds later leaders only) repairs its log to that leader's and fetches
        the entry back from a later one; no node that counted it committed is in such an epoch any more.
        """
        if offset >= self.committed_end or offset >= log.end_offset:
            return
        own_hw = self.hws.get(node, 0)
        for batch in log.batches_from(offset):
            base = batch.base_offset
            if base >= self.committed_end:
                break
            seen = self.committed.get(base)
            if seen is not None and _same_batch(seen, batch) and (
                self.committed_epoch.get(base, epoch) <= epoch or base < own_hw
            ):
                raise self.fail(
                    "CommittedNeverTruncated",
                    node,
                    epoch,
                    seq,
                    ts,
                    f"truncated to {offset} (log end {log.end_offset}), removing the committed batch "
                    f"[{base}..{batch.last_offset}] of epoch {batch.partition_leader_epoch} "
                    f"(offsets below {self.committed_end} are committed)",
                )

    def note_high_watermark(
        self, node: int, prev_hw: int, hw: int, log: DiskLog, epoch: int, seq: int, ts: int
    ) -> None:
        """The node's high watermark moved from ``prev_hw`` to ``hw``: its entries below ``hw`` are
        committed. Entries already committed elsewhere must be the same ones; new ones are remembered.
        ``log``: the node's log after the step."""
        if hw > self.max_hws.get(node, 0):
            self.max_hws[node] = hw
        if hw <= prev_hw:
            return
        if hw > log.end_offset:
            # KRaft.tla CommittedNeverTruncated: Len(log'[i]) >= Committed(i) — a node's log holds all it counts
            # committed (KIP-595 "Fetch Response Handling": a follower's high watermark is min(the leader's, its
            # log end)).
            raise self.fail("CommittedNeverTruncated", node, epoch, seq, ts,
                            f"high watermark {hw} is above its log end {log.end_offset}: it counts offsets it does not "
                            "hold as committed")
        for batch in log.batches_from(prev_hw):
            base = batch.base_offset
            if base >= hw:
                break
            seen = self.committed.get(base)
            if self.committed_epoch.get(base, epoch) >= epoch:
                self.committed_epoch[base] = epoch
            if seen is None:
                if base < self.committed_end:
                    raise self.fail(
                        "CommittedNeverTruncated",
                        node,
                        epoch,
                        seq,
                        ts,
                        f"node {node} treats a batch at {base} as committed, "
                        "but no committed batch starts there",
                    )
                self.committed[base] = _BatchSeen(batch)
                self.committed_bases.append(base)
                if batch.is_control:
                    ids = voters_in(batch)
                    if ids is not None:
                        self._committed_config(node, base, ids, epoch, seq, ts)
                if base == self._digest_end:
                    self._digest = commit_digest(self._digest, batch)
                    self._digest_end = batch.last_offset + 1
                    self.commit_digests[self._digest_end] = self._digest
            elif not _same_batch(seen, batch):
                raise self.fail(
                    "CommittedNeverTruncated",
                    node,
                    epoch,
                    seq,
                    ts,
                    f"node {node} has offset {base} below its high watermark {hw} with records that differ "
                    "from the committed ones",
                )
        self.committed_end = max(self.committed_end, hw)

    def check_leader_completeness(
        self, node: int, epoch: int, log: DiskLog, seq: int, ts: int, covered: int = 0
    ) -> None:
        """KRaft.tla LeaderCompleteness, when ``node`` becomes leader of ``epoch`` (``log``: its log then):
        every batch some node counted committed while in an epoch <= ``epoch`` is in the new leader's log,
        the same batch at the same offset, or in its snapshot: ``covered`` is the end offset of its latest
        snapshot (KIP-630; ``check_snapshot`` checks that a snapshot agrees with the committed log). (Raft's
        election restriction is what guarantees it: a vote only for a log at least as up to date as the
        voter's.)"""
        for base, seen in self.committed.items():
            if self.committed_epoch.get(base, 0) > epoch or seen.batch.last_offset < covered:
                continue
            mine = log.batch_at(base)
            if mine is None or mine.base_offset != base or not _same_batch(seen, mine):
                have = "nothing" if mine is None else (
                    f"batch [{mine.base_offset}..{mine.last_offset}] of epoch {mine.partition_leader_epoch}")
                raise self.fail(
                    "LeaderCompleteness",
                    node,
                    epoch,
                    seq,
                    ts,
                    f"became leader of epoch {epoch} without the committed batch [{base}..{seen.batch.last_offset}] "
                    f"of epoch {seen.batch.partition_leader_epoch} (committed in epoch "
                    f"{self.committed_epoch.get(base)}); its log has {have} there (log end {log.end_offset})",
                )

    # ------------------------------------------------------------------------------------- voter sets (KIP-853)

    def check_configs(self, node: int, log: DiskLog, epoch: int, seq: int, ts: int) -> None:
        """AtMostOneUncommittedConfig (KAFKA-16580's first simulation invariant; KIP-853 "one voter change at a
        time"): at most one VotersRecord of ``node``'s log lies at or above the committed prefix. The committed
        prefix is the highest high watermark any node reached (``committed_end``), not the node's own: a
        restarted node's high watermark starts at 0 although its log holds committed VotersRecords."""
        configs, end = log.configs, self.committed_end
        if len(configs) < 2 or configs[-2][0] < end:
            return
        offsets = [off for off, _ in configs if off >= end]
        raise self.fail("AtMostOneUncommittedConfig", node, epoch, seq, ts, configs_uncommitted(offsets, end))

    def _committed_config(self, node: int, base: int, ids: frozenset[int], epoch: int, seq: int, ts: int) -> None:
        """CommittedConfigsDifferByOne (KAFKA-16580's second simulation invariant): a newly committed VotersRecord
        differs from the committed one before it (or the initial voter set) by at most one voter, and so does the
        committed one after it, if any."""
        configs = self.committed_configs
        i = bisect.bisect_left(configs, base, key=lambda c: c[0])
        prev = configs[i - 1] if i else (None if self.initial_voters is None else (-1, self.initial_voters))
        configs.insert(i, (base, ids))
        for a, b in ((prev, (base, ids)), ((base, ids), configs[i + 1] if i + 1 < len(configs) else None)):
            if a is not None and b is not None and len(a[1] ^ b[1]) > 1:
                raise self.fail("CommittedConfigsDifferByOne", node, epoch, seq, ts,
                                configs_differ(a[0], sorted(a[1]), b[0], sorted(b[1])))

    def config_at(self, offset: int) -> tuple[int, frozenset[int]] | None:
        """KIP-853: the committed voter set in force at ``offset`` — the latest committed VotersRecord at or below it
        as (base offset, voter ids), else the initial set at -1 (None: kraft.version 0)."""
        configs = self.committed_configs
        i = bisect.bisect_right(configs, offset, key=lambda c: c[0])
        if i:
            return configs[i - 1]
        return None if self.initial_voters is None else (-1, self.initial_voters)

    def check_snapshot_config(self, node: int, sid: SnapshotId, voters: frozenset[int] | None, epoch: int, seq: int,
                              ts: int, how: str = "taken") -> None:
        """SnapshotConfigAgreement (KIP-853 with KIP-630): a snapshot's header holds the voter set the committed log
        had in force at its last offset (Kafka's createSnapshot writes voterSetAtOffset(end - 1)), so a replica that
        installs it has the set it would have had replaying the log. ``voters``: its VotersRecord's ids (None: none)."""
        want = self.config_at(sid.end_offset - 1)
        if want is None or voters == want[1]:
            return
        raise self.fail("SnapshotConfigAgreement", node, epoch, seq, ts, f"{how}: " + snapshot_config_differs(
            sid.end_offset, sid.epoch, None if voters is None else sorted(voters), want[0], sorted(want[1])))

    def check_install_config(self, node: int, end: int, voters: Sequence[int], epoch: int, seq: int,
                             ts: int) -> None:
        """SnapshotConfigAgreement at the event that installs a snapshot ending at ``end``: the log is empty, so the
        voter set the node reports (``voters``) is the snapshot's, the committed one at ``end - 1`` (Kafka reloads
        it in that step: handleFetchSnapshotResponse -> ``partitionState.updateState``)."""
        want = self.config_at(end - 1)
        if want is not None and frozenset(voters) != want[1]:
            raise self.fail("SnapshotConfigAgreement", node, epoch, seq, ts,
                            install_config_differs(end, sorted(voters), want[0], sorted(want[1])))

    def check_leader_quorum(self, node: int, epoch: int, voters: frozenset[int], seq: int, ts: int) -> None:
        """ElectionSafety with the voter set in force (KIP-853 "Leader election"): ``node`` became leader of
        ``epoch`` with the votes of a majority of its own voter set (``voters``, its state's ``voters`` then). The
        votes are the ones recorded for VoteOnce: a voter's votedId, or a granted VoteResponse leaving it."""
        votes = self.votes
        granted = sorted(v for v in voters if votes.get((v, epoch)) == node)
        if len(granted) <= len(voters) // 2:
            raise self.fail("ElectionSafety", node, epoch, seq, ts,
                            too_few_votes(node, epoch, granted, sorted(voters)))

    # ------------------------------------------------------------------------------------- brokers

    def check_broker_event(
        self, node: int, change: BrokerChange, log: DiskLog, seq: int, ts: int, covered: int = 0
    ) -> None:
        """One ``BrokerEvent`` of ``node`` (``log``: its log now; ``covered``: the end offset of the snapshot its
        registry was loaded from, KIP-630). Online is checked against the registrations reported *before* this
        event, so a registration that itself says Online fails."""
        key = (node, change.broker_id, change.broker_epoch)
        if change.state == BrokerState.ONLINE:
            self._check_online(node, change, log, seq, ts, covered)
        if change.record == REGISTER:
            self.registrations.setdefault(key, change.offset)

    def _check_online(self, node: int, change: BrokerChange, log: DiskLog, seq: int, ts: int, covered: int) -> None:
        broker, epoch = change.broker_id, change.broker_epoch
        offset = self.registrations.get((node, broker, epoch))
        hw = self.max_hws.get(node, 0)
        if offset is None and epoch < covered:
            # KIP-630: the registration (broker epoch = its offset) lies below the node's log start, in the
            # snapshot it loaded or installed: it is committed; the log's committed batch there must register it.
            offset = epoch
        if offset is None:
            raise self.fail(
                "OnlineRequiresRegistration", node, epoch, seq, ts, online_unregistered(broker, epoch, node)
            )
        if offset >= hw:
            raise self.fail(
                "OnlineRequiresRegistration", node, epoch, seq, ts, online_uncommitted(broker, epoch, node, offset, hw)
            )
        # The node's own word is not enough: the committed log must hold that registration.
        batch = log.batch_at(offset) or self.committed_batch_at(offset)
        seen = self.committed.get(batch.base_offset) if batch is not None else None
        if (
            batch is None
            or offset >= self.committed_end
            or seen is None
            or not _same_batch(seen, batch)
            or not _registers(batch, offset, broker, epoch)
        ):
            raise self.fail(
                "OnlineRequiresRegistration",
                node,
                epoch,
                seq,
                ts,
                f"broker {broker} reported Online with broker epoch {epoch}, but the committed log holds no "
                f"RegisterBrokerRecord for it at offset {offset}",
            )


    def committed_batch_at(self, offset: int) -> RecordBatch | None:
        """The committed batch holding ``offset`` (None: none known)."""
        i = bisect.bisect_right(self.committed_bases, offset) - 1
        if i < 0:
            return None
        batch = self.committed[self.committed_bases[i]].batch
        return batch if batch.last_offset >= offset else None

    # ------------------------------------------------------------------------------------- snapshots (KIP-630)

    def check_snapshot(
        self, node: int, sid: SnapshotId, digest: bytes, count: int, epoch: int, seq: int, ts: int,
        hw: int | None = None,
    ) -> None:
        """A snapshot ``node`` took (``hw``: its high watermark then), installed or loaded, with its state
        machine's ``digest`` and record ``count``. SnapshotAtCommittedOffset: taken at or below the high
        watermark. SnapshotAgreement: the same epoch and content as every other snapshot with that end offset;
        the committed batch holding its last offset has its epoch; its digest is the committed log's there."""
        end = sid.end_offset
        if hw is not None and end > hw and end > 0:
            raise self.fail("SnapshotAtCommittedOffset", node, epoch, seq, ts,
                            snapshot_uncommitted(end, sid.epoch, hw))
        first = self.snapshots.setdefault(end, (sid.epoch, digest, count, node, seq))
        detail = None
        if first[0] != sid.epoch:
            detail = snapshot_epochs_differ(end, sid.epoch, first[3], first[0], first[4])
        elif first[1:3] != (digest, count):
            detail = (f"snapshot with end offset {end} holds another state ({count} records) than node {first[3]}'s "
                      f"snapshot with that end offset (seq {first[4]}, {first[2]} records)")
        elif end == 0 and sid.epoch != 0:
            detail = f"snapshot of the empty prefix (end offset 0) has epoch {sid.epoch}, not 0"
        elif end > self.committed_end:
            detail = f"snapshot with end offset {end} ends above every committed offset ({self.committed_end})"
        elif end > 0:
            batch = self.committed_batch_at(end - 1)
            if batch is not None and batch.partition_leader_epoch != sid.epoch:
                detail = (f"snapshot (end offset {end}, epoch {sid.epoch}) disagrees with the committed log: "
                          f"offset {end - 1} is in the committed batch {batch.base_offset}..{batch.last_offset} "
                          f"of epoch {batch.partition_leader_epoch}")
            want = self.commit_digests.get(end)
            if detail is None and want is not None and want != digest:
                detail = (f"snapshot with end offset {end} holds a state ({count} records) other than the committed "
                          f"log's up to {end}")
        if detail is not None:
            raise self.fail("SnapshotAgreement", node, epoch, seq, ts, detail)

    def check_log_start(self, node: int, log: DiskLog, latest_end: int, epoch: int, seq: int, ts: int) -> None:
        """LogStartCoveredBySnapshot: the log start is at most the end of the node's latest (frozen) snapshot."""
        if log.start > latest_end:
            raise self.fail("LogStartCoveredBySnapshot", node, epoch, seq, ts,
                            log_start_uncovered(log.start, latest_end))

    def check_install(self, node: int, sid: SnapshotId, log: DiskLog, core_start: int, core_end: int, epoch: int,
                      seq: int, ts: int) -> None:
        """SnapshotInstallResetsLog at the install: the durable log and the core's both start and end at the
        snapshot's end offset."""
        end = sid.end_offset
        if not log.start == log.end_offset == core_start == core_end == end:
            raise self.fail("SnapshotInstallResetsLog", node, epoch, seq, ts,
                            install_not_reset(end, min(log.start, core_start), max(log.end_offset, core_end)))

    def check_after_install(self, node: int, installed: int, start: int, end: int, epoch: int, seq: int,
                            ts: int, fetch_offset: int | None = None) -> None:
        """SnapshotInstallResetsLog afterwards: the log never starts or ends below the installed end offset, and
        no Fetch asks below it."""
        if fetch_offset is not None:
            if fetch_offset < installed:
                raise self.fail("SnapshotInstallResetsLog", node, epoch, seq, ts,
                                fetch_below_install(fetch_offset, installed))
        elif start < installed or end < installed:
            raise self.fail("SnapshotInstallResetsLog", node, epoch, seq, ts, log_below_install(start, end, installed))


def _registers(batch: RecordBatch, offset: int, broker: int, epoch: int) -> bool:
    """Does the record at ``offset`` in ``batch`` register ``broker`` with ``epoch`` (KIP-631: the broker
    epoch is the registration record's offset)?"""
    if batch.is_control:
        return False
    for rec in batch.records:
        if batch.base_offset + rec.offset_delta == offset:
            decoded = decode_broker_record(rec)
            return (
                decoded is not None
                and decoded[0] == REGISTER
                and decoded[2]["BrokerId"] == broker
                and decoded[2]["BrokerEpoch"] == epoch == offset
            )
    return False
