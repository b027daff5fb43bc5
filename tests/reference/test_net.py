"""The wire transport (reference/net.py) on real loopback sockets: responses leave in request order
whether the handler answers at once, through a future or through a coroutine; a handler that gives
no answer closes the connection; a client's requests fail (never hang) on timeouts and lost
connections. Kafka protocol "Requests and responses": a client matches each response to its oldest
in-flight request on the connection, so order is part of the contract."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.messages import DescribeQuorumRequest
from kraft_tck.reference.net import (
    Answer,
    EncodedAnswer,
    KafkaClient,
    KafkaServer,
    PendingAnswer,
    RequestError,
    ServerRequest,
)
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.framing import read_frame

DQ = wire.DESCRIBE_QUORUM
RANGES = {DQ: (0, 0)}


def _answer(error: Errors) -> dict[str, Any]:
    return wire.error_response_body(DQ, 0, error)


def _request_frame(corr: int) -> bytes:
    return codec.encode_request(DQ, 0, corr, "test", wire.request_to_body(DescribeQuorumRequest(), 0))


async def _with_server(
    handler: Callable[[ServerRequest], Answer | Awaitable[Answer]],
    body: Callable[[KafkaServer], Awaitable[None]],
    **options: Any,
) -> None:
    """``body`` against a started server (``options``: KafkaServer's), closed after it."""
    server = KafkaServer(handler, RANGES, host="127.0.0.1", port=0, **options)
    await server.start()
    try:
        await asyncio.wait_for(body(server), 10)
    finally:
        await server.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, int]:
    """(correlation id, ErrorCode) of the next response frame."""
    payload = await read_frame(reader)
    assert payload is not None, "the server closed the connection instead of answering"
    corr, body = codec.decode_response(DQ, 0, payload)
    return corr, body["ErrorCode"]


def _loop_rounds() -> list[int]:
    """A counter of the running loop's iterations (rounds), to check what happens within one."""
    loop = asyncio.get_running_loop()
    count = [0]
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counting() -> None:
        count[0] += 1
        run_once()

    loop._run_once = counting  # type: ignore[attr-defined]
    return count


def test_a_reply_is_written_in_order_from_the_call_that_answers_it() -> None:
    """A PendingAnswer answered later goes out from that call (no loop round in between), after the answers
    before it and before the ones after it; a second answer is ignored."""
    replies: dict[int, PendingAnswer] = {}

    def handler(req: ServerRequest) -> Answer | PendingAnswer:
        if req.correlation_id in (0, 2):
            replies[req.correlation_id] = PendingAnswer()
            return replies[req.correlation_id]
        return _answer(Errors.NOT_LEADER_OR_FOLLOWER)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0) + _request_frame(1) + _request_frame(2))
        while len(replies) < 2:
            await asyncio.sleep(0.01)
        with pytest.raises(TimeoutError):  # request 1 is answered but held back behind request 0
            await asyncio.wait_for(read_frame(reader), 0.2)
        transport = next(iter(server._conns))._transport
        assert transport is not None
        sent: list[bytes] = []
        write = transport.write

        def recording_write(data: Any) -> None:
            sent.append(bytes(data))
            write(data)

        transport.write = recording_write
        replies[0].answer(_answer(Errors.NONE))
        assert len(sent) == 2, "answers 0 and 1 are written by the answer() call itself"
        assert await _read_answer(reader) == (0, Errors.NONE)
        assert await _read_answer(reader) == (1, Errors.NOT_LEADER_OR_FOLLOWER)
        replies[2].answer(_answer(Errors.NONE))
        replies[2].answer(_answer(Errors.FENCED_LEADER_EPOCH))  # ignored
        assert len(sent) == 3
        assert await _read_answer(reader) == (2, Errors.NONE)
        writer.close()

    asyncio.run(_with_server(handler, body))


def test_an_encoded_answer_is_framed_per_request() -> None:
    """One EncodedAnswer body answers several requests: each gets it under its own correlation id, and the
    observer sees the body."""
    body = _answer(Errors.NOT_LEADER_OR_FOLLOWER)
    shared = EncodedAnswer(body, codec.encode_response_body(DQ, 0, body))
    seen: list[tuple[str, int, dict[str, Any]]] = []

    def handler(req: ServerRequest) -> EncodedAnswer:
        return shared

    async def body_(server: KafkaServer) -> None:
        server._observer = lambda d, _k, _v, corr, b, _p: seen.append((d, corr, b))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(5) + _request_frame(6))
        assert await _read_answer(reader) == (5, Errors.NOT_LEADER_OR_FOLLOWER)
        assert await _read_answer(reader) == (6, Errors.NOT_LEADER_OR_FOLLOWER)
        assert [(d, corr) for d, corr, _ in seen if d == "send"] == [("send", 5), ("send", 6)]
        assert all(b is body for d, _, b in seen if d == "send")
        writer.close()

    asyncio.run(_with_server(handler, body_))


