"""The generated codec (spec/codegen.py) against the interpreter (codec.interpreted_plan), its oracle.

On every message and version, for bodies from the hypothesis strategies and for mutated bytes:
* where the interpreter encodes, the generated encoder writes the same bytes (or, for a body with
  unknown tagged fields, leaves it to the interpreter); where the interpreter refuses, it refuses too;
* where the interpreter decodes, the generated decoder returns an identical body: same keys in the same
  order, same types, same values; where the interpreter raises, it raises too.
The same holds for the whole-frame functions (header + body + length) the public API uses.
Generated code's own exceptions are never seen by users: the public API then runs the interpreter,
whose errors tests/spec/test_schema_errors.py and test_fuzz.py check.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.spec import codec, codegen
from kraft_tck.spec.strategies import body_strategy

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))

STRUCT_CASES = [
    (name, version)
    for name in codec.message_names()
    for version in range(codec.message_def(name).valid.lo, codec.message_def(name).valid.hi + 1)
]
API_CASES = [
    (key, version)
    for key in codec.api_keys()
    for version in range(codec.supported_versions(key)[0], codec.supported_versions(key)[1] + 1)
]


def identical(a: Any, b: Any) -> bool:
    """Equal, and also the same types and the same key order all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as exc:  # the generated code may raise anything; the interpreter its own errors
        return False, exc


def has_unknown_tags(body: Any) -> bool:
    if isinstance(body, dict):
        return codec.UNKNOWN_TAGGED in body or any(has_unknown_tags(v) for v in body.values())
    if isinstance(body, list):
        return any(has_unknown_tags(v) for v in body)
    return False


def mutations(data: bytes, draw: Callable[[st.SearchStrategy[Any]], Any]) -> list[bytes]:
    """Truncations, one flipped byte, one inserted byte."""
    out = [data[:n] for n in range(len(data))]
    if data:
        i = draw(st.integers(0, len(data) - 1))
        b = draw(st.integers(0, 255))
        out.append(data[:i] + bytes([b]) + data[i + 1:])
        out.append(data[:i] + bytes([b]) + data[i:])
    return out


def check_decoders(slow: Callable[[bytes], Any], fast: Callable[[bytes], Any], data: bytes) -> None:
    ok_slow, got_slow = outcome(slow, data)
    ok_fast, got_fast = outcome(fast, data)
    assert ok_slow == ok_fast, (data.hex(), got_slow, got_fast)
    if ok_slow:
        assert identical(got_slow, got_fast), (data.hex(), got_slow, got_fast)


@pytest.mark.parametrize(("name", "version"), STRUCT_CASES, ids=lambda x: str(x))
def test_struct_codec_matches_the_interpreter(name: str, version: int) -> None:
    slow, fast = codec.interpreted_plan(name, version), codec.generated_plan(name, version)

    def whole(dec: Callable[[bytes, int], tuple[Any, int]]) -> Callable[[bytes], Any]:
        def run(data: bytes) -> Any:
            body, pos = dec(data, 0)
            if pos != len(data):
                raise ValueError("trailing bytes")
            return body
        return run

    @SETTINGS
    @given(body_strategy(name, version), st.data())
    def check(body: dict[str, Any], data: st.DataObject) -> None:
        expected = bytearray()
        slow.enc(expected, body)
        got = bytearray(b"prefix")
        ok, exc = outcome(fast.enc, got, body)
        if has_unknown_tags(body):
            assert ok or isinstance(exc, codegen.Fallback)  # written back by the interpreter
        else:
            assert ok, exc
        if ok:
            assert bytes(got) == b"prefix" + expected
        for mutated in [bytes(expected), *mutations(bytes(expected), data.draw)]:
            check_decoders(whole(slow.dec), whole(fast.dec), mutated)

    check()


@pytest.mark.parametrize(("name", "version"), STRUCT_CASES[::7], ids=lambda x: str(x))
def test_generated_encoder_refuses_what_the_interpreter_refuses(name: str, version: int) -> None:
    slow, fast = codec.interpreted_plan(name, version), codec.generated_plan(name, version)
    wrong: list[Any] = [None, 1 << 70, "x", "x" * 32_768, b"x", -1, [None], [{}], {"x": 1}, 1.5, True]

    @SETTINGS
    @given(body_strategy(name, version), st.data())
    def check(body: dict[str, Any], data: st.DataObject) -> None:
        bodies: list[Any] = [body, [body], None]
        for key in list(body):
            bodies.append({**body, key: data.draw(st.sampled_from(wrong))})
        bodies.append({**body, "NoSuchField": 1})
        for b in bodies:
            ok_slow, want = outcome(lambda b=b: bytes(_enc(slow.enc, b)))
            ok_fast, got = outcome(lambda b=b: bytes(_enc(fast.enc, b)))
            if ok_fast:
                assert ok_slow and got == want, (b, want, got)

    check()


def _enc(enc: Callable[[bytearray, Any], None], body: Any) -> bytearray:
    out = bytearray()
    enc(out, body)
    return out


def _frame_fns(key: int, version: int) -> dict[str, Any]:
    return {which: codec._generated({}, key, version, which)
            for which in ("request encoder", "response encoder", "request decoder", "response decoder")}


