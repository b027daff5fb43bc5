"""Kafka wire transport on asyncio: a request server and a client connection.

No protocol logic lives here — only framing, correlation, ordering, timeouts and ApiVersions. The node's
shell and the conformance harness's virtual voters both speak through this module.

Both ends are ``asyncio.Protocol``s, not streams: frames are cut and handled in the event-loop round
that reads them, with no reader task to wake. A handler's later answer given through a :class:`PendingAnswer`
and a response delivered through :meth:`KafkaClient.send_with_callback` also skip the round a future's
callbacks would cost (a reference-node commit takes 3 rounds instead of 7).

Kafka rules this module keeps:
* responses on one connection leave in request order (Kafka's clients match the oldest in-flight
  request), even when a later request is answered first (a parked Fetch must not block a Vote reply
  from being *computed*, only from being *sent* before it);
* an ApiVersions request at a version the server does not know is answered at v0 with
  UNSUPPORTED_VERSION and the supported ranges (KIP-511);
* any other request the server cannot decode (unknown api key, unsupported version, malformed body,
  oversized frame) closes that connection — Kafka's network layer does the same, since no response
  layout exists that the client could parse. The server keeps serving other connections.

Limits a server may be given, with Kafka's broker settings as models (``SocketServerConfigs``):
* ``one_in_flight``: a connection's next request is read only once the answer to the one before is
  written and the transport is not holding back writes (below its high-water mark; Kafka's ``Processor``
  mutes a channel while its request is handled and until its response is sent). A client that pipelines
  requests and never reads then holds about one answer's memory on the server, not one per request.
* ``max_frame_bytes`` (``socket.request.max.bytes``): a larger frame closes the connection, with a log line.
* ``idle_timeout_ms`` (``connections.max.idle.ms``): a connection with no bytes read or written for that
  long, and no answer being computed, is closed.
* ``queued_max_bytes`` (``queued.max.request.bytes``, -1 unbounded): the request bytes held across all
  connections, counted per frame from the moment its length is read until its answer is written. Once
  the total reaches the bound, connections starting a new frame are muted until memory is released;
  as in Kafka's non-strict memory pool, a frame is admitted while *any* memory is left, so the total
  exceeds the bound by at most one frame.
* ``ssl``: TLS on the listener (an ``ssl.SSLContext``); the client takes one too.
* ``gate``: asked about each request before anything else sees it (the node's authorization); an answer
  it gives is written at once, and neither the frame observer nor the handler sees that request.
* ``answer_early``: api keys whose handler may answer from inside its call, through ``ServerRequest.reply``,
  before the rest of its work (the node answers DescribeQuorum before the disk write its step triggers).
* ``sasl``: SASL on the listener (``security.SaslSettings``): until a connection has authenticated
  (SaslHandshake v1, then SaslAuthenticate, as Kafka's ``SaslServerAuthenticator``), it may send only
  ApiVersions and those two; anything else closes it, as does a refused mechanism or a failed login
  (after its answer). The client takes a ``security.SaslLogin`` and authenticates right after ApiVersions.
  Every request carries its connection's principal (``security``: from the SASL login, else the TLS
  peer's certificate, else ``User:ANONYMOUS``) for the handler to authorize.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import re
import ssl as _ssl
import struct
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from kraft_tck.reference.security import (
    ANONYMOUS,
    SASL_API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SaslError,
    SaslLogin,
    SaslServerSession,
    SaslSettings,
    tls_principal,
)
from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError, Errors, FrameTooLargeError, UnsupportedVersionError
from kraft_tck.spec.framing import FrameSplitter

log = logging.getLogger("kraft_tck.reference.net")

API_VERSIONS = 18
#: ApiVersions v3+ names the client (KIP-511). Kafka answers INVALID_REQUEST to an empty or ill-formed name
#: (``ApiVersionsRequest.isValid``: letters, digits, '.', '-', and a letter or digit at each end).
CLIENT_SOFTWARE: dict[str, Any] = {"ClientSoftwareName": "kraft-tck-reference", "ClientSoftwareVersion": "0.1.0"}
#: KIP-853's feature (Kafka's ``KRaftVersion.FEATURE_NAME``): 0 = static voters, 1 = dynamic quorum.
KRAFT_VERSION_FEATURE = "kraft.version"
#: What a server advertises in ApiVersions v3+ ``SupportedFeatures`` unless told otherwise: every Kafka node
#: lists ``kraft.version`` 0-1 (server-common ``Features.KRAFT_VERSION``, Kafka 3.9+).
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {KRAFT_VERSION_FEATURE: (0, 1)}
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
_CORRELATION = struct.Struct(">i")
_read_correlation = _CORRELATION.unpack_from  # (bound once: each response's id costs no attribute lookup)
#: Kafka's ``connections.max.idle.ms`` default (``SocketServerConfigs.CONNECTIONS_MAX_IDLE_MS_DEFAULT``).
DEFAULT_IDLE_MS = 600_000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_control(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``, ``\\u2028``): a value
    a peer chose (a topic name, a client id) cannot start a new log line or drive a terminal."""

    def one(m: re.Match[str]) -> str:
        c = m.group()
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
            f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _CONTROL.sub(one, text)


class EscapingFilter(logging.Filter):
    """A handler filter that escapes control characters in every record's message (not in tracebacks,
    which are the program's own text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True  # the logging module reports a bad format itself
        escaped = escape_control(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


def install_log_escaping(logger: logging.Logger | None = None) -> None:
    """Add :class:`EscapingFilter` to every handler of ``logger`` (the root logger by default)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, EscapingFilter) for f in handler.filters):
            handler.addFilter(EscapingFilter())


