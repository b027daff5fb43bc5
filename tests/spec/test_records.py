"""RecordBatch v2: layout, CRC32C, control records, bounds checked before allocation."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kraft_tck.spec import records as R
from kraft_tck.spec.errors import CorruptRecordError, DecodeError, Errors

record_st = st.builds(
    lambda key, value, ts, headers: (key, value, ts, headers),
    st.none() | st.binary(max_size=16),
    st.none() | st.binary(max_size=64),
    st.integers(-(1 << 40), 1 << 40),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
)


@st.composite
def batches(draw: st.DrawFn) -> R.RecordBatch:
    raw = draw(st.lists(record_st, min_size=1, max_size=5))
    gaps = draw(st.lists(st.integers(1, 3), min_size=len(raw), max_size=len(raw)))
    delta = 0
    recs = []
    for (key, value, ts, headers), gap in zip(raw, gaps, strict=True):
        recs.append(R.Record(delta, value, key, ts, tuple(headers)))
        delta += gap
    return R.RecordBatch(
        base_offset=draw(st.integers(0, 1 << 50)),
        partition_leader_epoch=draw(st.integers(-1, 1 << 20)),
        records=tuple(recs),
        is_control=draw(st.booleans()),
        base_timestamp=draw(st.integers(0, 1 << 42)),
        max_timestamp=draw(st.integers(0, 1 << 42)),
        producer_id=draw(st.integers(-1, 1 << 40)),
        producer_epoch=draw(st.integers(-1, 100)),
        base_sequence=draw(st.integers(-1, 1000)),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(batches(), min_size=1, max_size=3))
def test_batches_round_trip(bs: list[R.RecordBatch]) -> None:
    data = R.encode_batches(bs)
    assert R.decode_batches(data) == bs
    assert R.encode_batches(R.decode_batches(data)) == data


def test_layout_by_hand() -> None:
    batch = R.data_batch(100, 7, [b"hi"], timestamp=5)
    data = R.encode_batch(batch)
    base, length, epoch, magic, crc = struct.unpack_from(">qiibI", data)
    assert (base, length, epoch, magic) == (100, len(data) - 12, 7, 2)
    assert crc == crc32c.crc32c(data[21:])
    attrs, last_delta, base_ts, max_ts, pid, pepoch, seq, count = struct.unpack_from(">hiqqqhii", data, 21)
    assert (attrs, last_delta, base_ts, max_ts, pid, pepoch, seq, count) == (0, 0, 5, 5, -1, -1, -1, 1)
    # record: length 8, attributes 0, timestampDelta 0, offsetDelta 0, key null (-1 zigzag = 1),
    # value length 2 (zigzag 4), "hi", no headers
    assert data[61:] == bytes([16, 0, 0, 0, 1, 4]) + b"hi" + bytes([0])
    assert batch.last_offset == 100


def test_every_single_bit_flip_in_crc_region_is_detected() -> None:
    data = R.encode_batch(R.data_batch(0, 1, [b"value-1", b"value-2"]))
    for i in range(17, len(data)):  # the crc itself and everything it covers
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            with pytest.raises(CorruptRecordError) as info:
                R.decode_batch(bytes(bad))
            assert info.value.error_code == Errors.CORRUPT_MESSAGE
            assert info.value.expected_crc != info.value.actual_crc


def test_crc_error_reports_both_crcs() -> None:
    data = bytearray(R.encode_batch(R.data_batch(0, 1, [b"x"])))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch") as info:
        R.decode_batch(bytes(data))
    assert info.value.expected_crc == struct.unpack_from(">I", data, 17)[0]
    assert info.value.actual_crc == crc32c.crc32c(bytes(data[21:]))


def _recrc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_oversized_counts_are_rejected_before_allocation() -> None:
    data = bytearray(R.encode_batch(R.data_batch(0, 1, [b"x"])))
    struct.pack_into(">i", data, 57, 2_000_000_000)  # recordCount
    with pytest.raises(DecodeError, match="recordCount"):
        R.decode_batch(_recrc(data))
    data = bytearray(R.encode_batch(R.data_batch(0, 1, [b"x"])))
    struct.pack_into(">i", data, 8, 1 << 30)  # batchLength far past the buffer
    with pytest.raises(DecodeError, match="batchLength"):
        R.decode_batch(bytes(data))
    data = bytearray(R.encode_batch(R.data_batch(0, 1, [b"x"])))
    data[61] = 0x7E  # record length 63 > bytes left
    with pytest.raises(DecodeError, match="length"):
        R.decode_batch(_recrc(data))


def test_truncation_and_partial_tail() -> None:
    one = R.encode_batch(R.data_batch(0, 1, [b"a"]))
    two = R.encode_batch(R.data_batch(1, 1, [b"b"]))
    for cut in range(1, len(two)):
        with pytest.raises(DecodeError):
            R.decode_batches(one + two[:cut])
        assert R.decode_batches(one + two[:cut], allow_partial_tail=True) == [R.decode_batch(one)[0]]


def test_compressed_batch_is_refused_naming_the_codec() -> None:
    data = bytearray(R.encode_batch(R.data_batch(0, 1, [b"x"])))
    struct.pack_into(">h", data, 21, 4)  # zstd
    with pytest.raises(DecodeError, match="zstd"):
        R.decode_batch(_recrc(data))


def test_empty_batch_refused() -> None:
    with pytest.raises(ValueError):
        R.encode_batch(R.RecordBatch(0, 0, ()))
    with pytest.raises(ValueError):
        _ = R.RecordBatch(0, 0, ()).last_offset


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        (
            R.ControlType.LEADER_CHANGE,
            {
                "Version": 0,
                "LeaderId": 1,
                "Voters": [{"VoterId": 1}, {"VoterId": 2}],
                "GrantingVoters": [{"VoterId": 1}],
            },
        ),
        (R.ControlType.SNAPSHOT_HEADER, {"Version": 0, "LastContainedLogTimestamp": 123}),
        (R.ControlType.SNAPSHOT_FOOTER, {"Version": 0}),
        (R.ControlType.KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}),
        (
            R.ControlType.KRAFT_VOTERS,
            {
                "Version": 0,
                "Voters": [
                    {
                        "VoterId": 1,
                        "VoterDirectoryId": uuid.UUID(int=5),
                        "Endpoints": [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": 9093}],
                        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
                    }
                ],
            },
        ),
    ],
)
def test_control_batches_round_trip(ctype: R.ControlType, body: dict[str, object]) -> None:
    batch = R.control_batch(40, 3, ctype, body, timestamp=9)
    assert batch.is_control and batch.last_offset == 40
    data = R.encode_batch(batch)
    assert struct.unpack_from(">h", data, 21)[0] & 0x20  # control attribute bit 5
    decoded, end = R.decode_batch(data)
    assert end == len(data) and decoded == batch
    assert decoded.records[0].key == struct.pack(">hh", 0, int(ctype))
    assert R.decode_control(decoded.records[0]) == (ctype, body)


def test_batch_digest_depends_on_records_only() -> None:
    a = R.data_batch(0, 1, [b"x", b"y"])
    b = R.data_batch(50, 9, [b"x", b"y"])
    c = R.data_batch(0, 1, [b"x", b"z"])
    assert R.batch_digest(a) == R.batch_digest(b) != R.batch_digest(c)
    assert len(R.batch_digest(a)) == 8


def test_framing_refuses_oversized_frames() -> None:
    from kraft_tck.spec import framing
    from kraft_tck.spec.errors import FrameTooLargeError

    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(struct.pack(">i", 200 * 1024 * 1024))
        with pytest.raises(FrameTooLargeError, match="exceeds the maximum"):
            await framing.read_frame(reader)
        reader = asyncio.StreamReader()
        reader.feed_data(framing.frame(b"abc") + b"\x00\x00")
        reader.feed_eof()
        assert await framing.read_frame(reader) == b"abc"
        with pytest.raises(DecodeError):
            await framing.read_frame(reader)
        reader = asyncio.StreamReader()
        reader.feed_eof()
        assert await framing.read_frame(reader) is None
        reader = asyncio.StreamReader()
        reader.feed_data(framing.frame(b"x" * 11))
        with pytest.raises(FrameTooLargeError):
            await framing.read_frame(reader, max_bytes=10)

    asyncio.run(run())
    assert framing.split_frame(framing.frame(b"ab") + b"\x00", 0) == (b"ab", 6)
    assert framing.split_frame(b"\x00\x00\x00\x05ab") is None
    with pytest.raises(FrameTooLargeError):
        framing.split_frame(struct.pack(">i", 1 << 30) + b"x")
    assert framing.unframe(framing.frame(b"q")) == b"q"


def _record_outcome(fn: object, buf: bytes, end: int) -> tuple[str, object]:
    try:
        return "ok", fn(buf, 0, end, 3)  # type: ignore[operator]
    except DecodeError as exc:
        return "error", (type(exc), str(exc))


@settings(max_examples=300, deadline=None)
@given(record_st, st.integers(0, 300) | st.sampled_from([63, 64, 8191, 8192, 1 << 20]), st.data())
def test_record_fast_path_matches_the_checked_decoder(rec: tuple[object, ...], delta: int, data: st.DataObject) -> None:
    """_decode_record's inline path gives the same record, or the same error, as _decode_record_checked,
    on well-formed records (short and long varints, keys, null values, headers, offset deltas across the
    one- and two-byte boundaries) and on damaged ones."""
    key, value, ts, headers = rec
    raw = R._encode_record(R.Record(delta, value, key, ts, tuple(headers)))  # type: ignore[arg-type]
    cases = [raw, raw + b"\x00\x01"]  # exact, and followed by other bytes (the next record)
    cases += [raw[:n] for n in range(len(raw))]
    cases += [raw[:-1] + bytes([b]) for b in (1, 2, 0x7F, 0x80)]  # a bad header count in the last byte
    i = data.draw(st.integers(0, len(raw) - 1))
    cases.append(raw[:i] + bytes([data.draw(st.integers(0, 255))]) + raw[i + 1:])
    for buf in cases:
        for end in {len(buf), len(raw), max(0, len(raw) - 1)}:
            if end > len(buf):
                continue
            fast = _record_outcome(R._decode_record, buf, end)
            assert fast == _record_outcome(R._decode_record_checked, buf, end), (buf.hex(), end)


@settings(max_examples=400, deadline=None)
@given(
    st.none() | st.binary(max_size=4),
    st.none() | st.binary(max_size=4200) | st.sampled_from([b"v" * n for n in (63, 64, 100, 4095, 4096, 8191)]),
    st.integers(-70, 70) | st.integers(-(1 << 40), 1 << 40),
    st.integers(0, 70) | st.integers(0, (1 << 31) - 1),
    st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2),
)
def test_record_encoder_fast_path_writes_the_generic_bytes(
    key: bytes | None, value: bytes | None, ts: int, delta: int, headers: list[tuple[str, bytes | None]]
) -> None:
    """_encode_record's inline path (no key, no headers, small deltas, values under 4 KiB: a leader's client
    records) writes exactly what the generic varint writers do, at and across every boundary it tests."""
    rec = R.Record(delta, value, key, ts, tuple(headers))
    raw = R._encode_record(rec)
    assert raw == R._encode_record_generic(rec)
    decoded, end = R._decode_record_checked(raw, 0, len(raw), 0)
    assert (decoded, end) == (rec, len(raw))


# ---------------------------------------------------------------------------------------------- templates


def _decoded(decode: Any, data: bytes, pos: int = 0) -> tuple[bool, Any]:
    try:
        return True, decode(data, pos)
    except Exception as exc:  # the same error, at the same place, or the same batch
        return False, (type(exc), str(exc))


def _like(batch: R.RecordBatch, data: Any) -> R.RecordBatch:
    """``batch``'s shape with other numbers and record values (of the same lengths)."""
    recs = tuple(R.Record(r.offset_delta, None if r.value is None else data.draw(
        st.binary(min_size=len(r.value), max_size=len(r.value))), r.key, r.timestamp_delta, r.headers)
        for r in batch.records)
    return R.RecordBatch(data.draw(st.integers(0, 1 << 50)), data.draw(st.integers(-1, 1 << 20)), recs,
                         batch.is_control, data.draw(st.integers(0, 1 << 42)), data.draw(st.integers(0, 1 << 42)),
                         data.draw(st.integers(-1, 1 << 40)), data.draw(st.integers(-1, 100)),
                         data.draw(st.integers(-1, 1000)))


