"""The node's typed Fetch path (reference/typed_wire.py) against the dict path it stands in for.

The dict path — ``codec`` to a body dict, ``wire.py`` to the core's message — is the oracle:

* for every FetchRequest/FetchResponse the core can send, on every Fetch version the node serves, the
  typed encoders write the dict path's bytes and the typed decoders read the dict path's values back;
* for any Fetch frame at all (arbitrary bodies from the definitions, mutated bytes), reading it the
  typed way gives the core the same message, or fails with the same error, as reading it the dict way;
* a real cluster commits through it, with a node that traces frames (dict path) among typed ones.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch
from kraft_tck.reference.net import EncodedAnswer, KafkaClient
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.typed_wire import BOUND_VERSIONS, TypedCodec
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import data_batch, encode_batches
from kraft_tck.spec.strategies import body_strategy

from tests.reference.test_node_fetch_answers import leading, start_nodes

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
FETCH = wire.FETCH
# v12 is answered INVALID_REQUEST by the dict path (no TopicId: RaftUtil.hasValidTopicPartition), never bound
VERSIONS = BOUND_VERSIONS

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
cluster_ids = st.none() | st.text(max_size=10)

# KIP-853 (v17 tagged ReplicaDirectoryId): None is ZERO_UUID, which leaves the tag out
directory_ids = st.none() | st.sampled_from(
    ["AAAAAAAAAAAAAAAAAAAAAQ", "Zx1W-0mTQzSWb8b0NoQ0Kg", "_____________________w"])
fetch_requests = st.builds(
    FetchRequest, cluster_ids, int32, int32, int64, int32, max_wait_ms=int32, max_bytes=int32, replica_epoch=int64,
    replica_directory_id=directory_ids)

batches = st.lists(
    st.builds(data_batch, st.integers(0, 10**6), st.integers(0, 1000), st.lists(st.binary(max_size=40), min_size=1,
                                                                                   max_size=3)),
    max_size=3).map(tuple)
errors = st.sampled_from([Errors.NONE, Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER,
                          Errors.UNKNOWN_LEADER_EPOCH, Errors.INCONSISTENT_CLUSTER_ID, Errors.INVALID_REQUEST])
# The top-level error stays NONE: an answer with a top-level error carries no partition (as Kafka's), and
# wire.error_response_body, not the binding, writes it.
fetch_responses = st.builds(
    FetchResponse, int64, batches, st.none() | st.tuples(int32, int64), st.builds(LeaderIdAndEpoch, int32, int32),
    errors, st.just(Errors.NONE), int64)

ENDPOINTS = {i: wire.ListenerEndpoint("CONTROLLER", "127.0.0.1", 9090 + i) for i in (1, 2, 3)}


def outcome(fn: Any, *args: Any) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Exception as exc:  # compared by type and message: the typed path must fail as the dict path does
        return False, (type(exc), str(exc))


def read_request_typed(tc: TypedCodec, payload: bytes) -> tuple[dict[str, Any], Any]:
    header, body = tc.decode_request(payload)
    return header, wire.request_from_kafka(header["RequestApiKey"], header["RequestApiVersion"], body)


def read_request_dict(payload: bytes) -> tuple[dict[str, Any], Any]:
    header, body = codec.decode_request(payload)
    return header, wire.request_from_kafka(header["RequestApiKey"], header["RequestApiVersion"], body)


def read_response_typed(tc: TypedCodec, version: int, payload: bytes) -> tuple[int, Any]:
    corr, body = tc.decode_response(FETCH, version, payload)
    return corr, wire.response_from_kafka(FETCH, version, body)


def read_response_dict(version: int, payload: bytes) -> tuple[int, Any]:
    corr, body = codec.decode_response(FETCH, version, payload)
    return corr, wire.response_from_kafka(FETCH, version, body)


# ---------------------------------------------------------------------------- what the core sends


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(req=fetch_requests, corr=int32, client_id=st.none() | st.text(max_size=8))
def test_a_fetch_request_is_written_and_read_as_the_dict_path_does(
        version: int, req: FetchRequest, corr: int, client_id: str | None) -> None:
    tc = TypedCodec()
    frame = tc.encode_request(FETCH, version, corr, client_id, req)
    assert frame == codec.encode_request(FETCH, version, corr, client_id, wire.request_to_body(req, version))
    typed = read_request_typed(tc, frame[4:])
    assert type(typed[1]) is FetchRequest and typed == read_request_dict(frame[4:])
    assert (tc.bound, tc.fallbacks) == (2, 0), "both directions took the bound code"


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(resp=fetch_responses, corr=int32, share=st.booleans())
def test_a_fetch_answer_is_written_and_read_as_the_dict_path_does(
        version: int, resp: FetchResponse, corr: int, share: bool) -> None:
    if share:  # the leader's answer carries its log's bytes (one per batch), not the batches to encode
        resp.encoded = tuple(encode_batches([b]) for b in resp.batches)
    tc = TypedCodec()
    body = tc.encode_response_body(version, resp, {})
    assert body is not None
    assert body == codec.encode_response_body(FETCH, version, wire.response_to_body(resp, version, {}))
    payload = codec.frame_response(FETCH, version, corr, body)[4:]
    (c1, typed), (c2, plain) = read_response_typed(tc, version, payload), read_response_dict(version, payload)
    assert type(typed) is FetchResponse and (c1, typed) == (c2, plain)
    assert typed.encoded == plain.encoded, "a follower keeps the leader's batch bytes either way"
    assert (tc.bound, tc.fallbacks) == (2, 0)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("error", [Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH])
def test_the_bound_code_writes_and_reads_the_leaders_endpoint_from_v17(version: int, error: Errors) -> None:
    # KIP-853 (RaftUtil.singletonFetchResponse): from v17 every answer naming a leader with a known endpoint
    # carries it in NodeEndpoints, whatever the error; v16 has the field (KIP-951) but KRaft leaves it empty.
    resp = FetchResponse(-1, current_leader=LeaderIdAndEpoch(2, 7), partition_error=error)
    tc = TypedCodec()
    body = tc.encode_response_body(version, resp, ENDPOINTS)
    assert body is not None and tc.fallbacks == 0
    dict_body = wire.response_to_body(resp, version, ENDPOINTS)
    assert body == codec.encode_response_body(FETCH, version, dict_body)
    named = [(2, "127.0.0.1", 9092)] if version >= 17 else []
    assert [(e["NodeId"], e["Host"], e["Port"]) for e in dict_body.get("NodeEndpoints", [])] == named
    payload = codec.frame_response(FETCH, version, 4, body)[4:]
    (c1, typed), (c2, plain) = read_response_typed(tc, version, payload), read_response_dict(version, payload)
    assert (c1, typed) == (c2, plain) and tc.fallbacks == 0
    assert [(e.node_id, e.host, e.port) for e in typed.node_endpoints] == named


# ---------------------------------------------------------------------------- any frame at all


def _one_metadata_partition(body: dict[str, Any], version: int, responses: bool) -> dict[str, Any]:
    """``body`` narrowed to the one partition a KRaft Fetch names, so the bound code reads it."""
    topics_key, part_key = ("Responses", "PartitionIndex") if responses else ("Topics", "Partition")
    topics = body[topics_key] or [{"Partitions": []}]
    topic, parts = dict(topics[0]), topics[0]["Partitions"]
    topic.pop("Topic", None)
    topic.pop("TopicId", None)
    topic["Topic" if version < 13 else "TopicId"] = wire.METADATA_TOPIC if version < 13 else wire.METADATA_TOPIC_ID
    topic["Partitions"] = [{**parts[0], part_key: 0}] if parts else []
    return {**body, topics_key: [topic]}


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data(), narrow=st.booleans())
def test_any_fetch_request_frame_reads_as_the_dict_path_reads_it(version: int, data: Any, narrow: bool) -> None:
    body = data.draw(body_strategy("FetchRequest", version))
    if narrow:
        body = _one_metadata_partition(body, version, responses=False)
    try:
        frame = codec.encode_request(FETCH, version, 5, "c", body)
    except Exception:
        return  # a body no frame can carry (e.g. an oversized string): nothing to read
    tc = TypedCodec()
    assert outcome(read_request_typed, tc, frame[4:]) == outcome(read_request_dict, frame[4:])


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(data=st.data(), narrow=st.booleans(),
       records=st.sampled_from(["random", "none", "batches"]), batch=batches)
def test_any_fetch_response_frame_reads_as_the_dict_path_reads_it(
        version: int, data: Any, narrow: bool, records: str, batch: tuple[Any, ...]) -> None:
    body = data.draw(body_strategy("FetchResponse", version))
    if narrow:
        body = _one_metadata_partition(body, version, responses=True)
        for part in body["Responses"][0]["Partitions"]:
            if records != "random":
                part["Records"] = None if records == "none" else encode_batches(batch)
    try:
        payload = codec.encode_response(FETCH, version, 9, body)[4:]
    except Exception:
        return
    tc = TypedCodec()
    assert outcome(read_response_typed, tc, version, payload) == outcome(read_response_dict, version, payload)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(req=fetch_requests, resp=fetch_responses, data=st.data())
def test_mutated_fetch_frames_read_as_the_dict_path_reads_them(
        version: int, req: FetchRequest, resp: FetchResponse, data: Any) -> None:
    tc = TypedCodec()
    request = bytearray(tc.encode_request(FETCH, version, 3, "c", req)[4:])
    body = tc.encode_response_body(version, resp, {})
    assert body is not None
    response = bytearray(codec.frame_response(FETCH, version, 3, body)[4:])
    for frame in (request, response):
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(frame) - 1))
            frame[i] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            del frame[data.draw(st.integers(0, len(frame) - 1)):]
    assert outcome(read_request_typed, tc, bytes(request)) == outcome(read_request_dict, bytes(request))
    assert (outcome(read_response_typed, tc, version, bytes(response))
            == outcome(read_response_dict, version, bytes(response)))


# ---------------------------------------------------------------------------- a real cluster


def test_a_cluster_commits_through_typed_fetches_beside_a_node_that_traces_frames(tmp_path: Path) -> None:
    """Nodes 2 and 3 read and write Fetch the typed way; node 1 traces frames, so it takes the dict path.
    Whoever leads, both paths meet on the wire, and every record commits identically on every log."""

    async def main() -> None:
        cluster, nodes = await start_nodes(tmp_path / "c", traced=frozenset({1}))
        try:
            leader = await leading(nodes)
            deadline = time.monotonic() + 20
            for k in range(30):
                await leader.write([b"record-%d" % k])
            end = leader.high_watermark
            while any(n.high_watermark < end for n in nodes):
                assert time.monotonic() < deadline, [n.high_watermark for n in nodes]
                await asyncio.sleep(0.01)
            logs = [[b.records for b in n.core.log.batches if b.base_offset < end] for n in nodes if n.core]
            assert logs[0] == logs[1] == logs[2]
            assert nodes[0].typed is None, "a node that traces frames reads them as the dict path does"
            for n in nodes[1:]:
                assert n.typed is not None and n.typed.fallbacks == 0
                assert n.typed.bound >= 30, f"node {n.config.node_id}: only {n.typed.bound} typed Fetch frames"
            # A Fetch for another partition is no frame the binding reads: the dict path refuses it, with
            # the top-level INVALID_REQUEST a node on the dict path answers (wire.InvalidTopicPartition).
            typed_node = nodes[2]
            assert typed_node.typed is not None
            client = KafkaClient("127.0.0.1", typed_node.config.listener.endpoint.port)
            await client.connect()
            try:
                version = client.best_version(FETCH)
                body = wire.request_to_body(FetchRequest(cluster.cluster_id, 7, 1, 0, -1), version)
                body["Topics"][0]["Partitions"][0]["Partition"] = 3
                answer = await client.request(FETCH, version, body, 5)
            finally:
                await client.close()
            assert answer["ErrorCode"] == Errors.INVALID_REQUEST and answer["Responses"] == []
            assert typed_node.typed.fallbacks == 1
        finally:
            for n in nodes:
                await n.stop(graceful=True, grace_s=0.2)

    asyncio.run(main())


def test_an_answer_the_bound_code_cannot_write_goes_to_the_dict_path(tmp_path: Path) -> None:
    # A high watermark past int64 (no core sends one): the bound encoder raises, and the node answers
    # with the body instead, which net's encoder then refuses and reports (closing that connection), as
    # for any answer the dict path cannot encode, rather than the step failing inside the shell.
    cfg = LocalCluster(tmp_path / "c", voters=1, base_port=free_base_port(1)).node_configs()[0]
    node = Node(cfg, fsync=False)
    node.typed = TypedCodec()
    answer = node._answer_body(FetchResponse(2**63), codec.supported_versions(FETCH)[1], several=False)
    assert isinstance(answer, dict) and answer["Responses"][0]["Partitions"][0]["HighWatermark"] == 2**63
    assert (node.typed.bound, node.typed.fallbacks) == (0, 1)
    ok = FetchResponse(5)
    assert isinstance(node._answer_body(ok, codec.supported_versions(FETCH)[1], several=False), EncodedAnswer)


def test_a_request_the_bound_code_cannot_write_fails_as_on_the_dict_path() -> None:
    tc, version = TypedCodec(), codec.supported_versions(FETCH)[1]
    bad = FetchRequest("c", 2, 1, 2**63, 0)  # FetchOffset past int64
    typed, plain = (outcome(tc.encode_request, FETCH, version, 1, "c", bad),
                    outcome(codec.encode_request, FETCH, version, 1, "c", wire.request_to_body(bad, version)))
    assert typed == plain and not typed[0] and "FetchOffset" in typed[1][1]
    assert (tc.bound, tc.fallbacks) == (0, 1)


def test_answers_naming_the_same_leader_share_its_messages_and_others_get_their_own() -> None:
    """A follower's next answer names the leader and endpoints its last one named: the typed decoder shares that
    answer's frozen ``LeaderIdAndEpoch`` and ``NodeEndpoint`` tuple. Any answer naming others (another leader, epoch,
    host or port, no endpoints) gets its own, equal to the dict path's reading of the frame."""
    version = max(BOUND_VERSIONS)
    moved = {**ENDPOINTS, 1: wire.ListenerEndpoint("CONTROLLER", "127.0.0.2", 9091)}
    tc = TypedCodec()
    got = []
    for corr, (leader, epoch, endpoints) in enumerate([
            (1, 1, ENDPOINTS), (1, 1, ENDPOINTS), (1, 1, ENDPOINTS), (2, 1, ENDPOINTS), (2, 2, ENDPOINTS),
            (1, 2, ENDPOINTS), (1, 2, moved), (1, 2, moved), (-1, 2, ENDPOINTS), (1, 2, ENDPOINTS)]):
        resp = FetchResponse(5, (data_batch(5, 1, [b"r" * 20]),), None, LeaderIdAndEpoch(leader, epoch))
        frame = codec.encode_response(FETCH, version, corr, wire.response_to_body(resp, version, endpoints))[4:]
        typed = read_response_typed(tc, version, frame)[1]
        assert typed == read_response_dict(version, frame)[1]
        assert (typed.current_leader.leader_id, typed.current_leader.leader_epoch) == (leader, epoch)
        assert [(n.node_id, n.host, n.port) for n in typed.node_endpoints] == (
            [] if leader < 0 else [(leader, endpoints[leader].host, endpoints[leader].port)])
        got.append(typed)
    assert tc.bound == len(got)
    for a, b in ((0, 1), (1, 2), (6, 7)):  # the same leader, epoch and endpoints as the answer before
        assert got[b].current_leader is got[a].current_leader and got[b].node_endpoints is got[a].node_endpoints
    assert got[4].node_endpoints is got[3].node_endpoints and got[4].current_leader is not got[3].current_leader
    assert got[7].current_leader is got[5].current_leader  # (6 and 7 name it too)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([-1, 1, 2, 3, 4]), st.integers(0, 3), st.booleans(),
                          st.sampled_from(["127.0.0.1", "::1", "h"]), st.booleans()), min_size=1, max_size=12))