class BodyCodec(Protocol):
    """How frames become bodies and bodies frames: :mod:`kraft_tck.spec.codec` itself (bodies are dicts)
    unless a server or client is given another. The node's (``typed_wire.TypedCodec``) reads and writes
    Fetch as the core's own messages and everything else as dicts."""

    def decode_request(self, payload: Any) -> tuple[dict[str, Any], Any]: ...

    def encode_request(self, api_key: int, version: int, correlation_id: int, client_id: str | None,
                       body: Any) -> bytes: ...

    def decode_response(self, api_key: int, version: int, payload: Any) -> tuple[int, Any]: ...


@dataclass(slots=True)
class ServerRequest:
    """One decoded request as a handler sees it (handlers do not change it). Not frozen: one is built per request,
    and a frozen dataclass's ``__init__`` costs twice the opcodes (``object.__setattr__`` per field)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a dict, or what the server's BodyCodec reads instead
    peer: str
    #: Who sent it (Kafka's principal: ``User:<SASL name>``, ``User:<certificate subject>``, User:ANONYMOUS).
    principal: str = ANONYMOUS
    #: Set for the api keys a server answers early (``KafkaServer(answer_early=...)``): the request's place in its
    #: connection's order is taken before the handler runs, so an answer given through this during the handler's
    #: call is written at once, not when the call returns. The handler returns it (or any other answer).
    reply: PendingAnswer | None = None


#: What a handler answers: the response body, or None to close the connection without answering.
Answer = dict[str, Any] | None
#: A handler answers at once (a body or None), or later: through a :class:`PendingAnswer` it answers itself
#: (written from that call), or an awaitable (a coroutine, or a future; written one loop round after it
#: completes). Answering at once costs no task and no event-loop round.
Handler = Callable[[ServerRequest], "Answer | PendingAnswer | Awaitable[Answer]"]
#: Observes every frame: (direction "recv"/"send", api_key, version, correlation_id, body, peer).
FrameObserver = Callable[[str, int, int, int, dict[str, Any], str], None]


def api_versions_body(ranges: Mapping[int, tuple[int, int]], error: int = Errors.NONE,
                      features: Mapping[str, tuple[int, int]] | None = None, version: int = 0) -> dict[str, Any]:
    """ApiVersions response listing what *this server* serves (the codec knows more apis than a node serves),
    and from v3 the ``features`` it supports (filtered as :func:`supported_features_body` says)."""
    body: dict[str, Any] = {
        "ErrorCode": int(error),
        "ApiKeys": [{"ApiKey": k, "MinVersion": lo, "MaxVersion": hi} for k, (lo, hi) in sorted(ranges.items())],
        "ThrottleTimeMs": 0,
    }
    if features and version >= 3:
        body["SupportedFeatures"] = supported_features_body(features, version)
    return body


def supported_features_body(features: Mapping[str, tuple[int, int]], version: int) -> list[dict[str, Any]]:
    """ApiVersions v3+ ``SupportedFeatures``. Below v4 a feature whose minimum is 0 is left out, as Kafka's
    ``ApiVersionsResponse.maybeFilterSupportedFeatureKeys`` does (``alterFeatureLevel0`` is set for requests
    below v4 by ControllerApis.handleApiVersionsRequest; KAFKA-17492: older clients cannot read a 0 minimum).
    So ``kraft.version`` (0-1) is seen only at v4+, which is why KIP-853's leader probes a new voter at v4."""
    if version < 3:
        return []
    return [{"Name": name, "MinVersion": lo, "MaxVersion": hi} for name, (lo, hi) in sorted(features.items())
            if version >= 4 or lo != 0]


@dataclass(frozen=True, slots=True)
class EncodedAnswer:
    """An answer whose body is already encoded (``codec.encode_response_body``): one encoding serves every
    request answered with the same body, each framed with its own correlation id."""

    body: dict[str, Any] | None  # for a frame observer; None when the bytes were written without a dict
    encoded: bytes


#: The answers a handler gives at once (a body, or one already encoded): a tuple, not ``dict | EncodedAnswer``,
#: which would build a union object on every ``isinstance`` asked.
_READY_ANSWER = (dict, EncodedAnswer)


class PendingAnswer:
    """An answer the handler gives later, by calling :meth:`answer` (or :meth:`cancel`).

    Unlike a future, whose callbacks run in a later event-loop round, the answer is written from the
    call that gives it, so a parked request (a long-poll Fetch) costs no extra round to answer."""

    __slots__ = ("_answered", "_listener", "_value", "cancelled")

    def __init__(self) -> None:
        self._answered = False
        self._value: Answer | EncodedAnswer = None
        self._listener: Callable[[], None] | None = None
        self.cancelled = False

    def done(self) -> bool:
        return self._answered

    def result(self) -> Answer | EncodedAnswer:
        return self._value

    def answer(self, body: Answer | EncodedAnswer) -> None:
        """Answer with ``body`` (None closes the connection without an answer). Later calls are ignored."""
        if self._answered:
            return
        self._answered = True
        self._value = body
        if self._listener is not None:
            self._listener()

    def cancel(self) -> None:
        """No answer will come: the connection closes (Kafka's server drops a request it cannot answer)."""
        if not self._answered:
            self.cancelled = True
            self.answer(None)


