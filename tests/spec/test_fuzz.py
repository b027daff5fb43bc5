"""Fuzz: garbage and mutated valid frames only ever raise DecodeError (or decode)."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.spec import codec, records
from kraft_tck.spec.errors import DecodeError
from kraft_tck.spec.strategies import body_strategy

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

API_VERSIONS = [
    (k, v)
    for k in codec.api_keys()
    for v in range(codec.supported_versions(k)[0], codec.supported_versions(k)[1] + 1)
]


def _try(fn: Any, *args: Any) -> None:
    with contextlib.suppress(DecodeError):
        fn(*args)


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_requests(data: bytes) -> None:
    _try(codec.decode_request, data)


@FUZZ
@given(st.sampled_from(API_VERSIONS), st.binary(max_size=200))
def test_garbage_requests_with_a_valid_header(api: tuple[int, int], data: bytes) -> None:
    key, version = api
    _try(codec.decode_request, key.to_bytes(2, "big") + version.to_bytes(2, "big") + data)


@FUZZ
@given(st.sampled_from(API_VERSIONS), st.binary(max_size=200))
def test_garbage_responses(api: tuple[int, int], data: bytes) -> None:
    _try(codec.decode_response, api[0], api[1], data)


@FUZZ
@given(st.sampled_from(codec.message_names()), st.integers(0, 4), st.binary(max_size=120))
def test_garbage_data(name: str, version: int, data: bytes) -> None:
    _try(codec.decode_data, name, version, data)
    _try(codec.decode_metadata_record, data)


@st.composite
def mutated_frame(draw: st.DrawFn) -> tuple[int, int, bool, bytes]:
    key, version = draw(st.sampled_from(API_VERSIONS))
    is_request = draw(st.booleans())
    name = codec.api_name(key) + ("Request" if is_request else "Response")
    body = draw(body_strategy(name, version))
    if is_request:
        frame = bytearray(codec.encode_request(key, version, 1, "c", body)[4:])
    else:
        frame = bytearray(codec.encode_response(key, version, 1, body)[4:])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if not frame:
            break
        i = draw(st.integers(0, len(frame) - 1))
        if op == "flip":
            frame[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            frame[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del frame[i:]
        else:
            frame[i:i] = draw(st.binary(min_size=1, max_size=4))
    return key, version, is_request, bytes(frame)


@FUZZ
@given(mutated_frame())
def test_mutated_valid_frames(case: tuple[int, int, bool, bytes]) -> None:
    key, version, is_request, frame = case
    if is_request:
        _try(codec.decode_request, frame)
    else:
        _try(codec.decode_response, key, version, frame)


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_record_batches(data: bytes) -> None:
    _try(records.decode_batches, data)


@FUZZ
@given(st.integers(0, 10_000), st.integers(0, 7), st.integers(0, 3))
def test_mutated_record_batches(seed: int, bit: int, extra: int) -> None:
    batch = records.data_batch(10, 2, [b"a" * (seed % 7), b"", b"xyz"])
    data = bytearray(records.encode_batch(batch))
    i = seed % len(data)
    data[i] ^= 1 << bit
    del data[len(data) - extra :]
    try:
        got = records.decode_batches(bytes(data))
    except DecodeError:
        return
    # Only a flip in the unchecked prefix (base offset, length, epoch) can still decode.
    assert i < 12 + 4 and extra == 0 and len(got) == 1