def test_a_cancelled_reply_closes_the_connection() -> None:
    replies: list[PendingAnswer] = []

    def handler(req: ServerRequest) -> Answer | PendingAnswer:
        if req.correlation_id == 0:
            return _answer(Errors.NONE)
        replies.append(PendingAnswer())
        return replies[-1]

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0) + _request_frame(1))
        assert await _read_answer(reader) == (0, Errors.NONE)
        while not replies:
            await asyncio.sleep(0.01)
        replies[0].cancel()
        assert replies[0].cancelled and replies[0].done()
        assert await read_frame(reader) is None  # closed, request 1 unanswered
        writer.close()

    asyncio.run(_with_server(handler, body))


def test_frames_split_and_joined_across_reads() -> None:
    """Requests arriving a few bytes at a time, or several in one read, are all answered in order."""

    def handler(req: ServerRequest) -> Answer:
        return _answer(Errors.NONE if req.correlation_id % 2 == 0 else Errors.NOT_LEADER_OR_FOLLOWER)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        data = b"".join(_request_frame(i) for i in range(4))
        for i in range(0, len(data), 3):
            writer.write(data[i:i + 3])
            await writer.drain()
            await asyncio.sleep(0.001)
        got = [await _read_answer(reader) for _ in range(4)]
        assert got == [(i, Errors.NONE if i % 2 == 0 else Errors.NOT_LEADER_OR_FOLLOWER) for i in range(4)]
        writer.close()

    asyncio.run(_with_server(handler, body))


@pytest.mark.parametrize("bad", ["too large", "negative", "cut short"])
def test_unreadable_frames_end_the_connection_after_earlier_answers(bad: str) -> None:
    """Frames before a bad length are answered; then the connection closes (Kafka's network layer)."""

    def handler(req: ServerRequest) -> Answer:
        return _answer(Errors.NONE)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        tail = {"too large": b"\x7f\xff\xff\xff", "negative": b"\xff\xff\xff\xfe",
                "cut short": _request_frame(1)[:9]}[bad]
        writer.write(_request_frame(0) + tail)
        if bad == "cut short":
            writer.write_eof()
        assert await _read_answer(reader) == (0, Errors.NONE)
        assert await read_frame(reader) is None
        writer.close()

    asyncio.run(_with_server(handler, body))


def _answering_below(corr: int) -> Callable[[ServerRequest], Answer | Awaitable[Answer]]:
    """A handler that answers requests with a correlation id below ``corr`` and never the others."""

    def handler(req: ServerRequest) -> Answer | Awaitable[Answer]:
        if req.correlation_id >= corr:
            return asyncio.get_running_loop().create_future()  # never answered
        return _answer(Errors.NONE)

    return handler


async def _client(server: KafkaServer) -> tuple[KafkaClient, dict[str, Any]]:
    """A connected client (ApiVersions took correlation id 0) and a DescribeQuorum request body."""
    client = KafkaClient("127.0.0.1", server.port)
    await client.connect(timeout_s=2)
    return client, wire.request_to_body(DescribeQuorumRequest(), 0)


def test_send_with_callback_runs_in_the_round_that_reads_the_response() -> None:
    """The callback runs from the read itself (a future's done-callbacks would run one round later),
    and gets the RequestError of a timeout or a lost connection."""

    async def body(server: KafkaServer) -> None:
        client, req = await _client(server)
        rounds = _loop_rounds()
        got: list[tuple[int, Any, Any]] = []
        done = asyncio.get_running_loop().create_future()

        def callback(resp: dict[str, Any] | None, exc: BaseException | None) -> None:
            got.append((rounds[0], resp, exc))
            if len(got) == 2:
                done.set_result(None)

        fut = client.send(DQ, 0, req, 2.0)  # correlation id 1: a future, for comparison
        fut_round: list[int] = []
        fut.add_done_callback(lambda _f: fut_round.append(rounds[0]))
        client.send_with_callback(DQ, 0, req, 2.0, callback)  # 2, answered in the same read as 1
        await fut
        await asyncio.sleep(0)
        assert got and got[0][1] is not None and got[0][1]["ErrorCode"] == Errors.NONE and got[0][2] is None
        assert fut_round[0] > got[0][0], "the callback ran before the future's callbacks"
        client.send_with_callback(DQ, 0, req, 0.05, callback)  # 3: times out
        await done
        assert got[1][1] is None and isinstance(got[1][2], RequestError) and "timed out" in str(got[1][2])
        lost: list[BaseException | None] = []
        client.send_with_callback(DQ, 0, req, 5.0, lambda _r, exc: lost.append(exc))  # 4: connection lost
        await asyncio.sleep(0.05)
        await server.close()
        for _ in range(100):
            if lost:
                break
            await asyncio.sleep(0.01)
        assert lost and isinstance(lost[0], RequestError)
        await client.close()

    asyncio.run(_with_server(_answering_below(3), body))