@settings(max_examples=200, deadline=None)
@given(batches(), st.data())
def test_batch_templates_decode_as_decode_batch_does(batch: R.RecordBatch, data: Any) -> None:
    """Any sequence of batches (the same shape with other numbers and values, random bytes changed with and
    without a fixed CRC, cut short, behind other bytes) decodes through one BatchTemplates as through
    decode_batch: the same batch and end, or the same error."""
    templates = R.BatchTemplates()
    first = R.encode_batch(batch)
    frames = [(first, 0), (first, 0)]  # the first of its size is only decoded, the second remembered
    likes = [R.encode_batch(_like(batch, data)) for _ in range(2)]
    frames += [(b, 0) for b in likes]
    for recrc in (False, True, True):
        f = bytearray(first)
        for _ in range(data.draw(st.integers(1, 3))):
            f[data.draw(st.integers(0, len(f) - 1))] = data.draw(st.integers(0, 255))
        frames.append((_recrc(f) if recrc else bytes(f), 0))
    frames.append((first[:data.draw(st.integers(0, len(first) - 1))], 0))
    frames.append((b"\x07" * 5 + likes[0] + b"tail", 5))
    hits = 0
    for frame, pos in frames:
        want = _decoded(R.decode_batch, frame, pos)
        assert _decoded(templates.decode, frame, pos) == want
        if pos == 0:
            # ``one``: the whole buffer one batch of a remembered shape -> decode_batch's batch (or its error),
            # else None (nothing read: the caller decodes).
            got = _decoded(lambda data, _: templates.one(data), frame)
            if got != (True, None):
                hits += 1
                assert got == (want if not want[0] else (True, want[1][0]))
                assert not want[0] or want[1][1] == len(frame)
    if not any(r.headers for r in batch.records):
        assert templates.hits >= 3, "batches of the first one's shape are read from its template"
        assert hits >= 3, "one() reads batches of the first one's shape from its template"


