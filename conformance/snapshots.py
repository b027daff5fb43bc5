"""Snapshots as the harness sees them (KIP-630), written independently of the reference node.

* ``HarnessSnapshot`` — a snapshot a virtual leader serves: Kafka's layout (``RecordsSnapshotWriter``): a
  control batch holding a SnapshotHeaderRecord at offset 0, the state as metadata records, a control batch
  holding a SnapshotFooterRecord last; every batch in the snapshot's epoch. Its state is what the harness
  log holds below the snapshot's end offset: FeatureLevelRecord(metadata.version) (every other record the
  harness writes is a NoOpRecord, which leaves no state).
* ``read_snapshot`` — the harness's own reading of a snapshot a target served, chunk after chunk: every
  batch decodes with a valid CRC32C, the first record is a SnapshotHeaderRecord, the last a
  SnapshotFooterRecord, no other header or footer in between, offsets increasing from the first batch;
  what each data record is (a metadata record the harness can decode, or not).
* FetchSnapshot (api key 59) bodies, built and read like ``bodies`` does for the KIP-595 RPCs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.spec import codec
from kraft_tck.spec.errors import CorruptRecordError, DecodeError
from kraft_tck.spec.records import (
    ControlType,
    RecordBatch,
    control_batch,
    data_batch,
    decode_batch,
    decode_control,
    encode_batches,
)

FETCH_SNAPSHOT = 59

#: Kafka's SnapshotHeaderRecord / SnapshotFooterRecord versions (ControlRecordUtils.*_CURRENT_VERSION).
HEADER_VERSION = 0
FOOTER_VERSION = 0


# ---------------------------------------------------------------------------------------------- bodies


def fetch_snapshot_request(
    cluster_id: str | None,
    replica_id: int,
    leader_epoch: int,
    snapshot_id: tuple[int, int],
    position: int,
    max_bytes: int = 0x7FFFFFFF,
) -> B.Body:
    """One FetchSnapshot for ``__cluster_metadata``-0; ``snapshot_id`` is (EndOffset, Epoch)."""
    part: B.Body = {
        "Partition": 0,
        "CurrentLeaderEpoch": leader_epoch,
        "SnapshotId": {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]},
        "Position": position,
    }
    return {
        "ClusterId": cluster_id,
        "ReplicaId": replica_id,
        "MaxBytes": max_bytes,
        "Topics": [{"Name": B.METADATA_TOPIC, "Partitions": [part]}],
    }


def fetch_snapshot_response(
    *,
    error: int = 0,
    top_error: int = 0,
    snapshot_id: tuple[int, int] = (-1, -1),
    leader: tuple[int, int] = (-1, -1),
    size: int = -1,
    position: int = -1,
    chunk: bytes = b"",
) -> B.Body:
    """A FetchSnapshot answer as Kafka's leader builds it (RaftUtil.singletonFetchSnapshotResponse)."""
    if top_error:
        return {"ThrottleTimeMs": 0, "ErrorCode": int(top_error), "Topics": []}
    part: B.Body = {
        "Index": 0,
        "ErrorCode": int(error),
        "SnapshotId": {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]},
        "CurrentLeader": {"LeaderId": leader[0], "LeaderEpoch": leader[1]},
        "Size": size,
        "Position": position,
        "UnalignedRecords": chunk,
    }
    return {"ThrottleTimeMs": 0, "ErrorCode": 0, "Topics": [{"Name": B.METADATA_TOPIC, "Partitions": [part]}]}


def snapshot_id_of(part: B.Body) -> tuple[int, int] | None:
    """(EndOffset, Epoch) of a Fetch or FetchSnapshot partition's SnapshotId, None when unset (-1, -1)."""
    sid = part.get("SnapshotId")
    if not isinstance(sid, dict):
        return None
    end, epoch = int(sid.get("EndOffset", -1)), int(sid.get("Epoch", -1))
    return None if end == -1 and epoch == -1 else (end, epoch)


def errors_of(resp: B.Body) -> int:
    """The top-level error, else the partition's (0: none)."""
    top = int(resp.get("ErrorCode", 0) or 0)
    if top:
        return top
    part = B.partition_or_none(resp) or {}
    return int(part.get("ErrorCode", 0) or 0)


def chunk_of(part: B.Body) -> bytes:
    raw = part.get("UnalignedRecords")
    return bytes(raw) if raw else b""


def describe(kind: str, body: B.Body) -> str:
    """A one-line summary of a FetchSnapshot request or response."""
    part = B.partition_or_none(body) or {}
    sid = snapshot_id_of(part)
    if kind == "request":
        return (
            f"FetchSnapshot(replica={body.get('ReplicaId')}, epoch={part.get('CurrentLeaderEpoch')}, "
            f"snapshot={sid}, position={part.get('Position')}, maxBytes={body.get('MaxBytes')})"
        )
    top = int(body.get("ErrorCode", 0) or 0)
    if top:
        return f"{B.error_name(top)} FetchSnapshot→()"
    err = int(part.get("ErrorCode", 0) or 0)
    leader = part.get("CurrentLeader") or {}
    return (
        f"FetchSnapshot→({B.error_name(err) + ', ' if err else ''}snapshot={sid}, size={part.get('Size')}, "
        f"position={part.get('Position')}, bytes={len(chunk_of(part))}, "
        f"leader={leader.get('LeaderId')}/{leader.get('LeaderEpoch')})"
    )


# ---------------------------------------------------------------------------------------------- building


