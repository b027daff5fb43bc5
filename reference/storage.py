"""Durable storage of one KRaft data directory, in Kafka's on-disk layout.

::

    <log.dirs>/meta.properties                      version=1, node.id, cluster.id[, directory.id]
    <log.dirs>/__cluster_metadata-0/
        00000000000000000000.log                    RecordBatch v2, back to back (one segment)
        00000000000000000000.index                  sparse offset index: int32 relative offset, int32 position
        00000000000000004711.log ...                next segment, named by its base offset
        leader-epoch-checkpoint                     "0", count, then "epoch startOffset" lines
        quorum-state                                QuorumStateData JSON (leader, epoch, vote)
        00000000000000004711-0000000003.checkpoint  a snapshot (``snapshot.py``)
    <log.dirs>/log-start-offset-checkpoint          "0", "1", "__cluster_metadata 0 <log start offset>"

Log start offset and cleaning (KIP-630)
    The log may start above 0: :meth:`LogDir.delete_before_snapshot` (driven by :meth:`LogDir.maybe_clean`,
    Kafka's ``KafkaMetadataLog.maybeClean`` / ``deleteBeforeSnapshot``) moves the start up to a snapshot's
    end offset, deletes the segments wholly below it and trims the epoch cache, and a follower installing a
    snapshot empties the log with :meth:`LogDir.truncate_fully_and_start_at`. The start is persisted in
    ``log-start-offset-checkpoint`` (Kafka's OffsetCheckpointFile format) before any segment goes, so a
    restart comes back with the same start. (Kafka's metadata log does not checkpoint it: after a restart
    its start is the first segment's base offset. Without the file this class starts there too, then moves
    up to the first snapshot end at or above it.) After :meth:`LogDir.open` a log starting above 0 always
    starts at a valid snapshot's end (:attr:`LogDir.start_snapshot_id`); when the snapshot there was found
    corrupt, the start moves up to the next valid snapshot, which covers the records in between. Reading
    below the start raises :class:`OffsetOutOfRangeError`.

Durability
    ``append`` writes batches to the active segment; ``flush`` makes them durable with one fsync of the
    segment (plus one of the directory when a segment was created since the last flush). The small
    files (``quorum-state``, ``meta.properties``, ``leader-epoch-checkpoint``, rebuilt indexes) are
    replaced atomically: temp file, fsync, rename, fsync of the directory — so a crash leaves either the
    old or the new content, never a mix. ``truncate_to`` is durable when it returns. ``fsync=False``
    (benchmarks only) skips every fsync and with it every crash-safety promise.

Derived files
    The offset index and the leader-epoch checkpoint are caches of what the segments say. Recovery
    recomputes both from the segments and rewrites a file that is missing or disagrees, so index
    entries are appended without fsync; the checkpoint is rewritten (atomically) only when an append
    starts a new epoch or a truncation removes one.

Recovery policy (at :meth:`LogDir.open`)
    Every segment is scanned batch by batch (length, CRC32C, contiguous offsets, non-decreasing leader
    epochs) — Kafka scans only segments after its recovery point; a metadata log is small enough, and
    the node reads all of it at start anyway. At the first batch that fails, the log is cut at that
    batch's start position and every later segment is deleted; nothing before it is touched.

    * If the bad batch is the *tail* — its declared end reaches or passes the end of the log, or only
      zero bytes follow it, as after a crash mid-write (torn), or before the page cache reached the disk
      (bad CRC, zero-filled blocks) — the cut is logged at WARNING: such bytes were never flushed, so
      nothing acknowledged after a ``flush`` is lost.
    * If bytes follow the bad batch (corruption in the *middle* of the log), the cut is logged at ERROR
      as DATA LOSS with the number of bytes and segments dropped. The log is still cut there rather
      than skipping the bad batch: Raft logs must stay gap-free, and the lost suffix is re-fetched
      from the leader.

    Each log line names the file, byte position, offset and the reason (with expected/actual CRC).

    Snapshots and the log start come next: the snapshot store validates every snapshot (``snapshot.py``;
    a bad one is set aside), segments wholly below the checkpointed start are deleted (a cleaning cut short
    by a crash), snapshots below the start go (Kafka's ``KafkaMetadataLog.recoverSnapshots``), a start above
    0 with no valid snapshot at or after it refuses to open (Kafka throws there too), and a log behind its
    latest snapshot is emptied to start at it (Kafka's ``KafkaMetadataLog.apply`` →
    ``truncateToLatestSnapshot``: a follower that crashed between a download and its truncation).

A :class:`LogDir` has one owner and is not thread-safe.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import json
import logging
import os
import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_tck.reference.config import ConfigError, parse_properties, render_properties
from kraft_tck.spec.errors import CorruptRecordError, DecodeError
from kraft_tck.spec.records import LOG_OVERHEAD, RecordBatch, decode_batch, encode_batch

if TYPE_CHECKING:
    from kraft_tck.reference.io import ElectionState
    from kraft_tck.reference.messages import SnapshotId
    from kraft_tck.reference.snapshot import Snapshot, SnapshotRecord, SnapshotStore
    from kraft_tck.reference.voters import VoterSet

log = logging.getLogger("kraft_tck.reference.storage")

METADATA_PARTITION_DIR = "__cluster_metadata-0"
META_PROPERTIES = "meta.properties"
QUORUM_STATE = "quorum-state"
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
METADATA_TOPIC = "__cluster_metadata"
TMP_SUFFIX = ".tmp"
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
# Kafka's index.interval.bytes default: one index entry per 4 KiB of log.
DEFAULT_INDEX_INTERVAL_BYTES = 4096

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index)$")
_INDEX_ENTRY = struct.Struct(">ii")  # relative (last) offset of a batch, file position of its start
_LENGTH_AT = struct.Struct(">qi")  # baseOffset, batchLength
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta: enough to find a
# batch by offset without decoding it
_LOCATE_HEAD = struct.Struct(">qiibIhi")


class StorageError(Exception):
    """A storage operation that cannot be done, or an on-disk file that cannot be read."""


class CorruptFileError(StorageError):
    """``quorum-state``, ``meta.properties``, ``leader-epoch-checkpoint`` or a segment file with unreadable
    content."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class OffsetOutOfRangeError(StorageError):
    """A read of offsets below the log start offset (they were cleaned: a snapshot holds them)."""


class FormatError(StorageError):
    """``format`` refused: the directory already belongs to another cluster or node."""


# ---------------------------------------------------------------------------------------------- small files


def fsync_dir(path: Path) -> None:
    """fsync a directory so that file creations, renames and deletions in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, fsync: bool = True) -> int:
    """Replace ``path`` with ``data`` atomically; return the number of fsyncs done.

    The temp file is removed if anything fails before the rename, so the old file stays intact and no
    temp file is left behind.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(path.parent)
        return 2
    return 0