def test_a_corrupt_batch_of_a_known_shape_is_refused() -> None:
    templates = R.BatchTemplates()
    for _ in range(2):  # decoded, then remembered
        templates.decode(R.encode_batch(R.data_batch(5, 1, [b"r" * 100])))
    data = bytearray(R.encode_batch(R.data_batch(6, 1, [b"s" * 100])))
    assert templates.decode(bytes(data))[0].records[0].value == b"s" * 100
    data[-5] ^= 1  # inside the record's value
    with pytest.raises(CorruptRecordError) as got:
        templates.decode(bytes(data))
    with pytest.raises(CorruptRecordError) as want:
        R.decode_batch(bytes(data))
    assert str(got.value) == str(want.value)
    assert (templates.hits, templates.misses) == (1, 2), "the corrupt one was refused on the template path"


def _plain_encode_batch(batch: R.RecordBatch) -> bytes:
    """A batch's bytes written field by field with the generic record encoder (no template, no inline path)."""
    recs = batch.records
    body = struct.pack(">hiqqqhii", batch.attributes, recs[-1].offset_delta, batch.base_timestamp,
                       batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                       len(recs)) + b"".join(R._encode_record_generic(r) for r in recs)
    return struct.pack(">qiibI", batch.base_offset, 9 + len(body), batch.partition_leader_epoch, 2,
                       crc32c.crc32c(body)) + body


