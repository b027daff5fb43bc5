"""Kafka wire transport on asyncio: a request server and a client connection.

No protocol logic lives here — only framing, correlation, ordering, timeouts and ApiVersions. The node's
shell and the conformance harness's virtual voters both speak through this module.

Kafka rules this module keeps:
* responses on one connection leave in request order (Kafka's clients match the oldest in-flight
  request), even when a later request is answered first (a parked Fetch must not block a Vote reply
  from being *computed*, only from being *sent* before it);
* an ApiVersions request at a version the server does not know is answered at v0 with
  UNSUPPORTED_VERSION and the supported ranges (KIP-511);
* any other request the server cannot decode (unknown api key, unsupported version, malformed body,
  oversized frame) closes that connection — Kafka's network layer does the same, since no response
  layout exists that the client could parse. The server keeps serving other connections.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError, Errors, FrameTooLargeError, UnsupportedVersionError
from kraft_tck.spec.framing import read_frame

log = logging.getLogger("kraft_tck.reference.net")

API_VERSIONS = 18
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True)
class Request:
    """One decoded request as a handler sees it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]
    peer: str


#: What a handler answers: the response body, or None to close the connection without answering.
Answer = dict[str, Any] | None
#: A handler answers at once (a body or None), or later (an awaitable: a coroutine, or a future the
#: handler resolves itself). Answering at once costs no task and no event-loop round.
Handler = Callable[[Request], Answer | Awaitable[Answer]]
#: Observes every frame: (direction "recv"/"send", api_key, version, correlation_id, body, peer).
FrameObserver = Callable[[str, int, int, int, dict[str, Any], str], None]


def api_versions_body(ranges: Mapping[int, tuple[int, int]], error: int = Errors.NONE) -> dict[str, Any]:
    """ApiVersions response listing what *this server* serves (the codec knows more apis than a node serves)."""
    return {
        "ErrorCode": int(error),
        "ApiKeys": [{"ApiKey": k, "MinVersion": lo, "MaxVersion": hi} for k, (lo, hi) in sorted(ranges.items())],
        "ThrottleTimeMs": 0,
    }


class KafkaServer:
    """Accepts connections and answers requests through one handler coroutine."""

    def __init__(
        self,
        handler: Handler,
        api_ranges: Mapping[int, tuple[int, int]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME,
        observer: FrameObserver | None = None,
    ) -> None:
        self._handler = handler
        self.api_ranges = {API_VERSIONS: codec.supported_versions(API_VERSIONS), **api_ranges}
        self._host = host
        self._port = port
        self._max_frame = max_frame_bytes
        self._observer = observer
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._host, self._port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        responses = _InOrderResponses(writer, peer, self._observer)
        closing = False  # the server is closing: answers still pending are dropped
        try:
            while not responses.closed:
                try:
                    payload = await read_frame(reader, self._max_frame)
                except FrameTooLargeError as exc:
                    log.warning("closing %s: %s", peer, exc)
                    break
                if payload is None:
                    break
                self._dispatch(payload, peer, responses)
                # Backpressure: stop reading requests while the peer is not reading our responses.
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, DecodeError) as exc:
            log.debug("connection %s ended: %s", peer, exc)
        except asyncio.CancelledError:
            # close() cancels open connections; finishing normally keeps asyncio from logging it as an error.
            closing = True
        finally:
            # Requests read before the peer stopped sending still get their answers, in order.
            if not closing:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await responses.all_written()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._conns.discard(task)

    def _dispatch(self, payload: bytes, peer: str, responses: _InOrderResponses) -> None:
        try:
            header, body = codec.decode_request(payload)
        except UnsupportedVersionError as exc:
            if exc.api_key == API_VERSIONS and exc.correlation_id is not None:
                # KIP-511: answer at v0 with the supported ranges so the client can pick a version.
                body = api_versions_body(self.api_ranges, Errors.UNSUPPORTED_VERSION)
                responses.add_frame(codec.encode_response(API_VERSIONS, 0, exc.correlation_id, body))
            else:
                log.warning("closing %s: %s", peer, exc)
                responses.add_frame(None)
            return
        except DecodeError as exc:
            log.warning("closing %s: malformed request: %s", peer, exc)
            responses.add_frame(None)
            return
        req = Request(
            api_key=header["RequestApiKey"],
            api_version=header["RequestApiVersion"],
            correlation_id=header["CorrelationId"],
            client_id=header.get("ClientId"),
            body=body,
            peer=peer,
        )
        if self._observer:
            self._observer("recv", req.api_key, req.api_version, req.correlation_id, body, peer)
        answer: Answer | Awaitable[Answer]
        if req.api_key == API_VERSIONS:
            answer = api_versions_body(self.api_ranges)
        elif req.api_key not in self.api_ranges:
            log.warning("closing %s: api key %d is not served here", req.peer, req.api_key)
            answer = None
        else:
            try:
                answer = self._handler(req)
            except Exception:
                log.exception("handler failed for a request from %s; closing the connection", peer)
                answer = None
        responses.add(req, answer)


