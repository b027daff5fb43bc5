"""Snapshot files of the metadata log (KIP-630), in Kafka's format and names.

::

    <log.dirs>/__cluster_metadata-0/
        00000000000000004711-0000000003.checkpoint       snapshot (end offset 4711, epoch 3)
        00000000000000004711-0000000003.checkpoint.part  being written or downloaded (removed at open)
        00000000000000004711-0000000003.checkpoint.corrupt   a snapshot found bad, set aside (kept)

A snapshot is RecordBatch v2 batches back to back, as Kafka's ``RecordsSnapshotWriter`` writes them:
the first batch is a control batch whose first record is a ``SnapshotHeaderRecord``, the last one a
control batch holding a ``SnapshotFooterRecord``, the state machine's records in between. Offsets inside
the file count from 0 and every batch carries the snapshot's epoch as its partition leader epoch. The id
(end offset, epoch) is only in the file name (Kafka's ``Snapshots.filenameFromSnapshotId``): the end offset
is the offset after the last record the snapshot covers, the epoch that record's epoch.

KIP-853
    From kraft.version 1 on, the header batch also holds a KRaftVersionRecord and, when the node knows a voter
    set, the VotersRecord in force at the snapshot's end (Kafka's ``RecordsSnapshotWriter.Builder``
    ``setKraftVersion``/``setVoterSet``); :class:`Snapshot` returns both. The file ``00000000000000000000-
    0000000000.checkpoint`` is the bootstrap checkpoint ``format --standalone/--initial-controllers`` writes
    (:data:`BOOTSTRAP_SNAPSHOT_ID`, read by ``bootstrap.read_bootstrap_voters``): never listed, offered, cleaned
    or set aside by this store. Kafka deletes it with the other snapshots below the log start; this node keeps
    it, since it reads the initial voter set from it at every start (the latest snapshot's VotersRecord, and the
    log's, take precedence).

Durability
    A snapshot is written to ``<id>.checkpoint.part``, fsynced, renamed to ``<id>.checkpoint`` and the
    directory fsynced (Kafka's ``FileRawSnapshotWriter.freeze``): a crash leaves either no snapshot or the
    whole one. A follower's download goes through the same ``.part`` file and is validated as a whole
    before the rename.

Validation and the "nothing is lost" rule
    :meth:`SnapshotStore.open` reads every snapshot through (CRC of every batch, header first, footer last,
    contiguous offsets, the name's epoch on every batch). Kafka checks less at open (it trusts the name);
    this store never offers a snapshot it has not read whole. A bad one is renamed aside to
    ``<name>.corrupt`` with the reason logged at ERROR and counted (:attr:`SnapshotStore.quarantined`); it
    is never deleted, and the previous valid snapshot is the latest. Kafka's ``Snapshots.parse`` ignores
    such names. Stray ``.part`` files (a crash mid-write or mid-download) are removed, as Kafka's
    ``KafkaMetadataLog.recoverSnapshots`` does; so are Kafka's ``.checkpoint.deleted`` files.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.storage import CorruptFileError, StorageError, fsync_dir
from kraft_tck.spec.errors import CorruptRecordError, DecodeError
from kraft_tck.spec.records import (
    LOG_OVERHEAD,
    ControlType,
    Record,
    RecordBatch,
    control_batch,
    decode_batch,
    decode_control,
    encode_batch,
)

if TYPE_CHECKING:
    from kraft_tck.reference.voters import VoterSet

log = logging.getLogger("kraft_tck.reference.snapshot")

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETED_SUFFIX = SUFFIX + ".deleted"  # Kafka's markForDelete; this store deletes at once and never writes it
CORRUPT_SUFFIX = SUFFIX + ".corrupt"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_PREFIX = re.compile(r"^(\d{20})-(\d{10})")
SNAPSHOT_HEADER_VERSION = 0  # ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION
SNAPSHOT_FOOTER_VERSION = 0  # ControlRecordUtils.SNAPSHOT_FOOTER_CURRENT_VERSION
KRAFT_VERSION_RECORD_VERSION = 0  # ControlRecordUtils.KRAFT_VERSION_CURRENT_VERSION
#: Kafka's ``Snapshots.BOOTSTRAP_SNAPSHOT_ID``: the file ``format --standalone/--initial-controllers`` writes
#: (KIP-853 "Bootstrapping"; reference/bootstrap.py reads it). It is not a snapshot of the log: this store never
#: lists, offers, cleans or sets it aside (Kafka keeps it out of Fetch's SnapshotId and FetchSnapshot:
#: ``KafkaRaftClient.handleFetchRequest``/``handleFetchSnapshotRequest``).
BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)


#: One record of a snapshot: its value, or ``(key, value)`` for a keyed record.
SnapshotRecord = bytes | tuple[bytes | None, bytes]


class SnapshotNotFoundError(StorageError):
    """No valid snapshot with this id (a FetchSnapshot answer of SNAPSHOT_NOT_FOUND)."""


class PositionOutOfRangeError(StorageError):
    """A chunk read at a position outside the snapshot (a FetchSnapshot answer of POSITION_OUT_OF_RANGE)."""


class DownloadPositionError(StorageError):
    """A downloaded chunk that does not continue the bytes held (Kafka's follower refuses the response)."""


class SnapshotExistsError(StorageError):
    """A snapshot with this id is already in the store."""


def snapshot_filename(sid: SnapshotId) -> str:
    """``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`` (Kafka's ``Snapshots.snapshotPath``)."""
    if sid.end_offset < 0 or sid.epoch < 0:
        raise ValueError(f"snapshot id {sid} has a negative field")
    return f"{sid.end_offset:020d}-{sid.epoch:010d}{SUFFIX}"


def parse_snapshot_filename(name: str) -> tuple[SnapshotId, str] | None:
    """The id and kind (``"checkpoint"``, ``"part"``, ``"deleted"``) of a snapshot file name, else None.

    As Kafka's ``Snapshots.parse``, the id of a ``.part`` or ``.deleted`` file is its first 31 characters
    (Kafka's temp files are ``<id>-<random>.checkpoint.part``)."""
    if name.endswith(PARTIAL_SUFFIX):
        kind = "part"
    elif name.endswith(DELETED_SUFFIX):
        kind = "deleted"
    elif name.endswith(SUFFIX):
        m = _NAME.match(name)
        return (SnapshotId(int(m.group(1)), int(m.group(2))), "checkpoint") if m else None
    else:
        return None
    p = _PREFIX.match(name)
    return (SnapshotId(int(p.group(1)), int(p.group(2))), kind) if p else None


# ---------------------------------------------------------------------------------------------- content


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A validated snapshot: its id, the header's LastContainedLogTimestamp, the batches between the
    header and the footer (header/footer batches stripped), and the file's size."""

    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    batches: tuple[RecordBatch, ...]
    size_bytes: int
    #: The header batch's KRaftVersionRecord (KIP-853; 0 when it has none, Kafka's default) and VotersRecord
    #: (None when it has none): the kraft.version and voter set in force at the snapshot's end.
    kraft_version: int = 0
    voters: VoterSet | None = None

    def values(self) -> Iterator[bytes]:
        """Every data record's value, in order (control batches skipped)."""
        for batch in self.batches:
            if not batch.is_control:
                for rec in batch.records:
                    if rec.value is not None:
                        yield rec.value

    @property
    def record_count(self) -> int:
        return sum(len(b.records) for b in self.batches if not b.is_control)


def control_records_batch(base_offset: int, epoch: int, records: Sequence[tuple[ControlType, dict[str, Any]]],
                          timestamp_ms: int = 0) -> RecordBatch:
    """One control batch holding several control records at consecutive offsets (Kafka's MemoryRecordsBuilder
    with ``isControlBatch``): key int16 version 0 + int16 type, value the record's version-0 body."""
    from kraft_tck.spec.codec import encode_data
    from kraft_tck.spec.records import CONTROL_SCHEMAS

    out = tuple(
        Record(i, encode_data(CONTROL_SCHEMAS[ctype], 0, body), int(ctype).to_bytes(4, "big"))
        for i, (ctype, body) in enumerate(records)
    )
    return RecordBatch(base_offset, epoch, out, is_control=True, base_timestamp=timestamp_ms,
                       max_timestamp=timestamp_ms)


def _voters_body(voters: VoterSet | dict[str, Any]) -> dict[str, Any]:
    if isinstance(voters, dict):
        return voters
    from kraft_tck.reference.voters import voters_record

    return voters_record(voters)


def header_batch(sid: SnapshotId, last_contained_log_timestamp: int, timestamp_ms: int = 0, *,
                 kraft_version: int = 0, voters: VoterSet | dict[str, Any] | None = None) -> RecordBatch:
    """The first batch of a snapshot (``RecordsSnapshotWriter.Builder.build``): the SnapshotHeaderRecord at
    offset 0, then (KIP-853) from kraft.version 1 on a KRaftVersionRecord and, when a voter set is given, its
    VotersRecord, all in this one control batch. A voter set at kraft.version 0 is refused (ValueError), as
    Kafka's builder refuses it. ``voters`` is a ``voters.VoterSet`` or a VotersRecord body."""
    body = {"Version": SNAPSHOT_HEADER_VERSION, "LastContainedLogTimestamp": last_contained_log_timestamp}
    if kraft_version == 0:
        if voters is not None:
            raise ValueError(f"snapshot {sid}: a voter set is not expected when the kraft.version is 0")
        return control_batch(0, sid.epoch, ControlType.SNAPSHOT_HEADER, body, timestamp=timestamp_ms)
    records: list[tuple[ControlType, dict[str, Any]]] = [
        (ControlType.SNAPSHOT_HEADER, body),
        (ControlType.KRAFT_VERSION, {"Version": KRAFT_VERSION_RECORD_VERSION, "KRaftVersion": kraft_version}),
    ]
    if voters is not None:
        records.append((ControlType.KRAFT_VOTERS, _voters_body(voters)))
    return control_records_batch(0, sid.epoch, records, timestamp_ms)


def footer_batch(sid: SnapshotId, base_offset: int, timestamp_ms: int = 0) -> RecordBatch:
    """The last batch of a snapshot: one SnapshotFooterRecord (``finalizeSnapshotWithFooter``)."""
    body = {"Version": SNAPSHOT_FOOTER_VERSION}
    return control_batch(base_offset, sid.epoch, ControlType.SNAPSHOT_FOOTER, body, timestamp=timestamp_ms)


def _record(delta: int, item: SnapshotRecord) -> Record:
    if isinstance(item, tuple):
        key, value = item
        return Record(delta, bytes(value), None if key is None else bytes(key))
    return Record(delta, bytes(item))


def data_batch_at(
    sid: SnapshotId, base_offset: int, values: Sequence[SnapshotRecord], timestamp_ms: int = 0
) -> RecordBatch:
    """A data batch of a snapshot: its records (values, or ``(key, value)`` pairs) at consecutive offsets."""
    if not values:
        raise ValueError("a snapshot data batch needs at least one record")
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=sid.epoch,
        records=tuple(_record(i, v) for i, v in enumerate(values)),
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
    )


