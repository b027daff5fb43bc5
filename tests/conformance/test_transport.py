"""The harness's own transport (conformance/transport.py) over real loopback sockets: against itself, against
raw scripted peers (for what a correct peer never does), and against the reference node's network layer
both ways (tests may import both sides; the harness itself may not)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.transport import (
    API_VERSIONS,
    KafkaClient,
    KafkaServer,
    RequestError,
    ServerRequest,
    api_versions_response,
)
from kraft_tck.reference import net as ref
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.framing import read_frame

RANGES = {
    B.VOTE: codec.supported_versions(B.VOTE),
    B.FETCH: (B.MIN_FETCH_VERSION, codec.supported_versions(B.FETCH)[1]),
}


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def vote(epoch: int) -> dict[str, Any]:
    return B.vote_request("cid", epoch, 2, 0, 0, 1)


def epoch_of_vote(req: ServerRequest) -> int:
    return int(B.partition(req.body)["CandidateEpoch"])


def vote_answer(epoch: int, granted: bool = True) -> dict[str, Any]:
    return B.election_response(B.VOTE, -1, epoch, granted=granted)


def answered_epoch(resp: dict[str, Any]) -> int:
    return int(B.partition(resp)["LeaderEpoch"])


async def serving(handler: Callable[[ServerRequest], Any], **kw: Any) -> KafkaServer:
    server = KafkaServer(handler, RANGES, **kw)
    await server.start()
    return server


def test_negotiates_versions_and_round_trips_a_request() -> None:
    seen: list[tuple[str, int, int, int]] = []
    bodies: list[dict[str, Any]] = []

    async def scenario() -> None:
        def server_saw(d: str, k: int, v: int, c: int, b: dict[str, Any], _p: str) -> None:
            seen.append(("server " + d, k, v, c))
            bodies.append(b)

        server = await serving(lambda req: vote_answer(epoch_of_vote(req)), observer=server_saw)
        client = KafkaClient("127.0.0.1", server.port, observer=lambda d, k, v, c, _b, _p: seen.append((d, k, v, c)))
        try:
            await client.connect(timeout_s=5)
            assert client.connected
            assert client.versions[B.VOTE] == RANGES[B.VOTE]
            assert client.versions[API_VERSIONS] == codec.supported_versions(API_VERSIONS)
            assert client.versions[B.FETCH][0] == B.MIN_FETCH_VERSION
            assert B.DESCRIBE_QUORUM not in client.versions
            with pytest.raises(RequestError, match="does not advertise"):
                client.best_version(B.DESCRIBE_QUORUM)
            v = client.best_version(B.VOTE)
            assert v == RANGES[B.VOTE][1]
            resp = await client.request(B.VOTE, v, vote(7), 5)
            assert answered_epoch(resp) == 7 and B.partition(resp)["VoteGranted"] is True
        finally:
            await client.close()
            await server.close()

    run(scenario())
    # ApiVersions (corr 0), then Vote (corr 1), each seen sent and received by both ends
    top = RANGES[B.VOTE][1]  # the highest Vote version both ends speak (2 since KIP-996)
    assert [s for s in seen if s[0] == "send"] == [("send", API_VERSIONS, 4, 0), ("send", B.VOTE, top, 1)]
    assert ("server recv", B.VOTE, top, 1) in seen and ("server send", B.VOTE, top, 1) in seen
    assert ("recv", B.VOTE, top, 1) in seen
    # ApiVersions v3+ names the software validly (Kafka answers INVALID_REQUEST to empty names)
    assert bodies[0] == {"ClientSoftwareName": "kraft-tck", "ClientSoftwareVersion": "0.1.0"}


def test_answers_leave_in_request_order_though_computed_out_of_order() -> None:
    order: list[int] = []

    async def handler(req: ServerRequest) -> dict[str, Any]:
        epoch = epoch_of_vote(req)
        await asyncio.sleep(0.3 if epoch == 1 else 0)  # the first request is answered last
        order.append(epoch)
        return vote_answer(epoch)

    async def scenario() -> list[int]:
        server = await serving(handler)
        client = KafkaClient("127.0.0.1", server.port)
        got: list[int] = []
        try:
            await client.connect()

            async def one(epoch: int) -> None:
                resp = await client.request(B.VOTE, 1, vote(epoch), 5)
                got.append(answered_epoch(resp))

            await asyncio.gather(one(1), one(2), one(3))
        finally:
            await client.close()
            await server.close()
        return got

    got = run(scenario())
    assert order == [2, 3, 1]  # computed out of order...
    assert got == [1, 2, 3]  # ...each response matched to its own request, written in request order


def test_timeout_fails_the_request_and_closes_the_connection() -> None:
    async def handler(req: ServerRequest) -> dict[str, Any]:
        if epoch_of_vote(req) == 1:
            await asyncio.sleep(30)
        return vote_answer(epoch_of_vote(req))

    async def scenario() -> None:
        server = await serving(handler)
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect()
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(RequestError, match=r"timed out after 0\.200s"):
                await client.request(B.VOTE, 1, vote(1), 0.2)
            assert 0.15 < loop.time() - start < 2
            assert not client.connected  # as Kafka's NetworkClient disconnects on a request timeout
            with pytest.raises(RequestError, match="not connected"):
                await client.request(B.VOTE, 1, vote(2), 1)
            await client.close()
            await client.connect()  # a fresh connection serves again
            assert answered_epoch(await client.request(B.VOTE, 1, vote(2), 5)) == 2
        finally:
            await client.close()
            await server.close()

    run(scenario())


def test_handler_answering_none_closes_the_connection_and_fails_what_is_in_flight() -> None:
    async def handler(req: ServerRequest) -> dict[str, Any] | None:
        if epoch_of_vote(req) == 1:
            await asyncio.sleep(0.1)
            return None
        await asyncio.sleep(5)
        return vote_answer(2)

    async def scenario() -> None:
        server = await serving(handler)
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect()
            results = await asyncio.gather(
                client.request(B.VOTE, 1, vote(1), 10), client.request(B.VOTE, 1, vote(2), 10), return_exceptions=True
            )
            assert all(isinstance(r, RequestError) for r in results), results
            assert "closed" in str(results[0])
        finally:
            await client.close()
            await server.close()

    run(scenario())


def test_connect_refused_is_a_request_error() -> None:
    async def scenario() -> None:
        server = await serving(lambda req: None)
        port = server.port
        await server.close()
        client = KafkaClient("127.0.0.1", port)
        with pytest.raises(RequestError, match="cannot connect"):
            await client.connect(timeout_s=2)

    run(scenario())


async def raw_exchange(port: int, data: bytes, wait_s: float = 2) -> bytes | None:
    """Write ``data``; the first response frame's payload, or None when the server closed without one."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(read_frame(reader), wait_s)
    finally:
        writer.close()


