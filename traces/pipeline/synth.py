"""Deterministic synthetic traces for the pipeline's tests and benchmarks (not a protocol simulator).

`synth_run` plays a plausible KRaft history for a 3-voter cluster — elections with Vote round trips,
BeginQuorumEpoch, client appends, Fetch round trips that advance the high watermark by majority, a leader
that loses unreplicated records and truncates them after a new election, restarts — and emits it as trace
events (schema-valid, seq in order). The same seed gives the same events. The planting helpers insert one
invariant violation each, at a known seq, touching nothing else, so tests know exactly what to expect.
"""

from __future__ import annotations

import copy
import json
import random
import zlib
from pathlib import Path
from typing import Any

Event = dict[str, Any]

API_KEYS = {"Vote": 52, "BeginQuorumEpoch": 53, "EndQuorumEpoch": 54, "Fetch": 1, "FetchSnapshot": 59}


def _digest(*parts: object) -> str:
    return f"{zlib.crc32(repr(parts).encode()):08x}"


class _Cluster:
    def __init__(self, run: str, seed: int, voters: list[int], snapshots: bool = False) -> None:
        self.run = run
        # KIP-630 (only when asked for: other runs keep their events): per node the log start offset and the
        # latest snapshot (end offset, epoch); the lists in ``log`` keep the cleaned batches (the snapshot's
        # content), ``start`` says where the node's log begins.
        self.snapshots = snapshots
        self.start = dict.fromkeys(voters, 0)
        self.snap: dict[int, tuple[int, int] | None] = dict.fromkeys(voters)
        self.paused: int | None = None  # a follower that does not fetch for a while (it falls behind)
        self.rng = random.Random(seed)
        self.voters = voters
        self.ts = 0.0
        self.events: list[Event] = []
        self.corr = dict.fromkeys(voters, 0)
        self.st: dict[int, dict[str, Any]] = {
                  n: {"role": "Unattached", "epoch": 0, "votedId": -1, "leaderId": -1, "logEndOffset": 0,
                       "lastFetchedEpoch": -1, "highWatermark": 0} for n in voters}
        if snapshots:
            for st in self.st.values():
                st["logStartOffset"] = 0
        self.log: dict[int, list[dict[str, Any]]] = {n: [] for n in voters}  # batches per node
        self.match: dict[int, int] = {}

    def tick(self, lo: float = 0.2, hi: float = 3.0) -> None:
        self.ts = round(self.ts + self.rng.uniform(lo, hi), 3)

    def act(self, node: int, event: str, log: dict[str, Any] | None = None, cause: str | None = None,
            snapshot: tuple[int, int] | None = None) -> None:
        self.tick()
        ev: Event = {"ts": self.ts, "node": node, "event": event, "state": dict(self.st[node])}
        if cause:
            ev["cause"] = cause
        if snapshot is not None:
            ev["snapshotId"] = {"endOffset": snapshot[0], "epoch": snapshot[1]}
        if log:
            ev["log"] = log
        self.events.append(ev)

    def msg(self, direction: str, at: int, api: str, kind: str, frm: int, to: int, corr: int,
            body: dict[str, Any]) -> None:
        self.tick(0.05, 0.5)
        self.events.append({"ts": self.ts, "node": at, "event": direction, "msg": {
            "api": api, "apiKey": API_KEYS[api], "kind": kind, "version": 0, "correlationId": corr,
            "from": frm, "to": to, "body": body}})

    def rpc(self, src: int, dst: int, api: str, req: dict[str, Any]) -> int:
        self.corr[src] += 1
        c = self.corr[src]
        self.msg("Send", src, api, "request", src, dst, c, req)
        self.msg("Receive", dst, api, "request", src, dst, c, req)
        return c

    def reply(self, src: int, dst: int, api: str, corr: int, body: dict[str, Any]) -> None:
        self.msg("Send", src, api, "response", src, dst, corr, body)
        self.msg("Receive", dst, api, "response", src, dst, corr, body)

    def leo(self, n: int) -> int:
        return self.log[n][-1]["lastOffset"] + 1 if self.log[n] else 0

    def set_log_state(self, n: int) -> None:
        s = self.st[n]
        s["logEndOffset"] = self.leo(n)
        s["lastFetchedEpoch"] = self.log[n][-1]["epoch"] if self.log[n] else -1

    def elect(self, cand: int) -> None:
        s = self.st[cand]
        epoch = max(st["epoch"] for st in self.st.values()) + 1
        s.update(role="Candidate", epoch=epoch, votedId=cand, leaderId=-1)
        self.act(cand, "StartElection", log={"persisted": True}, cause="ElectionTimeout")
        for v in self.voters:
            if v == cand:
                continue
            c = self.rpc(cand, v, "Vote", {"CandidateEpoch": epoch, "CandidateId": cand})
            o = self.st[v]
            o.update(role="Voted", epoch=epoch, votedId=cand, leaderId=-1)
            self.act(v, "HandleVoteRequest", log={"persisted": True})
            self.reply(v, cand, "Vote", c, {"VoteGranted": True, "LeaderEpoch": epoch})
            self.act(cand, "HandleVoteResponse")
        s.update(role="Leader", leaderId=cand)
        base = self.leo(cand)
        batch = {"baseOffset": base, "lastOffset": base, "epoch": epoch, "control": True,
                 "digest": _digest(self.run, base, epoch, "LeaderChange")}
        self.log[cand].append(batch)
        self.set_log_state(cand)
        self.match = {v: -1 for v in self.voters if v != cand}
        self.act(cand, "BecomeLeader", log={"appended": [batch]})
        for v in self.voters:
            if v == cand:
                continue
            c = self.rpc(cand, v, "BeginQuorumEpoch", {"LeaderEpoch": epoch, "LeaderId": cand})
            self.st[v].update(role="Follower", leaderId=cand)
            self.act(v, "HandleBeginQuorumEpochRequest")
            self.reply(v, cand, "BeginQuorumEpoch", c, {"ErrorCode": 0})
            self.act(cand, "HandleBeginQuorumEpochResponse")

    def append(self, leader: int) -> None:
        base = self.leo(leader)
        n = self.rng.randint(1, 5)
        epoch = self.st[leader]["epoch"]
        batch = {"baseOffset": base, "lastOffset": base + n - 1, "epoch": epoch, "control": False,
                 "digest": _digest(self.run, base, epoch, n)}
        self.log[leader].append(batch)
        self.set_log_state(leader)
        self.act(leader, "ClientAppend", log={"appended": [batch]})

    def take_snapshot(self, n: int) -> None:
        """CreateSnapshot at the last batch boundary at or below the node's high watermark, then CleanLog."""
        hw = self.st[n]["highWatermark"]
        done = [b for b in self.log[n] if b["lastOffset"] < hw]
        snap = self.snap[n]
        if not done or (snap is not None and done[-1]["lastOffset"] + 1 <= snap[0]):
            return
        sid = (done[-1]["lastOffset"] + 1, done[-1]["epoch"])
        self.snap[n] = sid
        self.act(n, "CreateSnapshot", snapshot=sid)
        self.start[n] = self.st[n]["logStartOffset"] = sid[0]
        self.act(n, "CleanLog")

    def install(self, leader: int, f: int, c: int) -> None:
        """The leader answers a Fetch below its log start with its snapshot id; the follower downloads it in
        two FetchSnapshot chunks and installs it (its log empty, starting at the snapshot's end)."""
        snap = self.snap[leader]
        assert snap is not None
        end, epoch = snap
        sid = {"EndOffset": end, "Epoch": epoch}
        self.act(leader, "HandleFetchRequest")
        self.reply(leader, f, "Fetch", c, {"SnapshotId": sid, "LogStartOffset": self.start[leader]})
        self.act(f, "HandleFetchResponse")
        size = 64 * (end + 1)
        for position in (0, size // 2):
            self.act(f, "SendFetchSnapshotRequest")
            c = self.rpc(f, leader, "FetchSnapshot", {"SnapshotId": sid, "Position": position})
            self.act(leader, "HandleFetchSnapshotRequest")
            self.reply(leader, f, "FetchSnapshot", c, {"SnapshotId": sid, "Position": position, "Size": size})
            if position == 0:
                self.act(f, "HandleFetchSnapshotResponse")
        self.log[f] = [b for b in self.log[leader] if b["lastOffset"] < end]  # what the snapshot holds
        self.snap[f] = snap
        self.start[f] = end
        st = self.st[f]
        st.update(logStartOffset=end, logEndOffset=end, lastFetchedEpoch=epoch)
        self.act(f, "HandleFetchSnapshotResponse", snapshot=snap)

    def fetch(self, leader: int, f: int) -> None:
        fo = self.leo(f)
        self.act(f, "SendFetchRequest")
        c = self.rpc(f, leader, "Fetch", {"FetchOffset": fo, "LastFetchedEpoch": self.st[f]["lastFetchedEpoch"]})
        # The leader's log is a superset of the follower's here except after a leader change, where the
        # follower may hold records of an old epoch the leader never had: answer DivergingEpoch then.
        lead_log = self.log[leader]
        common = 0
        for a, b in zip(self.log[f], lead_log, strict=False):
            if a != b:
                break
            common = a["lastOffset"] + 1
        if min(fo, common) < self.start[leader]:  # KIP-630: below the leader's log start, only its snapshot helps
            self.install(leader, f, c)
            return
        if common < fo:
            self.act(leader, "HandleFetchRequest")
            self.reply(leader, f, "Fetch", c, {"DivergingEpoch": {"EndOffset": common}})
            before = self.st[f]["highWatermark"]
            self.log[f] = [b for b in self.log[f] if b["lastOffset"] < common]
            self.set_log_state(f)
            self.st[f]["highWatermark"] = min(before, self.leo(f))
            self.act(f, "HandleFetchResponse", log={"truncatedTo": common})
            return
        self.match[f] = fo
        ends = sorted([self.leo(leader), *[max(m, 0) for m in self.match.values()]], reverse=True)
        hw = max(self.st[leader]["highWatermark"], ends[len(self.voters) // 2])
        self.st[leader]["highWatermark"] = hw
        self.act(leader, "HandleFetchRequest")
        new = [b for b in lead_log if b["baseOffset"] >= fo]
        self.reply(leader, f, "Fetch", c, {"HighWatermark": hw, "Records": {"batches": new}})
        self.log[f].extend(new)
        self.set_log_state(f)
        self.st[f]["highWatermark"] = max(self.st[f]["highWatermark"], min(hw, self.leo(f)))
        self.act(f, "HandleFetchResponse", log={"appended": new} if new else None)

    def restart(self, n: int) -> None:
        # Volatile state is lost: the HW is relearned from the leader (TLA+: HighWatermarkMonotonic allows it).
        s = self.st[n]
        s["highWatermark"] = 0
        if s["role"] in ("Leader", "Candidate", "Follower"):
            s.update(role="Unattached" if s["votedId"] == -1 else "Voted", leaderId=-1)
        self.act(n, "Restart", snapshot=self.snap[n])  # the latest snapshot, loaded from disk


def synth_run(run: str, seed: int, events: int, voters: list[int] | None = None,
              snapshots: bool = False) -> list[Event]:
    """At least `events` events (without seq) of one deterministic cluster history. ``snapshots`` (KIP-630):
    nodes take snapshots at their high watermark and clean their logs, a follower now and then stops fetching
    for a while and catches up through the leader's snapshot; states carry logStartOffset."""
    cl = _Cluster(run, seed, voters or [1, 2, 3], snapshots)
    leader = cl.rng.choice(cl.voters)
    cl.elect(leader)
    while len(cl.events) < events:
        r = cl.rng.random()
        if snapshots and r >= 0.95:
            if r < 0.97:  # the leader cleans while a follower is away: it will need the snapshot
                cl.take_snapshot(leader if cl.paused is not None else cl.rng.choice(cl.voters))
            elif cl.paused is None:
                cl.paused = cl.rng.choice([v for v in cl.voters if v != leader])
            else:
                cl.paused = None
            continue
        if r < 0.03:
            cl.paused = None
            # Leader change: sometimes the old leader had appended a batch no one fetched (truncated later).
            if cl.rng.random() < 0.5:
                cl.append(leader)
            others = [v for v in cl.voters if v != leader]
            leader = max(others, key=lambda v: (cl.leo(v), cl.rng.random()))
            cl.elect(leader)
        elif r < 0.04:
            victim = cl.rng.choice([v for v in cl.voters if v != leader])
            cl.restart(victim)
            c = cl.rpc(leader, victim, "BeginQuorumEpoch", {"LeaderEpoch": cl.st[leader]["epoch"], "LeaderId": leader})
            cl.st[victim].update(role="Follower", epoch=cl.st[leader]["epoch"], leaderId=leader)
            cl.act(victim, "HandleBeginQuorumEpochRequest")
            cl.reply(victim, leader, "BeginQuorumEpoch", c, {"ErrorCode": 0})
        else:
            if cl.rng.random() < 0.6:
                cl.append(leader)
            for f in cl.voters:
                if f != leader and f != cl.paused:
                    cl.fetch(leader, f)
    return cl.events


def header(run: str, seed: int, voters: list[int] | None = None) -> dict[str, Any]:
    return {"type": "header", "format": 1, "source": "simulator", "run": run,
            "implementation": "synthetic/1", "voters": voters or [1, 2, 3],
            "config": {"controller.quorum.election.timeout.ms": 1000, "seed": seed}}


def write_trace(path: Path, head: dict[str, Any], events: list[Event]) -> int:
    """Write header + events with seq 0..n-1; returns the number of lines written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(head, separators=(",", ":")) + "\n")
        for seq, ev in enumerate(events):
            fh.write(json.dumps({"type": "event", "seq": seq, **ev}, separators=(",", ":")) + "\n")
    return len(events) + 1


def write_corpus(out: Path, runs: int, events_per_run: int, seed: int = 0, snapshots: bool = False) -> int:
    """`runs` trace files under `out`; returns the total number of events written."""
    total = 0
    for i in range(runs):
        run = f"seed-{seed + i}"
        evs = synth_run(run, seed + i, events_per_run, snapshots=snapshots)
        write_trace(out / f"{run}.ndjson", header(run, seed + i), evs)
        total += len(evs)
    return total


# ----------------------------------------------------------------------------- planted violations
# Each helper inserts (or edits) one event and returns the seq it now has; every other event keeps its
# content, so exactly one violation appears.


def _last_state(events: list[Event], node: int, before: int) -> dict[str, Any]:
    for ev in reversed(events[:before]):
        if ev["node"] == node and "state" in ev:
            return copy.deepcopy(ev["state"])
    raise ValueError(f"node {node} has no state before index {before}")


def _index_after(events: list[Event], pred: Any, start: int = 0) -> int:
    for i in range(start, len(events)):
        if pred(events[i]):
            return i
    raise ValueError("no event matches")


def _insert(events: list[Event], at: int, ev: Event) -> int:
    ev = {"ts": events[at - 1]["ts"], **ev}
    events.insert(at, ev)
    return at


def plant_two_leaders(events: list[Event]) -> tuple[int, int, int]:
    """A follower also becomes Leader of its leader's epoch. Returns (seq, node, epoch)."""
    i = _index_after(events, lambda e: e["event"] == "HandleBeginQuorumEpochRequest", len(events) // 3)
    node = events[i]["node"]
    st = _last_state(events, node, i + 1)
    st.update(role="Leader", leaderId=node)
    return _insert(events, i + 1, {"node": node, "event": "BecomeLeader", "state": st}), node, st["epoch"]


def plant_second_vote(events: list[Event]) -> tuple[int, int, int]:
    """A voter grants a second candidate in the same epoch."""
    i = _index_after(events, lambda e: e["event"] == "HandleVoteRequest", len(events) // 3)
    node = events[i]["node"]
    st = _last_state(events, node, i + 1)
    other = next(v for v in (1, 2, 3, 4) if v not in (node, st["votedId"]))
    st["votedId"] = other
    return _insert(events, i + 1, {"node": node, "event": "HandleVoteRequest", "state": st}), node, st["epoch"]


def plant_truncation_below_hw(events: list[Event]) -> tuple[int, int, int]:
    """A follower truncates below its high watermark (HW itself unchanged, so only this is wrong). The follower
    is one that wins no later election: a leader without the entries it cut would break LeaderCompleteness too."""
    def never_leads_after(i: int) -> bool:
        return not any(e["event"] == "BecomeLeader" and e["node"] == events[i]["node"] for e in events[i:])

    i = len(events) // 3
    while True:
        i = _index_after(events, lambda e: e["event"] == "HandleFetchResponse" and e["state"]["highWatermark"] > 2, i)
        if never_leads_after(i):
            break
        i += 1
    node = events[i]["node"]
    st = _last_state(events, node, i + 1)
    to = st["highWatermark"] - 2
    st["logEndOffset"] = to
    ev = {"node": node, "event": "HandleFetchResponse", "state": st, "log": {"truncatedTo": to}}
    return _insert(events, i + 1, ev), node, st["epoch"]


def plant_diverging_records(events: list[Event]) -> tuple[int, int, int]:
    """A follower's copy of a batch differs (same offset and epoch, another digest). After the last election: a
    later leader would lack one of the two copies, both counted committed (LeaderCompleteness)."""
    last = max(i for i, e in enumerate(events) if e["event"] == "BecomeLeader")
    i = _index_after(events, lambda e: e["event"] == "HandleFetchResponse" and bool(e.get("log", {}).get("appended")),
                     max(last, len(events) // 3))
    events[i]["log"] = copy.deepcopy(events[i]["log"])  # batches are shared with the leader's events
    batch = events[i]["log"]["appended"][0]
    batch["digest"] = "deadbeef"
    return i, events[i]["node"], batch["epoch"]


def plant_hw_backwards(events: list[Event]) -> tuple[int, int, int]:
    """A node's high watermark moves back (not in a Restart)."""
    i = _index_after(events, lambda e: e["event"] == "HandleFetchResponse" and e["state"]["highWatermark"] > 2,
                     len(events) // 3)
    node = events[i]["node"]
    st = _last_state(events, node, i + 1)
    st["highWatermark"] -= 1
    return _insert(events, i + 1, {"node": node, "event": "HandleFetchResponse", "state": st}), node, st["epoch"]


def plant_epoch_backwards(events: list[Event]) -> tuple[int, int, int]:
    """A node's epoch goes down by one (as an Unattached node with no vote and no leader)."""
    i = _index_after(events, lambda e: e["event"] == "HandleBeginQuorumEpochRequest" and e["state"]["epoch"] > 1,
                     len(events) // 3)
    node = events[i]["node"]
    st = _last_state(events, node, i + 1)
    st.update(role="Unattached", epoch=st["epoch"] - 1, votedId=-1, leaderId=-1)
    ev = {"node": node, "event": "HandleBeginQuorumEpochRequest", "state": st}
    return _insert(events, i + 1, ev), node, st["epoch"]


def plant_leader_without_committed_batch(events: list[Event]) -> tuple[int, int, int]:
    """A voter's log loses a batch it fetched and the old leader committed; that voter then wins the next
    election (no later one) without it: the new leader lacks a committed entry (KRaft.tla LeaderCompleteness,
    which Raft's election restriction guarantees). Only the fetch event's `log.appended` changes."""
    elections = [(i, e["node"]) for i, e in enumerate(events) if e["event"] == "BecomeLeader"]
    for j in range(len(elections) - 1, 0, -1):
        i, node = elections[j]
        if any(n == node for _, n in elections[j + 1:]):
            continue
        hw = _last_state(events, node, i)["highWatermark"]
        for k in range(i - 1, elections[j - 1][0], -1):
            ev = events[k]
            appended = (ev.get("log") or {}).get("appended") or []
            if ev["node"] != node or ev["event"] != "HandleFetchResponse":
                continue
            gone = next((b for b in appended if b["baseOffset"] < hw), None)
            if gone is not None:
                ev["log"] = copy.deepcopy(ev["log"])  # batches are shared with the leader's events
                ev["log"]["appended"] = [b for b in appended if b is not gone]
                if not ev["log"]["appended"]:
                    del ev["log"]["appended"]
                return i, node, events[i]["state"]["epoch"]
    raise ValueError("no election to plant on: no elected voter fetched a committed batch before it won")


# ----------------------------------------------------------------------------- planted snapshot violations
# On a run of ``synth_run(..., snapshots=True)``. Each returns (seq, node, epoch) of the one violation.


def _snapshot_events(events: list[Event]) -> list[int]:
    return [i for i, e in enumerate(events) if "snapshotId" in e]


def plant_snapshot_above_hw(events: list[Event]) -> tuple[int, int, int]:
    """A node takes a snapshot above its high watermark (SnapshotAtCommittedOffset): a CreateSnapshot inserted
    after one of its ClientAppends, ending at that batch's end while the high watermark is still below it. The
    batch is one that commits later, with that epoch, so the snapshot agrees with the committed log."""
    for i, ev in enumerate(events):
        appended = (ev.get("log") or {}).get("appended") or []
        if ev["event"] != "ClientAppend" or i < len(events) // 3 or not appended:
            continue
        b = appended[-1]
        if ev["state"]["highWatermark"] > b["lastOffset"]:
            continue
        committed = any(e["event"] == "HandleFetchResponse" and e["state"]["highWatermark"] > b["lastOffset"]
                        and b in ((e.get("log") or {}).get("appended") or []) for e in events[i + 1:])
        if not committed:
            continue
        node = ev["node"]
        st = _last_state(events, node, i + 1)
        snap = {"endOffset": b["lastOffset"] + 1, "epoch": b["epoch"]}
        return _insert(events, i + 1, {"node": node, "event": "CreateSnapshot", "state": st,
                                       "snapshotId": snap}), node, st["epoch"]
    raise ValueError("no client append to plant a snapshot above the high watermark on")


def plant_snapshot_epoch_disagrees(events: list[Event]) -> tuple[int, int, int]:
    """A CreateSnapshot names another epoch than the committed record at its end (SnapshotAgreement): one that
    is not the first snapshot with its end offset (it then differs from that one), or the only one."""
    by_end: dict[int, list[int]] = {}
    for i in _snapshot_events(events):
        by_end.setdefault(events[i]["snapshotId"]["endOffset"], []).append(i)
    for i in _snapshot_events(events):
        same = by_end[events[i]["snapshotId"]["endOffset"]]
        if events[i]["event"] == "CreateSnapshot" and (same[0] != i or len(same) == 1):
            events[i] = {**events[i], "snapshotId": {**events[i]["snapshotId"],
                                                     "epoch": events[i]["snapshotId"]["epoch"] + 7}}
            return i, events[i]["node"], events[i]["state"]["epoch"]
    raise ValueError("no snapshot to plant on")


def plant_log_start_above_snapshot(events: list[Event]) -> tuple[int, int, int]:
    """A CleanLog moves the log start past the node's latest snapshot, to its log end (LogStartCoveredBySnapshot).
    The node's next states show its real log start again (nothing checks that a log start never goes back)."""
    for i, ev in enumerate(events):
        st = ev.get("state") or {}
        if ev["event"] == "CleanLog" and st["logEndOffset"] > st["logStartOffset"]:
            events[i] = {**ev, "state": {**st, "logStartOffset": st["logEndOffset"]}}
            return i, ev["node"], st["epoch"]
    raise ValueError("no CleanLog with records after the log start to plant on")


def plant_install_not_reset(events: list[Event]) -> tuple[int, int, int]:
    """The installing HandleFetchSnapshotResponse leaves the log start one below the snapshot's end
    (SnapshotInstallResetsLog)."""
    for i, ev in enumerate(events):
        if ev["event"] == "HandleFetchSnapshotResponse" and "snapshotId" in ev:
            st = ev["state"]
            events[i] = {**ev, "state": {**st, "logStartOffset": st["logStartOffset"] - 1}}
            return i, ev["node"], st["epoch"]
    raise ValueError("no snapshot install to plant on")


def plant_fetch_below_install(events: list[Event]) -> tuple[int, int, int]:
    """After installing a snapshot the node's next Fetch asks one offset below its end (SnapshotInstallResetsLog).
    Only the Send event changes (the leader's Receive keeps the right offset)."""
    for i, ev in enumerate(events):
        if ev["event"] == "HandleFetchSnapshotResponse" and "snapshotId" in ev:
            node, end = ev["node"], ev["snapshotId"]["endOffset"]
            j = next(k for k in range(i, len(events)) if events[k]["event"] == "Send" and events[k]["node"] == node
                     and events[k]["msg"]["api"] == "Fetch" and events[k]["msg"]["kind"] == "request")
            msg = events[j]["msg"]
            body = {**msg["body"], "FetchOffset": end - 1}
            events[j] = {**events[j], "msg": {**msg, "body": body}}
            return j, node, -1
    raise ValueError("no snapshot install to plant on")


# ---------------------------------------------------------------------------------------------- KIP-853 voter sets


def _rstate(role: str, epoch: int, voted: int, leader: int, leo: int, hw: int, voters: list[int]) -> dict[str, Any]:
    return {"role": role, "epoch": epoch, "votedId": voted, "leaderId": leader, "logEndOffset": leo,
            "lastFetchedEpoch": epoch, "highWatermark": hw, "voters": voters, "kraftVersion": 1}


def _rbatch(base: int, epoch: int, control: bool = True) -> dict[str, Any]:
    return {"baseOffset": base, "lastOffset": base, "epoch": epoch, "control": control, "digest": f"{base:08x}"}


def reconfig_run(kind: str) -> tuple[list[Event], tuple[str, int, int, int] | None]:
    """A small kraft.version 1 run (voters 1, 2, 3; node 1 leads epoch 1, its epoch-start batch holds the bootstrap
    VotersRecord) and what the checkers must report on it: (invariant, node, epoch, seq), or None for ``"clean"``.
    Kinds: ``clean`` (one removal that commits), ``two-uncommitted`` (a second removal before the first commits:
    AtMostOneUncommittedConfig), ``differ-by-two`` (committed sets {1,2} then {1,4,5}: CommittedConfigsDifferByOne),
    ``leader-minority`` (node 1's voter set is {1..5} and 2 of its 5 voters voted for it: ElectionSafety),
    ``snapshot-config`` (node 2 installs node 1's snapshot ending after the committed {1,2} and holds {1,2,3}:
    SnapshotConfigAgreement; ``clean`` has the same install holding {1,2})."""
    voters = [1, 2, 3]
    ev: list[Event] = [
        {"node": 1, "event": "StartElection", "state": _rstate("Candidate", 1, 1, -1, 0, 0, voters)},
        {"node": 2, "event": "HandleVoteRequest", "state": _rstate("Voted", 1, 1, -1, 0, 0, voters)},
        {"node": 3, "event": "HandleVoteRequest", "state": _rstate("Voted", 1, 1, -1, 0, 0, voters)},
        {"node": 1, "event": "BecomeLeader", "state": _rstate("Leader", 1, 1, 1, 1, 0, voters),
         "log": {"appended": [_rbatch(0, 1)]}},
        {"node": 1, "event": "HandleFetchRequest", "state": _rstate("Leader", 1, 1, 1, 1, 1, voters)},
        {"node": 1, "event": "HandleRemoveRaftVoterRequest", "state": _rstate("Leader", 1, 1, 1, 2, 1, [1, 2]),
         "log": {"appended": [_rbatch(1, 1)]}},
    ]
    want: tuple[str, int, int, int] | None = None
    if kind in ("clean", "snapshot-config"):
        ev.append({"node": 1, "event": "HandleFetchRequest", "state": _rstate("Leader", 1, 1, 1, 2, 2, [1, 2])})
        ev.append({"node": 1, "event": "CreateSnapshot", "snapshotId": {"endOffset": 2, "epoch": 1},
                   "state": _rstate("Leader", 1, 1, 1, 2, 2, [1, 2])})
        # KIP-853: the installed snapshot's header holds the voter set in force at its last offset, {1, 2}
        held = [1, 2] if kind == "clean" else [1, 2, 3]
        ev.append({"node": 2, "event": "HandleFetchSnapshotResponse", "snapshotId": {"endOffset": 2, "epoch": 1},
                   "state": {**_rstate("Follower", 1, 1, 1, 2, 2, held), "logStartOffset": 2}})
        if kind == "snapshot-config":
            want = ("SnapshotConfigAgreement", 2, 1, 8)
    elif kind == "two-uncommitted":
        ev.append({"node": 1, "event": "HandleRemoveRaftVoterRequest", "state": _rstate("Leader", 1, 1, 1, 3, 1, [1]),
                   "log": {"appended": [_rbatch(2, 1)]}})
        want = ("AtMostOneUncommittedConfig", 1, 1, 6)
    elif kind == "differ-by-two":
        ev.append({"node": 1, "event": "HandleFetchRequest", "state": _rstate("Leader", 1, 1, 1, 2, 2, [1, 2])})
        ev.append({"node": 1, "event": "HandleApiVersionsResponse",
                   "state": _rstate("Leader", 1, 1, 1, 3, 2, [1, 4, 5]), "log": {"appended": [_rbatch(2, 1)]}})
        ev.append({"node": 1, "event": "HandleFetchRequest", "state": _rstate("Leader", 1, 1, 1, 3, 3, [1, 4, 5])})
        want = ("CommittedConfigsDifferByOne", 1, 1, 8)
    elif kind == "leader-minority":
        ev = ev[:4]
        ev[3]["state"]["voters"] = [1, 2, 3, 4, 5]
        ev[2]["state"] = _rstate("Voted", 1, 3, -1, 0, 0, voters)  # node 3 votes for itself
        ev += [{"node": n, "event": "HandleVoteRequest", "state": _rstate("Unattached", 1, -1, -1, 0, 0, voters)}
               for n in (4, 5)]
        want = ("ElectionSafety", 1, 1, 3)
    else:
        raise ValueError(f"unknown reconfig run kind {kind!r}")
    return [{"ts": i, **e} for i, e in enumerate(ev)], want


RECONFIG_KINDS = ("clean", "two-uncommitted", "differ-by-two", "leader-minority", "snapshot-config")
