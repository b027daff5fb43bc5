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