def encode_snapshot(
    sid: SnapshotId,
    values_batches: Iterable[Sequence[SnapshotRecord]],
    *,
    last_contained_log_timestamp: int = 0,
    timestamp_ms: int = 0,
    kraft_version: int = 0,
    voters: VoterSet | dict[str, Any] | None = None,
) -> bytes:
    """The bytes of a snapshot: header batch (with the KIP-853 records of :func:`header_batch`), one data batch
    per non-empty ``values_batches`` item, footer."""
    header = header_batch(sid, last_contained_log_timestamp, timestamp_ms, kraft_version=kraft_version,
                          voters=voters)
    out = [encode_batch(header)]
    offset = header.last_offset + 1
    for values in values_batches:
        if values:
            out.append(encode_batch(data_batch_at(sid, offset, values, timestamp_ms)))
            offset += len(values)
    out.append(encode_batch(footer_batch(sid, offset, timestamp_ms)))
    return b"".join(out)


def _control_type(batch: RecordBatch, index: int) -> ControlType | None:
    """The control type of the ``index``-th record of a control batch (None for a data batch)."""
    if not batch.is_control:
        return None
    ctype, _body = decode_control(batch.records[index])
    return ctype


def _first_type(batch: RecordBatch) -> ControlType | None:
    try:
        return _control_type(batch, 0)
    except DecodeError:
        return None