def test_successive_answers_name_each_its_own_endpoints(steps: list[tuple[int, int, bool, str, bool]]) -> None:
    """One codec (a leader's) writing answer after answer, as its NodeEndpoints template sees them: the leader
    changes, its address book entry is replaced (same id, another host or port), the address book is rebuilt
    with equal entries, or the core names the endpoints itself: every answer is the dict path's bytes (v17:
    NodeEndpoints written), never an earlier answer's endpoints."""
    from kraft_tck.reference.messages import NodeEndpoint

    tc = TypedCodec()
    book = dict(ENDPOINTS)
    for leader, port_step, rebuild, host, core_named in steps:
        if rebuild:
            book = {i: wire.ListenerEndpoint(e.listener, e.host, e.port) for i, e in book.items()}
        if leader in book and port_step:
            book[leader] = wire.ListenerEndpoint("CONTROLLER", host, 9090 + leader + 10 * port_step)
        given = (NodeEndpoint(leader, host, 7000 + port_step),) if core_named and leader >= 0 else ()
        resp = FetchResponse(5, current_leader=LeaderIdAndEpoch(leader, 3), node_endpoints=given)
        for version in (16, 17):
            body = tc.encode_response_body(version, resp, book)
            assert body == codec.encode_response_body(FETCH, version, wire.response_to_body(resp, version, book))


def test_two_leaders_at_one_address_book_entry_are_each_named() -> None:
    """Two voter ids sharing one address book entry object (the same listener): the answer names the leader it
    is for, not the last answer's."""
    shared = wire.ListenerEndpoint("CONTROLLER", "127.0.0.1", 9090)
    book = {1: shared, 2: shared}
    tc = TypedCodec()
    for leader in (1, 2, 1):
        resp = FetchResponse(5, current_leader=LeaderIdAndEpoch(leader, 3))
        body = tc.encode_response_body(17, resp, book)
        assert body == codec.encode_response_body(FETCH, 17, wire.response_to_body(resp, 17, book))