def request_header(api_key: int, version: int, corr: int) -> bytes:
    client = b"raw"
    return struct.pack(">hhih", api_key, version, corr, len(client)) + client


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    "name,data",
    [
        ("unknown api key", framed(request_header(9999, 0, 5) + b"\x00")),
        ("unsupported Vote version", framed(request_header(B.VOTE, 99, 5) + b"\x00\x00")),
        ("garbage Vote body", framed(request_header(B.VOTE, 0, 5) + bytes(range(7, 250, 3)))),
        ("api not served here", codec.encode_request(B.DESCRIBE_QUORUM, 1, 5, "raw", B.describe_quorum_request())),
        ("oversized frame", struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16),
    ],
)
def test_server_closes_a_connection_it_cannot_answer_and_serves_on(name: str, data: bytes) -> None:
    async def scenario() -> None:
        server = await serving(lambda req: vote_answer(epoch_of_vote(req)), max_frame_bytes=1024 * 1024)
        try:
            assert await raw_exchange(server.port, data) is None, name
            client = KafkaClient("127.0.0.1", server.port)  # still serving other connections
            await client.connect()
            assert answered_epoch(await client.request(B.VOTE, 1, vote(3), 5)) == 3
            await client.close()
        finally:
            await server.close()

    run(scenario())


def test_apiversions_at_an_unknown_version_is_answered_at_v0_with_unsupported_version() -> None:
    async def scenario() -> None:
        server = await serving(lambda req: None)
        try:
            payload = await raw_exchange(server.port, framed(request_header(API_VERSIONS, 99, 42)))
            assert payload is not None
            corr, body = codec.decode_response(API_VERSIONS, 0, payload)
            assert corr == 42 and body["ErrorCode"] == Errors.UNSUPPORTED_VERSION
            assert {k["ApiKey"] for k in body["ApiKeys"]} == {API_VERSIONS, B.VOTE, B.FETCH}
        finally:
            await server.close()

    run(scenario())