class KafkaServer:
    """Accepts connections and answers requests through one handler (limits: see the module's notes)."""

    def __init__(
        self,
        handler: Handler,
        api_ranges: Mapping[int, tuple[int, int]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME,
        observer: FrameObserver | None = None,
        bodies: BodyCodec = codec,
        one_in_flight: bool = False,
        idle_timeout_ms: int | None = None,
        queued_max_bytes: int = -1,
        ssl: _ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
        gate: Callable[[ServerRequest], Answer] | None = None,
        supported_features: Mapping[str, tuple[int, int]] | None = None,
        answer_early: Collection[int] = (),
    ) -> None:
        self._handler = handler
        self._answer_early = frozenset(answer_early)
        #: ApiVersions v3+ SupportedFeatures (default ``SUPPORTED_FEATURES``; ``{}`` advertises none).
        self.supported_features = dict(SUPPORTED_FEATURES if supported_features is None else supported_features)
        # Asked before the frame observer and the handler: an answer (a refusal) goes back at once and the
        # request is not protocol the node received (the node's authorization, as Kafka's ControllerApis
        # refuses before the Raft client sees a request).
        self._gate = gate
        self._bodies = bodies
        self.api_ranges = {API_VERSIONS: codec.supported_versions(API_VERSIONS), **api_ranges}
        self._sasl = sasl
        if sasl is not None:
            self.api_ranges.update(SASL_API_VERSIONS)
        self._host = host
        self._port = port
        self._max_frame = max_frame_bytes
        self._observer = observer
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_ServerConnection] = set()
        self.one_in_flight = one_in_flight
        self._idle_s = idle_timeout_ms / 1000 if idle_timeout_ms is not None and idle_timeout_ms >= 0 else None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._ssl = ssl
        # queued.max.request.bytes: bytes of the request frames held (read or being read, not yet answered).
        self.queued_max_bytes = queued_max_bytes
        self.queued_bytes = 0
        self._memory_waiters: collections.deque[_ServerConnection] = collections.deque()
        self.idle_closed = 0  # connections closed by connections.max.idle.ms (for tests and logs)

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _ServerConnection(self), self._host, self._port, ssl=self._ssl,
            # A TLS handshake never finished is an idle connection too (Kafka's Selector expires channels
            # still handshaking by connections.max.idle.ms): at most that long, and never over 10 s.
            ssl_handshake_timeout=None if self._ssl is None else min(10.0, self._idle_s or 10.0))
        if self._idle_s is not None:
            self._idle_timer = loop.call_later(self._idle_period(), self._close_idle)

    async def close(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._server is not None:
            self._server.close()
        conns = list(self._conns)
        for conn in conns:
            conn.shut()  # answers still pending are dropped
        for conn in conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(conn.closed), 2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    # connections.max.idle.ms -----------------------------------------------------------------------

    def _idle_period(self) -> float:
        assert self._idle_s is not None
        return min(max(self._idle_s / 4, 0.005), 1.0)

    def _close_idle(self) -> None:
        """Close every connection idle for longer than connections.max.idle.ms (Kafka's Selector does the
        same on each poll: no bytes read or sent in that time). One whose answer is still being computed
        is not idle: the server, not the client, is the one keeping it waiting."""
        assert self._idle_s is not None
        now = time.monotonic()
        for conn in list(self._conns):
            if now - conn.last_active > self._idle_s and not conn.computing():
                log.info("closing %s: idle for more than connections.max.idle.ms=%d",
                         conn.peer, round(self._idle_s * 1000))
                self.idle_closed += 1
                conn.shut()
        if self._server is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_period(), self._close_idle)

    # queued.max.request.bytes ------------------------------------------------------------------------

    def _reserve(self, conn: _ServerConnection, size: int) -> bool:
        """Take ``size`` bytes for a frame ``conn`` starts reading; False (``conn`` waits) when none is left."""
        if self.queued_max_bytes < 0:
            return True
        if self.queued_bytes >= self.queued_max_bytes:
            if conn not in self._memory_waiters:
                self._memory_waiters.append(conn)
            return False
        self.queued_bytes += size
        return True

    def _release(self, size: int) -> None:
        if self.queued_max_bytes < 0 or size == 0:
            return
        self.queued_bytes -= size
        loop = asyncio.get_running_loop()
        while self._memory_waiters and self.queued_bytes < self.queued_max_bytes:
            loop.call_soon(self._memory_waiters.popleft().retry_memory)

    def _forget(self, conn: _ServerConnection) -> None:
        self._conns.discard(conn)
        with contextlib.suppress(ValueError):
            self._memory_waiters.remove(conn)

    def _dispatch(self, payload: bytes, peer: str, responses: _InOrderResponses,
                  conn: _ServerConnection | None = None) -> None:
        try:
            header, body = self._bodies.decode_request(payload)
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
        api_key = header["RequestApiKey"]
        req = ServerRequest(api_key, header["RequestApiVersion"], header["CorrelationId"], header.get("ClientId"),
                            body, peer, conn.principal if conn is not None else ANONYMOUS,
                            PendingAnswer() if api_key in self._answer_early else None)
        sasl = conn.sasl if conn is not None else None
        if sasl is not None and (sasl.principal is None or api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE)) \
                and api_key != API_VERSIONS:
            assert conn is not None
            self._authenticate(req, sasl, conn, responses)
            return
        if self._gate is not None and api_key != API_VERSIONS and api_key in self.api_ranges:
            try:
                refusal = self._gate(req)
                frame = None if refusal is None else codec.encode_response(
                    req.api_key, req.api_version, req.correlation_id, refusal)
            except Exception:
                log.exception("the gate failed on a request from %s; closing the connection", peer)
                responses.add_frame(None)
                return
            if frame is not None:
                responses.add_frame(frame)
                return
        if self._observer:
            try:
                self._observer("recv", req.api_key, req.api_version, req.correlation_id, body, peer)
            except Exception as exc:
                # The observer (the node's frame trace) refuses what a peer sent, e.g. a field out of the
                # trace schema's range: the request is dropped unhandled, as an undecodable one would be.
                log.warning("closing %s: request not recorded: %s", peer, str(exc)[:500])
                responses.add_frame(None)
                return
        answer: Answer | PendingAnswer | Awaitable[Answer]
        if api_key == API_VERSIONS:
            answer = api_versions_body(self.api_ranges, features=self.supported_features, version=req.api_version)
        elif api_key not in self.api_ranges:
            log.warning("closing %s: api key %d is not served here", peer, api_key)
            answer = None
        else:
            early = req.reply
            if early is not None:
                responses.add(req, early)  # its place first: an answer given during the call below leaves at once
            try:
                answer = self._handler(req)
            except Exception:
                log.exception("handler failed for a request from %s; closing the connection", peer)
                answer = None
            if early is not None:
                _settle(early, answer, peer)
                return
        responses.add(req, answer)

    def _authenticate(self, req: ServerRequest, sasl: SaslServerSession, conn: _ServerConnection,
                      responses: _InOrderResponses) -> None:
        """A SASL request, or a request before authentication (which closes the connection unanswered:
        Kafka's SaslServerAuthenticator takes only ApiVersions, SaslHandshake and SaslAuthenticate then).
        SASL frames are transport, not protocol: the frame observer does not see them."""
        if req.api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            log.warning("closing %s: %s before SASL authentication", req.peer, codec.api_name(req.api_key))
            responses.add_frame(None)
            return
        answer, close = sasl.handle(req.api_key, req.body)
        try:
            frame = codec.encode_response(req.api_key, req.api_version, req.correlation_id, answer)
        except Exception:
            log.exception("cannot encode the SASL answer to %s; closing the connection", req.peer)
            frame, close = None, True
        responses.add_frame(frame)
        if sasl.principal is not None and conn.principal != sasl.principal:
            conn.principal = sasl.principal
            log.debug("%s authenticated as %s (%s)", req.peer, sasl.principal, sasl.mechanism)
        if close:
            if answer.get("ErrorMessage"):
                log.warning("closing %s: SASL %s: %s", req.peer, sasl.mechanism, answer["ErrorMessage"])
            else:
                log.warning("closing %s: SASL handshake refused (mechanism not enabled or out of order)", req.peer)
            conn._stop_reading()