def decode_snapshot(path: Path, data: bytes, sid: SnapshotId) -> Snapshot:
    """Validate a whole snapshot file's bytes and return its content; raise :class:`CorruptFileError`
    naming ``path`` and the problem: a torn or malformed batch, a CRC mismatch, a first batch that is not
    a SnapshotHeaderRecord, a last one that is not a SnapshotFooterRecord (a header or footer anywhere
    else), offsets that do not run on from 0, or a batch whose epoch is not the name's."""
    if not data:
        raise CorruptFileError(path, "empty file (no SnapshotHeaderRecord batch)")
    batches: list[RecordBatch] = []
    pos, expected = 0, 0
    header_ts = 0
    kraft_version = 0
    voters_body: dict[str, Any] | None = None
    while pos < len(data):
        try:
            batch, nxt = decode_batch(data, pos)
        except CorruptRecordError as exc:
            raise CorruptFileError(
                path,
                f"CRC mismatch in the batch at byte {pos} (stored {exc.expected_crc:#010x}, "
                f"computed {exc.actual_crc:#010x})",
            ) from None
        except DecodeError as exc:
            declared = None
            if len(data) - pos >= LOG_OVERHEAD:
                declared = LOG_OVERHEAD + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
            if declared is None or pos + declared > len(data):
                raise CorruptFileError(
                    path,
                    f"torn: the file ends inside the batch at byte {pos} "
                    f"({len(data) - pos} bytes left, batch needs {declared if declared is not None else '>12'}); "
                    "no SnapshotFooterRecord",
                ) from None
            raise CorruptFileError(path, f"malformed batch at byte {pos}: {exc}") from None
        where = f"the batch at byte {pos} (offset {batch.base_offset})"
        if not batches and (not batch.is_control or _first_type(batch) is not ControlType.SNAPSHOT_HEADER):
            raise CorruptFileError(path, f"missing header: {where} is not a SnapshotHeaderRecord control batch")
        if batch.base_offset != expected:
            raise CorruptFileError(path, f"{where}: base offset is not the expected {expected}")
        if batch.partition_leader_epoch != sid.epoch:
            raise CorruptFileError(
                path,
                f"{where}: epoch {batch.partition_leader_epoch} is not the epoch {sid.epoch} in the file name",
            )
        try:
            types = [_control_type(batch, i) for i in range(len(batch.records))] if batch.is_control else []
            if not batches:
                header = decode_control(batch.records[0])[1]
                header_ts = int(header["LastContainedLogTimestamp"])
                types = types[1:]
                # KIP-853: the header batch's KRaftVersionRecord and VotersRecord (RecordsSnapshotWriter.Builder).
                for rec in batch.records[1:]:
                    ctype, cbody = decode_control(rec)
                    if ctype is ControlType.KRAFT_VERSION:
                        kraft_version = int(cbody["KRaftVersion"])
                    elif ctype is ControlType.KRAFT_VOTERS:
                        voters_body = cbody
            if ControlType.SNAPSHOT_HEADER in types:
                raise CorruptFileError(path, f"{where}: a SnapshotHeaderRecord after the first record")
        except DecodeError as exc:
            raise CorruptFileError(path, f"{where}: unreadable control record: {exc}") from None
        batches.append(batch)
        expected = batch.last_offset + 1
        pos = nxt
        if ControlType.SNAPSHOT_FOOTER in types:
            if types != [ControlType.SNAPSHOT_FOOTER] or len(batches) == 1:
                raise CorruptFileError(path, f"{where}: the SnapshotFooterRecord must be alone in its own last batch")
            if pos != len(data):
                raise CorruptFileError(
                    path, f"{len(data) - pos} bytes after the SnapshotFooterRecord batch at offset {batch.base_offset}"
                )
            voters = None
            if voters_body is not None:
                from kraft_tck.reference.voters import voter_set_from_record

                try:
                    voters = voter_set_from_record(voters_body)
                except (ValueError, KeyError, TypeError) as exc:
                    raise CorruptFileError(path, f"the header batch's VotersRecord is not a voter set: {exc}") from None
            return Snapshot(sid, header_ts, tuple(batches[1:-1]), len(data), kraft_version, voters)
    raise CorruptFileError(
        path,
        f"missing footer: the last batch (offset {batches[-1].base_offset}) is not a SnapshotFooterRecord "
        "control batch (an unfinished snapshot)",
    )