class _InOrderResponses:
    """One connection's responses, written in request order, each as soon as it and all before it are
    ready: straight from the call that completes it, with no writer task or queue in between."""

    def __init__(self, writer: asyncio.StreamWriter, peer: str, observer: FrameObserver | None) -> None:
        self._writer = writer
        self._peer = peer
        self._observer = observer
        # Oldest first: (request, its answer or the future of it) or (None, an encoded frame / None to close).
        self._slots: collections.deque[tuple[Request | None, Any]] = collections.deque()
        self._idle: asyncio.Future[None] | None = None  # resolved when every slot is written
        self.closed = False

    def add(self, req: Request, answer: Answer | Awaitable[Answer]) -> None:
        if answer is None or isinstance(answer, dict):
            self._slots.append((req, answer))
            self._observe(req, answer)
            self._flush()
            return
        fut = asyncio.ensure_future(answer)  # a coroutine becomes a task; a future stays itself
        self._slots.append((req, fut))
        if fut.done():
            self._answered(req, fut)
        else:
            fut.add_done_callback(lambda f: self._answered(req, f))

    def add_frame(self, frame: bytes | None) -> None:
        self._slots.append((None, frame))
        self._flush()

    async def all_written(self) -> None:
        if self._slots and not self.closed:
            self._idle = asyncio.get_running_loop().create_future()
            await self._idle

    def _answered(self, req: Request, fut: asyncio.Future[Answer]) -> None:
        if not fut.cancelled():
            exc = fut.exception()
            if exc is not None:
                log.error("handler failed for a request from %s; closing the connection", self._peer, exc_info=exc)
            else:
                self._observe(req, fut.result())
        self._flush()

    def _observe(self, req: Request, answer: Answer) -> None:
        if self._observer and answer is not None:
            self._observer("send", req.api_key, req.api_version, req.correlation_id, answer, req.peer)

    def _flush(self) -> None:
        slots = self._slots
        while slots and not self.closed:
            req, answer = slots[0]
            if isinstance(answer, asyncio.Future):
                if not answer.done():
                    break  # later answers wait for this one
                answer = None if answer.cancelled() or answer.exception() else answer.result()
            slots.popleft()
            if answer is None:
                self.closed = True
                slots.clear()
                self._writer.close()
            elif req is None:
                self._writer.write(answer)  # already encoded
            else:
                try:
                    frame = codec.encode_response(req.api_key, req.api_version, req.correlation_id, answer)
                except Exception:
                    log.exception("cannot encode the answer to a request from %s; closing the connection", self._peer)
                    self.closed = True
                    slots.clear()
                    self._writer.close()
                    break
                self._writer.write(frame)
        if (not slots or self.closed) and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)


class RequestError(Exception):
    """A request that got no response: connection refused or lost, or timed out."""


@dataclass(slots=True)
class _InFlight:
    api_key: int
    version: int
    future: asyncio.Future[dict[str, Any]]
    timer: asyncio.TimerHandle | None = None