def test_a_later_answer_waits_for_an_earlier_pending_one() -> None:
    """Request 0 is answered through a future resolved later, request 1 at once: 1 must not overtake 0."""
    pending: asyncio.Future[Answer] | None = None

    def handler(req: ServerRequest) -> Answer | Awaitable[Answer]:
        nonlocal pending
        if req.correlation_id == 0:
            pending = asyncio.get_running_loop().create_future()
            return pending
        return _answer(Errors.NOT_LEADER_OR_FOLLOWER)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0) + _request_frame(1))
        with pytest.raises(TimeoutError):  # request 1 is answered but held back behind request 0
            await asyncio.wait_for(read_frame(reader), 0.3)
        assert pending is not None
        pending.set_result(_answer(Errors.NONE))
        assert await _read_answer(reader) == (0, Errors.NONE)
        assert await _read_answer(reader) == (1, Errors.NOT_LEADER_OR_FOLLOWER)
        writer.close()

    asyncio.run(_with_server(handler, body))


def test_coroutine_handlers_answer_in_order() -> None:
    async def handler(req: ServerRequest) -> Answer:
        # The first request takes longest: answers still leave in request order.
        await asyncio.sleep(0.05 * (3 - req.correlation_id))
        return _answer(Errors.NONE if req.correlation_id % 2 == 0 else Errors.NOT_LEADER_OR_FOLLOWER)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"".join(_request_frame(i) for i in range(3)))
        got = [await _read_answer(reader) for _ in range(3)]
        assert got == [(0, Errors.NONE), (1, Errors.NOT_LEADER_OR_FOLLOWER), (2, Errors.NONE)]
        writer.close()

    asyncio.run(_with_server(handler, body))


@pytest.mark.parametrize("failure", ["none", "raise", "cancelled"])
def test_a_request_without_an_answer_closes_the_connection(failure: str) -> None:
    """None, a handler error and a cancelled answer all close the connection; answers queued before
    it still go out, and the server keeps serving new connections."""

    def handler(req: ServerRequest) -> Answer | Awaitable[Answer]:
        if req.correlation_id == 0:
            return _answer(Errors.NONE)
        if failure == "raise":
            raise RuntimeError("handler bug")
        if failure == "cancelled":
            fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
            fut.cancel()
            return fut
        return None

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0) + _request_frame(1))
        assert await _read_answer(reader) == (0, Errors.NONE)
        assert await read_frame(reader) is None  # closed, request 1 unanswered
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0))
        assert await _read_answer(reader) == (0, Errors.NONE)
        writer.close()

    asyncio.run(_with_server(handler, body))


@pytest.mark.parametrize("observed", [False, True], ids=["no-observer", "observer"])
@pytest.mark.parametrize("one_in_flight", [False, True], ids=["pipelined", "one-in-flight"])
def test_parked_answers_leave_in_request_order_then_a_refusal_closes(observed: bool, one_in_flight: bool) -> None:
    """Five pipelined requests: 0 and 2 parked (PendingAnswer), 1 answered at once, 3 by a coroutine, 4 with no
    answer. Answering 2 before 0 writes nothing; answering 0 writes 0, 1 and 2 from that call (a parked Fetch
    answered from the step that completes it, as the node's leader does); then 3, then the connection closes.
    A server without a frame observer hands the answer straight to the connection's queue (net's fast lane), one
    with an observer records it first: both keep Kafka's order, and the observer sees each answer once. With
    ``one_in_flight`` (the node's setting) request 1 is read only once 0 is written. Memory of
    queued.max.request.bytes is held until each answer is written."""
    parked: dict[int, PendingAnswer] = {}
    handled: list[int] = []
    sent: list[int] = []

    def observer(direction: str, api_key: int, version: int, corr: int, body: Any, peer: str) -> None:
        if direction == "send":
            sent.append(corr)

    def handler(req: ServerRequest) -> Answer | PendingAnswer | Awaitable[Answer]:
        corr = req.correlation_id
        handled.append(corr)
        if corr in (0, 2):
            parked[corr] = PendingAnswer()
            return parked[corr]
        if corr == 3:
            async def later() -> Answer:
                await asyncio.sleep(0.05)
                return _answer(Errors.NOT_LEADER_OR_FOLLOWER)
            return later()
        return None if corr == 4 else _answer(Errors.NONE)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"".join(_request_frame(i) for i in range(5)))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if 0 in parked and (one_in_flight or 2 in parked):
                break
        assert handled == ([0] if one_in_flight else [0, 1, 2, 3, 4])
        assert server.queued_bytes > 0  # the parked frames' memory is held
        if not one_in_flight:
            parked[2].answer(_answer(Errors.NOT_LEADER_OR_FOLLOWER))
            with pytest.raises(TimeoutError):  # 2 is answered, held back behind the parked 0
                await asyncio.wait_for(read_frame(reader), 0.2)
        parked[0].answer(_answer(Errors.NONE))
        if one_in_flight:
            assert await _read_answer(reader) == (0, Errors.NONE)
            for _ in range(100):
                await asyncio.sleep(0.01)
                if 2 in parked:
                    break
            assert handled == [0, 1, 2]
            parked[2].answer(_answer(Errors.NOT_LEADER_OR_FOLLOWER))
        else:
            assert await _read_answer(reader) == (0, Errors.NONE)
        assert await _read_answer(reader) == (1, Errors.NONE)
        assert await _read_answer(reader) == (2, Errors.NOT_LEADER_OR_FOLLOWER)
        assert await _read_answer(reader) == (3, Errors.NOT_LEADER_OR_FOLLOWER)
        assert await read_frame(reader) is None  # request 4 had no answer: closed
        writer.close()
        await asyncio.sleep(0.05)
        assert server.queued_bytes == 0  # every frame's memory given back
        assert sorted(sent) == ([0, 1, 2, 3] if observed else [])

    asyncio.run(_with_server(handler, body, observer=observer if observed else None, one_in_flight=one_in_flight,
                             queued_max_bytes=1 << 20))


