"""The wire transport (reference/net.py) on real loopback sockets: responses leave in request order
whether the handler answers at once, through a future or through a coroutine; a handler that gives
no answer closes the connection; a client's requests fail (never hang) on timeouts and lost
connections. Kafka protocol "Requests and responses": a client matches each response to its oldest
in-flight request on the connection, so order is part of the contract."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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
) -> None:
    server = KafkaServer(handler, RANGES, host="127.0.0.1", port=0)
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