# ---------------------------------------------------------------------------------------------- writers


class _PartFile:
    """A ``.part`` file written append-only, then validated, fsynced and renamed into place."""

    def __init__(self, store: SnapshotStore, sid: SnapshotId) -> None:
        self.store = store
        self.snapshot_id = sid
        self.part_path = store.partition_dir / (snapshot_filename(sid) + ".part")
        self.position = 0  # bytes written so far
        self._fd: int | None = os.open(self.part_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._done = False

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise StorageError(f"{self.part_path}: already finished or aborted")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.position += len(data)

    def _freeze(self) -> Snapshot:
        """Validate the whole file, then make it the snapshot durably; on a bad file remove the part file
        (it is not a snapshot anybody had) and raise CorruptFileError."""
        if self._fd is None:
            raise StorageError(f"{self.part_path}: already finished or aborted")
        self.store._fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        try:
            snap = decode_snapshot(self.part_path, self.part_path.read_bytes(), self.snapshot_id)
        except CorruptFileError:
            self.part_path.unlink(missing_ok=True)
            raise
        final = self.store.path(self.snapshot_id)
        if final.exists():
            self.part_path.unlink(missing_ok=True)
            raise SnapshotExistsError(f"{final}: a snapshot with id {self.snapshot_id} appeared meanwhile")
        os.replace(self.part_path, final)
        self.store._sync_dir()
        self.store._add(self.snapshot_id, snap.size_bytes, snap.last_contained_log_timestamp)
        self._done = True
        return snap

    def abort(self) -> None:
        """Give up: close and remove the part file (a no-op once finished)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self._done:
            self.part_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class SnapshotWriter(_PartFile):
    """Writes a snapshot of the state machine batch by batch (Kafka's ``RecordsSnapshotWriter`` over a
    ``FileRawSnapshotWriter``): the header at once, :meth:`append` per data batch, :meth:`freeze` adds the
    footer and makes the file the snapshot. Leaving a ``with`` block without ``freeze`` removes the part."""

    def __init__(
        self, store: SnapshotStore, sid: SnapshotId, *, last_contained_log_timestamp: int = 0, timestamp_ms: int = 0,
        kraft_version: int = 0, voters: VoterSet | dict[str, Any] | None = None,
    ) -> None:
        header = header_batch(sid, last_contained_log_timestamp, timestamp_ms, kraft_version=kraft_version,
                              voters=voters)  # refused before the part file exists
        super().__init__(store, sid)
        self._timestamp_ms = timestamp_ms
        self._next_offset = header.last_offset + 1
        self._write(encode_batch(header))

    def append(self, values: Sequence[SnapshotRecord]) -> None:
        """One data batch of records (nothing for an empty sequence)."""
        if values:
            batch = data_batch_at(self.snapshot_id, self._next_offset, values, self._timestamp_ms)
            self._write(encode_batch(batch))
            self._next_offset += len(values)

    def freeze(self) -> Snapshot:
        self._write(encode_batch(footer_batch(self.snapshot_id, self._next_offset, self._timestamp_ms)))
        return self._freeze()


class SnapshotDownload(_PartFile):
    """A follower's download of a snapshot served in chunks by FetchSnapshot (Kafka's
    ``handleFetchSnapshotResponse``: the follower appends each chunk at ``Position`` = bytes it holds)."""

    def append(self, position: int, data: bytes) -> None:
        if position != self.position:
            raise DownloadPositionError(
                f"{self.part_path}: chunk at position {position}, but {self.position} bytes are held "
                "(chunks must be contiguous)"
            )
        self._write(data)

    def finish(self) -> Snapshot:
        """Validate the whole downloaded file and make it the snapshot (see the class docstring)."""
        return self._freeze()


# ---------------------------------------------------------------------------------------------- the store


@dataclass(slots=True)
class _Entry:
    size: int
    last_contained_log_timestamp: int


class SnapshotStore:
    """The valid snapshots of one partition directory. Use :meth:`open`."""

    def __init__(self, partition_dir: Path, fsync: bool) -> None:
        self.partition_dir = partition_dir
        self.fsync = fsync
        self.fsync_count = 0
        self._entries: dict[SnapshotId, _Entry] = {}
        self._sorted: list[SnapshotId] = []
        #: every file set aside as corrupt since open, with the reason
        self.quarantined: list[tuple[Path, str]] = []

    @classmethod
    def open(cls, partition_dir: str | Path, *, fsync: bool = True) -> SnapshotStore:
        """Scan ``partition_dir``: remove stray ``.part``/``.deleted`` files, validate every snapshot and set
        the bad ones aside (module docstring)."""
        self = cls(Path(partition_dir), fsync)
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        removed = False
        for p in sorted(self.partition_dir.iterdir()):
            if not p.name.endswith((SUFFIX, PARTIAL_SUFFIX, DELETED_SUFFIX)):
                continue
            parsed = parse_snapshot_filename(p.name)
            if p.name.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX)):
                log.info(
                    "%s: removing %s snapshot file left by a crash",
                    p,
                    "partial" if p.name.endswith(PARTIAL_SUFFIX) else "deleted",
                )
                p.unlink()
                removed = True
                continue
            if parsed is None:
                self._quarantine(p, "the name is not <end offset, 20 digits>-<epoch, 10 digits>.checkpoint")
                continue
            sid = parsed[0]
            if sid == BOOTSTRAP_SNAPSHOT_ID:
                continue  # the bootstrap checkpoint (reference/bootstrap.py reads and checks it), not a snapshot
            try:
                snap = decode_snapshot(p, p.read_bytes(), sid)
            except CorruptFileError as exc:
                self._quarantine(p, exc.problem)
                continue
            self._add(sid, snap.size_bytes, snap.last_contained_log_timestamp)
        if removed or self.quarantined:
            self._sync_dir()
        return self

    # ------------------------------------------------------------------ queries

    def ids(self) -> list[SnapshotId]:
        return list(self._sorted)

    def latest(self) -> SnapshotId | None:
        return self._sorted[-1] if self._sorted else None

    def earliest(self) -> SnapshotId | None:
        return self._sorted[0] if self._sorted else None

    def __contains__(self, sid: object) -> bool:
        return sid in self._entries

    def __len__(self) -> int:
        return len(self._sorted)

    def path(self, sid: SnapshotId) -> Path:
        return self.partition_dir / snapshot_filename(sid)

    def _entry(self, sid: SnapshotId) -> _Entry:
        try:
            return self._entries[sid]
        except KeyError:
            raise SnapshotNotFoundError(f"{self.partition_dir}: no snapshot with id {sid}") from None

    def size(self, sid: SnapshotId) -> int:
        return self._entry(sid).size

    def total_bytes(self) -> int:
        return sum(e.size for e in self._entries.values())

    def last_contained_log_timestamp(self, sid: SnapshotId) -> int:
        """The header's LastContainedLogTimestamp (Kafka's ``Snapshots.lastContainedLogTimestamp``)."""
        return self._entry(sid).last_contained_log_timestamp

    def read(self, sid: SnapshotId) -> Snapshot:
        """The snapshot's content, validated again; a file damaged since it was validated is set aside
        (and forgotten) and CorruptFileError raised."""
        self._entry(sid)
        path = self.path(sid)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self._forget(sid)
            raise SnapshotNotFoundError(f"{path}: the snapshot file is gone") from None
        try:
            return decode_snapshot(path, data, sid)
        except CorruptFileError as exc:
            self._forget(sid)
            self._quarantine(path, exc.problem)
            self._sync_dir()
            raise

    def read_chunk(self, sid: SnapshotId, position: int, max_bytes: int) -> bytes:
        """The file's bytes from ``position``, at most ``max_bytes`` of them (not aligned to batches: Kafka's
        ``UnalignedRecords``). ``position`` must be in ``[0, size)`` (Kafka's handleFetchSnapshotRequest)."""
        size = self.size(sid)
        if position < 0 or position >= size:
            raise PositionOutOfRangeError(f"snapshot {sid}: position {position} is outside [0, {size})")
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        try:
            with open(self.path(sid), "rb") as fh:
                fh.seek(position)
                return fh.read(min(max_bytes, size - position))
        except FileNotFoundError:
            self._forget(sid)
            raise SnapshotNotFoundError(f"{self.path(sid)}: the snapshot file is gone") from None

    # ------------------------------------------------------------------ changes

    def create(
        self, sid: SnapshotId, *, last_contained_log_timestamp: int = 0, timestamp_ms: int = 0,
        kraft_version: int = 0, voters: VoterSet | dict[str, Any] | None = None,
    ) -> SnapshotWriter:
        """A writer for a new snapshot (SnapshotExistsError if the id is known). ``kraft_version`` and
        ``voters``: the KIP-853 records of the header batch (:func:`header_batch`)."""
        self._refuse_known(sid)
        return SnapshotWriter(
            self, sid, last_contained_log_timestamp=last_contained_log_timestamp, timestamp_ms=timestamp_ms,
            kraft_version=kraft_version, voters=voters,
        )

    def write(
        self,
        sid: SnapshotId,
        values_batches: Iterable[Sequence[SnapshotRecord]],
        *,
        last_contained_log_timestamp: int = 0,
        timestamp_ms: int = 0,
        kraft_version: int = 0,
        voters: VoterSet | dict[str, Any] | None = None,
    ) -> Snapshot:
        """Write a whole snapshot (one data batch per item of ``values_batches``) durably."""
        with self.create(
            sid, last_contained_log_timestamp=last_contained_log_timestamp, timestamp_ms=timestamp_ms,
            kraft_version=kraft_version, voters=voters,
        ) as w:
            for values in values_batches:
                w.append(values)
            return w.freeze()

    def begin_download(self, sid: SnapshotId) -> SnapshotDownload:
        """A part file for a snapshot fetched from the leader (SnapshotExistsError if the id is known)."""
        self._refuse_known(sid)
        return SnapshotDownload(self, sid)

    def delete_before(self, sid: SnapshotId) -> list[SnapshotId]:
        """Delete every snapshot older than ``sid`` (Kafka's forgetSnapshotsBefore + removeSnapshots, without
        the delayed ``.deleted`` stage); return their ids."""
        gone = [s for s in self._sorted if s < sid]
        for s in gone:
            self._forget(s)
            self.path(s).unlink(missing_ok=True)
            log.info("%s: deleted snapshot %s (older than %s)", self.path(s), s, sid)
        if gone:
            self._sync_dir()
        return gone

    # ------------------------------------------------------------------ helpers

    def _refuse_known(self, sid: SnapshotId) -> None:
        if sid.end_offset < 0 or sid.epoch < 0:
            raise StorageError(f"snapshot id {sid} has a negative field")
        if sid in self._entries:
            raise SnapshotExistsError(f"{self.path(sid)}: a snapshot with id {sid} already exists")

    def _add(self, sid: SnapshotId, size: int, ts: int) -> None:
        if sid == BOOTSTRAP_SNAPSHOT_ID:
            return  # named as the bootstrap checkpoint: never listed (BOOTSTRAP_SNAPSHOT_ID)
        self._entries[sid] = _Entry(size, ts)
        self._sorted = sorted(self._entries)

    def _forget(self, sid: SnapshotId) -> None:
        if self._entries.pop(sid, None) is not None:
            self._sorted.remove(sid)

    def _quarantine(self, path: Path, reason: str) -> None:
        target = path.with_name(path.name + ".corrupt")
        n = 0
        while target.exists():
            n += 1
            target = path.with_name(f"{path.name}.corrupt.{n}")
        os.replace(path, target)
        self.quarantined.append((target, reason))
        log.error(
            "%s: corrupt snapshot, not used: %s; kept as %s (the previous valid snapshot is used)",
            path,
            reason,
            target.name,
        )

    def _fsync(self, fd: int) -> None:
        if self.fsync:
            os.fsync(fd)
            self.fsync_count += 1

    def _sync_dir(self) -> None:
        if self.fsync:
            fsync_dir(self.partition_dir)
            self.fsync_count += 1