@pytest.mark.parametrize(("api_key", "version"), API_CASES, ids=lambda x: str(x))
def test_frame_codecs_match_the_interpreter(api_key: int, version: int) -> None:
    fns = _frame_fns(api_key, version)
    name = codec.api_name(api_key)

    @SETTINGS
    @given(body_strategy(name + "Request", version), body_strategy(name + "Response", version),
           st.sampled_from([None, "", "kraft-tck", "é" * 3]), st.integers(-(1 << 31), (1 << 31) - 1), st.data())
    def check(req: dict[str, Any], resp: dict[str, Any], client_id: str | None, corr: int,
              data: st.DataObject) -> None:
        frame = codec._encode_request_interpreted(api_key, version, corr, client_id, req)
        ok, got = outcome(fns["request encoder"], corr, client_id, req)
        assert ok or has_unknown_tags(req), got
        if ok:
            assert got == frame
        for mutated in [frame[4:], *mutations(frame[4:], data.draw)]:
            if mutated[:4] == frame[4:8]:  # same api key and version: what the codec routes here
                check_decoders(codec._decode_request_interpreted, fns["request decoder"], mutated)

        frame = codec._encode_response_interpreted(api_key, version, corr, resp)
        ok, got = outcome(fns["response encoder"], corr, resp)
        assert ok or has_unknown_tags(resp), got
        if ok:
            assert got == frame
        for mutated in [frame[4:], *mutations(frame[4:], data.draw)]:
            check_decoders(lambda b: codec._decode_response(api_key, version, b),
                           lambda b: _corr_and_body(fns["response decoder"](b)), mutated)

    check()


def _corr_and_body(header_and_body: tuple[dict[str, Any], dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    header, body = header_and_body
    return int(header["CorrelationId"]), body


def test_public_api_uses_the_generated_frames() -> None:
    """The node's messages take the generated path (a regression here costs CPU, not correctness)."""
    body = {"ClusterId": "c", "Topics": []}
    frame = codec.encode_request(52, 1, 3, "x", body)
    assert (52, 1) in codec._REQUEST_ENCODERS
    codec.decode_request(frame[4:])
    assert (52, 1) in codec._REQUEST_DECODERS


def test_generated_source_is_readable_python() -> None:
    src = codec.generated_plan("FetchRequest", 17).dec.__source__
    assert src.startswith("def decode(buf, pos):")
    assert "'FetchOffset'" in src


@pytest.mark.parametrize(("api_key", "version"), API_CASES, ids=lambda x: str(x))
def test_a_shared_response_body_frames_like_encode_response(api_key: int, version: int) -> None:
    """frame_response(encode_response_body(body)) is encode_response(body), for any correlation id."""

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body_strategy(codec.api_name(api_key) + "Response", version),
           st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=3))
    def check(body: dict[str, Any], correlation_ids: list[int]) -> None:
        encoded = codec.encode_response_body(api_key, version, body)
        for corr in correlation_ids:
            assert codec.frame_response(api_key, version, corr, encoded) == codec.encode_response(
                api_key, version, corr, body)

    check()
    with pytest.raises(codec.EncodeError):
        codec.frame_response(api_key, version, 1 << 31, b"")


def _forget_frames(api_key: int) -> None:
    for frames in (codec._REQUEST_ENCODERS, codec._RESPONSE_ENCODERS, codec._REQUEST_DECODERS,
                   codec._RESPONSE_DECODERS):
        for key in [k for k in frames if k[0] == api_key]:
            del frames[key]


def test_precompile_generates_the_newest_version_or_all_of_them() -> None:
    """What a server makes before it listens: the first request then finds its frame functions."""
    lo, hi = codec.supported_versions(1)
    _forget_frames(1)
    codec.precompile([1])
    for frames in (codec._REQUEST_ENCODERS, codec._RESPONSE_ENCODERS, codec._REQUEST_DECODERS,
                   codec._RESPONSE_DECODERS):
        assert sorted(k for k in frames if k[0] == 1) == [(1, hi)]
    codec.precompile([1], all_versions=True)
    assert sorted(k for k in codec._REQUEST_DECODERS if k[0] == 1) == [(1, v) for v in range(lo, hi + 1)]


@pytest.mark.parametrize("size", [0, 126, 127, 128, 129, 16382, 16383, 16384, 20000])
def test_lengths_at_the_uvarint_boundaries_are_written_as_the_interpreter_writes_them(size: int) -> None:
    """Compact lengths of one, two (inlined: a Fetch answer's records on every commit) and three bytes."""
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [{
        "TopicId": uuid.UUID(int=0),
        "Partitions": [{"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 1, "LastStableOffset": 1,
                        "LogStartOffset": 0, "AbortedTransactions": None, "PreferredReadReplica": -1,
                        "Records": b"x" * size}]}]}
    fns = _frame_fns(1, 17)
    frame = codec._encode_response_interpreted(1, 17, 7, body)
    assert fns["response encoder"](7, body) == frame
    check_decoders(lambda b: codec._decode_response(1, 17, b), lambda b: _corr_and_body(fns["response decoder"](b)),
                   frame[4:])
