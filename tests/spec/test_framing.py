"""``FrameSplitter``: the stream cut into frames, whether bytes are fed (``asyncio.Protocol``) or read into
its reused buffer (``asyncio.BufferedProtocol``, what reference/net.py uses), in pieces of any size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kraft_tck.spec.errors import DecodeError, FrameTooLargeError
from kraft_tck.spec.framing import READ_CHUNK, FrameSplitter, frame

payloads = st.lists(st.binary(max_size=300), max_size=8)


def _read_into(splitter: FrameSplitter, data: bytes) -> None:
    """What the transport does for one read: fill the start of the buffer, report how much."""
    buf = splitter.get_buffer()
    buf[: len(data)] = data
    splitter.buffer_updated(len(data))


def _drain(splitter: FrameSplitter) -> list[bytes]:
    out = []
    while (p := splitter.next_frame()) is not None:
        out.append(p)
    return out


@given(payloads, st.lists(st.integers(1, 700), min_size=1), st.booleans())
def test_any_split_of_the_stream_gives_the_frames_in_order(frames: list[bytes], cuts: list[int], fed: bool) -> None:
    stream = b"".join(frame(p) for p in frames)
    splitter, got, pos, i = FrameSplitter(), [], 0, 0
    while pos < len(stream):
        piece = stream[pos : pos + cuts[i % len(cuts)]]
        pos, i = pos + len(piece), i + 1
        if fed and i % 2:
            splitter.feed(piece)  # the two ways mix on one splitter
        else:
            _read_into(splitter, piece)
        got += _drain(splitter)
    assert got == frames
    assert splitter.end_error() is None


def test_reads_reuse_one_buffer() -> None:
    splitter = FrameSplitter()
    first = splitter.get_buffer()
    assert len(first) == READ_CHUNK
    _read_into(splitter, frame(b"abc"))
    assert _drain(splitter) == [b"abc"]
    assert splitter.get_buffer() is first


def test_a_frame_cut_short_after_whole_ones_is_reported_at_the_end() -> None:
    splitter = FrameSplitter()
    _read_into(splitter, frame(b"one") + frame(b"two") + frame(b"three")[:6])
    assert _drain(splitter) == [b"one", b"two"]
    err = splitter.end_error()
    assert isinstance(err, DecodeError) and "stream ended after 2 of 5 bytes" in str(err)
    _read_into(splitter, frame(b"three")[6:])
    assert _drain(splitter) == [b"three"]
    assert splitter.end_error() is None


def test_a_bad_length_raises_after_the_frames_before_it() -> None:
    splitter = FrameSplitter(max_bytes=10)
    _read_into(splitter, frame(b"ok") + frame(b"x" * 11))
    assert splitter.next_frame() == b"ok"
    with pytest.raises(FrameTooLargeError):
        splitter.next_frame()


@given(payloads, st.lists(st.booleans(), min_size=1))
def test_reads_of_whole_frames_keep_order_when_not_taken_at_once(frames: list[bytes], take: list[bool]) -> None:
    """A read holding exactly one frame is set aside without a copy into the stream buffer; bytes read before it is
    taken go behind it, and the sizes the server's memory pool asks about count it."""
    splitter, got = FrameSplitter(), []
    for i, p in enumerate(frames):
        pending = splitter.buffered()
        _read_into(splitter, frame(p))
        assert splitter.buffered() == pending + len(p) + 4
        if pending == 0:
            assert splitter.pending_size() == len(p)
        if take[i % len(take)]:
            got += _drain(splitter)
    got += _drain(splitter)
    assert got == frames
    assert splitter.buffered() == 0 and splitter.end_error() is None


def test_a_whole_frame_over_the_limit_raises_when_reached() -> None:
    splitter = FrameSplitter(max_bytes=10)
    _read_into(splitter, frame(b"x" * 11))
    with pytest.raises(FrameTooLargeError):
        splitter.next_frame()


def test_a_whole_frame_left_untaken_at_the_end_is_reported_as_before() -> None:
    splitter = FrameSplitter()
    _read_into(splitter, frame(b"abc"))
    err = splitter.end_error()
    assert isinstance(err, DecodeError) and "stream ended after 3 of 3 bytes" in str(err)
    assert _drain(splitter) == [b"abc"]


@given(payloads, st.lists(st.integers(1, 700), min_size=1), st.lists(st.booleans(), min_size=1))
def test_read_hands_back_a_lone_whole_frame_and_leaves_the_rest_to_next_frame(
        frames: list[bytes], cuts: list[int], take: list[bool]) -> None:
    """``read`` (net.py's client) returns a read's payload only when the read held exactly that one frame and nothing
    was buffered before it; the frames of every other read come from ``next_frame``, all in the stream's order."""
    stream = b"".join(frame(p) for p in frames)
    splitter, got, pos, i = FrameSplitter(), [], 0, 0
    # Reads of whole frames (the steady state), then reads cut anywhere, some left untaken for a while.
    pieces = [frame(p) for p in frames[: len(frames) // 2]]
    rest = stream[sum(map(len, pieces)):]
    while pos < len(rest):
        pieces.append(rest[pos : pos + cuts[i % len(cuts)]])
        pos, i = pos + len(pieces[-1]), i + 1
    lone = 0
    for j, piece in enumerate(pieces):
        before = splitter.buffered()
        buf = splitter.get_buffer()
        buf[: len(piece)] = piece
        whole = splitter.read(len(piece))
        if whole is not None:
            assert before == 0 and piece == frame(whole), "only a read of one whole frame, nothing before it"
            got.append(whole)
            lone += 1
        else:
            assert before or len(piece) < 4 or int.from_bytes(piece[:4], "big") + 4 != len(piece)
        if take[j % len(take)]:
            got += _drain(splitter)
    got += _drain(splitter)
    assert got == frames
    assert splitter.buffered() == 0 and splitter.end_error() is None
    if frames and all(take):
        assert lone >= len(frames) // 2  # every whole-frame read came back at once


def test_read_reports_a_bad_length_through_next_frame() -> None:
    splitter = FrameSplitter(max_bytes=10)
    buf = splitter.get_buffer()
    data = frame(b"x" * 11)
    buf[: len(data)] = data
    assert splitter.read(len(data)) is None
    with pytest.raises(FrameTooLargeError):
        splitter.next_frame()


def test_read_never_hands_back_a_frame_ahead_of_buffered_ones() -> None:
    splitter = FrameSplitter()
    for data in (frame(b"a") + frame(b"b"), frame(b"c"), frame(b"d")):  # two frames in one read, not yet taken
        buf = splitter.get_buffer()
        buf[: len(data)] = data
        assert splitter.read(len(data)) is None
    assert _drain(splitter) == [b"a", b"b", b"c", b"d"]
    buf = splitter.get_buffer()
    buf[:5] = frame(b"e")
    assert splitter.read(5) == b"e" and splitter.buffered() == 0  # nothing before it now: handed back at once