def test_best_version_follows_a_renegotiation() -> None:
    """The client remembers the version it picked per api key, but only for the ApiVersions answer it picked it
    from: a connection that negotiates again (a new ``versions``) picks again."""

    async def body(server: KafkaServer) -> None:
        client = KafkaClient("127.0.0.1", server.port)
        await client.connect()
        try:
            assert client.best_version(DQ) == 0
            assert client.best_version(DQ) == 0  # asked again: the same answer
            client.versions = {k: v for k, v in client.versions.items() if k != DQ}
            with pytest.raises(RequestError, match="does not advertise"):
                client.best_version(DQ)
        finally:
            await client.close()

    asyncio.run(_with_server(lambda req: _answer(Errors.NONE), body))


def test_client_send_times_out_and_fails_on_a_lost_connection() -> None:
    never: list[asyncio.Future[Answer]] = []

    def handler(req: ServerRequest) -> Answer | Awaitable[Answer]:
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        never.append(fut)  # never resolved
        return fut

    async def body(server: KafkaServer) -> None:
        client = KafkaClient("127.0.0.1", server.port)
        await client.connect(timeout_s=2)
        req = wire.request_to_body(DescribeQuorumRequest(), 0)
        with pytest.raises(RequestError, match="timed out"):
            await client.send(DQ, 0, req, 0.1)
        waiting = client.send(DQ, 0, req, 5.0)
        await asyncio.sleep(0.05)
        await server.close()  # the connection goes away with the request unanswered
        with pytest.raises(RequestError):
            await asyncio.wait_for(waiting, 2)
        assert not client._inflight, "a failed request must not stay in flight"
        with pytest.raises(RequestError, match="not connected"):
            client.send(DQ, 0, req, 1.0)
        await client.close()

    asyncio.run(_with_server(handler, body))


def test_requests_time_out_each_at_its_own_deadline() -> None:
    """One timer per connection serves every request's timeout: an earlier deadline sent later still
    fails first, a later one is still failed when its time comes, and an answered request never fails."""

    async def body(server: KafkaServer) -> None:
        client, req = await _client(server)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        failed: dict[int, float] = {}
        answered = client.send(DQ, 0, req, 0.05)  # 1: answered at once (responses leave in request order)
        slow = client.send(DQ, 0, req, 0.4)  # 2
        fast = client.send(DQ, 0, req, 0.1)  # 3: sent later, due earlier
        for corr, fut in ((2, slow), (3, fast)):
            fut.add_done_callback(lambda f, c=corr: failed.setdefault(c, loop.time() - t0))
        assert (await answered)["ErrorCode"] == Errors.NONE
        for fut in (fast, slow):
            with pytest.raises(RequestError, match="timed out"):
                await fut
        assert 0.1 <= failed[3] < 0.35, failed
        assert failed[2] >= 0.4, failed
        await asyncio.sleep(0.1)  # past the answered request's deadline: its success stands
        assert answered.exception() is None
        assert not client._inflight
        # The timer waits for a later deadline; a request due earlier moves it.
        t1 = loop.time()
        later = client.send(DQ, 0, req, 0.5)  # 4
        sooner = client.send(DQ, 0, req, 0.05)  # 5
        with pytest.raises(RequestError, match="timed out"):
            await sooner
        assert loop.time() - t1 < 0.3 and not later.done()
        with pytest.raises(RequestError, match="timed out"):
            await later
        await client.close()

    asyncio.run(_with_server(_answering_below(2), body))