#: Kafka's ``Uuid.ZERO_UUID`` as a string: "no directory id" (QuorumStateData v1, VotersRecord, the wire).
ZERO_UUID_STRING = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumStateData:
    """Kafka's QuorumStateData (quorum-state file). ``leader_id``/``voted_id`` are -1 when unknown/none.

    Kafka writes data_version 0 with ClusterId (always ""), AppliedOffset and CurrentVoters; data_version
    1 (KIP-853) drops those and carries VotedDirectoryId. Both are read. ``version`` picks what is written:
    Kafka's ``FileQuorumStateStore.writeElectionState`` writes at the version of the node's kraft.version
    (``KRaftVersion.quorumStateVersion``: 0 -> 0, 1 -> 1), with VotedDirectoryId = the voted replica's
    directory id or the zero Uuid (``ElectionState.toQuorumStateData``); use :meth:`from_election`. With
    ``version`` None (and on read) version 1 is written only when ``voted_directory_id`` is set.
    """

    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    applied_offset: int = 0
    current_voters: tuple[int, ...] | None = ()
    cluster_id: str = ""
    voted_directory_id: str | None = None
    version: int | None = None

    @classmethod
    def from_election(cls, state: ElectionState, kraft_version: int = 0,
                      current_voters: tuple[int, ...] = ()) -> QuorumStateData:
        """What Kafka writes for the core's ``io.ElectionState`` at ``kraft_version`` (see the class docstring):
        data_version 1 with ``votedDirectoryId`` from kraft.version 1 on, version 0 with ``currentVoters``
        before."""
        voted_dir = state.voted_directory_id
        if kraft_version >= 1:
            return cls(leader_epoch=state.leader_epoch, leader_id=state.leader_id, voted_id=state.voted_id,
                       current_voters=None, voted_directory_id=voted_dir or ZERO_UUID_STRING, version=1)
        return cls(leader_epoch=state.leader_epoch, leader_id=state.leader_id, voted_id=state.voted_id,
                   current_voters=tuple(current_voters), version=0)

    @property
    def voted_directory(self) -> str | None:
        """The voted replica's directory id as the core takes it: None for none or the zero Uuid
        (``ReplicaKey.of`` with ``Uuid.ZERO_UUID`` has no directory id)."""
        vdir = self.voted_directory_id
        return None if vdir in (None, ZERO_UUID_STRING) or self.voted_id < 0 else vdir

    def to_json(self) -> dict[str, Any]:
        if self.version == 1 or (self.version is None and self.voted_directory_id is not None):
            return {
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "votedDirectoryId": self.voted_directory_id or ZERO_UUID_STRING,
                "data_version": 1,
            }
        # Field order and names as Kafka's QuorumStateDataJsonConverter writes them.
        return {
            "clusterId": self.cluster_id,
            "leaderId": self.leader_id,
            "leaderEpoch": self.leader_epoch,
            "votedId": self.voted_id,
            "appliedOffset": self.applied_offset,
            "currentVoters": None
            if self.current_voters is None
            else [{"voterId": v} for v in self.current_voters],
            "data_version": 0,
        }

    @classmethod
    def from_json(cls, path: Path, doc: object) -> QuorumStateData:
        if not isinstance(doc, dict):
            raise CorruptFileError(path, f"expected a JSON object, got {type(doc).__name__}")

        def get_int(name: str, default: int | None) -> int:
            value = doc.get(name, default)
            if type(value) is not int:
                raise CorruptFileError(path, f"field {name!r} must be an integer, got {value!r}")
            return value

        if "data_version" not in doc:
            raise CorruptFileError(path, "missing field 'data_version'")
        version = get_int("data_version", None)
        if version not in (0, 1):
            raise CorruptFileError(path, f"field 'data_version' must be 0 or 1, got {version}")
        epoch = get_int("leaderEpoch", -1)
        leader, voted = get_int("leaderId", -1), get_int("votedId", -1)
        if version == 1:
            vdir = doc.get("votedDirectoryId")
            if vdir is not None and not isinstance(vdir, str):
                raise CorruptFileError(path, f"field 'votedDirectoryId' must be a string, got {vdir!r}")
            return cls(
                leader_epoch=epoch,
                leader_id=leader,
                voted_id=voted,
                current_voters=None,
                voted_directory_id=vdir,
            )
        cluster_id = doc.get("clusterId", "")
        if not isinstance(cluster_id, str):
            raise CorruptFileError(path, f"field 'clusterId' must be a string, got {cluster_id!r}")
        raw_voters = doc.get("currentVoters")
        voters: tuple[int, ...] | None = None
        if raw_voters is not None:
            if not isinstance(raw_voters, list) or not all(
                isinstance(v, dict) and type(v.get("voterId")) is int for v in raw_voters
            ):
                raise CorruptFileError(
                    path, f"field 'currentVoters' must be a list of {{\"voterId\": int}}, got {raw_voters!r}"
                )
            voters = tuple(v["voterId"] for v in raw_voters)
        return cls(
            leader_epoch=epoch,
            leader_id=leader,
            voted_id=voted,
            applied_offset=get_int("appliedOffset", 0),
            current_voters=voters,
            cluster_id=cluster_id,
        )


def read_quorum_state_file(path: Path) -> QuorumStateData | None:
    """The quorum state in ``path``, or None when the file does not exist (a fresh node)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise CorruptFileError(
            path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return QuorumStateData.from_json(path, doc)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """Kafka's meta.properties, version 1 (KRaft). KIP-595 Fetch Request Handling step 1 checks a
    request's clusterId against "the cached value in meta.properties"."""

    node_id: int
    cluster_id: str
    directory_id: str | None = None
    version: int = 1

    def to_properties(self) -> dict[str, str]:
        props = {"cluster.id": self.cluster_id}
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        props["node.id"] = str(self.node_id)
        props["version"] = str(self.version)
        return props