def _settle(early: PendingAnswer, answer: Answer | EncodedAnswer | PendingAnswer | Awaitable[Answer],
            peer: str) -> None:
    """Route what a handler returned for an early-answered request (``ServerRequest.reply``) into ``early``."""
    if answer is early:
        return
    if answer is None or isinstance(answer, _READY_ANSWER):
        early.answer(answer)
    elif isinstance(answer, PendingAnswer):
        later = answer
        if later.done():
            early.answer(later.result())
        else:
            later._listener = lambda: early.answer(later.result())
    else:
        def done(fut: asyncio.Future[Answer]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                log.error("handler failed for a request from %s; closing the connection", peer,
                          exc_info=fut.exception())
            early.answer(None if fut.cancelled() or fut.exception() is not None else fut.result())

        asyncio.ensure_future(answer).add_done_callback(done)


class _ServerConnection(asyncio.BufferedProtocol):
    """One accepted connection: frames are cut and dispatched as bytes arrive, in the event-loop round
    that reads them (no reader task, no extra round per request). Reads go into one reused buffer
    (``FrameSplitter.get_buffer``), not a fresh 256 KiB ``bytes`` per read as ``asyncio.Protocol``'s do.

    Reading stops (the transport's reading is paused) while the peer does not read our answers (write
    backpressure), while the pool of queued.max.request.bytes has nothing left for the next frame, and,
    with ``one_in_flight``, while a request is being handled and bytes of the next one have arrived. The
    pause is taken only when bytes come in that must wait: a client that sends one request at a time
    costs no pause and no resume."""

    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self._frames = FrameSplitter(server._max_frame)
        self._chunk: memoryview | None = None  # the splitter's read buffer (``get_buffer``)
        self._transport: asyncio.Transport | None = None
        self._responses: _InOrderResponses | None = None
        self.peer = "?"
        self._reading = True  # False once the peer stopped sending or sent something we cannot read
        self._muted = False  # the transport's reading is paused by us
        self._write_paused = False
        self._waiting_memory = False
        self._busy = False  # one_in_flight: a request was dispatched and its answer is not yet sent
        self._frame_reserved = -1  # pool bytes taken for the frame being read (-1: none yet)
        self._held: collections.deque[int] = collections.deque()  # pool bytes of each dispatched frame
        self._resume_scheduled = False
        self._pumping = False  # inside _pump: an answer given there needs no later round to go on
        self._eof = False  # the peer will send nothing more
        self.last_active = time.monotonic()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.principal = ANONYMOUS
        self.sasl = server._sasl.authenticator() if server._sasl is not None else None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; not an asyncio.Transport subclass on every event loop (uvloop's are not).
        self._transport = cast(asyncio.Transport, transport)
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        if self._server._ssl is not None:  # the TLS handshake is done: the peer's certificate names it
            try:
                self.principal = tls_principal(transport.get_extra_info("ssl_object"))
            except Exception as exc:
                log.warning("%s: cannot read the peer certificate's subject (%s); principal %s", self.peer, exc,
                            ANONYMOUS)
        self._responses = _InOrderResponses(self._transport, self.peer, self._server._observer, self._sent)
        self._server._conns.add(self)

    def computing(self) -> bool:
        """Is an answer of ours still being computed (the peer is waiting on us, not idle)?"""
        return self._responses is not None and self._responses.waiting() and not self._write_paused

    def get_buffer(self, sizehint: int) -> memoryview:
        chunk = self._chunk
        if chunk is None:  # (the splitter's one read buffer, made on the first read, then kept here: no call)
            chunk = self._chunk = self._frames.get_buffer()
        return chunk

    def buffer_updated(self, nbytes: int) -> None:
        responses = self._responses
        if not self._reading or responses is None:
            return  # read after we stopped reading: dropped, as the connection is ending
        self.last_active = time.monotonic()
        server = self._server
        if self._busy or self._write_paused or responses.closed or server.queued_max_bytes >= 0:
            self._frames.buffer_updated(nbytes)  # the frame may have to wait, or hold pool memory: ``_pump`` decides
            self._pump()
            return
        payload = self._frames.read(nbytes)
        if payload is None:
            self._pump()  # not exactly one whole frame: the splitter holds the bytes
            return
        # One whole request and nothing buffered before it (a follower's Fetch, the steady state): dispatched as
        # ``_pump_frames`` would take it, without its loop and limits (none applies: checked above).
        if server.one_in_flight:
            self._busy = True
        self._pumping = True
        try:
            server._dispatch(payload, self.peer, responses, self)
        finally:
            self._pumping = False
        # As ``_pump`` ends (its loop would find no other frame: the splitter held nothing else, and no EOF comes
        # before the bytes it ends), with ``_update_reading``'s test for this case first: the splitter holds no byte
        # (nothing is read during a dispatch) and, unbounded, no frame waits for memory, so reading must be paused
        # only if one of these holds, and resumed only if it is paused. (The usual case: neither, no call.)
        if self._muted or not self._reading or self._eof or self._write_paused or self._waiting_memory:
            self._update_reading()

    def _pump(self) -> None:
        """Dispatch the whole frames that have arrived, as far as the limits allow, then pause or resume
        reading to match."""
        responses = self._responses
        if responses is None:
            return
        server = self._server
        frames = self._frames
        self._pumping = True
        try:
            self._pump_frames(responses, server, frames)
        finally:
            self._pumping = False
        self._update_reading()

    def _pump_frames(self, responses: _InOrderResponses, server: KafkaServer, frames: FrameSplitter) -> None:
        bounded = server.queued_max_bytes >= 0  # queued.max.request.bytes: each frame's bytes are held
        while self._reading and not responses.closed and not self._write_paused and not self._busy:
            if bounded and self._frame_reserved < 0:
                size = frames.pending_size()
                if size is not None and 0 <= size <= server._max_frame:
                    if not server._reserve(self, size + 4):
                        self._waiting_memory = True
                        break
                    self._frame_reserved = size + 4
            try:
                payload = frames.next_frame()
            except FrameTooLargeError as exc:
                log.warning("closing %s: %s (socket.request.max.bytes)", self.peer, exc)
                self._stop_reading()
                return
            except DecodeError as exc:
                log.debug("connection %s ended: %s", self.peer, exc)
                self._stop_reading()
                return
            if payload is None:
                if self._eof:
                    self._stop_reading()  # every whole frame received is dispatched: nothing more comes
                break
            if bounded:  # unbounded, a frame holds nothing: _sent has nothing to give back for it
                self._held.append(max(self._frame_reserved, 0))
                self._frame_reserved = -1
            if server.one_in_flight:
                self._busy = True
            server._dispatch(payload, self.peer, responses, self)

    def _update_reading(self) -> None:
        blocked = (not self._reading or self._eof or self._write_paused or self._waiting_memory
                   or (self._busy and self._frames.buffered() > 0))
        if blocked == self._muted:
            return  # reading is paused exactly when it should be (the common case: nothing to change)
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if blocked and not self._muted:
            self._muted = True
            with contextlib.suppress(Exception):
                transport.pause_reading()
        elif not blocked and self._muted:
            self._muted = False
            with contextlib.suppress(Exception):
                transport.resume_reading()

    def _sent(self) -> None:
        """One answer (or the close it asked for) left, in order: release its frame's memory, and with
        one_in_flight take the next request (from a later loop round: this may run inside a handler's call,
        and handlers are not re-entered)."""
        self.last_active = time.monotonic()
        held = self._held
        if held:
            size = held.popleft()
            if size:  # 0 without queued.max.request.bytes: nothing to give back
                self._server._release(size)
        if self._busy and not (self._responses is not None and self._responses._slots):
            self._busy = False
            self._schedule_resume()

    def _schedule_resume(self) -> None:
        if self._pumping or self._resume_scheduled or not (self._muted or self._frames.buffered()):
            return  # nothing waits: the next bytes are read and dispatched as they come
        self._resume_scheduled = True
        asyncio.get_running_loop().call_soon(self._resume)

    def _resume(self) -> None:
        self._resume_scheduled = False
        self._pump()

    def retry_memory(self) -> None:
        """The pool has memory again: try to take this connection's next frame."""
        self._waiting_memory = False
        self._pump()

    def eof_received(self) -> bool:
        err = self._frames.end_error()
        if err is not None:
            log.debug("connection %s ended: %s", self.peer, err)
        # Requests already received are still handled (one at a time with one_in_flight), then answered,
        # then the connection closes.
        self._eof = True
        self._pump()
        # Keep the transport open: answers to what was read still go out. A TLS transport cannot stay half
        # open (asyncio closes it and warns if asked to): there, say so instead of asking.
        return self._server._ssl is None

    def _stop_reading(self) -> None:
        """Read no more; requests already read still get their answers, in order, then the connection
        closes."""
        if not self._reading:
            return
        self._reading = False
        self._update_reading()
        if self._responses is not None:
            self._responses.close_when_written()

    def shut(self) -> None:
        """The server is closing: drop pending answers and close now."""
        self._reading = False
        if self._responses is not None:
            self._responses.abandon()
        if self._transport is not None:
            self._transport.close()

    # Backpressure: stop reading requests while the peer is not reading our responses.
    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self.last_active = time.monotonic()
        self._schedule_resume()
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("connection %s ended: %s", self.peer, exc)
        self._reading = False
        if self._responses is not None:
            self._responses.abandon()
        held = sum(self._held) + max(self._frame_reserved, 0)
        self._held.clear()
        self._frame_reserved = -1
        self._server._forget(self)
        self._server._release(held)
        if not self.closed.done():
            self.closed.set_result(None)


class _InOrderResponses:
    """One connection's responses, written in request order, each as soon as it and all before it are
    ready: straight from the call that completes it, with no writer task or queue in between."""

    def __init__(self, transport: asyncio.Transport, peer: str, observer: FrameObserver | None,
                 on_sent: Callable[[], None] | None = None) -> None:
        self._transport = transport
        self._peer = peer
        self._observer = observer
        self._on_sent = on_sent  # called once per answer written (or close it asked for), in order
        # Oldest first: (request, its answer, a PendingAnswer or a future of it) or (None, an encoded frame / None
        # to close).
        self._slots: collections.deque[tuple[ServerRequest | None, Any]] = collections.deque()
        self._close_when_written = False
        self.closed = False

    def add(self, req: ServerRequest, answer: Answer | EncodedAnswer | PendingAnswer | Awaitable[Answer]) -> None:
        # A PendingAnswer first: the node answers every request of its core through one. (The callbacks below are
        # partials, not lambdas: a closure would make cells of ``req`` and ``answer`` on every call.)
        if isinstance(answer, PendingAnswer):
            self._slots.append((req, answer))
            if answer._answered:
                self._replied(req, answer)
            elif self._observer is None:
                answer._listener = self._flush  # nothing to observe: the answer goes straight to its turn
            else:
                answer._listener = functools.partial(self._replied, req, answer)
            return
        if answer is None or isinstance(answer, _READY_ANSWER):
            self._slots.append((req, answer))
            self._observe(req, answer)
            self._flush()
            return
        fut = asyncio.ensure_future(answer)  # a coroutine becomes a task; a future stays itself
        self._slots.append((req, fut))
        if fut.done():
            self._answered(req, fut)
        else:
            fut.add_done_callback(functools.partial(self._answered, req))

    def add_frame(self, frame: bytes | None) -> None:
        self._slots.append((None, frame))
        self._flush()

    def waiting(self) -> bool:
        """Is an answer not yet written (being computed, or behind one that is)?"""
        return bool(self._slots)

    def close_when_written(self) -> None:
        """Close the connection once every pending answer is written (at once if none is pending)."""
        self._close_when_written = True
        self._flush()

    def abandon(self) -> None:
        self.closed = True
        self._slots.clear()

    def _replied(self, req: ServerRequest, reply: PendingAnswer) -> None:
        if not reply.cancelled:
            self._observe(req, reply.result())
        self._flush()

    def _answered(self, req: ServerRequest, fut: asyncio.Future[Answer]) -> None:
        if not fut.cancelled():
            exc = fut.exception()
            if exc is not None:
                log.error("handler failed for a request from %s; closing the connection", self._peer, exc_info=exc)
            else:
                self._observe(req, fut.result())
        self._flush()

    def _observe(self, req: ServerRequest, answer: Answer | EncodedAnswer) -> None:
        if self._observer and answer is not None:
            body = answer.body if isinstance(answer, EncodedAnswer) else answer
            if body is not None:
                try:
                    self._observer("send", req.api_key, req.api_version, req.correlation_id, body, req.peer)
                except Exception as exc:
                    log.warning("answer to %s not recorded: %s", req.peer, str(exc)[:500])

    def _close(self) -> None:
        self.closed = True
        self._slots.clear()
        self._transport.close()

    def _flush(self) -> None:
        slots = self._slots
        while slots and not self.closed:
            req, answer = slots[0]
            if isinstance(answer, PendingAnswer):
                if not answer._answered:
                    break  # later answers wait for this one
                answer = answer._value
            elif isinstance(answer, asyncio.Future):
                if not answer.done():
                    break
                answer = None if answer.cancelled() or answer.exception() else answer.result()
            slots.popleft()
            if answer is None:
                self._close()
            elif req is None:
                self._transport.write(answer)  # already encoded
            else:
                try:
                    if isinstance(answer, EncodedAnswer):
                        frame = codec.frame_response(req.api_key, req.api_version, req.correlation_id, answer.encoded)
                    else:
                        frame = codec.encode_response(req.api_key, req.api_version, req.correlation_id, answer)
                except Exception:
                    log.exception("cannot encode the answer to a request from %s; closing the connection", self._peer)
                    self._close()
                    break
                self._transport.write(frame)
            if self._on_sent is not None:
                self._on_sent()
        if self._close_when_written and not slots and not self.closed:
            self._close()


class RequestError(Exception):
    """A request that got no response: connection refused or lost, or timed out."""


#: Called once with the response body (what the client's BodyCodec reads), or with the RequestError that
#: ended the request.
ResponseCallback = Callable[[Any, BaseException | None], None]


#: A request awaiting its response: (api_key, version, its future or None, its callback or None, deadline in loop
#: time, timeout_s). A plain tuple: one is built per request, with no ``__init__`` frame to run.
_InFlight = tuple[int, int, "asyncio.Future[dict[str, Any]] | None", "ResponseCallback | None", float, float]


def _finish(entry: _InFlight, body: Any, error: BaseException | None) -> None:
    """Hand a request its response body, or the error that ended it: to its callback, else to its future."""
    _, _, future, callback, _, _ = entry
    if callback is not None:
        try:
            callback(body, error)
        except Exception:
            log.exception("response callback failed")
    elif future is not None and not future.done():
        if error is not None:
            future.set_exception(error)
        else:
            assert body is not None
            future.set_result(body)


class _ClientProtocol(asyncio.BufferedProtocol):
    """The client's side of a connection: responses are decoded and handed on as bytes arrive (read into
    one reused buffer, as on the server's side)."""

    def __init__(self, client: KafkaClient) -> None:
        self._client = client
        self._frames = FrameSplitter(client.max_frame_bytes)
        self._chunk: memoryview | None = None  # the splitter's read buffer (``get_buffer``)
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        chunk = self._chunk
        if chunk is None:  # (as the server's: the splitter's one read buffer, kept here)
            chunk = self._chunk = self._frames.get_buffer()
        return chunk

    def buffer_updated(self, nbytes: int) -> None:
        client = self._client
        frames = self._frames
        try:
            payload = frames.read(nbytes)
            if payload is not None:  # one whole answer, nothing else buffered (the steady state): straight on
                client._on_frame(payload)
                return
            while (payload := frames.next_frame()) is not None:
                client._on_frame(payload)
        except DecodeError as exc:
            client._fail_all(RequestError(f"{client.peer}: undecodable response: {exc}"), warn=True)

    def eof_received(self) -> bool:
        client = self._client
        err = self._frames.end_error()
        if err is not None:
            client._fail_all(RequestError(f"{client.peer}: undecodable response: {err}"), warn=True)
        else:
            client._fail_all(RequestError(f"{client.peer}: connection closed"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        client = self._client
        if exc is not None:
            client._fail_all(RequestError(f"{client.peer}: connection lost: {exc}"))
        else:
            client._fail_all(RequestError(f"{client.peer}: connection closed"))
        self._wake_drainers(ConnectionResetError("connection lost") if exc is None else exc)
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drainers(None)

    def _wake_drainers(self, exc: Exception | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                if exc is None:
                    w.set_result(None)
                else:
                    w.set_exception(ConnectionError(str(exc)))

    async def drain(self) -> None:
        if self.lost.done():
            raise ConnectionResetError("connection lost")
        if not self._paused:
            return
        w = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(w)
        await w


@dataclass
class KafkaClient:
    """One client connection: correlation ids, pipelined requests, timeouts, ApiVersions negotiation."""

    host: str
    port: int
    client_id: str = "kraft-tck"
    max_frame_bytes: int = DEFAULT_MAX_FRAME
    observer: FrameObserver | None = None
    bodies: BodyCodec = codec  # how bodies are read and written (see BodyCodec)
    ssl: _ssl.SSLContext | None = None  # TLS to the server (its certificate checked as the context says)
    sasl: SaslLogin | None = None  # SASL login, right after ApiVersions (SaslHandshake v1, SaslAuthenticate)
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: The server's ApiVersions v3+ SupportedFeatures (name -> (min, max)), from the negotiation at connect.
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    _transport: asyncio.Transport | None = None
    _protocol: _ClientProtocol | None = None
    _next_correlation: int = 0
    _inflight: dict[int, _InFlight] = field(default_factory=dict)
    # One timer per connection, at the earliest deadline it has seen since it last fired (Kafka's
    # NetworkClient checks request timeouts on its poll, likewise): a request costs no timer of its own.
    _expiry: asyncio.TimerHandle | None = None
    _expiry_at: float = float("inf")
    # The loop the connection runs on, kept from ``connect``: on Python 3.11 every
    # ``asyncio.get_running_loop()`` outside a C-level callback costs a getpid() system call.
    _loop: asyncio.AbstractEventLoop | None = None
    # best_version's answers for the ``versions`` dict they were computed from (a node asks before every request;
    # ``versions`` is replaced, never changed in place, when a connection negotiates).
    _best: dict[int, int] = field(default_factory=dict)
    _best_for: object = None

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self, timeout_s: float = 5.0, negotiate: bool = True) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _ClientProtocol(self), self.host, self.port, ssl=self.ssl,
                                       server_hostname=self.host if self.ssl is not None else None),
                timeout_s,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            raise RequestError(f"cannot connect to {self.peer}: {exc}") from exc
        self._transport, self._protocol, self._loop = cast(asyncio.Transport, transport), protocol, loop
        if negotiate or self.sasl is not None:
            version = codec.supported_versions(API_VERSIONS)[1]
            body = await self.request(API_VERSIONS, version, dict(CLIENT_SOFTWARE), timeout_s)
            if body["ErrorCode"] != Errors.NONE:
                raise RequestError(f"{self.peer}: ApiVersions failed with error {body['ErrorCode']}")
            self.versions = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in body["ApiKeys"]}
            self.features = {f["Name"]: (f["MinVersion"], f["MaxVersion"]) for f in body.get("SupportedFeatures") or ()}
        if self.sasl is not None:
            observer, self.observer = self.observer, None  # SASL frames are transport, not protocol
            try:
                await self._authenticate(self.sasl, timeout_s)
            finally:
                self.observer = observer

    async def _authenticate(self, login: SaslLogin, timeout_s: float) -> None:
        """SaslHandshake v1 naming the mechanism, then SaslAuthenticate until the exchange completes
        (Kafka's SaslClientAuthenticator). RequestError says why a login failed."""
        if self.versions.get(SASL_HANDSHAKE, (0, 0))[1] < 1 or SASL_AUTHENTICATE not in self.versions:
            raise RequestError(f"{self.peer}: does not serve SASL (no SaslHandshake v1 / SaslAuthenticate in its "
                               f"ApiVersions): is its listener SASL_SSL or SASL_PLAINTEXT?")
        hs = await self.request(SASL_HANDSHAKE, 1, {"Mechanism": login.mechanism}, timeout_s)
        if hs["ErrorCode"] != Errors.NONE:
            raise RequestError(f"{self.peer}: SASL mechanism {login.mechanism} refused "
                               f"({Errors(hs['ErrorCode']).name}); it has {', '.join(hs['Mechanisms']) or 'none'}")
        version = self.best_version(SASL_AUTHENTICATE)
        exchange = login.exchange()
        out: bytes | None = exchange.first()
        while out is not None:
            resp = await self.request(SASL_AUTHENTICATE, version, {"AuthBytes": out}, timeout_s)
            if resp["ErrorCode"] != Errors.NONE:
                raise RequestError(f"{self.peer}: SASL {login.mechanism} login as {login.username} failed "
                                   f"({Errors(resp['ErrorCode']).name}: {resp.get('ErrorMessage')})")
            try:
                out = exchange.respond(bytes(resp["AuthBytes"]))
            except SaslError as exc:
                raise RequestError(f"{self.peer}: {exc}") from None

    def best_version(self, api_key: int) -> int:
        """The highest version both sides support (KIP-511); RequestError when there is none."""
        if self._best_for is self.versions:
            try:  # (a try costs nothing until it catches: a hit is one subscript)
                return self._best[api_key]
            except KeyError:
                pass
        else:
            self._best, self._best_for = {}, self.versions
        ours = codec.supported_versions(api_key)
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise RequestError(f"{self.peer} does not advertise api key {api_key}")
        hi = min(ours[1], theirs[1])
        if hi < max(ours[0], theirs[0]):
            raise RequestError(f"no common version of api key {api_key}: ours {ours}, {self.peer} {theirs}")
        self._best[api_key] = hi
        return hi

    def send(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float
    ) -> asyncio.Future[dict[str, Any]]:
        """Write a request now and return the future of its response body, which fails with
        ``RequestError`` on a timeout or a lost connection. Nothing is awaited: a caller that sends one
        request at a time (the node: one per destination) needs no backpressure, and no task."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.send_with_callback(api_key, version, body, timeout_s, None, fut)
        return fut

    def send_with_callback(
        self, api_key: int, version: int, body: Any, timeout_s: float, callback: ResponseCallback | None,
        _future: asyncio.Future[dict[str, Any]] | None = None,
    ) -> None:
        """Like :meth:`send`, but ``callback(body, error)`` is called from the event-loop round that reads
        the response (or from the timeout or the connection's end), not one round later as a future's
        callbacks are. (``_future``: :meth:`send`'s, given instead of a callback; both write through here, the
        node's every request without a second call.)"""
        transport = self._transport
        if transport is None or transport.is_closing():  # (``connected``)
            raise RequestError(f"not connected to {self.peer}")
        corr = self._next_correlation
        self._next_correlation = (corr + 1) & 0x7FFFFFFF
        frame = self.bodies.encode_request(api_key, version, corr, self.client_id, body)
        loop = self._loop
        assert loop is not None  # set with the transport
        deadline = loop.time() + timeout_s
        self._inflight[corr] = (api_key, version, _future, callback, deadline, timeout_s)
        if deadline < self._expiry_at:
            if self._expiry is not None:
                self._expiry.cancel()
            self._expiry, self._expiry_at = loop.call_at(deadline, self._expire_due), deadline
        if self.observer:
            self.observer("send", api_key, version, corr, body, self.peer)
        transport.write(frame)

    async def request(
        self, api_key: int, version: int, body: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        fut = self.send(api_key, version, body, timeout_s)
        assert self._protocol is not None
        try:
            await self._protocol.drain()
        except ConnectionError as exc:
            raise RequestError(f"{self.peer}: connection lost: {exc}") from exc
        return await fut

    def _expire_due(self) -> None:
        """Fail every request past its deadline, then wait for the earliest deadline left."""
        self._expiry, self._expiry_at = None, float("inf")
        loop = self._loop
        assert loop is not None  # the timer was set on it
        now = loop.time() + 1e-6  # the loop may fire a timer up to its clock resolution early
        for corr, entry in list(self._inflight.items()):
            api_key, _, _, _, deadline, timeout_s = entry
            if deadline <= now and self._inflight.pop(corr, None) is not None:
                _finish(entry, None, RequestError(
                    f"{self.peer}: request api_key={api_key} timed out after {timeout_s:.3f}s"))
        if self._inflight and self._expiry is None:
            earliest = min(e[4] for e in self._inflight.values())
            self._expiry, self._expiry_at = loop.call_at(earliest, self._expire_due), earliest

    async def send_raw(self, data: bytes) -> None:
        """Write arbitrary bytes (robustness tests send malformed frames through this)."""
        assert self._transport is not None and self._protocol is not None
        self._transport.write(data)
        await self._protocol.drain()

    def _on_frame(self, payload: bytes) -> None:
        """One response frame (raises DecodeError for one that cannot be read: the connection then ends)."""
        try:  # (a try costs nothing until it catches: no length test before the unpack)
            (corr,) = _read_correlation(payload)
        except struct.error:
            raise DecodeError("CorrelationId", 0, "response shorter than its correlation id") from None
        entry = self._inflight.pop(corr, None)
        if entry is None:
            log.warning("%s: response with unknown correlation id %d dropped", self.peer, corr)
            return
        api_key, version, _, callback, _, _ = entry
        try:
            _, body = self.bodies.decode_response(api_key, version, payload)
        except DecodeError:
            self._inflight[corr] = entry  # failed with the others
            raise
        if self.observer:
            self.observer("recv", api_key, version, corr, body, self.peer)
        if callback is None:
            _finish(entry, body, None)
            return
        try:  # (``_finish``'s callback case, inline: a node's every response takes it)
            callback(body, None)
        except Exception:
            log.exception("response callback failed")

    def _fail_all(self, error: RequestError, warn: bool = False) -> None:
        """The connection is over: every request in flight fails with ``error``."""
        if warn:
            log.warning("%s", error)
        inflight, self._inflight = self._inflight, {}
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry, self._expiry_at = None, float("inf")
        if self._transport is not None:
            self._transport.close()
        for entry in inflight.values():
            _finish(entry, None, error)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            if self._protocol is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._protocol.lost), 2)
        self._transport = None
        self._protocol = None