def test_client_names_its_software_as_kafka_requires() -> None:
    """KIP-511: ApiVersions v3+ carries ClientSoftwareName/Version, and Kafka answers INVALID_REQUEST to an
    empty or ill-formed one (``ApiVersionsRequest.isValid``), so the node could not talk to a Kafka peer."""
    import re

    from kraft_tck.reference.net import API_VERSIONS

    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        payload = await read_frame(reader)
        assert payload is not None
        header, req = codec.decode_request(payload)
        seen.append((header, req))
        answer = codec.api_versions_body()
        answer["ApiKeys"] = [{"ApiKey": API_VERSIONS, "MinVersion": 0, "MaxVersion": header["RequestApiVersion"]}]
        version, corr = header["RequestApiVersion"], header["CorrelationId"]
        writer.write(codec.encode_response(API_VERSIONS, version, corr, answer))
        await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            client = KafkaClient("127.0.0.1", port)
            await client.connect(timeout_s=2)
            await client.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
    (header, req), = seen
    assert header["RequestApiVersion"] >= 3
    valid = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
    for field in ("ClientSoftwareName", "ClientSoftwareVersion"):
        assert valid.fullmatch(req[field]), f"{field}={req[field]!r} is not a name Kafka accepts"


# ============================================================================ KIP-853 over a real socket


async def _api_versions_at(port: int, version: int) -> dict[str, Any]:
    """One raw ApiVersions request at ``version`` (as a Kafka client of that version sends it)."""
    from kraft_tck.reference.net import API_VERSIONS, CLIENT_SOFTWARE

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(codec.encode_request(API_VERSIONS, version, 11, "probe",
                                          dict(CLIENT_SOFTWARE) if version >= 3 else {}))
        await writer.drain()
        payload = await read_frame(reader)
        assert payload is not None
        corr, body = codec.decode_response(API_VERSIONS, version, payload)
        assert corr == 11
        return body
    finally:
        writer.close()


def test_api_versions_advertises_kraft_version_only_from_v4() -> None:
    """ApiVersions v3+ has SupportedFeatures; Kafka leaves out a feature whose minimum is 0 below v4
    (ApiVersionsResponse.maybeFilterSupportedFeatureKeys, alterFeatureLevel0 set by ControllerApis for requests
    below v4; KAFKA-17492). So ``kraft.version`` 0-1 shows at v4 only, and a server told of a feature with
    a non-zero minimum shows it at v3 too."""

    async def body(server: KafkaServer) -> None:
        seen = {v: (await _api_versions_at(server.port, v)).get("SupportedFeatures") for v in (2, 3, 4)}
        assert seen[4] == [{"Name": "kraft.version", "MinVersion": 0, "MaxVersion": 1}]
        assert seen[3] == [] and seen[2] is None  # v3 filtered; no such field below v3
        server.supported_features = {"kraft.version": (0, 1), "example.feature": (1, 3)}
        assert (await _api_versions_at(server.port, 3))["SupportedFeatures"] == [
            {"Name": "example.feature", "MinVersion": 1, "MaxVersion": 3}]
        # The client negotiates at the latest version and keeps what the server supports.
        client = KafkaClient("127.0.0.1", server.port)
        await client.connect(timeout_s=2)
        try:
            assert client.features == {"kraft.version": (0, 1), "example.feature": (1, 3)}
        finally:
            await client.close()

    asyncio.run(_with_server(lambda req: None, body))


def test_a_server_can_advertise_no_features() -> None:
    async def main() -> None:
        server = KafkaServer(lambda req: None, RANGES, supported_features={})
        await server.start()
        try:
            assert (await _api_versions_at(server.port, 4)).get("SupportedFeatures", []) == []
        finally:
            await server.close()

    asyncio.run(main())