_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def new_uuid() -> str:
    """A random id in Kafka's Uuid string form (URL-safe base64 of 16 bytes, no padding), like
    ``kafka-storage random-uuid``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def read_meta_file(path: Path) -> MetaProperties | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise CorruptFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        props = parse_properties(text, source=str(path))
    except ConfigError as exc:
        raise CorruptFileError(path, str(exc)) from None
    if props.get("version") != "1":
        raise CorruptFileError(
            path, f"expected version=1 (a KRaft meta.properties), got version={props.get('version')!r}"
        )
    node_id = props.get("node.id", "")
    if not node_id.isdigit():
        raise CorruptFileError(path, f"expected node.id=<non-negative integer>, got {props.get('node.id')!r}")
    cluster_id = props.get("cluster.id", "")
    if not _CLUSTER_ID.match(cluster_id):
        raise CorruptFileError(
            path, f"expected cluster.id=<id of [A-Za-z0-9_-]>, got {props.get('cluster.id')!r}"
        )
    return MetaProperties(int(node_id), cluster_id, props.get("directory.id"))


def write_meta_file(path: Path, meta: MetaProperties, fsync: bool = True) -> int:
    if not _CLUSTER_ID.match(meta.cluster_id):
        raise StorageError(f"{path}: cluster id {meta.cluster_id!r} must be non-empty [A-Za-z0-9_-]")
    text = render_properties(meta.to_properties(), header="Written by kraft-tck (Kafka meta.properties v1)")
    return atomic_write(path, text.encode("utf-8"), fsync)


def format_dir(
    data_dir: str | Path, node_id: int, cluster_id: str, directory_id: str | None = None
) -> MetaProperties:
    """Prepare ``data_dir`` like ``kafka-storage format``: write ``meta.properties``.

    Formatting again with the same node id and cluster id is a no-op; a different cluster id or node id
    is refused, since that would make the node join a cluster its log does not belong to.
    """
    path = Path(data_dir)
    if node_id < 0:
        raise FormatError(f"{path}: node id must be ≥ 0, got {node_id}")
    if not _CLUSTER_ID.match(cluster_id):
        raise FormatError(
            f"{path}: cluster id {cluster_id!r} must be non-empty [A-Za-z0-9_-] (e.g. {new_uuid()})"
        )
    path.mkdir(parents=True, exist_ok=True)
    existing = read_meta_file(path / META_PROPERTIES)
    if existing is not None:
        if existing.cluster_id != cluster_id:
            raise FormatError(
                f"{path / META_PROPERTIES}: already formatted for cluster.id {existing.cluster_id!r}; "
                f"refusing to re-format for cluster.id {cluster_id!r} (remove the directory to start over)"
            )
        if existing.node_id != node_id:
            raise FormatError(
                f"{path / META_PROPERTIES}: already formatted for node.id {existing.node_id}; "
                f"refusing to re-format for node.id {node_id}"
            )
        return existing
    meta = MetaProperties(node_id, cluster_id, directory_id or new_uuid())
    write_meta_file(path / META_PROPERTIES, meta)
    return meta


format = format_dir  # the name kafka-storage uses; format_dir inside this module avoids the builtin


# ---------------------------------------------------------------------------------------------- the log


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One leader-epoch-checkpoint line: the first offset written in ``epoch``."""

    epoch: int
    start_offset: int


def render_epoch_checkpoint(entries: Sequence[EpochEntry]) -> str:
    return "".join(["0\n", f"{len(entries)}\n", *(f"{e.epoch} {e.start_offset}\n" for e in entries)])


def parse_epoch_checkpoint(path: Path, text: str) -> list[EpochEntry]:
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        raise CorruptFileError(path, "expected a version line '0' and a count line")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise CorruptFileError(path, f"count line says {count} entries, found {len(lines) - 2}")
    entries = []
    for i, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
            raise CorruptFileError(path, f"line {i}: expected 'epoch startOffset', got {line!r}")
        entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    return entries


def render_log_start_checkpoint(start_offset: int) -> str:
    """Kafka's OffsetCheckpointFile (version 0, one entry) holding the metadata partition's log start."""
    return f"0\n1\n{METADATA_TOPIC} 0 {start_offset}\n"


def parse_log_start_checkpoint(path: Path, text: str) -> int | None:
    """The metadata partition's log start offset in a ``log-start-offset-checkpoint`` (None if absent)."""
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        raise CorruptFileError(path, "expected a version line '0' and a count line")
    if int(lines[1]) != len(lines) - 2:
        raise CorruptFileError(path, f"count line says {int(lines[1])} entries, found {len(lines) - 2}")
    for i, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise CorruptFileError(path, f"line {i}: expected 'topic partition offset', got {line!r}")
        if parts[0] == METADATA_TOPIC and parts[1] == "0":
            return int(parts[2])
    return None


def _segment_name(base_offset: int, ext: str) -> str:
    return f"{base_offset:020d}.{ext}"


@dataclass(slots=True)
class _Segment:
    base_offset: int
    log_path: Path
    size: int = 0
    end_offset: int = 0  # offset after the last batch; == base_offset when empty
    index: list[tuple[int, int]] = field(default_factory=list)  # (absolute last offset, position)
    bytes_since_index: int = 0

    @property
    def index_path(self) -> Path:
        return self.log_path.with_suffix(".index")

    def index_bytes(self) -> bytes:
        return b"".join(_INDEX_ENTRY.pack(off - self.base_offset, pos) for off, pos in self.index)


@dataclass(frozen=True, slots=True)
class _BadBatch:
    segment: int  # index in the segment list
    position: int
    offset: int
    reason: str
    is_tail: bool