@dataclass
class KafkaClient:
    """One client connection: correlation ids, pipelined requests, timeouts, ApiVersions negotiation."""

    host: str
    port: int
    client_id: str = "kraft-tck"
    max_frame_bytes: int = DEFAULT_MAX_FRAME
    observer: FrameObserver | None = None
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    _reader: asyncio.StreamReader | None = None
    _writer: asyncio.StreamWriter | None = None
    _next_correlation: int = 0
    _inflight: dict[int, _InFlight] = field(default_factory=dict)
    _read_task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self, timeout_s: float = 5.0, negotiate: bool = True) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise RequestError(f"cannot connect to {self.peer}: {exc}") from exc
        self._read_task = asyncio.create_task(self._read_loop())
        if negotiate:
            body = await self.request(API_VERSIONS, codec.supported_versions(API_VERSIONS)[1], {}, timeout_s)
            if body["ErrorCode"] != Errors.NONE:
                raise RequestError(f"{self.peer}: ApiVersions failed with error {body['ErrorCode']}")
            self.versions = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in body["ApiKeys"]}

    def best_version(self, api_key: int) -> int:
        """The highest version both sides support (KIP-511); RequestError when there is none."""
        ours = codec.supported_versions(api_key)
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise RequestError(f"{self.peer} does not advertise api key {api_key}")
        hi = min(ours[1], theirs[1])
        if hi < max(ours[0], theirs[0]):
            raise RequestError(f"no common version of api key {api_key}: ours {ours}, {self.peer} {theirs}")
        return hi

    def send(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float
    ) -> asyncio.Future[dict[str, Any]]:
        """Write a request now and return the future of its response body, which fails with
        ``RequestError`` on a timeout or a lost connection. Nothing is awaited: a caller that sends one
        request at a time (the node: one per destination) needs no backpressure, and no task."""
        if not self.connected:
            raise RequestError(f"not connected to {self.peer}")
        corr = self._next_correlation
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        frame = codec.encode_request(api_key, version, corr, self.client_id, body)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        entry = self._inflight[corr] = _InFlight(api_key, version, fut)
        # A timer that fails the future, rather than wait_for: no extra task per request.
        entry.timer = loop.call_later(timeout_s, self._expire, corr, timeout_s)
        if self.observer:
            self.observer("send", api_key, version, corr, body, self.peer)
        assert self._writer is not None
        self._writer.write(frame)
        return fut

    async def request(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        fut = self.send(api_key, version, body, timeout_s)
        assert self._writer is not None
        try:
            await self._writer.drain()
        except ConnectionError as exc:
            raise RequestError(f"{self.peer}: connection lost: {exc}") from exc
        return await fut

    def _expire(self, corr: int, timeout_s: float) -> None:
        entry = self._inflight.pop(corr, None)
        if entry is not None and not entry.future.done():
            entry.future.set_exception(
                RequestError(f"{self.peer}: request api_key={entry.api_key} timed out after {timeout_s:.3f}s")
            )

    async def send_raw(self, data: bytes) -> None:
        """Write arbitrary bytes (robustness tests send malformed frames through this)."""
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error: Exception = RequestError(f"{self.peer}: connection closed")
        try:
            while True:
                payload = await read_frame(self._reader, self.max_frame_bytes)
                if payload is None:
                    break
                if len(payload) < 4:
                    raise DecodeError("CorrelationId", 0, "response shorter than its correlation id")
                (corr,) = _CORRELATION.unpack_from(payload, 0)
                entry = self._inflight.pop(corr, None)
                if entry is None:
                    log.warning("%s: response with unknown correlation id %d dropped", self.peer, corr)
                    continue
                if entry.timer is not None:
                    entry.timer.cancel()
                try:
                    _, body = codec.decode_response(entry.api_key, entry.version, payload)
                except DecodeError:
                    self._inflight[corr] = entry  # failed with the others below
                    raise
                if self.observer:
                    self.observer("recv", entry.api_key, entry.version, corr, body, self.peer)
                if not entry.future.done():
                    entry.future.set_result(body)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            error = RequestError(f"{self.peer}: connection lost: {exc}")
        except DecodeError as exc:
            error = RequestError(f"{self.peer}: undecodable response: {exc}")
            log.warning("%s", error)
        finally:
            inflight, self._inflight = self._inflight, {}
            for entry in inflight.values():
                if entry.timer is not None:
                    entry.timer.cancel()
                if not entry.future.done():
                    entry.future.set_exception(error)
            if self._writer is not None:
                self._writer.close()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task
        self._writer = None
        self._reader = None