def test_the_leaders_api_versions_probe_reads_the_joiners_kraft_version_range() -> None:
    """KIP-853 AddVoter: the leader sends ApiVersions to the new voter (AddVoterHandler, at the latest version
    both speak) and reads its ``kraft.version`` range; a peer that answers only v3 hides it (min 0)."""
    from kraft_tck.reference.messages import ApiVersionsRequest, ApiVersionsResponse
    from kraft_tck.reference.net import API_VERSIONS

    async def probe(port: int, cap: int | None) -> ApiVersionsResponse:
        client = KafkaClient("127.0.0.1", port)
        await client.connect(timeout_s=2)
        try:
            version = client.best_version(API_VERSIONS) if cap is None else cap
            answer = await client.request(API_VERSIONS, version, wire.request_to_body(ApiVersionsRequest(), version), 2)
            response = wire.response_from_kafka(API_VERSIONS, version, answer)
            assert isinstance(response, ApiVersionsResponse)
            return response
        finally:
            await client.close()

    async def body(server: KafkaServer) -> None:
        assert await probe(server.port, None) == ApiVersionsResponse(Errors.NONE, (0, 1))
        assert await probe(server.port, 3) == ApiVersionsResponse(Errors.NONE, None)

    asyncio.run(_with_server(lambda req: None, body))


def test_a_request_of_a_new_api_key_goes_out_and_its_answer_comes_back() -> None:
    """AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82) v0 through KafkaServer/KafkaClient: the
    client picks v0 from the server's ranges, and the answer reads back as the core's value."""
    from kraft_tck.reference.messages import (
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        Endpoint,
        LeaderIdAndEpoch,
        NodeEndpoint,
        RemoveRaftVoterRequest,
        RemoveRaftVoterResponse,
        UpdateRaftVoterRequest,
        UpdateRaftVoterResponse,
    )

    seen: list[Any] = []
    answers = {
        wire.ADD_RAFT_VOTER: AddRaftVoterResponse(Errors.DUPLICATE_VOTER, "voter 4 is already a voter"),
        wire.REMOVE_RAFT_VOTER: RemoveRaftVoterResponse(),
        wire.UPDATE_RAFT_VOTER: UpdateRaftVoterResponse(Errors.NONE, LeaderIdAndEpoch(1, 3),
                                                        NodeEndpoint(1, "127.0.0.1", 9091)),
    }

    def handler(req: ServerRequest) -> Answer:
        seen.append(wire.request_from_kafka(req.api_key, req.api_version, req.body))
        return wire.response_to_body(answers[req.api_key], req.api_version)

    requests = [
        AddRaftVoterRequest("cid", 4, "Zx1W-0mTQzSWb8b0NoQ0Kg", (Endpoint("CONTROLLER", "127.0.0.1", 9094),), 900),
        RemoveRaftVoterRequest("cid", 3, "AAAAAAAAAAAAAAAAAAAAAQ"),
        UpdateRaftVoterRequest("cid", 3, 2, "AAAAAAAAAAAAAAAAAAAAAg", (Endpoint("CONTROLLER", "h", 1),), 0, 1),
    ]

    async def main() -> None:
        server = KafkaServer(handler, {k: wire.SERVED_API_VERSIONS[k] for k in answers})
        await server.start()
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect(timeout_s=2)
            for req in requests:
                key = wire.api_key(req)
                version = client.best_version(key)
                assert version == 0
                body = await client.request(key, version, wire.request_to_body(req, version), 2)
                assert wire.response_from_kafka(key, version, body) == (
                    answers[key] if key != wire.REMOVE_RAFT_VOTER else RemoveRaftVoterResponse(Errors.NONE, "NONE"))
        finally:
            await client.close()
            await server.close()

    asyncio.run(main())
    assert seen == requests


def test_a_node_serves_the_kip853_apis_and_features_over_its_socket(tmp_path: Path) -> None:
    """A real node (static voters, kraft.version 0): its ApiVersions advertises the KIP-853 ranges and
    ``kraft.version`` 0-1 (v4), it answers AddRaftVoter/RemoveRaftVoter in Kafka's order of checks (a foreign
    cluster id first: INCONSISTENT_CLUSTER_ID; then kraft.version 0: UNSUPPORTED_VERSION,
    KafkaRaftClientReconfigTest.testAddVoterWithKraftVersion0), and its Fetch v17 answers name the leader's
    endpoint (RaftUtil.singletonFetchResponse)."""
    from kraft_tck.reference.messages import AddRaftVoterRequest, Endpoint, FetchRequest, RemoveRaftVoterRequest

    from tests.reference.test_node_fetch_answers import leading, start_nodes

    async def main() -> None:
        _, nodes = await start_nodes(tmp_path / "c")
        try:
            leader = await leading(nodes)
            assert leader.core is not None
            client = KafkaClient("127.0.0.1", leader.config.listener.endpoint.port)
            await client.connect(timeout_s=5)
            try:
                assert client.features == {"kraft.version": (0, 1)}
                assert {k: client.versions.get(k) for k in (1, 53, 54, 55, 59, 80, 81, 82)} == {
                    1: (12, 17), 53: (0, 1), 54: (0, 1), 55: (0, 2), 59: (0, 1), 80: (0, 0), 81: (0, 0), 82: (0, 0)}
                listeners = (Endpoint("CONTROLLER", "127.0.0.1", 1),)
                for req, error in (
                        (AddRaftVoterRequest("not-ours", 9, "Zx1W-0mTQzSWb8b0NoQ0Kg", listeners),
                         Errors.INCONSISTENT_CLUSTER_ID),
                        (AddRaftVoterRequest(None, 9, "Zx1W-0mTQzSWb8b0NoQ0Kg", listeners), Errors.UNSUPPORTED_VERSION),
                        (RemoveRaftVoterRequest(None, 2, "Zx1W-0mTQzSWb8b0NoQ0Kg"), Errors.UNSUPPORTED_VERSION)):
                    key = wire.api_key(req)
                    answer = await client.request(key, 0, wire.request_to_body(req, 0), 5)
                    assert wire.response_from_kafka(key, 0, answer).error == error, req
                fetch = FetchRequest(leader.core.cluster_id, 2, leader.core.epoch, 0, 0)
                answer = await client.request(1, 17, wire.request_to_body(fetch, 17), 5)
                assert answer["NodeEndpoints"] == [{"NodeId": leader.config.node_id, "Host": "127.0.0.1",
                                                    "Port": leader.config.listener.endpoint.port, "Rack": None}]
            finally:
                await client.close()
        finally:
            for n in nodes:
                await n.stop()

    asyncio.run(main())