async def scripted_server(answer: Callable[[int, int, int], bytes | None]) -> tuple[asyncio.Server, int]:
    """A raw peer: for each request frame, ``answer(api_key, version, corr)`` gives the bytes to write."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (payload := await read_frame(reader)) is not None:
                api_key, version, corr = struct.unpack_from(">hhi", payload, 0)
                out = answer(api_key, version, corr)
                if out is not None:
                    writer.write(out)
                    await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


def test_client_asks_again_at_the_servers_apiversions_version() -> None:
    """KIP-511: an older server answers a newer ApiVersions at v0 with UNSUPPORTED_VERSION and its range."""
    asked: list[int] = []

    def answer(api_key: int, version: int, corr: int) -> bytes:
        asked.append(version)
        if version > 2:
            body = api_versions_response({API_VERSIONS: (0, 2)}, Errors.UNSUPPORTED_VERSION)
            return codec.encode_response(API_VERSIONS, 0, corr, body)
        return codec.encode_response(API_VERSIONS, version, corr, api_versions_response({API_VERSIONS: (0, 2),
                                                                                          B.VOTE: (0, 0)}))

    async def scenario() -> None:
        server, port = await scripted_server(answer)
        client = KafkaClient("127.0.0.1", port)
        try:
            await client.connect()
            assert client.versions == {API_VERSIONS: (0, 2), B.VOTE: (0, 0)}
            assert client.best_version(B.VOTE) == 0
        finally:
            await client.close()
            server.close()

    run(scenario())
    assert asked == [codec.supported_versions(API_VERSIONS)[1], 2]


def test_a_response_with_a_correlation_id_not_in_flight_ends_the_connection() -> None:
    def answer(api_key: int, version: int, corr: int) -> bytes:
        if api_key == API_VERSIONS:
            return codec.encode_response(API_VERSIONS, version, corr, api_versions_response(RANGES))
        return codec.encode_response(api_key, version, corr + 1000, vote_answer(1))

    async def scenario() -> None:
        server, port = await scripted_server(answer)
        client = KafkaClient("127.0.0.1", port)
        try:
            await client.connect()
            with pytest.raises(RequestError, match="correlation id"):
                await client.request(B.VOTE, 1, vote(1), 5)
            assert not client.connected
        finally:
            await client.close()
            server.close()

    run(scenario())


def test_an_undecodable_response_fails_the_request_at_once() -> None:
    def answer(api_key: int, version: int, corr: int) -> bytes:
        if api_key == API_VERSIONS:
            return codec.encode_response(API_VERSIONS, version, corr, api_versions_response(RANGES))
        return framed(struct.pack(">i", corr) + b"\xff\xff\xff")

    async def scenario() -> None:
        server, port = await scripted_server(answer)
        client = KafkaClient("127.0.0.1", port)
        try:
            await client.connect()
            start = asyncio.get_running_loop().time()
            with pytest.raises(RequestError, match=r"undecodable|unreadable"):
                await client.request(B.VOTE, 1, vote(1), 10)
            assert asyncio.get_running_loop().time() - start < 5  # not by the timeout
        finally:
            await client.close()
            server.close()

    run(scenario())


def test_interoperates_with_the_reference_nodes_network_layer_both_ways() -> None:
    """The two transports are written apart; each must read what the other writes."""

    async def scenario() -> None:
        ref_server = ref.KafkaServer(lambda req: vote_answer(epoch_of_vote(req)), RANGES)
        await ref_server.start()
        ours = await serving(lambda req: vote_answer(epoch_of_vote(req) + 100))
        ours_client = KafkaClient("127.0.0.1", ref_server.port)
        ref_client = ref.KafkaClient("127.0.0.1", ours.port)
        try:
            await ours_client.connect()
            assert ours_client.versions[B.VOTE] == RANGES[B.VOTE]
            got = await asyncio.gather(*(ours_client.request(B.VOTE, 1, vote(e), 5) for e in range(1, 6)))
            assert [answered_epoch(r) for r in got] == [1, 2, 3, 4, 5]
            await ref_client.connect()
            assert ref_client.versions[B.VOTE] == RANGES[B.VOTE]
            resp = await ref_client.request(B.VOTE, ref_client.best_version(B.VOTE), vote(4), 5)
            assert answered_epoch(resp) == 104
        finally:
            await ours_client.close()
            await ref_client.close()
            await ref_server.close()
            await ours.close()

    run(scenario())


def test_closing_the_server_ends_parked_requests_at_once() -> None:
    parked = asyncio.Event()

    async def handler(req: ServerRequest) -> dict[str, Any]:
        parked.set()
        await asyncio.sleep(30)  # a long-poll Fetch, say
        return vote_answer(1)

    async def scenario() -> None:
        server = await serving(handler)
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect()
            pending = asyncio.ensure_future(client.request(B.VOTE, 1, vote(1), 20))
            await parked.wait()
            loop = asyncio.get_running_loop()
            start = loop.time()
            await server.close()
            with pytest.raises(RequestError, match=r"closed|lost"):
                await pending
            assert loop.time() - start < 5
        finally:
            await client.close()

    run(scenario())


def test_many_pipelined_requests_each_get_their_own_answer() -> None:
    async def handler(req: ServerRequest) -> dict[str, Any]:
        epoch = epoch_of_vote(req)
        await asyncio.sleep((epoch * 7919 % 13) / 1000)  # answers computed in a scrambled order
        return vote_answer(epoch)

    async def scenario() -> list[int]:
        server = await serving(handler)
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect()
            got = await asyncio.gather(*(client.request(B.VOTE, 1, vote(e), 10) for e in range(1, 301)))
            return [answered_epoch(r) for r in got]
        finally:
            await client.close()
            await server.close()

    assert run(scenario()) == list(range(1, 301))