@dataclass(frozen=True)
class HarnessSnapshot:
    """A snapshot the harness built: its id (end offset, epoch) and its bytes."""

    end_offset: int
    epoch: int
    data: bytes

    @property
    def id(self) -> tuple[int, int]:
        return (self.end_offset, self.epoch)

    @property
    def size(self) -> int:
        return len(self.data)


def build_snapshot(
    end_offset: int, epoch: int, state: list[bytes], last_timestamp: int | None = None
) -> HarnessSnapshot:
    """Kafka's snapshot layout (RecordsSnapshotWriter): header control batch at offset 0, one batch per state
    record, footer control batch last, every batch in ``epoch``; ``state``: metadata record values."""
    now = int(time.time() * 1000) if last_timestamp is None else last_timestamp
    batches: list[RecordBatch] = [
        control_batch(0, epoch, ControlType.SNAPSHOT_HEADER,
                      {"Version": HEADER_VERSION, "LastContainedLogTimestamp": now}, timestamp=now),
    ]  # fmt: skip
    for value in state:
        batches.append(data_batch(batches[-1].last_offset + 1, epoch, [value], timestamp=now))
    batches.append(
        control_batch(batches[-1].last_offset + 1, epoch, ControlType.SNAPSHOT_FOOTER, {"Version": FOOTER_VERSION},
                      timestamp=now)
    )  # fmt: skip
    return HarnessSnapshot(end_offset, epoch, encode_batches(batches))


# ---------------------------------------------------------------------------------------------- reading


@dataclass
class SnapshotReading:
    """What the harness read in a snapshot's bytes; ``problems``: each rule it breaks, in words."""

    size: int
    batches: list[RecordBatch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: data records by metadata record name ("?" for one the harness's codec cannot decode)
    records: dict[str, int] = field(default_factory=dict)
    undecodable: list[str] = field(default_factory=list)
    header: dict[str, Any] | None = None
    footer: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        first = self.batches[0].base_offset if self.batches else None
        last = self.batches[-1].last_offset if self.batches else None
        recs = ", ".join(f"{n} x{c}" for n, c in sorted(self.records.items())) or "no data records"
        return f"{self.size} bytes, {len(self.batches)} batches, offsets {first}..{last}, {recs}"


def _control_types(batch: RecordBatch) -> list[ControlType | str]:
    out: list[ControlType | str] = []
    for rec in batch.records:
        try:
            ctype, _ = decode_control(rec)
            out.append(ctype)
        except DecodeError as exc:
            out.append(f"undecodable control record ({exc})")
    return out


def read_snapshot(data: bytes) -> SnapshotReading:
    """Read a whole snapshot: CRCs, header first, footer last, increasing offsets (KIP-630 "Snapshot Format",
    Kafka's RecordsSnapshotReader / Snapshots); the data records as metadata records (informative)."""
    out = SnapshotReading(len(data))
    pos = 0
    while pos < len(data):
        try:
            batch, pos = decode_batch(data, pos)
        except CorruptRecordError as exc:
            out.problems.append(f"batch at byte {pos}: CRC32C mismatch ({exc})")
            return out
        except DecodeError as exc:
            out.problems.append(f"batch at byte {pos}: undecodable ({exc})")
            return out
        out.batches.append(batch)
    if not out.batches:
        out.problems.append("no record batch at all")
        return out
    prev_last: int | None = None
    for i, batch in enumerate(out.batches):
        if prev_last is not None and batch.base_offset <= prev_last:
            out.problems.append(
                f"batch {i} starts at offset {batch.base_offset}, not after the previous batch's last {prev_last}"
            )
        prev_last = batch.last_offset
        if batch.is_control:
            types = _control_types(batch)
            for j, t in enumerate(types):
                if isinstance(t, str):
                    out.problems.append(f"batch {i} record {j}: {t}")
                elif t == ControlType.SNAPSHOT_HEADER and (i, j) != (0, 0):
                    out.problems.append(f"a SnapshotHeaderRecord at batch {i} record {j}, not first")
                elif t == ControlType.SNAPSHOT_FOOTER and (i, j) != (len(out.batches) - 1, len(types) - 1):
                    out.problems.append(f"a SnapshotFooterRecord at batch {i} record {j}, not last")
            continue
        for rec in batch.records:
            if rec.value is None:
                out.undecodable.append(f"offset {batch.base_offset + rec.offset_delta}: null value")
                continue
            try:
                name, _, _ = codec.decode_metadata_record(rec.value)
            except (DecodeError, ValueError) as exc:
                name = "?"
                out.undecodable.append(f"offset {batch.base_offset + rec.offset_delta}: {exc}")
            out.records[name] = out.records.get(name, 0) + 1
    first, last = out.batches[0], out.batches[-1]
    head = _decoded(first, 0)
    if not first.is_control or head is None or head[0] != ControlType.SNAPSHOT_HEADER:
        out.problems.append(f"the first record is not a SnapshotHeaderRecord (batch at offset {first.base_offset})")
    else:
        out.header = head[1]
    tail = _decoded(last, len(last.records) - 1)
    if not last.is_control or tail is None or tail[0] != ControlType.SNAPSHOT_FOOTER:
        out.problems.append(f"the last record is not a SnapshotFooterRecord (batch at offset {last.base_offset})")
    else:
        out.footer = tail[1]
    return out


def _decoded(batch: RecordBatch, index: int) -> tuple[ControlType, dict[str, Any]] | None:
    if not batch.is_control:
        return None
    try:
        return decode_control(batch.records[index])
    except DecodeError:
        return None