@settings(max_examples=300, deadline=None)
@given(
    batches(),
    st.lists(st.tuples(st.integers(0, 1 << 50), st.integers(-1, 1 << 20), st.integers(0, 1 << 42),
                       st.binary(min_size=0, max_size=300)), min_size=1, max_size=4),
    st.none() | st.binary(max_size=4),
    st.integers(-70, 70) | st.integers(-(1 << 40), 1 << 40),
    st.integers(0, 70) | st.integers(0, (1 << 31) - 1),
    st.booleans(), st.booleans(), st.booleans(),
)
def test_one_record_batches_from_the_template_are_the_plain_bytes(
    shape: R.RecordBatch, writes: list[tuple[int, int, int, bytes]], key: bytes | None, ts: int, delta: int,
    control: bool, transactional: bool, append_time: bool,
) -> None:
    """encode_batch writes a one-record plain batch (a leader's client write) from the template of its record's
    shape: the same bytes as the field-by-field encoding, for the next writes of that shape (only offset, epoch,
    timestamp and value new; same-length values hit the template), for other shapes, keys and flags, and
    after the template is cleared when full."""
    plain = [shape]
    for base, epoch, ts0, value in writes:
        plain.append(R.data_batch(base, epoch, [value], timestamp=ts0))
        plain.append(R.data_batch(base, epoch, [bytearray(value)], timestamp=ts0))
        plain.append(R.RecordBatch(base, epoch, (R.Record(delta, value, key, ts),), control, ts0, ts0 + 1,
                                   base_sequence=epoch % 7, is_transactional=transactional,
                                   log_append_time=append_time))
        plain.append(R.RecordBatch(base, epoch, (R.Record(delta, value, None, ts, (("h", None),)),)))
        plain.append(R.RecordBatch(base, epoch, (R.Record(delta, None, key, ts),)))
        plain.append(R.RecordBatch(base, epoch, (R.Record(0, value), R.Record(1, value))))
    for batch in plain + plain:  # the second round reads every shape from the template
        data = R.encode_batch(batch)
        assert data == _plain_encode_batch(batch), batch
        assert R.decode_batch(data)[0].records[0].offset_delta == batch.records[0].offset_delta


def test_the_record_template_stays_bounded_and_right_when_shapes_are_evicted() -> None:
    """Many shapes (one per value length) fill the template cache; it never grows past its bound, and every
    batch, its shape remembered or evicted, still encodes to the plain bytes."""
    bound = R._plain_record_head.cache_info().maxsize
    assert bound is not None
    for n in range(3 * bound):
        batch = R.data_batch(n, 1, [bytes([n % 251]) * n], timestamp=n)
        assert R.encode_batch(batch) == _plain_encode_batch(batch)
        assert R._plain_record_head.cache_info().currsize <= bound


def test_data_batch_of_one_value_is_the_general_one() -> None:
    for value in (b"", b"x", bytearray(b"yz"), memoryview(b"abc")):
        one = R.data_batch(5, 2, [value], timestamp=9)
        assert one == R.RecordBatch(5, 2, (R.Record(0, bytes(value)),), base_timestamp=9, max_timestamp=9)
        assert type(one.records[0].value) is bytes