@pytest.mark.parametrize(("acl", "refused"), [
    ("ClusterAction", {80, 81}),  # Kafka's ControllerApis: ALTER for Add/RemoveRaftVoter, CLUSTER_ACTION for Update
    ("Alter", {82}),
    ("Alter,ClusterAction", set()),
])
def test_the_voter_change_apis_pass_the_authorization_gate_as_kafka(acl: str, refused: set[int]) -> None:
    """The node's gate (Node._authorize, reference/security.REQUIRED_OPERATION) on a real socket: a principal
    without the operation gets CLUSTER_AUTHORIZATION_FAILED in the api's own response layout."""
    from types import SimpleNamespace

    from kraft_tck.reference.messages import (
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        RemoveRaftVoterRequest,
        RemoveRaftVoterResponse,
        UpdateRaftVoterRequest,
        UpdateRaftVoterResponse,
    )
    from kraft_tck.reference.node import Node
    from kraft_tck.reference.security import ANONYMOUS, AuthorizerSettings

    ops = frozenset({"ALTER"} if acl == "Alter" else {"CLUSTER_ACTION"} if acl == "ClusterAction"
                    else {"ALTER", "CLUSTER_ACTION"})
    shell = SimpleNamespace(config=SimpleNamespace(authorizer=AuthorizerSettings(acls=((ANONYMOUS, ops),))),
                            _denials={})
    answers: dict[int, Any] = {80: AddRaftVoterResponse(), 81: RemoveRaftVoterResponse(),
                               82: UpdateRaftVoterResponse()}

    def handler(req: ServerRequest) -> Answer:
        return wire.response_to_body(answers[req.api_key], req.api_version)

    requests = [AddRaftVoterRequest("c", 4, "Zx1W-0mTQzSWb8b0NoQ0Kg"), RemoveRaftVoterRequest("c", 4, None),
                UpdateRaftVoterRequest("c", 1, 4, "Zx1W-0mTQzSWb8b0NoQ0Kg")]

    async def main() -> set[int]:
        server = KafkaServer(handler, {k: (0, 0) for k in answers},
                             gate=lambda req: Node._authorize(shell, req))
        await server.start()
        client = KafkaClient("127.0.0.1", server.port)
        denied = set()
        try:
            await client.connect(timeout_s=2)
            for req in requests:
                key = wire.api_key(req)
                answer = await client.request(key, 0, wire.request_to_body(req, 0), 2)
                if wire.response_from_kafka(key, 0, answer).error == Errors.CLUSTER_AUTHORIZATION_FAILED:
                    denied.add(key)
        finally:
            await client.close()
            await server.close()
        return denied

    assert asyncio.run(main()) == refused


