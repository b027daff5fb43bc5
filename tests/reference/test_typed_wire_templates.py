"""The node's Fetch decoders remember the shapes of their last frames (``spec/binding.py``'s
``FrameTemplates``): a frame equal to a remembered one in every byte but numbers, record bytes and the
correlation id is read from the template. The plain generated decoder is the oracle:

* any sequence of frames — random Fetch frames, the same frame with other numbers, with random bytes
  changed (inside and outside the numbers), cut short — reads through one templated decoder exactly as
  each frame reads through the plain decoder: the same value, or the same exception;
* a follower's next Fetch (another offset and correlation id) and a leader's next answer (another batch of
  the same size, another high watermark) do come from the template;
* a corrupt batch in a frame of a known shape is still refused before anything is appended (the CRC is
  checked when the answer is built, template or not), as the dict path refuses it.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest, FetchResponse, NodeEndpoint
from kraft_tck.reference.typed_wire import BOUND_VERSIONS, TypedCodec, _generated
from kraft_tck.spec import codec
from kraft_tck.spec.errors import CorruptRecordError
from kraft_tck.spec.records import data_batch, encode_batches

from tests.reference.test_typed_wire import (
    fetch_requests,
    fetch_responses,
    int64,
    outcome,
    read_request_dict,
    read_request_typed,
    read_response_dict,
    read_response_typed,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
FETCH = wire.FETCH
CORRELATION_IDS = st.integers(-(2**31), 2**31 - 8)  # room for the next frames' ids
ENDPOINTS = {i: wire.ListenerEndpoint("CONTROLLER", "127.0.0.1", 9090 + i) for i in (1, 2, 3)}


def _request(version: int, req: FetchRequest, corr: int) -> bytes:
    return codec.encode_request(FETCH, version, corr, "raft-client-1", wire.request_to_body(req, version))[4:]


def _response(version: int, resp: FetchResponse, corr: int) -> bytes:
    body = wire.response_to_body(resp, version, ENDPOINTS)
    return codec.encode_response(FETCH, version, corr, body)[4:]


def _mutations(data: Any, frame: bytes, spans: list[tuple[int, int]]) -> list[bytes]:
    """``frame`` with a few bytes changed anywhere, changed inside ``spans`` (where the template reads values
    again), and cut short."""
    out = []
    for inside in (False, True, True):
        f = bytearray(frame)
        for _ in range(data.draw(st.integers(1, 3))):
            if inside and spans:
                start, end = data.draw(st.sampled_from(spans))
                i = data.draw(st.integers(start, end - 1))
            else:
                i = data.draw(st.integers(0, len(f) - 1))
            f[i] = data.draw(st.integers(0, 255))
        out.append(bytes(f))
    out.append(frame[:data.draw(st.integers(0, len(frame) - 1))])
    return out


def _spans(templates: Any) -> list[tuple[int, int]]:
    """The byte ranges the templates read values from (numbers, record bytes, correlation id)."""
    spans = [(templates._head_span[0], templates._head_span[1])]
    for group in templates._by_length.values():
        for t in group:
            size = next(n for n, group in templates._by_length.items() if t in group)
            variable = ~t.mask & ((1 << (8 * size)) - 1)
            spans += [(i, i + 1) for i in range(size) if variable >> (8 * (size - 1 - i)) & 0xFF]
    return spans


def _same(templates: Any, plain: Any, frames: list[bytes]) -> None:
    for frame in frames:
        assert outcome(templates, frame) == outcome(plain, frame), frame.hex()


@pytest.mark.parametrize("version", BOUND_VERSIONS)
@SETTINGS
@given(req=fetch_requests, offsets=st.lists(int64, min_size=1, max_size=3), corr=CORRELATION_IDS, data=st.data())
def test_fetch_requests_read_through_templates_as_through_the_plain_decoder(
        version: int, req: FetchRequest, offsets: list[int], corr: int, data: Any) -> None:
    templates, plain = _generated("request templates", version)(), _generated("request decoder", version)
    # The follower's next Fetches: another offset and correlation id, the same shape.
    nxt = [_request(version, dataclasses.replace(req, fetch_offset=o), corr + i + 1) for i, o in enumerate(offsets)]
    _read_as_plainly(templates, plain, _request(version, req, corr), nxt,
                     _request(version, data.draw(fetch_requests), corr), data, "a follower's next Fetch")


@pytest.mark.parametrize("version", BOUND_VERSIONS)
@SETTINGS
@given(resp=fetch_responses, hws=st.lists(int64, min_size=1, max_size=3), corr=CORRELATION_IDS, data=st.data())
def test_fetch_answers_read_through_templates_as_through_the_plain_decoder(
        version: int, resp: FetchResponse, hws: list[int], corr: int, data: Any) -> None:
    templates, plain = _generated("response templates", version)(), _generated("response decoder", version)
    # The leader's next answers: batches of the same sizes with other offsets, epochs and values, another HW.
    nxt = []
    for i, hw in enumerate(hws):
        batches = tuple(data_batch(b.base_offset + i + 1, b.partition_leader_epoch + i,
                                   [bytes(reversed(r.value or b"")) for r in b.records]) for b in resp.batches)
        nxt.append(_response(version, dataclasses.replace(resp, high_watermark=hw, batches=batches), corr + i))
    _read_as_plainly(templates, plain, _response(version, resp, corr), nxt,
                     _response(version, data.draw(fetch_responses), corr), data, "a leader's next answer")


def _read_as_plainly(templates: Any, plain: Any, first: bytes, nxt: list[bytes], other: bytes, data: Any,
                     what: str) -> None:
    """``first`` twice (the first of its length is read plainly, the second remembered), then ``nxt`` (frames of
    its shape: each must be read from the template), then ``other`` and mutations of ``first``: every frame read by
    ``templates`` as by ``plain``."""
    _same(templates, plain, [first, first])
    hits = templates.hits
    _same(templates, plain, nxt)
    if outcome(plain, first)[0]:
        assert templates.hits == hits + len(nxt), f"{what} of the same shape is read from the template"
    _same(templates, plain, [other, *_mutations(data, first, _spans(templates))])


@pytest.mark.parametrize("version", BOUND_VERSIONS)
def test_a_corrupt_batch_in_a_known_shape_is_refused_as_the_dict_path_refuses_it(version: int) -> None:
    tc = TypedCodec()
    good = FetchResponse(5, (data_batch(5, 1, [b"r" * 100]),), None, wire.LeaderIdAndEpoch(2, 1))
    first = _response(version, good, 1)
    for _ in range(2):  # read plainly, then remembered
        assert outcome(read_response_typed, tc, version, first) == outcome(read_response_dict, version, first)
    nxt = bytearray(_response(version, dataclasses.replace(good, batches=(data_batch(6, 1, [b"s" * 100]),)), 2))
    templates = tc._response_decoders[version]
    misses = templates.misses  # type: ignore[attr-defined]
    assert read_response_typed(tc, version, bytes(nxt))[1].batches[0].records[0].value == b"s" * 100
    i = bytes(nxt).index(b"s" * 100)
    nxt[i] ^= 1  # one bit of the record's value: the batch's CRC no longer matches
    typed = outcome(read_response_typed, tc, version, bytes(nxt))
    assert typed == outcome(read_response_dict, version, bytes(nxt))
    assert typed[0] is False and typed[1][0] is CorruptRecordError
    assert templates.misses == misses, "both frames had the first one's shape"  # type: ignore[attr-defined]


def test_a_batch_of_another_size_makes_a_new_template() -> None:
    templates, plain = _generated("response templates", 17)(), _generated("response decoder", 17)
    frames = [_response(17, FetchResponse(5, (data_batch(5, 1, [b"r" * n]),)), 1) for n in (10, 11) * 3]
    _same(templates, plain, frames)
    # Each length: read plainly, then remembered, then read from its template.
    assert (templates.misses, templates.hits) == (4, 2)
    assert encode_batches([data_batch(5, 1, [b"r" * 10])]) in frames[0]


def test_a_frame_longer_than_the_bound_is_never_remembered() -> None:
    """A catch-up's long answers are read plainly every time: a template holds two ints of its frame's size."""
    templates, plain = _generated("response templates", 17)(), _generated("response decoder", 17)
    value = b"r" * (templates.MAX_BYTES + 1)
    big = [_response(17, FetchResponse(5, (data_batch(5, 1, [value]),)), k) for k in (1, 2, 3)]
    _same(templates, plain, big)
    assert templates.hits == 0 and not templates._by_length


def _encoder_args(req: FetchRequest, corr: int) -> list[Any]:
    """What TypedCodec.encode_request passes the generated request encoder."""
    return [corr, "raft-client-1", req.cluster_id, req.replica_id, req.replica_epoch, req.max_wait_ms, req.max_bytes,
            req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch, 0, req.max_bytes,
            wire.directory_uuid(req.replica_directory_id)]


# Values of any kind in any argument: out of range, of another type (1.0 for 1, True for 1), None.
odd_values = st.one_of(st.integers(-(2**70), 2**70), st.booleans(), st.none(), st.floats(allow_nan=False),
                       st.sampled_from([1, 1.0, -0.0, "", b"", -1]))


@pytest.mark.parametrize("version", BOUND_VERSIONS)
@SETTINGS
@given(req=fetch_requests, offsets=st.lists(int64, min_size=1, max_size=3), corr=CORRELATION_IDS, data=st.data())
def test_fetch_requests_written_through_templates_are_the_plain_encoders_bytes(
        version: int, req: FetchRequest, offsets: list[int], corr: int, data: Any) -> None:
    templates, plain = _generated("request encoder templates", version)(), _generated("request encoder", version)
    first = _encoder_args(req, corr)
    nxt = [_encoder_args(dataclasses.replace(req, fetch_offset=o), corr + i + 1) for i, o in enumerate(offsets)]
    changed = []
    for _ in range(data.draw(st.integers(1, 4))):
        args = list(data.draw(st.sampled_from([first, *nxt])))
        args[data.draw(st.integers(0, len(args) - 1))] = data.draw(odd_values)
        changed.append(args)
    for args in [first, *nxt, _encoder_args(data.draw(fetch_requests), corr), *changed, first]:
        assert outcome(templates, *args) == outcome(plain, *args), args
    if outcome(plain, *first)[0]:
        assert templates.hits >= len(nxt), "a follower's next Fetch is written from the template"


def _body_args(resp: FetchResponse, version: int) -> list[Any]:
    """What TypedCodec.encode_response_body passes the generated answer encoder."""
    div, leader = resp.diverging_epoch or (-1, -1), resp.current_leader
    return [int(resp.error), int(resp.partition_error), resp.high_watermark, resp.log_start_offset, div[0], div[1],
            leader.leader_id, leader.leader_epoch, -1, -1, encode_batches(resp.batches),
            wire.fetch_node_endpoints(resp, ENDPOINTS) if version >= wire.FETCH_NODE_ENDPOINTS_VERSION else []]


@pytest.mark.parametrize("version", BOUND_VERSIONS)
@SETTINGS
@given(resp=fetch_responses, hws=st.lists(int64, min_size=1, max_size=3), data=st.data())
def test_fetch_answers_written_through_templates_are_the_plain_encoders_bytes(
        version: int, resp: FetchResponse, hws: list[int], data: Any) -> None:
    templates, plain = _generated("response encoder templates", version)(), _generated("response encoder", version)
    leader = data.draw(st.sampled_from([None, 1, 2, 3]))  # a leader in ENDPOINTS: NodeEndpoints from v17
    if leader is not None:
        resp = dataclasses.replace(resp, current_leader=wire.LeaderIdAndEpoch(leader, resp.current_leader.leader_epoch))
    first = _body_args(resp, version)
    nxt = []
    for i, hw in enumerate(hws):  # the leader's next answers: another HW, batches of the same sizes
        batches = tuple(data_batch(b.base_offset + i + 1, b.partition_leader_epoch + i,
                                   [bytes(reversed(r.value or b"")) for r in b.records]) for b in resp.batches)
        nxt.append(_body_args(dataclasses.replace(resp, high_watermark=hw, batches=batches), version))
    changed = []
    for _ in range(data.draw(st.integers(1, 4))):
        args = list(data.draw(st.sampled_from([first, *nxt])))
        i = data.draw(st.integers(0, len(args) - 1))
        if i == len(args) - 1 and args[i] and data.draw(st.booleans()):  # inside NodeEndpoints
            key = data.draw(st.sampled_from(["NodeId", "Port", "Host", "Rack"]))
            old = args[i][0][key]
            # An equal value of another type (9092.0 for 9092: the plain encoder refuses it) or any odd value.
            args[i] = [{**args[i][0], key: float(old) if type(old) is int and data.draw(st.booleans()) else
                        data.draw(odd_values)}]
        else:
            args[i] = data.draw(odd_values | st.binary(max_size=3))
        changed.append(args)
    # (The first answer of its records' length is only written; the second makes the template.)
    for args in [first, first, *nxt, _body_args(data.draw(fetch_responses), version), *changed, first]:
        assert outcome(templates, *args) == outcome(plain, *args), args
    if outcome(plain, *first)[0]:
        assert templates.hits >= len(nxt), "a leader's next answer is written from the template"


def _templates_of(templates: Any) -> list[Any]:
    return [t for group in templates._by_length.values() for t in group]


@pytest.mark.parametrize("version", BOUND_VERSIONS)
def test_the_usual_fetch_and_answer_are_read_by_the_prepared_builders(version: int) -> None:
    """A follower's usual Fetch and a leader's usual answer (no DivergingEpoch, no SnapshotId) are read by what
    ``_prepare_fetch_request``/``_prepare_fetch_response`` made for their template (so the property tests above
    compare that path with the plain decoder); an answer with a DivergingEpoch by ``_fetch_response``."""
    req = FetchRequest("cluster", 2, 1, 10, 1, 500, 1 << 20, 3, replica_directory_id=wire.directory_id_of(
        uuid.UUID(int=7)))
    templates, plain = _generated("request templates", version)(), _generated("request decoder", version)
    frames = [_request(version, dataclasses.replace(req, fetch_offset=10 + i), 5 + i) for i in range(4)]
    _same(templates, plain, frames)
    assert templates.hits == 2 and [t.prepared for t in _templates_of(templates)] == [True]
    resp = FetchResponse(5, (data_batch(5, 1, [b"r" * 30]),), None, wire.LeaderIdAndEpoch(2, 1))
    for diverging, prepared in ((None, True), ((1, 4), False)):
        templates, plain = _generated("response templates", version)(), _generated("response decoder", version)
        frames = [_response(version, dataclasses.replace(resp, high_watermark=5 + i, diverging_epoch=diverging,
                                                         batches=(data_batch(5 + i, 1, [b"%02d" % i * 15]),)), i)
                  for i in range(4)]
        _same(templates, plain, frames)
        assert templates.hits == 2 and [t.prepared for t in _templates_of(templates)] == [prepared]


def test_an_answers_node_endpoints_rows_serve_again_only_for_the_same_fields() -> None:
    """``encode_response_body`` reuses the NodeEndpoints rows of the last answer while its one NodeEndpoint's
    fields are the same objects: an endpoint with another host, node or port (9092.0: the same value, another
    type, that the encoders refuse) is written afresh, as a codec without memory writes it."""
    typed = TypedCodec()
    host = "127.0.0.1"
    fields = [(1, host, 9092), (1, host, 9092), (1, "localhost", 9092), (1, "localhost", 9092),
              (2, "localhost", 9092), (2, "localhost", 9093), (2, "localhost", 9093.0), (2, "localhost", 9093),
              (2, "".join(["local", "host"]), 9093)]
    for i, (node, h, port) in enumerate(fields):
        resp = FetchResponse(5 + i, (data_batch(5 + i, 1, [b"r" * 30]),), None, wire.LeaderIdAndEpoch(node, 1),
                             node_endpoints=(NodeEndpoint(node, h, port),))  # type: ignore[arg-type]
        for version in (16, 17):
            # The oracle: the dict path (TypedCodec's own writers share the cache); None where it refuses.
            ok, want = outcome(lambda v, r: codec.encode_response_body(FETCH, v, wire.response_to_body(
                r, v, ENDPOINTS)), version, resp)
            assert typed.encode_response_body(version, resp, ENDPOINTS) == (want if ok else None), (i, version)


def test_a_fetch_names_its_directory_id_when_the_last_one_named_another() -> None:
    """``encode_request`` remembers the last Fetch's directory id and uuid (per codec): a Fetch naming another one
    (or none) writes its own, as the dict path does."""
    typed = TypedCodec()
    a, b = (wire.directory_id_of(uuid.UUID(int=n)) for n in (7, 8))
    for i, directory in enumerate([None, a, a, b, b, None, a, "".join(list(str(a))), None]):
        req = FetchRequest("cluster", 2, 1, 10 + i, 1, 500, 1 << 20, 3, replica_directory_id=directory)
        for version in (16, 17):
            want = codec.encode_request(FETCH, version, i, "c", wire.request_to_body(req, version))
            assert typed.encode_request(FETCH, version, i, "c", req) == want, (i, version)


def test_requests_of_every_version_and_api_read_through_one_codec_each_by_its_own_decoder() -> None:
    """``decode_request`` finds a frame's decoder by its first four bytes (api key, version): Fetches of every
    version and other requests, interleaved through one codec, are each read by the bound code of their version
    (counted in ``bound``; none falls back) or by the dict path, as the dict path reads them; so is a bytearray."""
    typed = TypedCodec()
    req = FetchRequest("cluster", 2, 1, 10, 1, 500, 1 << 20, 3)
    vote = wire.VoteRequest("cluster", 3, 2, 1, 5)
    frames: list[Any] = [_request(v, dataclasses.replace(req, fetch_offset=10 + i), i) for i in range(3)
                         for v in BOUND_VERSIONS]
    frames += [codec.encode_request(wire.VOTE, 2, 9, "c", wire.request_to_body(vote, 2))[4:], frames[0][:3]]
    for frame in frames * 2 + [bytearray(frames[0])]:
        bound, fallbacks = typed.bound, typed.fallbacks
        got = outcome(read_request_typed, typed, frame)
        assert got == outcome(read_request_dict, bytes(frame)), frame.hex()
        fetch = frame[1:2] == bytes([FETCH]) and len(frame) > 4
        assert (typed.bound - bound, typed.fallbacks - fallbacks) == ((1, 0) if fetch else (0, 0)), frame.hex()


def _twins(value: Any) -> list[Any]:
    """Values equal to ``value`` of another type (the plain encoders refuse or write them otherwise)."""
    if type(value) is int:
        return [float(value), *([bool(value)] if value in (0, 1) else [])]
    if type(value) is bool:
        return [int(value), float(value)]
    if type(value) is str:
        return [type("Text", (str,), {})(value)]
    return []


@pytest.mark.parametrize("version", BOUND_VERSIONS)
def test_equal_arguments_of_another_type_are_not_written_from_a_template(version: int) -> None:
    """Every argument of a follower's next Fetch and of a leader's next answer replaced by an equal value of
    another type (1.0 or True for 1, a str subclass): templated encoder == plain encoder (bytes or error)."""
    req = FetchRequest("cluster", 1, 0, 1, 1, 0, 1 << 20, 1,
                       replica_directory_id=wire.directory_id_of(uuid.UUID(int=7)))
    resp = FetchResponse(1, (data_batch(1, 1, [b"r" * 30]),), None, wire.LeaderIdAndEpoch(1, 0))
    cases = [("request encoder", _encoder_args(req, 1)), ("response encoder", _body_args(resp, version))]
    for which, args in cases:
        for i, value in enumerate(args):
            for twin in _twins(value):
                templates, plain = _generated(f"{which} templates", version)(), _generated(which, version)
                changed = [*args[:i], twin, *args[i + 1:]]
                for call in (args, args, changed):  # remembered, then read from the template, then the twin
                    assert outcome(templates, *call) == outcome(plain, *call), (which, i, twin)


def test_answers_of_other_sizes_share_one_generated_source_and_make_templates_only_when_seen_again() -> None:
    """Templates' generated code names offsets and sizes as closure cells: frames and answers of other lengths
    share one compiled source (a compile costs more than many reads). The answer encoder makes a template only
    for records of a length it wrote before: answers of ever other sizes make none."""
    from kraft_tck.spec.codegen import compiled_maker

    decoder, plain = _generated("response templates", 17)(), _generated("response decoder", 17)
    encoder = _generated("response encoder templates", 17)()
    resp = FetchResponse(5, (data_batch(5, 1, [b"r" * 30]),), None, wire.LeaderIdAndEpoch(1, 1))
    _same(decoder, plain, [_response(17, resp, 1)] * 2)  # (the sources of this shape, compiled once)
    encoder(*_body_args(resp, 17))
    encoder(*_body_args(resp, 17))
    sources = compiled_maker.cache_info().misses
    for n in range(31, 41):
        other = dataclasses.replace(resp, batches=(data_batch(5, 1, [b"r" * n]),))
        _same(decoder, plain, [_response(17, other, 1)] * 2)  # read plainly, then remembered: a template each
        misses = encoder.misses
        assert encoder(*_body_args(other, 17)) == _generated("response encoder", 17)(*_body_args(other, 17))
        assert encoder.misses == misses + 1 and len(encoder._templates) == 1, "no template for a length seen once"
    assert decoder.misses == 2 + 2 * 10 and len(decoder._by_length) == 11  # (each length: plainly, then remembered)
    assert compiled_maker.cache_info().misses == sources, "no new source for another length"
