"""The node's codec for ``net.py``: :mod:`kraft_tck.spec.codec`, except that Fetch — the RPC on every
commit's path — is read straight into the core's ``FetchRequest``/``FetchResponse`` and written straight
from them, by code that ``spec/binding.py`` generates from ``spec/messages/Fetch*.json``.

The dict path (``codec`` → body dict → ``wire.py``) stays the reference: every other RPC takes it, any
Fetch frame the bindings below cannot represent falls back to it (so its errors are the dict path's
errors), and a node that traces frames uses only it (a trace records the body as it was on the wire).
The bindings say the same as ``wire.request_to_body``/``response_to_body`` and their inverses, field by
field; ``tests/reference/test_typed_wire.py`` checks that both paths give the same bytes and the same
values on every Fetch version.

Why: in a 3-process cluster on 2 cores each node wakes with cold caches, and a commit's latency follows
the memory its messages touch. The dict path builds about a dozen dicts and lists per Fetch exchange;
this one builds the two dataclasses (``bench/bench_commit_path.py``, the codec and wire rows).

Each codec's two Fetch decoders remember the shapes of their last frames (``binding.FrameTemplates``): a
follower's next Fetch, and a leader's next answer, differ from the last one only in numbers and record bytes,
and read from the template for about a third of the work; ``tests/reference/test_typed_wire_templates.py``
checks that they read every frame as the plain generated decoder does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any

from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch, SnapshotId
from kraft_tck.reference.messages import NodeEndpoint as ResponseNodeEndpoint
from kraft_tck.reference.wire import (
    _FETCHED_BATCHES,
    FETCH,
    FETCH_NODE_ENDPOINTS_VERSION,
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    MIN_FETCH_VERSION,
    ZERO_UUID,
    ListenerEndpoint,
    _decode_keeping_bytes,
    _error,
    directory_id_of,
    directory_uuid,
    fetch_node_endpoints,
)
from kraft_tck.spec import binding, codec
from kraft_tck.spec.binding import Expect
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import encode_batches

_PARTITION = "Topics[0].Partitions[0]."

#: FetchRequest fields the core carries (KIP-595 "Fetch": the follower's position and epoch), and the
#: one partition every KRaft Fetch names. LogStartOffset is read and written but not kept: the node
#: sends 0, as ``wire.request_to_body`` does, and has no use for a follower's.
FETCH_REQUEST: binding.Binding = {
    "ClusterId": "cluster_id",
    "ReplicaId": "replica_id",  # v12-14
    "ReplicaState.ReplicaId": "replica_id",  # v15+
    "ReplicaState.ReplicaEpoch": "replica_epoch",
    "MaxWaitMs": "max_wait_ms",
    "MaxBytes": "max_bytes",
    "Topics[0].Topic": Expect(METADATA_TOPIC),  # v12
    "Topics[0].TopicId": Expect(METADATA_TOPIC_ID),  # v13+
    _PARTITION + "Partition": Expect(METADATA_PARTITION),
    _PARTITION + "CurrentLeaderEpoch": "current_leader_epoch",
    _PARTITION + "FetchOffset": "fetch_offset",
    _PARTITION + "LastFetchedEpoch": "last_fetched_epoch",
    _PARTITION + "LogStartOffset": "log_start_offset",
    _PARTITION + "PartitionMaxBytes": "partition_max_bytes",
    _PARTITION + "ReplicaDirectoryId": "replica_directory_id",  # v17+ tagged (KIP-853)
}
FETCH_REQUEST_PARAMS: binding.Params = (
    ("cluster_id", None), ("replica_id", -1), ("replica_epoch", -1), ("max_wait_ms", 0),
    ("max_bytes", 0x7FFFFFFF), ("current_leader_epoch", -1), ("fetch_offset", 0), ("last_fetched_epoch", -1),
    ("log_start_offset", -1), ("partition_max_bytes", 0x7FFFFFFF), ("replica_directory_id", ZERO_UUID),
)

_RESPONSE_PARTITION = "Responses[0].Partitions[0]."

#: FetchResponse fields the core reads (KIP-595 "Fetch Response Handling": records, high watermark,
#: DivergingEpoch, CurrentLeader) and the one partition; NodeEndpoints (tagged, v16+) binds whole, as the
#: codec's list of dicts (KRaft writes it from v17: ``wire.FETCH_NODE_ENDPOINTS_VERSION``).
FETCH_RESPONSE: binding.Binding = {
    "ErrorCode": "error",
    "Responses[0].Topic": Expect(METADATA_TOPIC),
    "Responses[0].TopicId": Expect(METADATA_TOPIC_ID),
    _RESPONSE_PARTITION + "PartitionIndex": Expect(METADATA_PARTITION),
    _RESPONSE_PARTITION + "ErrorCode": "partition_error",
    _RESPONSE_PARTITION + "HighWatermark": "high_watermark",
    _RESPONSE_PARTITION + "LogStartOffset": "log_start_offset",
    _RESPONSE_PARTITION + "DivergingEpoch.Epoch": "diverging_epoch",
    _RESPONSE_PARTITION + "DivergingEpoch.EndOffset": "diverging_end_offset",
    _RESPONSE_PARTITION + "CurrentLeader.LeaderId": "leader_id",
    _RESPONSE_PARTITION + "CurrentLeader.LeaderEpoch": "leader_epoch",
    _RESPONSE_PARTITION + "SnapshotId.EndOffset": "snapshot_end_offset",  # KIP-630
    _RESPONSE_PARTITION + "SnapshotId.Epoch": "snapshot_epoch",
    _RESPONSE_PARTITION + "Records": "records",
    "NodeEndpoints": "node_endpoints",
}
FETCH_RESPONSE_PARAMS: binding.Params = (
    ("error", 0), ("partition_error", 0), ("high_watermark", -1), ("log_start_offset", -1),
    ("diverging_epoch", -1), ("diverging_end_offset", -1), ("leader_id", -1), ("leader_epoch", -1),
    ("snapshot_end_offset", -1), ("snapshot_epoch", -1), ("records", None), ("node_endpoints", ()),
)


def _fetch_request(cluster_id: str | None, replica_id: int, replica_epoch: int, max_wait_ms: int, max_bytes: int,
                   current_leader_epoch: int, fetch_offset: int, last_fetched_epoch: int, log_start_offset: int,
                   partition_max_bytes: int, replica_directory_id: Any) -> FetchRequest:
    """``wire.request_from_body`` of a Fetch, from the bound fields."""
    return _request(replica_id, replica_epoch, max_wait_ms, max_bytes, current_leader_epoch, fetch_offset,
                    last_fetched_epoch, log_start_offset, partition_max_bytes, cluster_id=cluster_id,
                    directory=directory_id_of(replica_directory_id))


def _request(replica_id: int, replica_epoch: int, max_wait_ms: int, max_bytes: int, current_leader_epoch: int,
             fetch_offset: int, last_fetched_epoch: int, log_start_offset: int, partition_max_bytes: int, *,
             cluster_id: str | None, directory: str | None) -> FetchRequest:
    """The request from its numbers and what ``_fetch_request`` made of its cluster id and directory id."""
    return FetchRequest(cluster_id, replica_id, current_leader_epoch, fetch_offset, last_fetched_epoch,
                        max_wait_ms, min(max_bytes, partition_max_bytes), replica_epoch, replica_directory_id=directory)


def _prepare_fetch_request(args: list[Any], variable: frozenset[int]) -> tuple[Callable[..., FetchRequest],
                                                                               tuple[int, ...]] | None:
    """``_fetch_request`` for the frames of one template (``binding.Prepare``): ``_request`` with the cluster id and
    the directory id (a string and a uuid: the frame's shape, never variable) worked out once."""
    if 0 in variable or 10 in variable:
        return None
    return partial(_request, cluster_id=args[0], directory=directory_id_of(args[10])), tuple(range(1, 10))


def _fetch_response(error: int, partition_error: int, high_watermark: int, log_start_offset: int,
                    diverging_epoch: int, diverging_end_offset: int, leader_id: int, leader_epoch: int,
                    snapshot_end_offset: int, snapshot_epoch: int, records: bytes | None,
                    node_endpoints: Any) -> FetchResponse:
    """``wire.response_from_body`` of a Fetch answer with its one partition, from the bound fields."""
    diverging, snapshot = _diverging_and_snapshot(diverging_epoch, diverging_end_offset, snapshot_end_offset,
                                                  snapshot_epoch)
    return _answer(error, partition_error, high_watermark, log_start_offset, leader_id, leader_epoch, records,
                   diverging, snapshot, _nodes(node_endpoints))


def _diverging_and_snapshot(diverging_epoch: int, diverging_end_offset: int, snapshot_end_offset: int,
                            snapshot_epoch: int) -> tuple[tuple[int, int] | None, SnapshotId | None]:
    # Kafka: DivergingEpoch (and SnapshotId) is set when either field differs from -1.
    diverging = None if diverging_epoch == -1 and diverging_end_offset == -1 else (diverging_epoch,
                                                                                    diverging_end_offset)
    snapshot = None if snapshot_end_offset == -1 and snapshot_epoch == -1 else SnapshotId(snapshot_end_offset,
                                                                                          snapshot_epoch)
    return diverging, snapshot


def _nodes(node_endpoints: Any) -> tuple[ResponseNodeEndpoint, ...]:
    """The answer's NodeEndpoints as messages (the last answer's, when equal: see ``_last_endpoints``)."""
    if not node_endpoints:
        return ()
    last = _last_endpoints[0]  # (one read of the pair: codecs in other threads may replace it meanwhile)
    if node_endpoints == last[0]:
        return last[1]
    nodes = tuple([ResponseNodeEndpoint(n["NodeId"], n["Host"], n["Port"]) for n in node_endpoints])
    _last_endpoints[0] = (node_endpoints, nodes)
    return nodes


def _answer(error: int, partition_error: int, high_watermark: int, log_start_offset: int, leader_id: int,
            leader_epoch: int, records: bytes | None, diverging: tuple[int, int] | None, snapshot: SnapshotId | None,
            nodes: tuple[ResponseNodeEndpoint, ...]) -> FetchResponse:
    """The answer from its numbers and records and what ``_fetch_response`` made of its other fields."""
    if records:
        # A follower's usual answer: one batch of its last one's shape, read from the template here (a call less).
        batch = _one_batch(records)
        batches, encoded = ((batch,), (records,)) if batch is not None else _decode_keeping_bytes(records)
    else:
        batches = encoded = ()
    leader = _last_leader[0]
    if leader.leader_id != leader_id or leader.leader_epoch != leader_epoch:
        leader = _last_leader[0] = LeaderIdAndEpoch(leader_id, leader_epoch)
    return FetchResponse(high_watermark, batches, diverging, leader,
                         _NONE if partition_error == 0 else _error(partition_error),
                         _NONE if error == 0 else _error(error), log_start_offset, encoded, snapshot, nodes)


#: The arguments ``_prepare_fetch_response`` lets vary: the numbers, the leader and the records; DivergingEpoch,
#: SnapshotId (absent in a follower's usual answer) and NodeEndpoints are worked out once per template.
_RESPONSE_TAKES = (0, 1, 2, 3, 6, 7, 10)
_RESPONSE_VARIABLE = frozenset(_RESPONSE_TAKES)


def _prepare_fetch_response(args: list[Any], variable: frozenset[int]) -> tuple[Callable[..., FetchResponse],
                                                                                 tuple[int, ...]] | None:
    """``_fetch_response`` for the frames of one template (``binding.Prepare``): ``_answer`` with the rest made
    once (a partial: no frame of its own per answer)."""
    if variable - _RESPONSE_VARIABLE:
        return None
    (_, _, _, _, diverging_epoch, diverging_end_offset, _, _, snapshot_end_offset, snapshot_epoch, _,
     node_endpoints) = args
    diverging, snapshot = _diverging_and_snapshot(diverging_epoch, diverging_end_offset, snapshot_end_offset,
                                                  snapshot_epoch)
    try:
        nodes = _nodes(node_endpoints)
    except Exception:
        return None  # (_fetch_response raises it at every frame: let it)
    return partial(_answer, diverging=diverging, snapshot=snapshot, nodes=nodes), _RESPONSE_TAKES


#: The last answer's NodeEndpoints (the decoded list of dicts) and CurrentLeader, with the frozen messages they
#: became: a follower's next answer names the same ones, and shares them instead of building them again. Compared
#: by value: the decoder gives each field one type (int32 ids and ports, str hosts), so equal values are equal
#: messages; the list is only read (templates pass theirs again, ``copies=False``).
_last_endpoints: list[tuple[Any, tuple[ResponseNodeEndpoint, ...]]] = [(None, ())]
_last_leader: list[LeaderIdAndEpoch] = [LeaderIdAndEpoch()]


_one_batch = _FETCHED_BATCHES.one

#: (An enum member read from its class goes through a descriptor: once, here.)
_NONE = Errors.NONE


#: The Fetch versions the bindings serve: every version the node serves a partition at. KRaft's fields start
#: at v12, but a v12 request names no TopicId, which Kafka's raft reads as the zero uuid and refuses
#: (``RaftUtil.hasValidTopicPartition``): the dict path answers it INVALID_REQUEST (``wire.request_from_body``).
BOUND_VERSIONS = range(max(codec.supported_versions(FETCH)[0], MIN_FETCH_VERSION + 1),
                       codec.supported_versions(FETCH)[1] + 1)
#: The generated functions per version ("... templates": a maker of the decoder's ``binding.FrameTemplates``).
GENERATED = ("request decoder", "request encoder", "response decoder", "response encoder", "request templates",
             "response templates", "request encoder templates", "response encoder templates")


@cache
def _generated(which: str, version: int) -> Callable[..., Any]:
    """One of the ``GENERATED`` functions of Fetch ``version``, made once per process at first use (a node
    makes them all before it listens: ``TypedCodec.precompile``)."""
    label = f"Fetch v{version} bound {which}"
    if which.startswith("request"):
        header = codec.message_struct("RequestHeader", codec.request_header_version(FETCH, version))
        body = codec.message_struct("FetchRequest", version)
        if which == "request decoder":
            return binding.frame_decoder(header, body, FETCH_REQUEST, FETCH_REQUEST_PARAMS, _fetch_request, label,
                                         response=False)
        if which == "request templates":
            return binding.templated_frame_decoder(header, body, FETCH_REQUEST, FETCH_REQUEST_PARAMS, _fetch_request,
                                                   label, response=False, copies=False, prepare=_prepare_fetch_request)
        if which == "request encoder templates":
            return binding.templated_request_encoder(header, body, FETCH, FETCH_REQUEST, FETCH_REQUEST_PARAMS, label)
        return binding.request_encoder(header, body, FETCH, FETCH_REQUEST, FETCH_REQUEST_PARAMS, label)
    body = codec.message_struct("FetchResponse", version)
    if which in ("response decoder", "response templates"):
        header = codec.message_struct("ResponseHeader", codec.response_header_version(FETCH, version))
        if which == "response templates":
            # copies=False: _fetch_request/_fetch_response only read their arguments (NodeEndpoints' dicts become
            # the answer's NodeEndpoint tuple), so a template's lists may be passed again as they are.
            return binding.templated_frame_decoder(header, body, FETCH_RESPONSE, FETCH_RESPONSE_PARAMS,
                                                   _fetch_response, label, response=True, copies=False,
                                                   prepare=_prepare_fetch_response)
        return binding.frame_decoder(header, body, FETCH_RESPONSE, FETCH_RESPONSE_PARAMS, _fetch_response, label,
                                     response=True)
    if which == "response encoder templates":
        return binding.templated_body_encoder(body, FETCH_RESPONSE, FETCH_RESPONSE_PARAMS, label)
    return binding.body_encoder(body, FETCH_RESPONSE, FETCH_RESPONSE_PARAMS, label)


class TypedCodec:
    """What ``net.KafkaServer``/``KafkaClient`` call to read and write frames (``spec.codec``'s names):
    bodies are the core's Fetch messages where the bound code applies, the codec's dicts elsewhere.
    ``wire.request_from_kafka``/``response_from_kafka`` take either."""

    def __init__(self, templates: bool = True) -> None:
        #: Frames the bound code read or wrote, and those it left to the dict path.
        self.bound = 0
        self.fallbacks = 0
        #: Fetch version -> this codec's request / response decoder. With ``templates`` each is a
        #: ``binding.FrameTemplates``: it remembers the shapes of the last frames it read (a follower's next
        #: Fetch differs from its last one only in numbers), so it belongs to the codec (a node), not the process.
        self._templates = templates
        self._request_decoders: dict[int, Callable[[Any], Any]] = {}
        self._response_decoders: dict[int, Callable[[Any], Any]] = {}
        self._request_encoders: dict[int, Callable[..., bytes]] = {}  # (binding.EncoderTemplates likewise)
        self._response_encoders: dict[int, Callable[..., bytes]] = {}
        self._by_prefix: dict[bytes, Callable[[Any], Any] | None] = {}  # a request's first 4 bytes -> its decoder
        #: The last Fetch's directory id (a string or None: the same object is the same value) and its wire uuid.
        self._last_directory: tuple[str | None, Any] = (None, ZERO_UUID)
        #: The last answer's one given NodeEndpoint's fields and the NodeEndpoints rows written for it (only read by
        #: the encoders: the templated one compares and copies them, the plain one writes them).
        self._last_rows: tuple[Any, Any, Any, list[dict[str, Any]]] = (None, None, None, [])

    def _decoder(self, which: str, version: int) -> Callable[[Any], Any] | None:
        """The ``which`` ("request"/"response") decoder of Fetch ``version``, None for a version not bound."""
        table = self._request_decoders if which == "request" else self._response_decoders
        decoder = table.get(version)
        if decoder is None and version in BOUND_VERSIONS:
            decoder = table[version] = _generated(f"{which} templates", version)() if self._templates else \
                _generated(f"{which} decoder", version)
        return decoder

    def _directory_uuid(self, directory_id: str | None) -> Any:
        """``wire.directory_uuid``, remembered for the next Fetch (a follower's names the same directory)."""
        u = directory_uuid(directory_id)
        self._last_directory = (directory_id, u)
        return u

    @staticmethod
    def precompile(versions: range = BOUND_VERSIONS) -> None:
        for version in versions:
            for which in GENERATED:
                _generated(which, version)

    # ---------------------------------------------------------------- net.py's codec

    def decode_request(self, payload: Any) -> tuple[dict[str, Any], Any]:
        """(header, body): a ``FetchRequest`` for a Fetch the binding reads, else ``codec``'s dicts."""
        # The decoder is a function of the frame's first four bytes (api key, version): looked up by them.
        try:
            decode = self._by_prefix[payload[:4]]
        except (KeyError, TypeError, ValueError):  # (a prefix not seen yet; a bytearray, a writable memoryview)
            decode = self._request_decoder_of(payload)
        if decode is not None:
            out = self._bound_read(decode, payload)
            if out is not None:
                return out
        return codec.decode_request(payload)

    def _request_decoder_of(self, payload: Any) -> Callable[[Any], Any] | None:
        """The bound decoder of a request frame (a Fetch of a bound version), or None; remembered by the frame's
        first four bytes (``decode_request``)."""
        decode = None
        if len(payload) >= 4 and payload[0] == 0 and payload[1] == FETCH:
            version = payload[2] << 8 | payload[3]
            decode = self._request_decoders.get(version) or self._decoder("request", version)
        prefix = payload[:4]
        if type(prefix) is bytes:
            if len(self._by_prefix) >= 64:
                self._by_prefix.clear()
            self._by_prefix[prefix] = decode
        return decode

    def decode_response(self, api_key: int, version: int, payload: Any) -> tuple[int, Any]:
        """(correlation id, body): a ``FetchResponse`` where the binding reads the frame."""
        if api_key == FETCH:
            decode = self._response_decoders.get(version) or self._decoder("response", version)
            if decode is not None:
                out = self._bound_read(decode, payload)
                if out is not None:
                    return out
        return codec.decode_response(api_key, version, payload)

    def _bound_read(self, decode: Callable[[Any], Any], payload: Any) -> Any:
        """``decode(payload)``, counted; None when the bound code does not read the frame (the dict path then
        reads it, and names what is wrong with it)."""
        try:
            out = decode(payload)
        except Exception:
            self.fallbacks += 1
            return None
        self.bound += 1
        return out

    def encode_request(self, api_key: int, version: int, correlation_id: int, client_id: str | None,
                       body: Any) -> bytes:
        """A request frame from a body dict, or from one of the core's requests: a ``FetchRequest`` by the
        bound code (``wire.request_to_body``'s fields), any other, or one it cannot write (a value that
        does not fit: the dict path names it), through its body."""
        if type(body) is FetchRequest and api_key == FETCH:
            encode = self._request_encoders.get(version)
            if encode is None and version in BOUND_VERSIONS:
                encode = self._request_encoders[version] = _generated("request encoder templates", version)() \
                    if self._templates else _generated("request encoder", version)
            if encode is not None:
                directory, last = body.replica_directory_id, self._last_directory
                try:
                    frame = encode(
                        correlation_id, client_id, body.cluster_id, body.replica_id, body.replica_epoch,
                        body.max_wait_ms, body.max_bytes, body.current_leader_epoch, body.fetch_offset,
                        body.last_fetched_epoch, 0, body.max_bytes,
                        last[1] if directory is last[0] else self._directory_uuid(directory))
                    self.bound += 1
                    return frame
                except Exception:
                    self.fallbacks += 1
        if type(body) is not dict:
            body = wire.request_to_body(body, version)
        return codec.encode_request(api_key, version, correlation_id, client_id, body)

    def encode_response_body(self, version: int, resp: FetchResponse,
                             endpoints: Mapping[int, ListenerEndpoint]) -> bytes | None:
        """The body bytes of a Fetch answer (``wire.response_to_body``'s fields, NodeEndpoints from v17 included),
        or None where the dict path must write it (and report what it cannot write): a version the binding
        lacks, a top-level error (no partition in the answer, as Kafka's), a value that does not fit."""
        if resp.error != _NONE:
            return None  # a top-level error has no partition: wire.error_response_body writes it
        if version not in BOUND_VERSIONS:
            self.fallbacks += 1
            return None
        div = resp.diverging_epoch or (-1, -1)
        snap = resp.snapshot_id
        leader = resp.current_leader
        encode = self._response_encoders.get(version)
        if encode is None:
            encode = self._response_encoders[version] = _generated("response encoder templates", version)() \
                if self._templates else _generated("response encoder", version)
        try:
            records = b"".join(resp.encoded) if resp.encoded is not None else encode_batches(resp.batches)
            if version < FETCH_NODE_ENDPOINTS_VERSION:
                rows: list[dict[str, Any]] = []
            else:
                # A leader's answers name its own endpoint, a new NodeEndpoint of the same fields each time: the
                # rows made for the last one serve while those fields are the same objects (ints and strings:
                # the same object is the same value and type).
                given = resp.node_endpoints
                if len(given) == 1:
                    n, last = given[0], self._last_rows
                    if n.node_id is last[0] and n.host is last[1] and n.port is last[2]:
                        rows = last[3]
                    else:
                        rows = fetch_node_endpoints(resp, endpoints)
                        self._last_rows = (n.node_id, n.host, n.port, rows)
                else:
                    rows = fetch_node_endpoints(resp, endpoints)
            out = encode(
                resp.error, resp.partition_error, resp.high_watermark, resp.log_start_offset, div[0], div[1],
                leader.leader_id, leader.leader_epoch, snap.end_offset if snap else -1, snap.epoch if snap else -1,
                records, rows)
        except Exception:
            self.fallbacks += 1
            return None
        self.bound += 1
        return out


__all__ = ["FETCH_REQUEST", "FETCH_RESPONSE", "TypedCodec"]
