"""KIP-630 snapshots: the target as follower downloads a virtual leader's snapshot (Snapshot/1-3), the target as
leader answers a Fetch below its log start with SnapshotId and serves its own snapshot by FetchSnapshot
(Snapshot/4-8).

Kafka is the authority where the KIP leaves room: KafkaRaftClient.handleFetchRequest / tryCompleteFetchRequest
(ReplicatedLog.validateOffsetAndEpoch), handleFetchSnapshotRequest, handleFetchResponse and
handleFetchSnapshotResponse; the tests of KafkaRaftClientSnapshotTest. The harness reads every snapshot with its
own code (conformance/snapshots.py), never the reference node's.

Each case runs in a life of its own when the harness can relaunch the target: on a fresh directory (with the
profile's ``snapshot_properties`` for the leader cases, so that the target snapshots and cleans its log after a
few KiB), then plain again for the cases after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance import snapshots as S
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import INFO, KAFKA, CaseSkipped, Scenario
from kraft_tck.conformance.target import TargetProfile, load_profile
from kraft_tck.conformance.transport import RequestError
from kraft_tck.conformance.virtual import Frame, VLog
from kraft_tck.spec.errors import Errors

FETCH_REQ = Clause("KIP-630", "Handling Fetch Request", "FetchOffset below LogStartOffset")
FETCH_RESP = Clause("KIP-630", "Handling Fetch Response", "SnapshotId set: fetch the snapshot")
FS_REQ = Clause("KIP-630", "Fetch Snapshot Request Handling")
FS_RESP = Clause("KIP-630", "Fetch Snapshot Response Handling")
FORMAT = Clause("KIP-630", "Snapshot Format", "SnapshotHeaderRecord first, SnapshotFooterRecord last, CRCs")
LOG_START = Clause("KIP-630", "When to Increase the LogStartOffset")
LOADING = Clause("KIP-630", "Generating and Loading the Snapshot", "restart")
EVERY_RPC = Clause("KIP-630", "Fetch Snapshot Request Handling", "ClusterId and CurrentLeaderEpoch validated")

#: spec/kafka-behaviour.yaml rows of the KAFKA-level checks
ROW_ZERO = "snapshot.fetch-offset-zero"
ROW_PAUSED = "snapshot.fetch-paused-while-downloading"
ROW_LAYOUT = "snapshot.batch-layout"
ROW_POSITION = "snapshot.position-out-of-range"

#: Whether tla/TraceKRaft.tla validates these lives. The node trace (CreateSnapshot, CleanLog, SendFetchSnapshotRequest,
#: HandleFetchSnapshotRequest/Response): yes, every case. The black-box mode: the follower cases (Snapshot/1-3: the
#: target downloads the harness's snapshot, then serves it as leader) yes; the leader cases (Snapshot/4-8: the target's
#: own snapshots and cleaning are hidden steps the model must guess) not yet: TLC does not come back within minutes,
#: so those lives are left to the cases' own checks and to the node's trace.
BLACKBOX_MODELS_INSTALL = True
BLACKBOX_MODELS_OWN_SNAPSHOTS = False
NODE_TRACE_MODELS_SNAPSHOTS = True

#: The MaxBytes of the harness's FetchSnapshot requests in Snapshot/5: small, so that a snapshot of a few
#: records comes in several chunks.
CHUNK_MAX_BYTES = 128


def profile_of(sc: Scenario) -> TargetProfile:
    return sc.target.profile or load_profile("reference")


def settings_hint(sc: Scenario) -> str:
    prof = profile_of(sc)
    names = ", ".join(prof.snapshot_properties) or (
        "metadata.log.max.record.bytes.between.snapshots, metadata.log.segment.bytes, metadata.max.retention.bytes, "
        "metadata.max.retention.ms"
    )
    return (
        f"lower the target's {names} (Kafka's names; the profile {prof.name!r} writes its snapshot_properties into "
        "the properties of a target the harness launches: --target-cmd or the embedded node), or raise the profile "
        "fact snapshot_feed_records"
    )


@contextlib.asynccontextmanager
async def snapshot_life(sc: Scenario, snapshot_properties: bool) -> AsyncIterator[None]:
    """Run the case in a life of its own: relaunch the target on a fresh directory (with the profile's
    snapshot_properties when asked) and retire that life afterwards (the next case gets a plain one); a target given
    by address stays as it is (then the black-box check of the life it is in, shared with other cases, stops where
    this case begins). The life is left out of the TLC checks that do not model snapshots yet."""
    target = sc.target
    relaunch = target.capability_missing("restart") is None
    if relaunch:
        if snapshot_properties:
            target.extra_properties = dict(profile_of(sc).snapshot_properties)
        await sc.restart_target(wipe=True)
        sc.q.log = VLog()  # a fresh target: a fresh history, so the byte counts of the feeds are the case's own
    life = sc.q.session.life
    if not relaunch:
        # A life shared with the cases before: the black-box check keeps what came before this case. Even an
        # install it models makes the whole long life a snapshot trace, whose hidden steps TLC explores far
        # too slowly (minutes where the rest takes seconds).
        target.blackbox_cut_at.setdefault(life, len(sc.q.session.entries))
    elif not (BLACKBOX_MODELS_OWN_SNAPSHOTS if snapshot_properties else BLACKBOX_MODELS_INSTALL):
        target.blackbox_unmodelled_lives.add(life)
    if not NODE_TRACE_MODELS_SNAPSHOTS:
        target.unmodelled_lives.add(life)
    try:
        yield
    finally:
        if relaunch:
            target.extra_properties = {}
            sc.retire_life()  # the next case gets a plain target again (relaunched when it starts)


# ---------------------------------------------------------------------------------------------- follower side


@dataclass
class Installed:
    leader: int  # the virtual leader that served the snapshot
    epoch: int  # its epoch
    snapshot: S.HarnessSnapshot
    start: int  # the frame index the download's exchange starts at


async def serve_snapshot_to_follower(sc: Scenario) -> Installed:
    """The target follows v_a and holds committed records up to t; v_b then leads a new epoch whose log goes on
    past t, snapshots it at S > t and serves the log from S only; announced with BeginQuorumEpoch, the target
    fetches from t, below v_b's log start, and is told SnapshotId (S, epoch)."""
    a, b = sc.virtual_ids[0], sc.virtual_ids[1]
    log = sc.q.log
    e1 = await sc.make_follower(a)
    await sc.feed(a, e1, 2)
    # No await from here to the BeginQuorumEpoch: the target cannot fetch from v_b before its snapshot exists.
    epoch = sc.q.next_epoch()
    sc.q.set_leader(b, epoch)
    log.append_metadata(epoch, 3)
    snap = log.take_snapshot()
    log.append_metadata(epoch, 2)
    voter = sc.q.voters[b]
    voter.snapshot_chunk_bytes = max(1, -(-snap.size // 3))  # three chunks, cut anywhere (unaligned)
    sc.q.changed()
    sc.frames.note(b, f"v{b} leads epoch {epoch}: snapshot {snap.id} of {snap.size} bytes, log from {log.start} "
                      f"to {log.end}, served {voter.snapshot_chunk_bytes} bytes per FetchSnapshot")
    start = sc.frames.mark()
    resp = await sc.call(f"setup: BeginQuorumEpoch(epoch={epoch}) from v{b} is answered",
                         voter.begin_quorum_epoch(epoch))
    err = S.errors_of(resp)
    sc.check(err == 0, f"setup: target accepts BeginQuorumEpoch(leader=v{b}, epoch={epoch})", "ErrorCode NONE",
             B.error_name(err), Clause("KIP-595", "BeginQuorumEpoch Request Handling"))
    return Installed(b, epoch, snap, start)


def is_fetch_snapshot_answer(sc: Scenario, leader: int) -> Any:
    def pred(f: Frame) -> bool:
        return f.api == "FetchSnapshot" and f.kind == "response" and f.src == leader and f.dst == sc.target_id

    return pred


async def expect_download(sc: Scenario, inst: Installed) -> Frame:
    """The target downloads ``inst.snapshot`` from its leader by Position and then fetches from its end;
    returns that Fetch (KIP-630 "Handling Fetch Response", "Fetch Snapshot Response Handling")."""
    t = sc.timeouts
    b, snap = inst.leader, inst.snapshot
    first = await sc.expect_frame(
        sc.from_target("FetchSnapshot", dst=b),
        sc.bound_ms(2 * t.request_timeout_ms + t.fetch_max_wait_ms),
        f"a follower told SnapshotId{snap.id} by its leader v{b} asks for that snapshot with FetchSnapshot",
        f"FetchSnapshot(snapshot={snap.id}, position=0) to v{b}",
        inst.start,
        FETCH_RESP,
    )
    part = first.part
    sc.check(
        S.snapshot_id_of(part) == snap.id and part.get("Position") == 0,
        "the download starts at Position 0 of the SnapshotId the leader named",
        f"FetchSnapshot(snapshot={snap.id}, position=0)",
        first.summary(),
        FETCH_RESP,
    )
    sc.check(
        part.get("CurrentLeaderEpoch") == inst.epoch and first.body.get("ReplicaId") == sc.target_id,
        "the FetchSnapshot names the follower (ReplicaId) and its leader's epoch (CurrentLeaderEpoch)",
        f"ReplicaId={sc.target_id}, CurrentLeaderEpoch={inst.epoch}",
        first.summary(),
        FS_RESP,
    )

    def completes(f: Frame) -> bool:
        p = f.part
        return (is_fetch_snapshot_answer(sc, b)(f) and not S.errors_of(f.body)
                and int(p.get("Position", -1)) + len(S.chunk_of(p)) == int(p.get("Size", -2)))

    chunks = -(-snap.size // sc.q.voters[b].snapshot_chunk_bytes)
    done = await sc.expect_frame(
        completes,
        sc.bound_ms(chunks * t.request_timeout_ms),
        f"the follower fetches every chunk of the {snap.size}-byte snapshot ({chunks} chunks)",
        f"FetchSnapshot requests up to Position {snap.size - sc.q.voters[b].snapshot_chunk_bytes * (chunks - 1)} "
        "and its answer",
        first.seq,
        FS_RESP,
    )
    received = 0
    for f in sc.frames.select(lambda f: f.api == "FetchSnapshot" and f.dst in (b, sc.target_id), first.seq):
        if f.seq > done.seq:
            break
        if f.kind == "request":
            sc.check(
                f.part.get("Position") == received and S.snapshot_id_of(f.part) == snap.id,
                "each FetchSnapshot asks from the bytes received so far (Position + the bytes of the last answer)",
                f"FetchSnapshot(snapshot={snap.id}, position={received})",
                f.summary(),
                FS_RESP,
            )
        elif not S.errors_of(f.body) and f.part.get("Position") == received:
            received += len(S.chunk_of(f.part))
    fetches = sc.frames.select(sc.from_target("Fetch", dst=b), first.seq)
    during = [f for f in fetches if f.seq < done.seq]
    sc.check(
        not during,
        "a follower fetching a snapshot sends FetchSnapshot, not Fetch, until the download is complete "
        "(KafkaRaftClient.maybeSendFetchOrFetchSnapshot)",
        "no Fetch to the leader during the download",
        during[0].summary() if during else "",
        FS_RESP,
        level=KAFKA,
        kafka=ROW_PAUSED,
    )
    after = await sc.expect_frame(
        sc.from_target("Fetch", dst=b),
        sc.bound_ms(t.request_timeout_ms + t.fetch_max_wait_ms),
        "the follower fetches again once the snapshot is complete",
        f"Fetch(offset={snap.end_offset}, lastFetchedEpoch={snap.epoch}) to v{b}",
        done.seq + 1,
        FS_RESP,
    )
    got = (after.part.get("FetchOffset"), after.part.get("LastFetchedEpoch"))
    sc.check(
        got == snap.id,
        "after the whole snapshot the follower's log starts and ends at the snapshot: it fetches from "
        "SnapshotId.EndOffset with LastFetchedEpoch = SnapshotId.Epoch",
        f"Fetch(offset={snap.end_offset}, lastFetchedEpoch={snap.epoch})",
        after.summary(),
        FS_RESP,
    )
    return after


async def install_and_catch_up(sc: Scenario) -> Installed:
    inst = await serve_snapshot_to_follower(sc)
    await expect_download(sc, inst)
    await sc.catch_up(inst.leader, inst.epoch)  # the records after the snapshot are appended
    return inst


async def require_fetch_snapshot(sc: Scenario) -> None:
    """Skip, saying so, when the target does not advertise FetchSnapshot (api key 59, KIP-630)."""
    client = await sc.v(0).connect()
    if S.FETCH_SNAPSHOT not in client.versions:
        sc.skip(
            "needs capability 'snapshots': the target advertises no FetchSnapshot (api key 59) in ApiVersions, "
            f"so it can neither download nor serve a snapshot (KIP-630); advertised keys {sorted(client.versions)}"
        )


@case("KIP-630/Snapshot/1", own_life=True)
async def test_follower_installs_snapshot_in_chunks(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchResponseWithSnapshotId, testFetchSnapshotResponsePartialData.
    await require_fetch_snapshot(sc)
    async with snapshot_life(sc, snapshot_properties=False):
        await install_and_catch_up(sc)


@case("KIP-630/Snapshot/2", own_life=True)
async def test_high_watermark_and_describe_quorum_after_install(sc: Scenario) -> None:
    # Kafka: KafkaRaftClient.handleFetchSnapshotResponse (truncateToLatestSnapshot, updateFollowerHighWatermark).
    await require_fetch_snapshot(sc)
    async with snapshot_life(sc, snapshot_properties=False):
        inst = await install_and_catch_up(sc)
        s_end = inst.snapshot.end_offset
        epoch = await sc.make_leader()
        dq = await sc.call("DescribeQuorum is answered", sc.v(0).describe_quorum())
        part = B.partition(dq)
        hw = int(part.get("HighWatermark", -1))
        rows = {int(r["ReplicaId"]): r for r in part.get("CurrentVoters", [])}
        own = int(rows.get(sc.target_id, {}).get("LogEndOffset", -1))
        sc.check(
            hw >= s_end and own >= s_end,
            f"the leader's high watermark and log end are at or past the snapshot it installed (end offset {s_end}): "
            "a snapshot holds committed records only",
            f"HighWatermark >= {s_end}, its own LogEndOffset >= {s_end}",
            f"HighWatermark={hw}, LogEndOffset={own}; {B.describe('DescribeQuorum', 'response', dq)}",
            FS_RESP,
        )
        probe = sc.q.voters[sc.bystander]
        resp = await sc.call("Fetch below the snapshot is answered", probe.fetch(epoch, 1, sc.q.log.epoch_at(0)))
        fpart = B.partition(resp)
        sid = S.snapshot_id_of(fpart)
        sc.check(
            sid is not None and sid[0] >= s_end and not B.records_of(fpart),
            f"a Fetch at offset 1, below the log start the installed snapshot set ({s_end}), gets SnapshotId",
            f"SnapshotId with EndOffset >= {s_end}, no records",
            B.describe("Fetch", "response", resp),
            FETCH_REQ,
        )
        assert sid is not None
        data = await download(sc, probe, epoch, sid, CHUNK_MAX_BYTES)
        check_snapshot_bytes(sc, data, sid)


@case("KIP-630/Snapshot/3", own_life=True)
async def test_restart_from_installed_snapshot(sc: Scenario) -> None:
    # Kafka: KafkaMetadataLog.apply (the latest snapshot, then the segments after it), LogLoader.
    sc.require("restart", "kill -9 the target after it installed a snapshot and relaunch it on its directory")
    await require_fetch_snapshot(sc)
    async with snapshot_life(sc, snapshot_properties=False):
        await install_and_catch_up(sc)
        log = sc.q.log
        want = (log.end, log.last_epoch)
        mark = sc.frames.mark()
        await sc.restart_target()
        await sc.make_follower(sc.virtual_ids[0])
        # the relaunched process's first request (not one the killed process sent just before kill -9)
        first = sc.frames.select(lambda f: f.src == sc.target_id and f.kind == "request" and f.api in ("Fetch", "Vote")
                                 and not sc.frames.stale(f), mark)[0]
        p = first.part
        got = ((p.get("FetchOffset"), p.get("LastFetchedEpoch")) if first.api == "Fetch"
               else (p.get("LastOffset"), p.get("LastOffsetEpoch")))
        sc.check(
            got == want,
            "killed after installing a snapshot and appending past it, the node restarts from the snapshot and the "
            "log after it: its first Fetch (or Vote) states the log end it had",
            f"log end {want[0]}, last epoch {want[1]}",
            first.summary(),
            LOADING,
        )


# ---------------------------------------------------------------------------------------------- leader side


@dataclass
class OwnSnapshot:
    epoch: int  # the target's leader epoch
    snapshot_id: tuple[int, int]
    log_start: int  # the LogStartOffset its Fetch answers carry
    high_watermark: int


async def leader_with_own_snapshot(sc: Scenario, cleaned: bool) -> OwnSnapshot:
    """Feed the target committed records as a follower (enough for the profile's snapshot thresholds), elect
    it, and probe with Fetch until its answers show a snapshot (SnapshotId) and, when ``cleaned``, a log start
    past 0; a target that shows neither within the bound is skipped, naming the settings to lower."""
    sc.require("snapshots", "write a snapshot and clean the log below it")
    await require_fetch_snapshot(sc)
    prof = profile_of(sc)
    a = sc.virtual_ids[0]
    e1 = await sc.make_follower(a)
    n = int(prof.fact("snapshot_feed_records", 60))
    fed = 0
    while fed < n:
        step = min(20, n - fed)
        await sc.feed(a, e1, step)
        fed += step
    epoch = await sc.make_leader()
    for vid in sc.followers:
        sc.keep_fetching(vid, epoch)
    probe = sc.q.voters[sc.bystander]
    t = sc.timeouts
    bound = sc.bound_ms(max(3000, 2 * t.fetch_ms))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound / 1000
    last = ""
    sid: tuple[int, int] | None = None
    while True:
        resp = await sc.call("the leader answers Fetch", probe.fetch(epoch, 1, sc.q.log.epoch_at(0)))
        part = B.partition(resp)
        start = int(part.get("LogStartOffset", -1) or 0)
        sid = S.snapshot_id_of(part)
        if sid is None and not cleaned:  # Kafka answers FetchOffset 0 with its latest snapshot (KAFKA-15078)
            zero = await sc.call("the leader answers Fetch", probe.fetch(epoch, 0, 0))
            sid = S.snapshot_id_of(B.partition(zero))
        last = B.describe("Fetch", "response", resp)
        if (cleaned and start > 0) or (not cleaned and sid is not None):
            # (cleaned: the case itself judges whether a Fetch below that start gets a SnapshotId)
            return OwnSnapshot(epoch, sid or (-1, -1), start, int(part.get("HighWatermark", -1)))
        if loop.time() >= deadline:
            break
        await sc.idle(0.2)
    if start > 0:
        sc.skip(
            f"the target's log starts at {start} but its answers to Fetch below it (and from 0) carry no SnapshotId "
            f"(KIP-630/Snapshot/4 judges that rule), so the harness knows no snapshot to fetch (last: {last})"
        )
    what = "a snapshot and a log start past 0" if cleaned else "a snapshot"
    raise CaseSkipped(
        f"needs capability 'snapshots' ({what}): after {fed} committed records the target's Fetch answers showed "
        f"none within {bound:.0f} ms (last: {last}); {settings_hint(sc)}"
    )


async def download(sc: Scenario, voter: Any, epoch: int, sid: tuple[int, int], max_bytes: int) -> bytes:
    """FetchSnapshot ``sid`` from the target leader from Position 0 to its Size, ``max_bytes`` per request,
    checking each answer (KIP-630 "Fetch Snapshot Request Handling"); returns the bytes."""
    data = b""
    size: int | None = None
    for _ in range(100_000):
        resp = await sc.call(f"FetchSnapshot at Position {len(data)} is answered",
                             voter.fetch_snapshot(epoch, sid, len(data), max_bytes=max_bytes), FS_REQ)
        part = B.partition_or_none(resp) or {}
        summary = B.describe("FetchSnapshot", "response", resp)
        err = S.errors_of(resp)
        sc.check(err == 0, f"the leader serves its snapshot {sid} from Position {len(data)}", "ErrorCode NONE",
                 summary, FS_REQ)
        chunk = S.chunk_of(part)
        this_size = int(part.get("Size", -1))
        sc.check(
            S.snapshot_id_of(part) == sid and part.get("Position") == len(data)
            and (size is None or this_size == size) and this_size > len(data),
            "each answer names the SnapshotId and the Position asked, and the same Size",
            f"SnapshotId={sid}, Position={len(data)}, Size={size if size is not None else f'> {len(data)}'}",
            summary,
            FS_REQ,
        )
        size = this_size
        sc.check(
            0 < len(chunk) <= max_bytes,
            f"each answer carries between 1 byte and MaxBytes ({max_bytes}) of the snapshot",
            f"1..{max_bytes} bytes",
            f"{len(chunk)} bytes; {summary}",
            FS_REQ,
        )
        data += chunk
        if len(data) >= size:
            break
    sc.check(size is not None and len(data) == size, "the chunks add up to Size", f"{size} bytes",
             f"{len(data)} bytes", FS_REQ)
    return data


def check_snapshot_bytes(sc: Scenario, data: bytes, sid: tuple[int, int]) -> S.SnapshotReading:
    reading = S.read_snapshot(data)
    sc.check(
        reading.ok,
        f"snapshot {sid} is a sequence of record batches with valid CRCs, a SnapshotHeaderRecord first and a "
        "SnapshotFooterRecord last",
        "a well-formed snapshot",
        f"{'; '.join(reading.problems)} ({reading.summary()})",
        FORMAT,
    )
    return reading


@case("KIP-630/Snapshot/4", own_life=True)
async def test_fetch_below_log_start_gets_snapshot_id(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchRequestOffsetLessThanLogStart, testFetchRequestOffsetAtZero.
    async with snapshot_life(sc, snapshot_properties=True):
        own = await leader_with_own_snapshot(sc, cleaned=True)
        probe = sc.q.voters[sc.bystander]
        log = sc.q.log
        offset = max(1, own.log_start - 1)
        resp = await sc.call("Fetch below the log start is answered",
                             probe.fetch(own.epoch, offset, log.epoch_at(offset - 1)))
        part = B.partition(resp)
        sid = S.snapshot_id_of(part)
        start = int(part.get("LogStartOffset", -1))
        hw = int(part.get("HighWatermark", -1))
        summary = B.describe("Fetch", "response", resp)
        sc.check(
            sid is not None and not B.records_of(part) and B.diverging_of(part) is None and not S.errors_of(resp),
            f"Fetch(offset={offset}) below the leader's log start {own.log_start} is answered with the SnapshotId of "
            "its latest snapshot, no records, no DivergingEpoch",
            "SnapshotId set, no records",
            summary,
            FETCH_REQ,
        )
        assert sid is not None
        sc.check(
            start <= sid[0] and (hw < 0 or sid[0] <= hw),
            "the log start never passes the latest snapshot, and a snapshot holds committed records only",
            f"LogStartOffset <= SnapshotId.EndOffset <= HighWatermark ({start} <= {sid[0]} <= {hw})",
            summary,
            LOG_START,
        )
        zero = await sc.call("Fetch at offset 0 is answered", probe.fetch(own.epoch, 0, 0))
        sc.check(
            S.snapshot_id_of(B.partition(zero)) is not None,
            "a Fetch from offset 0 is answered with SnapshotId whenever the leader holds a snapshot "
            "(KafkaRaftClient.tryCompleteFetchRequest, KAFKA-15078; KafkaRaftClientSnapshotTest"
            ".testFetchRequestOffsetAtZero)",
            "SnapshotId set",
            B.describe("Fetch", "response", zero),
            FETCH_REQ,
            level=KAFKA,
            kafka=ROW_ZERO,
        )


@case("KIP-630/Snapshot/5", own_life=True)
async def test_fetch_snapshot_in_chunks_record_by_record(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchSnapshotRequestAsLeader, testPartialFetchSnapshotRequestAsLeader.
    async with snapshot_life(sc, snapshot_properties=True):
        own = await leader_with_own_snapshot(sc, cleaned=False)
        sid = own.snapshot_id
        data = await download(sc, sc.q.voters[sc.bystander], own.epoch, sid, CHUNK_MAX_BYTES)
        reading = check_snapshot_bytes(sc, data, sid)
        offsets_ok = reading.batches[0].base_offset == 0 and all(
            b.last_offset + 1 == n.base_offset for b, n in zip(reading.batches, reading.batches[1:], strict=False)
        )
        epochs = sorted({b.partition_leader_epoch for b in reading.batches})
        sc.check(
            offsets_ok and epochs == [sid[1]],
            "the snapshot's batches run from offset 0 without gaps, each in the snapshot's epoch "
            "(RecordsSnapshotWriter: a BatchAccumulator at offset 0 in SnapshotId.Epoch)",
            f"offsets 0, 1, 2, ... and epoch {sid[1]} in every batch",
            f"batches at {[b.base_offset for b in reading.batches][:12]}, epochs {epochs}",
            FORMAT,
            level=KAFKA,
            kafka=ROW_LAYOUT,
        )
        sc.check(
            not reading.undecodable and "FeatureLevelRecord" in reading.records,
            "the snapshot's data records are metadata records (ApiMessageAndVersion), the metadata.version "
            "FeatureLevelRecord among them",
            "every data record decodes; FeatureLevelRecord present",
            f"{reading.summary()}; undecodable: {reading.undecodable[:3]}",
            FORMAT,
            level=INFO,
        )


async def snapshot_size(sc: Scenario, own: OwnSnapshot) -> int:
    resp = await sc.call("FetchSnapshot at Position 0 is answered",
                         sc.q.voters[sc.bystander].fetch_snapshot(own.epoch, own.snapshot_id, 0, max_bytes=1), FS_REQ)
    part = B.partition(resp)
    sc.check(S.errors_of(resp) == 0 and int(part.get("Size", -1)) > 0,
             f"setup: the leader serves its snapshot {own.snapshot_id}", "ErrorCode NONE, Size > 0",
             B.describe("FetchSnapshot", "response", resp), FS_REQ)
    return int(part["Size"])


def refused(resp: dict[str, Any], error: int) -> bool:
    part = B.partition_or_none(resp) or {}
    return S.errors_of(resp) == error and not S.chunk_of(part)


@case("KIP-630/Snapshot/6", own_life=True)
async def test_fetch_snapshot_position_out_of_range(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchSnapshotRequestWithInvalidPosition.
    async with snapshot_life(sc, snapshot_properties=True):
        own = await leader_with_own_snapshot(sc, cleaned=False)
        size = await snapshot_size(sc, own)
        probe = sc.q.voters[sc.bystander]
        for position, level in ((size + 1000, None), (size, KAFKA), (-1, KAFKA)):
            resp = await sc.call(f"FetchSnapshot at Position {position} is answered",
                                 probe.fetch_snapshot(own.epoch, own.snapshot_id, position), FS_REQ)
            what = (f"FetchSnapshot of {own.snapshot_id} (Size {size}) at Position {position}, outside the snapshot, "
                    "is refused")
            summary = B.describe("FetchSnapshot", "response", resp)
            if level is None:
                sc.check(refused(resp, Errors.POSITION_OUT_OF_RANGE), what, "POSITION_OUT_OF_RANGE, no bytes",
                         summary, Clause("KIP-630", "Fetch Snapshot Request Handling", "POSITION_OUT_OF_RANGE"))
            else:
                sc.check(refused(resp, Errors.POSITION_OUT_OF_RANGE),
                         what + " (Kafka: Position < 0 or >= Size, KafkaRaftClient.handleFetchSnapshotRequest)",
                         "POSITION_OUT_OF_RANGE, no bytes", summary, FS_REQ, level=KAFKA, kafka=ROW_POSITION)


@case("KIP-630/Snapshot/7", own_life=True)
async def test_fetch_snapshot_unknown_snapshot(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchSnapshotRequestMissingSnapshot.
    async with snapshot_life(sc, snapshot_properties=True):
        own = await leader_with_own_snapshot(sc, cleaned=False)
        end, ep = own.snapshot_id
        probe = sc.q.voters[sc.bystander]
        for sid in ((end + 1000, ep), (end, ep + 1)):
            resp = await sc.call(f"FetchSnapshot of {sid} is answered", probe.fetch_snapshot(own.epoch, sid, 0), FS_REQ)
            sc.check(
                refused(resp, Errors.SNAPSHOT_NOT_FOUND),
                f"FetchSnapshot of SnapshotId {sid}, which the leader does not hold (its snapshot: {own.snapshot_id})",
                "SNAPSHOT_NOT_FOUND, no bytes",
                B.describe("FetchSnapshot", "response", resp),
                Clause("KIP-630", "Fetch Snapshot Request Handling", "SNAPSHOT_NOT_FOUND"),
            )


@case("KIP-630/Snapshot/8", own_life=True)
async def test_fetch_snapshot_epoch_and_cluster_id(sc: Scenario) -> None:
    # Kafka: KafkaRaftClientSnapshotTest.testFetchSnapshotRequestWithOlderEpoch, testFetchSnapshotRequestWithNewerEpoch,
    # testFetchSnapshotRequestClusterIdValidation.
    async with snapshot_life(sc, snapshot_properties=True):
        own = await leader_with_own_snapshot(sc, cleaned=False)
        probe = sc.q.voters[sc.bystander]
        e, sid = own.epoch, own.snapshot_id
        for epoch, error in ((e - 1, Errors.FENCED_LEADER_EPOCH), (e + 1, Errors.UNKNOWN_LEADER_EPOCH)):
            resp = await sc.call(f"FetchSnapshot in epoch {epoch} is answered", probe.fetch_snapshot(epoch, sid, 0),
                                 EVERY_RPC)
            sc.check(
                refused(resp, error),
                f"FetchSnapshot with CurrentLeaderEpoch {epoch} to the leader of epoch {e} is refused",
                f"{error.name}, no bytes",
                B.describe("FetchSnapshot", "response", resp),
                EVERY_RPC,
            )
        foreign = "kraft-tck-foreign-cluster"
        try:
            resp = await probe.fetch_snapshot(e, sid, 0, cluster_id=foreign)
            summary = B.describe("FetchSnapshot", "response", resp)
            ok = int(resp.get("ErrorCode", 0) or 0) == Errors.INCONSISTENT_CLUSTER_ID and not S.chunk_of(
                B.partition_or_none(resp) or {})
        except RequestError as exc:
            summary, ok = f"no answer: {exc}", False
        sc.check(ok, f"FetchSnapshot with ClusterId {foreign!r} (not the target's) is refused",
                 "top-level INCONSISTENT_CLUSTER_ID, no bytes", summary, EVERY_RPC)
        resp = await sc.call("FetchSnapshot in the leader's epoch is answered", probe.fetch_snapshot(e, sid, 0),
                             EVERY_RPC)
        sc.check(S.errors_of(resp) == 0 and bool(S.chunk_of(B.partition(resp))),
                 f"the refusals changed nothing: the leader of epoch {e} still serves its snapshot",
                 "ErrorCode NONE, bytes", B.describe("FetchSnapshot", "response", resp), EVERY_RPC)