def test_a_callback_that_raises_is_logged_and_the_connection_serves_on(caplog: pytest.LogCaptureFixture) -> None:
    """A response callback's exception is the caller's bug, not the connection's: it is logged, and the responses
    after it (in the same read or later ones) still reach their callbacks on the same connection."""

    async def body(server: KafkaServer) -> None:
        client, req = await _client(server)
        got: list[tuple[int, Any, Any]] = []
        done = asyncio.get_running_loop().create_future()

        def failing(resp: Any, exc: BaseException | None) -> None:
            got.append((0, resp, exc))
            raise ValueError("a bug in the caller")

        def later(n: int) -> Callable[[Any, BaseException | None], None]:
            def callback(resp: Any, exc: BaseException | None) -> None:
                got.append((n, resp, exc))
                if n == 2:
                    done.set_result(None)
            return callback

        client.send_with_callback(DQ, 0, req, 2.0, failing)
        client.send_with_callback(DQ, 0, req, 2.0, later(1))
        await asyncio.wait_for(asyncio.shield(asyncio.sleep(0.2)), 1)
        client.send_with_callback(DQ, 0, req, 2.0, later(2))
        await asyncio.wait_for(done, 2)
        assert [n for n, _, _ in got] == [0, 1, 2]
        assert all(resp is not None and resp["ErrorCode"] == Errors.NONE and exc is None for _, resp, exc in got)
        assert client.connected
        assert any("response callback failed" in r.getMessage() and r.exc_info for r in caplog.records)
        await client.close()

    asyncio.run(_with_server(lambda _req: _answer(Errors.NONE), body))


@pytest.mark.parametrize("queued_max_bytes", [-1, 1 << 20], ids=["unbounded", "bounded"])
@pytest.mark.parametrize("one_in_flight", [False, True], ids=["pipelined", "one-in-flight"])
def test_requests_sent_one_write_each_are_taken_as_pipelined_ones(one_in_flight: bool, queued_max_bytes: int) -> None:
    """Requests written one at a time (each read whole, as a follower's Fetches come: the server's one-frame lane),
    the first parked: with one_in_flight the second waits, read but not handled, until the first is written; each
    request answered at once frees the connection for the next; a request followed by the client's EOF is still
    answered, then the connection closes. Without one_in_flight the second is handled while the first is parked,
    and its answer waits behind it. Pool memory is given back."""
    parked: dict[int, PendingAnswer] = {}
    handled: list[int] = []

    def handler(req: ServerRequest) -> Answer | PendingAnswer:
        handled.append(req.correlation_id)
        if req.correlation_id == 0:
            parked[0] = PendingAnswer()
            return parked[0]
        return _answer(Errors.NONE)

    async def until(cond: Callable[[], bool]) -> None:
        for _ in range(200):
            if cond():
                return
            await asyncio.sleep(0.005)

    async def body(server: KafkaServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_request_frame(0))
        await until(lambda: 0 in parked)
        writer.write(_request_frame(1))
        await asyncio.sleep(0.1)
        assert handled == ([0] if one_in_flight else [0, 1])
        with pytest.raises(TimeoutError):  # 1's answer (if any) waits behind the parked 0
            await asyncio.wait_for(read_frame(reader), 0.1)
        parked[0].answer(_answer(Errors.NOT_LEADER_OR_FOLLOWER))
        assert await _read_answer(reader) == (0, Errors.NOT_LEADER_OR_FOLLOWER)
        assert await _read_answer(reader) == (1, Errors.NONE)
        for corr in (2, 3):
            writer.write(_request_frame(corr))
            assert await _read_answer(reader) == (corr, Errors.NONE)
        writer.write(_request_frame(4))
        writer.write_eof()
        assert await _read_answer(reader) == (4, Errors.NONE)
        assert await read_frame(reader) is None  # everything answered: closed
        assert handled == [0, 1, 2, 3, 4]
        writer.close()
        await asyncio.sleep(0.05)
        assert server.queued_bytes == 0

    asyncio.run(_with_server(handler, body, one_in_flight=one_in_flight, queued_max_bytes=queued_max_bytes))


@pytest.mark.parametrize("answer", [b"", b"\x00\x00\x07"])
def test_a_response_shorter_than_its_correlation_id_fails_the_requests(answer: bytes) -> None:
    """A response frame too short to hold a correlation id cannot be matched to a request: every request in flight
    fails with an error naming it, and the connection ends (``_on_frame``'s DecodeError)."""

    async def main() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_frame(reader)
            await read_frame(reader)
            writer.write(len(answer).to_bytes(4, "big") + answer)
            await writer.drain()
            await reader.read()  # until the client closes
            writer.close()

        raw = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = raw.sockets[0].getsockname()[1]
        client = KafkaClient("127.0.0.1", port)
        await client.connect(negotiate=False)
        got: list[BaseException | None] = []
        try:
            req = wire.request_to_body(DescribeQuorumRequest(), 0)
            first = client.send(DQ, 0, req, 5.0)
            client.send_with_callback(DQ, 0, req, 5.0, lambda body, error: got.append(error))
            with pytest.raises(RequestError, match=r"undecodable response: .*shorter than its correlation id"):
                await asyncio.wait_for(first, 5)
            assert len(got) == 1 and isinstance(got[0], RequestError) and "shorter than its correlation" in str(got[0])
            assert not client._inflight and not client.connected
        finally:
            await client.close()
            raw.close()
            await raw.wait_closed()

    asyncio.run(main())
