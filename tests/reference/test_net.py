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
from kraft_tck.reference.net import Answer, KafkaClient, KafkaServer, Request, RequestError
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
    handler: Callable[[Request], Answer | Awaitable[Answer]],
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


def test_a_later_answer_waits_for_an_earlier_pending_one() -> None:
    """Request 0 is answered through a future resolved later, request 1 at once: 1 must not overtake 0."""
    pending: asyncio.Future[Answer] | None = None

    def handler(req: Request) -> Answer | Awaitable[Answer]:
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
    async def handler(req: Request) -> Answer:
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

    def handler(req: Request) -> Answer | Awaitable[Answer]:
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

    def handler(req: Request) -> Answer | Awaitable[Answer]:
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