class LogDir:
    """The metadata log, epoch cache and state files of one data directory. Use :meth:`open`."""

    def __init__(self, data_dir: Path, segment_bytes: int, index_interval_bytes: int, fsync: bool) -> None:
        self.data_dir = data_dir
        self.partition_dir = data_dir / METADATA_PARTITION_DIR
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.fsync = fsync
        self.fsync_count = 0  # every fsync done through this object (benchmarks report it)
        self._segments: list[_Segment] = []
        self._epochs: list[EpochEntry] = []
        self._fd: int | None = None  # active segment, O_APPEND
        self._unsynced = False  # appended bytes not yet fsynced
        self._dir_unsynced = False  # a segment file created since the last directory fsync
        self._start = 0  # the log start offset (KIP-630): offsets below it are in a snapshot only
        self.snapshots: SnapshotStore  # set by ``open``


    # ------------------------------------------------------------------ open / recovery

    @classmethod
    def open(
        cls,
        data_dir: str | Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        fsync: bool = True,
    ) -> LogDir:
        """Open (creating if needed) the log under ``data_dir`` and recover it (see the module docstring)."""
        if segment_bytes < 1 or index_interval_bytes < 1:
            raise ValueError("segment_bytes and index_interval_bytes must be positive")
        self = cls(Path(data_dir), segment_bytes, index_interval_bytes, fsync)
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        self._recover()
        return self

    def _recover(self) -> None:
        for d in (self.data_dir, self.partition_dir):
            for stale in d.glob("*" + TMP_SUFFIX):
                # A crash between writing a temp file and renaming it: the real file is intact.
                log.info("%s: removing temp file left by an interrupted write", stale)
                stale.unlink()
        from kraft_tck.reference.snapshot import SnapshotStore  # snapshot.py imports this module

        self.snapshots = SnapshotStore.open(self.partition_dir, fsync=self.fsync)
        logs: dict[int, Path] = {}
        for p in self.partition_dir.iterdir():
            m = _SEGMENT_NAME.match(p.name)
            if m and m.group(2) == "log":
                logs[int(m.group(1))] = p
        for p in self.partition_dir.glob("*.index"):
            m = _SEGMENT_NAME.match(p.name)
            if m and int(m.group(1)) not in logs:
                log.info("%s: removing index without a segment", p)
                p.unlink()
        self._segments = [_Segment(base, logs[base]) for base in sorted(logs)]
        if not self._segments:
            self._segments.append(self._create_segment(0))

        bad = self._scan()
        if bad is not None:
            self._cut(bad)
        self._recover_start()
        for seg in self._segments:
            self._check_index(seg)
        self._check_epoch_checkpoint()
        self._open_active()
        self._sync_dir_if_needed()
        self._recover_snapshots()
        # Kafka's KafkaMetadataLog.apply: a follower that crashed after downloading a snapshot but before
        # emptying its log does it now.
        self.truncate_to_latest_snapshot()

    def _recover_start(self) -> None:
        """The log start offset from its checkpoint, and what a crash in a cleaning may have left undone.

        As Kafka's LogLoader, the start is the larger of the checkpoint and the first segment's base offset,
        and a log ending below the checkpointed start is emptied to start there."""
        path = self.data_dir / LOG_START_CHECKPOINT
        try:
            recorded = parse_log_start_checkpoint(path, path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            recorded = None
        except (CorruptFileError, UnicodeDecodeError) as exc:
            log.warning("%s: unreadable (%s); the log starts at its first segment", path, exc)
            recorded = None
        start = self._segments[0].base_offset if recorded is None else max(recorded, self._segments[0].base_offset)
        self._start = start
        if start > self.end_offset:
            log.warning(
                "%s: the log ends at %d, below its start offset %d; emptied to start at %d",
                self.partition_dir,
                self.end_offset,
                start,
                start,
            )
            self._replace_segments(start)
        elif self._delete_segments_below_start():
            log.info("%s: finished deleting segments below the log start offset %d", self.partition_dir, start)
        self._trim_epochs()
        if recorded != start and (recorded is not None or start > 0):
            self._write_start_checkpoint()

    def _recover_snapshots(self) -> None:
        """Kafka's KafkaMetadataLog.recoverSnapshots: snapshots below the log start go; a log that starts
        above 0 needs a snapshot covering its start, else the state below it is lost: refuse to open."""
        from kraft_tck.reference.messages import SnapshotId

        self.snapshots.delete_before(SnapshotId(self._start, 0))
        latest = self.snapshots.latest()
        if self._start > 0 and (latest is None or latest.end_offset < self._start):
            bad = "; ".join(f"{p.name}: {why}" for p, why in self.snapshots.quarantined) or "none"
            raise StorageError(
                f"{self.partition_dir}: inconsistent snapshot state: the log starts at offset {self._start} but "
                f"the latest valid snapshot is {latest}; snapshots set aside as corrupt: {bad}. The records "
                "below the log start exist only in a snapshot: restore one, or wipe the directory so that the "
                "node fetches a snapshot from the leader"
            )
        if self._start > 0 and self.start_snapshot_id is None:
            # The snapshot at the start was set aside as corrupt, or the start checkpoint was lost (the start fell
            # back to the first segment): a later snapshot covers everything up to its end, so the log starts there.
            nxt = min(s for s in self.snapshots.ids() if s.end_offset > self._start)
            log.warning(
                "%s: no valid snapshot ends at the log start offset %d; the log now starts at snapshot %s",
                self.partition_dir,
                self._start,
                nxt,
            )
            if nxt.end_offset <= self.end_offset and self._is_batch_boundary(nxt.end_offset):
                self._advance_start(nxt.end_offset)
            else:
                self.truncate_fully_and_start_at(nxt.end_offset)

    def _scan(self) -> _BadBatch | None:
        """Validate every batch, filling sizes, indexes and the epoch cache; return the first bad batch."""
        expected = self._segments[0].base_offset
        epochs: list[EpochEntry] = []
        self._epochs = epochs  # filled as batches validate, so a cut keeps the epochs before it
        for si, seg in enumerate(self._segments):
            if seg.base_offset != expected:
                # Only the newest segment may be empty, so a segment not starting where its predecessor
                # ends is a gap: cut at the end of the predecessor (si > 0 since expected starts there).
                prev = self._segments[si - 1]
                gap = f"next segment {seg.log_path.name} does not start at offset {expected}"
                return self._bad(si - 1, prev.size, expected, gap, declared_end=prev.size)
            data = seg.log_path.read_bytes()
            seg.end_offset = expected
            pos = 0
            while pos < len(data):
                reason: str | None = None
                declared_end = len(data)  # unknown length: treat the rest as the bad batch
                if len(data) - pos >= LOG_OVERHEAD:
                    declared_end = pos + LOG_OVERHEAD + _LENGTH_AT.unpack_from(data, pos)[1]
                try:
                    batch, nxt = decode_batch(data, pos)
                except CorruptRecordError as exc:
                    reason = (
                        f"CRC mismatch (expected {exc.expected_crc:#010x} as stored in the batch, "
                        f"actual {exc.actual_crc:#010x} computed over its contents)"
                    )
                except DecodeError as exc:
                    torn = declared_end > len(data) or len(data) - pos < LOG_OVERHEAD
                    reason = f"{'torn (truncated) batch' if torn else 'malformed batch'}: {exc}"
                else:
                    if batch.base_offset != expected:
                        reason = f"batch base offset {batch.base_offset} is not the expected {expected}"
                    elif epochs and batch.partition_leader_epoch < epochs[-1].epoch:
                        reason = (
                            f"leader epoch {batch.partition_leader_epoch} is below the previous "
                            f"batch's epoch {epochs[-1].epoch}"
                        )
                if reason is not None:
                    if data.count(0, pos) == len(data) - pos:
                        # A file extended by the crash but whose blocks never got written reads as zeros.
                        declared_end = len(data)
                        reason = f"zero-filled tail of {len(data) - pos} bytes ({reason})"
                    seg.size = pos
                    return self._bad(si, pos, expected, reason, declared_end)
                self._note_batch(seg, batch, pos, nxt - pos, epochs)
                expected = batch.last_offset + 1
                pos = nxt
            seg.size = len(data)
        return None

    def _bad(self, si: int, pos: int, offset: int, reason: str, declared_end: int) -> _BadBatch:
        later_data = any(s.log_path.stat().st_size > 0 for s in self._segments[si + 1 :])
        is_tail = declared_end >= self._segments[si].log_path.stat().st_size and not later_data
        return _BadBatch(si, pos, offset, reason, is_tail)

    def _cut(self, bad: _BadBatch) -> None:
        seg = self._segments[bad.segment]
        dropped_here = seg.log_path.stat().st_size - bad.position
        later = self._segments[bad.segment + 1 :]
        dropped_later = sum(s.log_path.stat().st_size for s in later)
        if bad.is_tail:
            log.warning(
                "%s: truncating the log at byte %d (offset %d): %s; %d tail byte(s) dropped",
                seg.log_path,
                bad.position,
                bad.offset,
                bad.reason,
                dropped_here,
            )
        else:
            log.error(
                "DATA LOSS %s: bad batch at byte %d (offset %d) followed by more data: %s; "
                "truncating the log there, dropping %d byte(s) of this segment and %d later segment(s) "
                "(%d bytes); the suffix must be re-fetched from the leader",
                seg.log_path,
                bad.position,
                bad.offset,
                bad.reason,
                dropped_here,
                len(later),
                dropped_later,
            )
        self._truncate_segments(bad.segment, bad.position)

    def _truncate_segments(self, si: int, position: int) -> None:
        """Cut segment ``si`` at ``position`` and delete every later segment, durably."""
        # Delete from the newest so that a crash midway still leaves a gap-free prefix of the log.
        for seg in reversed(self._segments[si + 1 :]):
            seg.index_path.unlink(missing_ok=True)
            seg.log_path.unlink()
            self._dir_unsynced = True
        del self._segments[si + 1 :]
        seg = self._segments[si]
        with open(seg.log_path, "r+b") as fh:
            fh.truncate(position)
            self._fsync(fh.fileno())
        seg.size = position
        self._sync_dir_if_needed()

    def _check_index(self, seg: _Segment) -> None:
        want = seg.index_bytes()
        try:
            have: bytes | None = seg.index_path.read_bytes()
        except FileNotFoundError:
            have = None
        if have == want:
            return
        if have is None:
            log.info(
                "%s: offset index missing; rebuilt from the segment (%d entries)",
                seg.index_path,
                len(seg.index),
            )
        else:
            log.warning(
                "%s: offset index does not match the segment (%d bytes, expected %d); rebuilt",
                seg.index_path,
                len(have),
                len(want),
            )
        self._atomic_write(seg.index_path, want)

    def _check_epoch_checkpoint(self) -> None:
        path = self.partition_dir / EPOCH_CHECKPOINT
        try:
            on_disk: list[EpochEntry] | None = parse_epoch_checkpoint(path, path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            on_disk = None
        except (CorruptFileError, UnicodeDecodeError) as exc:
            log.warning("%s: unreadable (%s); rebuilt from the log", path, exc)
            on_disk = None
        if on_disk != self._epochs:
            if on_disk is not None:
                log.info("%s: did not match the log (%s); rewritten", path, on_disk)
            self._write_epoch_checkpoint()

    # ------------------------------------------------------------------ segments

    def _create_segment(self, base_offset: int) -> _Segment:
        path = self.partition_dir / _segment_name(base_offset, "log")
        for p in (path, path.with_suffix(".index")):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._dir_unsynced = True
        return _Segment(base_offset, path, 0, base_offset)

    def _open_active(self) -> None:
        self._close_active()
        self._fd = os.open(self._segments[-1].log_path, os.O_WRONLY | os.O_APPEND)

    def _close_active(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _roll(self, base_offset: int) -> None:
        # Make the full segment durable now: later flushes only sync the active segment.
        self.flush()
        self._segments.append(self._create_segment(base_offset))
        self._open_active()

    def _note_batch(
        self, seg: _Segment, batch: RecordBatch, position: int, size: int, epochs: list[EpochEntry]
    ) -> bool:
        """Account for a batch written at ``position``; return True when it added an index entry."""
        if not epochs or batch.partition_leader_epoch > epochs[-1].epoch:
            epochs.append(EpochEntry(batch.partition_leader_epoch, batch.base_offset))
        last = batch.base_offset + batch.records[-1].offset_delta  # (``batch.last_offset``, without its call)
        seg.end_offset = last + 1
        seg.bytes_since_index += size
        if seg.bytes_since_index >= self.index_interval_bytes:
            # Kafka indexes a batch by its last offset and the position where the batch starts.
            seg.index.append((last, position))
            seg.bytes_since_index = 0
            return True
        return False

    # ------------------------------------------------------------------ public API

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset the log holds (KIP-630; 0 until a cleaning or a snapshot
        install moves it up). Records below it are in the snapshot ending there."""
        return self._start

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self.snapshots.latest()

    @property
    def start_snapshot_id(self) -> SnapshotId | None:
        """The snapshot ending at the log start (what ``reference/log.py``'s ``Log(start=...)`` takes); None
        when the log starts at 0. After :meth:`open` a log starting above 0 always has one."""
        if self._start == 0:
            return None
        return max((s for s in self.snapshots.ids() if s.end_offset == self._start), default=None)

    @property
    def size_bytes(self) -> int:
        """The segment files' total size (Kafka's ``UnifiedLog.size``, what retention counts)."""
        return sum(seg.size for seg in self._segments)

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next appended record gets."""
        return self._segments[-1].end_offset

    @property
    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._epochs)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def append(self, batches: Iterable[RecordBatch], encoded: Sequence[bytes] | None = None) -> None:
        """Write ``batches`` after the log end (not yet durable: call :meth:`flush`).

        ``encoded``, when given, holds each batch's bytes (one per batch, as the core's log keeps them):
        they are written as they are instead of encoding the batch again.

        Refused as a whole, before anything is written, unless offsets continue exactly from the log
        end and leader epochs never decrease.
        """
        if type(batches) is tuple and encoded is not None:
            try:  # one batch with its bytes (a commit's shape: the leader's write, a follower's Fetch)?
                (batch,), (data,) = batches, encoded
            except ValueError:
                pass  # more or fewer: below
            else:
                if self._append_one(batch, data):
                    return
        batches = batches if isinstance(batches, (list, tuple)) else list(batches)
        if encoded is not None and len(encoded) != len(batches):
            raise StorageError(f"append: {len(batches)} batches but {len(encoded)} encoded forms")
        epochs = self._epochs
        expected, last_epoch = self._segments[-1].end_offset, epochs[-1].epoch if epochs else -1
        for b in batches:  # every batch checked before anything is written
            records, base, epoch = b.records, b.base_offset, b.partition_leader_epoch
            if not records:
                raise StorageError(f"append: batch at offset {base} has no records")
            if base != expected:
                raise StorageError(
                    f"append: batch base offset {base} is not the log end offset {expected} "
                    "(offsets must be contiguous)"
                )
            if epoch < last_epoch:
                raise StorageError(
                    f"append: batch at offset {base} has leader epoch {epoch}, below the log's last epoch {last_epoch}"
                )
            expected, last_epoch = base + records[-1].offset_delta + 1, epoch
        n_epochs = len(epochs)
        # Encoded batches are gathered and written with one write() per segment (or index entry).
        pending: list[bytes] = []
        pending_len = 0
        segment_bytes = self.segment_bytes
        for i, b in enumerate(batches):
            data = encode_batch(b) if encoded is None else encoded[i]
            size = len(data)
            seg = self._segments[-1]
            position = seg.size + pending_len
            if position > 0 and position + size > segment_bytes:
                self._write(pending)
                pending, pending_len = [], 0
                self._roll(b.base_offset)
                seg, position = self._segments[-1], 0
            pending.append(data)
            pending_len += size
            if self._note_batch(seg, b, position, size, epochs):
                self._write(pending)
                pending, pending_len = [], 0
                self._write_index_entry(seg, position)
        self._write(pending)
        if len(epochs) != n_epochs:
            self._write_epoch_checkpoint()

    def _append_one(self, batch: RecordBatch, data: bytes) -> bool:
        """``append`` of one batch given with its bytes (a commit's shape: the leader's write, a follower's Fetch)
        when it passes ``append``'s checks and fits in the active segment: the same checks, writes and accounting
        in straight line. False, with nothing done, otherwise: ``append`` then takes it (and names what is wrong)."""
        seg, epochs = self._segments[-1], self._epochs
        records, epoch, position, size = batch.records, batch.partition_leader_epoch, seg.size, len(data)
        last_epoch = epochs[-1].epoch if epochs else -1
        if not records or batch.base_offset != seg.end_offset or epoch < last_epoch \
                or (position > 0 and position + size > self.segment_bytes):
            return False
        since = seg.bytes_since_index + size
        if epochs and epoch == last_epoch and since < self.index_interval_bytes:
            # The usual batch: in the last batch's epoch, owing no index entry (all but one in index.interval.bytes):
            # ``_note_batch``'s and ``_write``'s work for this case alone, with one os.write.
            seg.end_offset = batch.base_offset + records[-1].offset_delta + 1
            seg.bytes_since_index = since
            assert self._fd is not None
            written = os.write(self._fd, data)
            if written < size:
                self._write_rest(self._fd, data, written)
            seg.size = position + size
            self._unsynced = True
            return True
        n_epochs = len(epochs)
        indexed = self._note_batch(seg, batch, position, size, epochs)
        self._write([data])
        if indexed:
            self._write_index_entry(seg, position)
        if len(epochs) != n_epochs:
            self._write_epoch_checkpoint()
        return True

    @staticmethod
    def _write_index_entry(seg: _Segment, position: int) -> None:
        """The offset index entry ``_note_batch`` just added to ``seg``, at the end of its index file."""
        with open(seg.index_path, "ab") as fh:
            fh.write(_INDEX_ENTRY.pack(seg.index[-1][0] - seg.base_offset, position))

    def _write(self, chunks: list[bytes]) -> None:
        """Write ``chunks`` at the end of the active segment: one write() for the usual single batch."""
        if not chunks:
            return
        assert self._fd is not None
        joined = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        written = os.write(self._fd, joined)
        if written < len(joined):
            self._write_rest(self._fd, joined, written)
        self._segments[-1].size += len(joined)
        self._unsynced = True

    @staticmethod
    def _write_rest(fd: int, data: bytes, written: int) -> None:
        """The rest of a write() that took only ``written`` bytes of ``data``."""
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]

    def flush(self) -> None:
        """Make every appended batch durable (one fsync of the active segment, plus the directory if a
        segment was created)."""
        if self._unsynced and self._fd is not None:
            if self.fsync:  # (``_fsync``'s own test first: without fsync, no call)
                self._fsync(self._fd)
            self._unsynced = False
        if self._dir_unsynced:  # (``_sync_dir_if_needed``'s test first: a segment created since the last flush)
            self._sync_dir_if_needed()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that ends at or after ``offset``, durably; return the new log end offset.

        KIP-595 Fetch Response Handling step 2: on DivergingEpoch the follower truncates "all of the
        offsets greater than or equal to" the divergence end offset; a restart must not bring them back.

        As in Kafka, truncation works on whole batches: a batch containing ``offset`` goes entirely, so
        the new end is ``offset`` whenever ``offset`` is a batch boundary (Raft's divergence points are:
        they are epoch starts). Truncating at or beyond the end is a no-op.
        """
        if offset < self.start_offset:
            raise StorageError(
                f"truncate_to: offset {offset} is below the log start offset {self.start_offset}"
            )
        if offset >= self.end_offset:
            return self.end_offset
        si = max(i for i, s in enumerate(self._segments) if s.base_offset <= offset)
        seg = self._segments[si]
        position, new_end = self._locate(seg, offset)
        if position == 0 and si > 0:
            si -= 1  # the whole segment goes; cut the previous one at its end (a no-op cut)
            seg = self._segments[si]
            position, new_end = seg.size, seg.end_offset
        self._close_active()
        self._truncate_segments(si, position)  # its fsync also covers bytes appended before the cut
        self._unsynced = False
        seg.end_offset = new_end
        seg.index = [(off, pos) for off, pos in seg.index if pos < position]
        seg.bytes_since_index = self._bytes_since_last_index(seg)
        self._atomic_write(seg.index_path, seg.index_bytes())
        kept = [e for e in self._epochs if e.start_offset < new_end]
        if kept != self._epochs:
            self._epochs = kept
            self._write_epoch_checkpoint()
        self._open_active()
        return new_end

    def _bytes_since_last_index(self, seg: _Segment) -> int:
        """Bytes from the start of the last indexed batch's successor to the segment end."""
        if not seg.index:
            return seg.size
        last_pos = seg.index[-1][1]
        with open(seg.log_path, "rb") as fh:
            fh.seek(last_pos + 8)
            (length,) = struct.unpack(">i", fh.read(4))
        return seg.size - (last_pos + LOG_OVERHEAD + length)

    def _locate(self, seg: _Segment, offset: int) -> tuple[int, int]:
        """Position of the first batch in ``seg`` whose last offset is ≥ ``offset``, and its base offset.

        The sparse index narrows the search to one index interval, whose batch headers are then read
        (not the batches: the files were checked at open, and the caller decodes what it reads)."""
        i = bisect.bisect_left(seg.index, offset, key=lambda entry: entry[0])  # entries before: last < offset
        pos = seg.index[i - 1][1] if i else 0
        with open(seg.log_path, "rb") as fh:
            while pos < seg.size:
                fh.seek(pos)
                head = fh.read(_LOCATE_HEAD.size)
                if len(head) < _LOCATE_HEAD.size:
                    raise CorruptFileError(seg.log_path, f"the batch header at position {pos} is cut short")
                base, length, *_rest, last_delta = _LOCATE_HEAD.unpack(head)
                if length < _LOCATE_HEAD.size - LOG_OVERHEAD:  # never loop in place on a damaged length
                    raise CorruptFileError(seg.log_path, f"the batch at position {pos} has length {length}")
                if base + last_delta >= offset:
                    return pos, base
                pos += LOG_OVERHEAD + length
        return seg.size, seg.end_offset

    def _encoded_from(self, offset: int, max_bytes: int | None = None) -> Iterator[tuple[RecordBatch, bytes]]:
        """Every batch whose last offset is ≥ ``offset``, with its bytes, read one batch at a time (the
        offset index skips ahead). With ``max_bytes``, stop before the batch that would take the bytes read
        past it, known from its header before it is read (the first batch always comes, as in Kafka)."""
        first = max(0, bisect.bisect_right(self._segments, offset, key=lambda seg: seg.base_offset) - 1)
        used = 0
        for seg in self._segments[first:]:
            if seg.end_offset <= offset:
                continue
            pos = 0 if seg.base_offset >= offset else self._locate(seg, offset)[0]
            with open(seg.log_path, "rb") as fh:
                fh.seek(pos)
                while pos < seg.size:
                    head = fh.read(LOG_OVERHEAD)
                    try:
                        size = LOG_OVERHEAD + _LENGTH_AT.unpack_from(head)[1]
                        if max_bytes is not None and used and used + size > max_bytes:
                            return
                        data = head + fh.read(size - LOG_OVERHEAD)
                        batch, _end = decode_batch(data)
                    except (DecodeError, struct.error) as exc:
                        # Checked at open, so damaged since (the disk, another writer): say where, loudly.
                        raise CorruptFileError(
                            seg.log_path, f"the batch at position {pos} no longer reads: {exc}"
                        ) from exc
                    yield batch, data
                    used += size
                    pos += size

    def read_all(self) -> list[RecordBatch]:
        """Every batch in the log (from the log start offset), in offset order."""
        return self.read_from(self._start)

    def iter_encoded(self) -> Iterator[tuple[RecordBatch, bytes]]:
        """Every batch from the log start offset with its bytes as stored, one at a time (how a node
        rebuilds its core's log at start-up without holding the whole log in memory)."""
        return self._encoded_from(self._start)

    def _check_readable(self, offset: int) -> None:
        if offset < self._start:
            raise OffsetOutOfRangeError(
                f"{self.partition_dir}: read from offset {offset}, below the log start offset {self._start} "
                f"(cleaned; the snapshot {self.snapshots.latest()} holds that state)"
            )

    def read_from(self, offset: int) -> list[RecordBatch]:
        """Every batch whose last offset is ≥ ``offset`` (uses the offset index to skip ahead).
        :class:`OffsetOutOfRangeError` below the log start offset."""
        self._check_readable(offset)
        return [batch for batch, _data in self._encoded_from(offset)]

    def read_encoded(self, from_offset: int, max_bytes: int) -> tuple[list[RecordBatch], list[bytes]]:
        """Whole batches from the one holding ``from_offset``, up to ``max_bytes`` (at least one, as in
        Kafka), with their bytes: a Fetch's read of batches the core's log released from memory
        (``reference/log.py``'s ``ColdStore``). :class:`OffsetOutOfRangeError` below the log start."""
        self._check_readable(from_offset)
        pairs = list(self._encoded_from(from_offset, max_bytes))
        return [b for b, _ in pairs], [d for _, d in pairs]

    # ------------------------------------------------------------------ snapshots and cleaning (KIP-630)

    def create_snapshot(
        self,
        sid: SnapshotId,
        values_batches: Iterable[Sequence[SnapshotRecord]],
        *,
        last_contained_log_timestamp: int = 0,
        timestamp_ms: int = 0,
        kraft_version: int = 0,
        voters: VoterSet | dict[str, Any] | None = None,
    ) -> Snapshot:
        """Write the snapshot ``sid`` of the state machine (one data batch per item of ``values_batches``);
        ``kraft_version`` and ``voters`` (a ``voters.VoterSet``) go in the header batch as KIP-853's
        KRaftVersionRecord/VotersRecord (``snapshot.header_batch``; Kafka's ``KafkaRaftClient.createSnapshot``
        passes ``kraftVersionAtOffset``/``voterSetAtOffset`` of the snapshot's last offset).

        The checks of Kafka's ``KafkaMetadataLog.createNewSnapshot`` that the log can make (the high
        watermark rule is the core's): the end offset lies in ``[start_offset, end_offset]`` at a batch
        boundary, and the epoch is that of the record just below it (0 for an empty prefix). Refused with
        StorageError (SnapshotExistsError when the id is already there)."""
        if not self._start <= sid.end_offset <= self.end_offset:
            raise StorageError(
                f"create_snapshot {sid}: end offset outside the log [{self._start}, {self.end_offset}]"
            )
        if not self._is_batch_boundary(sid.end_offset):
            raise StorageError(f"create_snapshot {sid}: end offset {sid.end_offset} is inside a batch")
        expected = self._epoch_below(sid.end_offset)
        if expected is not None and sid.epoch != expected:
            raise StorageError(
                f"create_snapshot {sid}: the record at offset {sid.end_offset - 1} has epoch {expected}"
            )
        return self.snapshots.write(
            sid, values_batches, last_contained_log_timestamp=last_contained_log_timestamp, timestamp_ms=timestamp_ms,
            kraft_version=kraft_version, voters=voters,
        )

    def delete_before_snapshot(self, sid: SnapshotId) -> bool:
        """Kafka's ``KafkaMetadataLog.deleteBeforeSnapshot``: when ``sid`` is a known snapshot above the log
        start and at most the latest one, the log start moves up to its end offset (persisted first), the
        epoch cache is trimmed from the start, every segment whose successor starts at or below the new
        start is deleted with its index, and the snapshots older than ``sid`` are deleted. Returns whether
        it did so (Trace action ``CleanLog``)."""
        if not self._can_clean_to(sid):
            return False
        self._advance_start(sid.end_offset)
        self.snapshots.delete_before(sid)
        return True

    def clean_target(self, now_ms: int, *, retention_bytes: int, retention_ms: int) -> SnapshotId | None:
        """The snapshot the next step of :meth:`maybe_clean` would clean up to, without changing anything
        (None: nothing to clean). A shell that must tell its core first (``CleanLogTo``) loops: query, step
        the core, :meth:`delete_before_snapshot` the answer, until None. Kafka's rules, one step at a time,
        size rule first; the same result as :meth:`maybe_clean`."""
        ids = self.snapshots.ids()
        if len(ids) < 2:
            return None
        oldest, nxt = ids[0], ids[1]
        breach = retention_bytes >= 0 and self.size_bytes + self.snapshots.total_bytes() > retention_bytes
        if not breach and retention_ms >= 0:
            breach = now_ms - self.snapshots.last_contained_log_timestamp(oldest) > retention_ms
        return nxt if breach and self._can_clean_to(nxt) else None

    def _can_clean_to(self, sid: SnapshotId) -> bool:
        latest = self.snapshots.latest()
        return (
            latest is not None
            and sid in self.snapshots
            and self._start < sid.end_offset <= latest.end_offset
            and sid.end_offset <= self.end_offset
        )

    def maybe_clean(self, now_ms: int, *, retention_bytes: int, retention_ms: int) -> bool:
        """Kafka's ``KafkaMetadataLog.maybeClean``, with ``metadata.max.retention.bytes`` and
        ``metadata.max.retention.ms`` (-1 turns a rule off). Walking the snapshots oldest first, while the
        log's and the snapshots' bytes together exceed ``retention_bytes`` (size rule), then while the oldest
        snapshot's LastContainedLogTimestamp is more than ``retention_ms`` before ``now_ms`` (time rule), the
        log is cleaned up to the next snapshot (:meth:`delete_before_snapshot`). The latest snapshot always
        stays, so a single snapshot is never cleaned up to. Returns whether anything was cleaned."""
        did_clean = False
        while (
            target := self.clean_target(now_ms, retention_bytes=retention_bytes, retention_ms=retention_ms)
        ) is not None:
            oldest = self.snapshots.ids()[0]
            log.info(
                "%s: cleaning up to snapshot %s (log %d bytes + snapshots %d bytes, metadata.max.retention.bytes %d; "
                "oldest snapshot %s timestamp %d, now %d, metadata.max.retention.ms %d)",
                self.partition_dir,
                target,
                self.size_bytes,
                self.snapshots.total_bytes(),
                retention_bytes,
                oldest,
                self.snapshots.last_contained_log_timestamp(oldest),
                now_ms,
                retention_ms,
            )
            if not self.delete_before_snapshot(target):
                break
            did_clean = True
        return did_clean

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and make it start (and end) at ``offset``, durably: Kafka's
        ``UnifiedLog.truncateFullyAndStartAt``, done when a follower installs a snapshot (prefer
        :meth:`truncate_to_latest_snapshot`, which decides whether it is needed)."""
        if offset < 0:
            raise StorageError(f"truncate_fully_and_start_at: negative offset {offset}")
        self._start = offset
        self._write_start_checkpoint()  # first: a crash after it is finished at open
        self._replace_segments(offset)
        self._open_active()
        self._sync_dir_if_needed()
        if self._epochs:
            self._epochs = []
            self._write_epoch_checkpoint()

    def reset_to_snapshot(self, sid: SnapshotId) -> None:
        """A follower's snapshot install (the core's ``InstallSnapshot`` op, after ``SnapshotDownload.finish``):
        the log is emptied to start and end at ``sid``'s end offset and older snapshots are deleted. ``sid``
        must be in the store. A no-op when the log is already empty at that offset (a restart that
        :meth:`open` already brought there)."""
        if sid not in self.snapshots:
            raise StorageError(f"reset_to_snapshot: no snapshot {sid} in {self.partition_dir}")
        if not self._start == self.end_offset == sid.end_offset:
            self.truncate_fully_and_start_at(sid.end_offset)
        self.snapshots.delete_before(sid)

    def truncate_to_latest_snapshot(self) -> bool:
        """Kafka's ``KafkaMetadataLog.truncateToLatestSnapshot``: when the latest snapshot is ahead of the
        log (a newer epoch than the log's last one, or the same epoch and an end beyond the log end), empty
        the log to start at the snapshot's end and delete the older snapshots. Returns whether it did. A
        follower calls it after a download's ``finish``; :meth:`open` calls it too."""
        latest = self.snapshots.latest()
        if latest is None:
            return False
        if latest.end_offset == self._start == self.end_offset:
            return False  # already empty at the snapshot
        last_epoch = self._epochs[-1].epoch if self._epochs else 0
        if not (
            latest.epoch > last_epoch or (latest.epoch == last_epoch and latest.end_offset > self.end_offset)
        ):
            return False
        log.info(
            "%s: log (start %d, end %d, last epoch %d) is behind snapshot %s: emptied to start at %d",
            self.partition_dir,
            self._start,
            self.end_offset,
            last_epoch,
            latest,
            latest.end_offset,
        )
        self.truncate_fully_and_start_at(latest.end_offset)
        self.snapshots.delete_before(latest)
        return True

    def _advance_start(self, offset: int) -> None:
        if not self._is_batch_boundary(offset):
            raise StorageError(f"advance the log start to {offset}: not a batch boundary")
        self._start = offset
        self._write_start_checkpoint()  # first: a crash after it is finished at open
        if self._trim_epochs():
            self._write_epoch_checkpoint()
        self._delete_segments_below_start()
        self._sync_dir_if_needed()

    def _is_batch_boundary(self, offset: int) -> bool:
        if offset == self.end_offset or offset == self._segments[0].base_offset:
            return True
        if not self._segments[0].base_offset < offset < self.end_offset:
            return False
        si = bisect.bisect_right(self._segments, offset, key=lambda seg: seg.base_offset) - 1
        return self._locate(self._segments[si], offset)[1] == offset

    def _epoch_below(self, offset: int) -> int | None:
        """The epoch of the record at ``offset - 1`` (0 below offset 0; for the log start, the epoch of the
        snapshot ending there, None when unknown)."""
        if offset == 0:
            return 0
        if offset > self._start:
            starts = [e.start_offset for e in self._epochs]
            return self._epochs[bisect.bisect_right(starts, offset - 1) - 1].epoch
        at_start = [s for s in self.snapshots.ids() if s.end_offset == offset]
        return at_start[-1].epoch if at_start else None

    def _trim_epochs(self) -> bool:
        """Keep the epoch cache to the records in ``[start, end)`` (Kafka's truncateFromStart: the entry
        covering the start is moved up to it). Unlike Kafka, an empty log keeps no entry: the latest
        snapshot's epoch stands for it. Returns whether it changed."""
        if self._start >= self.end_offset:
            kept: list[EpochEntry] = []
        else:
            i = bisect.bisect_right(self._epochs, self._start, key=lambda e: e.start_offset)
            kept = self._epochs[i:]
            if i:
                kept.insert(0, EpochEntry(self._epochs[i - 1].epoch, self._start))
        changed = kept != self._epochs
        self._epochs = kept
        return changed

    def _delete_segments_below_start(self) -> int:
        """Delete (oldest first) every segment whose successor starts at or below the log start (Kafka's
        ``deleteLogStartOffsetBreachedSegments``: the last segment always stays). Returns how many."""
        n = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= self._start:
            seg = self._segments.pop(0)
            seg.index_path.unlink(missing_ok=True)
            seg.log_path.unlink()
            self._dir_unsynced = True
            n += 1
        return n

    def _replace_segments(self, base_offset: int) -> None:
        """Delete every segment and start one empty segment at ``base_offset``."""
        self._close_active()
        for seg in reversed(self._segments):
            seg.index_path.unlink(missing_ok=True)
            seg.log_path.unlink(missing_ok=True)
        self._segments = [self._create_segment(base_offset)]
        self._unsynced = False
        self._dir_unsynced = True

    def _write_start_checkpoint(self) -> None:
        self._atomic_write(self.data_dir / LOG_START_CHECKPOINT, render_log_start_checkpoint(self._start).encode())

    def read_quorum_state(self) -> QuorumStateData | None:
        return read_quorum_state_file(self.partition_dir / QUORUM_STATE)

    def write_quorum_state(self, state: QuorumStateData) -> None:
        """Persist ``state`` atomically; when this returns (with fsync on) the vote survives a crash.

        KIP-595 Fetch Response Handling step 1 ("update the quorum-state file" on a new leader) and Vote
        Request Handling (the vote is on disk before the response is sent) both go through here.
        """
        data = json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8")
        self._atomic_write(self.partition_dir / QUORUM_STATE, data)

    def read_meta(self) -> MetaProperties | None:
        return read_meta_file(self.data_dir / META_PROPERTIES)

    def write_meta(self, meta: MetaProperties) -> None:
        self.fsync_count += write_meta_file(self.data_dir / META_PROPERTIES, meta, self.fsync)

    def close(self) -> None:
        self.flush()
        self._close_active()

    @property
    def epoch_entry_count(self) -> int:
        """Entries in the in-memory epoch cache (bounded by the epochs in ``[start, end)``)."""
        return len(self._epochs)

    @property
    def index_entry_count(self) -> int:
        """Entries in the in-memory offset indexes of all segments."""
        return sum(len(seg.index) for seg in self._segments)

    def __enter__(self) -> LogDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _fsync(self, fd: int) -> None:
        if self.fsync:
            os.fsync(fd)
            self.fsync_count += 1

    def _sync_dir_if_needed(self) -> None:
        if self._dir_unsynced:
            if self.fsync:
                fsync_dir(self.partition_dir)
                self.fsync_count += 1
            self._dir_unsynced = False

    def _atomic_write(self, path: Path, data: bytes) -> None:
        self.fsync_count += atomic_write(path, data, self.fsync)

    def _write_epoch_checkpoint(self) -> None:
        self._atomic_write(
            self.partition_dir / EPOCH_CHECKPOINT, render_epoch_checkpoint(self._epochs).encode()
        )
