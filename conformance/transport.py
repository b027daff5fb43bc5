"""The harness's own Kafka transport: a client and a server over asyncio streams.

The judge does not share the judged node's network layer: a framing or correlation bug in the reference
node's transport must be able to fail a conformance case, so the harness speaks the wire through this small
module, built on the ``spec`` package alone (:mod:`kraft_tck.spec.framing` for the int32 length prefix,
:mod:`kraft_tck.spec.codec` for headers and bodies). It favours being obviously right over being fast: one
reader task per connection, one writer task per server connection, futures for answers.

Kafka's rules it keeps (Kafka's ``NetworkClient`` / ``SocketServer``, KIP-511):

* a client numbers its requests with correlation ids and matches every response by its id; a response with
  an id that is not in flight, or one that cannot be decoded, ends the connection and fails every request
  in flight on it;
* a request that gets no answer within its timeout fails, and the connection is closed (as
  ``NetworkClient.handleTimedOutRequests`` disconnects);
* the client negotiates versions with ApiVersions at its highest version; a server that does not know that
  version answers at v0 with UNSUPPORTED_VERSION and its own ApiVersions range, and the client asks again
  at the highest version both know;
* a server answers each connection's requests in the order they came, even when a later one is computed
  first (a parked Fetch must not hold back the *computing* of a Vote answer, only its *sending*);
* a server closes a connection that sends a request it cannot read (unknown api key, unsupported version,
  malformed body, oversized frame): no response layout exists that the client could parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

from kraft_tck.conformance.security import SASL_RANGES, Login, SaslAccounts, SaslFailed, SaslServerSession, authenticate
from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError, Errors, UnsupportedVersionError
from kraft_tck.spec.framing import DEFAULT_MAX_FRAME_BYTES, read_frame

log = logging.getLogger("kraft_tck.conformance.transport")

API_VERSIONS = 18
_CORRELATION = struct.Struct(">i")

Body = dict[str, Any]
#: ApiVersions v3+ names the client software; Kafka answers INVALID_REQUEST to a name or version that is
#: empty or not ``[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`` (``ApiVersionsRequest.isValid``).
SOFTWARE: Body = {"ClientSoftwareName": "kraft-tck", "ClientSoftwareVersion": "0.1.0"}
#: Observes every frame: (direction "recv"/"send", api_key, version, correlation_id, body, peer).
FrameObserver = Callable[[str, int, int, int, Body, str], None]


class RequestError(Exception):
    """A request that got no response: connection refused or lost, undecodable answer, or timed out."""


@dataclass(frozen=True)
class ServerRequest:
    """One decoded request as a server's handler sees it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Body
    peer: str


#: A handler answers a request with a body, or None to close the connection without answering; it may
#: answer at once or return an awaitable of the answer.
Handler = Callable[[ServerRequest], "Body | Awaitable[Body | None] | None"]


def api_versions_response(
    ranges: Mapping[int, tuple[int, int]], error: int = Errors.NONE,
    features: Mapping[str, tuple[int, int]] | None = None,
) -> Body:
    """An ApiVersions response body advertising ``ranges`` (api key -> (min, max)) and, from v3 on, the
    ``features`` the server supports (name -> (min, max), e.g. KIP-853's ``kraft.version``)."""
    body: Body = {
        "ErrorCode": int(error),
        "ApiKeys": [{"ApiKey": k, "MinVersion": lo, "MaxVersion": hi} for k, (lo, hi) in sorted(ranges.items())],
        "ThrottleTimeMs": 0,
    }
    if features:
        body["SupportedFeatures"] = [
            {"Name": n, "MinVersion": lo, "MaxVersion": hi} for n, (lo, hi) in sorted(features.items())
        ]
    return body


# ------------------------------------------------------------------------------------------------ client


class KafkaClient:
    """One connection to a Kafka-protocol server: correlation ids, timeouts, ApiVersions negotiation."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "kraft-tck",
        observer: FrameObserver | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        ssl: SSLContext | None = None,
        sasl: Login | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl = ssl  # TLS to a secured target (conformance/security.py)
        self.sasl = sasl  # SASL login to a secured target, right after ApiVersions
        self.client_id = client_id
        self.observer = observer
        self.max_frame_bytes = max_frame_bytes
        #: what the server advertised in ApiVersions: api key -> (min, max)
        self.versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._next_correlation = 0
        #: correlation id -> (api key, version, the future of the response body)
        self._inflight: dict[int, tuple[int, int, asyncio.Future[Body]]] = {}
        self._ended: RequestError | None = None

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._ended is None and not self._writer.is_closing()

    async def connect(self, timeout_s: float = 5.0, negotiate: bool = True) -> None:
        """Open the connection and, unless ``negotiate`` is False, learn the server's versions (KIP-511)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self.ssl,
                                        server_hostname=self.host if self.ssl else None), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise RequestError(f"cannot connect to {self.peer}: {exc}") from exc
        self._reader, self._writer, self._ended = reader, writer, None
        self._reading = asyncio.create_task(self._read_responses(reader), name=f"kraft-tck-client {self.peer}")
        if negotiate:
            await self._negotiate(timeout_s)
        if self.sasl is not None:  # SASL frames are transport: the observer does not see them
            observer, self.observer = self.observer, None
            try:
                await authenticate(lambda k, v, b: self.request(k, v, b, timeout_s), self.sasl, self.peer)
            except SaslFailed as exc:
                self._end(RequestError(str(exc)))
                raise RequestError(str(exc)) from None
            finally:
                self.observer = observer

    async def _negotiate(self, timeout_s: float) -> None:
        version = codec.supported_versions(API_VERSIONS)[1]
        body = await self.request(API_VERSIONS, version, SOFTWARE, timeout_s)
        if body["ErrorCode"] == Errors.UNSUPPORTED_VERSION:
            # KIP-511: the answer (read at v0) lists the server's ApiVersions range; ask again within it.
            theirs = {k["ApiKey"]: k["MaxVersion"] for k in body["ApiKeys"]}.get(API_VERSIONS, 0)
            ours_lo = codec.supported_versions(API_VERSIONS)[0]
            retry = min(version, theirs)
            if retry < ours_lo or retry == version:
                raise RequestError(f"{self.peer}: no ApiVersions version in common (server max v{theirs})")
            body = await self.request(API_VERSIONS, retry, SOFTWARE, timeout_s)
        if body["ErrorCode"] != Errors.NONE:
            raise RequestError(f"{self.peer}: ApiVersions failed with error {body['ErrorCode']}")
        self.versions = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in body["ApiKeys"]}

    def best_version(self, api_key: int) -> int:
        """The highest version both sides support (KIP-511); RequestError when there is none."""
        lo, hi = codec.supported_versions(api_key)
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise RequestError(f"{self.peer} does not advertise api key {api_key}")
        best = min(hi, theirs[1])
        if best < max(lo, theirs[0]):
            raise RequestError(f"no common version of api key {api_key}: ours {(lo, hi)}, {self.peer} {theirs}")
        return best

    async def request(self, api_key: int, version: int, body: Body, timeout_s: float) -> Body:
        """Send one request and wait for its response body; RequestError if none comes in ``timeout_s``."""
        if not self.connected:
            raise RequestError(f"not connected to {self.peer}" + (f" ({self._ended})" if self._ended else ""))
        assert self._writer is not None
        corr = self._next_correlation
        self._next_correlation = (corr + 1) & 0x7FFFFFFF
        frame = codec.encode_request(api_key, version, corr, self.client_id, body)
        fut: asyncio.Future[Body] = asyncio.get_running_loop().create_future()
        self._inflight[corr] = (api_key, version, fut)
        if self.observer:
            self.observer("send", api_key, version, corr, body, self.peer)
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._end(RequestError(f"{self.peer}: connection lost: {exc}"))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            self._inflight.pop(corr, None)
            self._end(RequestError(f"{self.peer}: connection closed after a request timed out"))
            raise RequestError(
                f"{self.peer}: request api_key={api_key} v{version} timed out after {timeout_s:.3f}s"
            ) from None

    async def send_raw(self, data: bytes) -> None:
        """Write arbitrary bytes (a malformed frame, say) on the connection."""
        if self._writer is None:
            raise RequestError(f"not connected to {self.peer}")
        self._writer.write(data)
        await self._writer.drain()

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                payload = await read_frame(reader, self.max_frame_bytes)
                if payload is None:
                    self._end(RequestError(f"{self.peer}: connection closed"))
                    return
                self._on_response(payload)
        except DecodeError as exc:
            self._end(RequestError(f"{self.peer}: undecodable response: {exc}"), warn=True)
        except (ConnectionError, OSError) as exc:
            self._end(RequestError(f"{self.peer}: connection lost: {exc}"))
        except Exception as exc:  # anything else the codec raised on a response: the connection is unusable
            self._end(RequestError(f"{self.peer}: unreadable response: {exc!r}"), warn=True)

    def _on_response(self, payload: bytes) -> None:
        if len(payload) < 4:
            raise DecodeError("CorrelationId", 0, "response shorter than its correlation id")
        (corr,) = _CORRELATION.unpack_from(payload, 0)
        entry = self._inflight.get(corr)
        if entry is None:
            raise DecodeError("CorrelationId", 0, f"response with correlation id {corr}, which is not in flight")
        api_key, version, fut = entry
        _, body = codec.decode_response(api_key, version, payload)  # raising: the request fails with the rest
        del self._inflight[corr]
        if self.observer:
            self.observer("recv", api_key, version, corr, body, self.peer)
        if not fut.done():
            fut.set_result(body)

    def _end(self, error: RequestError, warn: bool = False) -> None:
        """The connection is over: close it and fail every request in flight with ``error``."""
        if self._ended is None:
            self._ended = error
            if warn:
                log.warning("%s", error)
        if self._writer is not None:
            self._writer.close()
        inflight, self._inflight = self._inflight, {}
        for _key, _version, fut in inflight.values():
            if not fut.done():
                fut.set_exception(error)

    async def close(self) -> None:
        writer, reading = self._writer, self._reading
        if writer is not None:
            self._end(RequestError(f"{self.peer}: connection closed by the client"))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 2)
        if reading is not None and reading is not asyncio.current_task():
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading
        self._writer = self._reader = self._reading = None


# ------------------------------------------------------------------------------------------------ server

class KafkaServer:
    """Accepts connections and answers their requests through one handler."""

    def __init__(
        self,
        handler: Handler,
        api_ranges: Mapping[int, tuple[int, int]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        observer: FrameObserver | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        ssl: SSLContext | None = None,
        sasl: SaslAccounts | None = None,
    ) -> None:
        self._handler = handler
        self._ssl = ssl
        self._sasl = sasl  # SASL the target must log in with (conformance/security.py)
        #: what this server serves (ApiVersions itself included), as its ApiVersions answer says
        self.api_ranges = {API_VERSIONS: codec.supported_versions(API_VERSIONS), **api_ranges}
        if sasl is not None:
            self.api_ranges.update(SASL_RANGES)
        #: the features its ApiVersions v3+ answers list as SupportedFeatures (name -> (min, max))
        self.supported_features: dict[str, tuple[int, int]] = {}
        self._host = host
        self._port = port
        self._observer = observer
        self._max_frame = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port, ssl=self._ssl)

    def open_peers(self) -> set[str]:
        """The peer addresses (``host:port``) of the connections open now, as ServerRequest.peer names them."""
        peers = set()
        for w in self._writers:
            name = w.get_extra_info("peername")
            if name:
                peers.add(f"{name[0]}:{name[1]}")
        return peers

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(t, 2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def _track(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: read requests and queue their answers' slots; a writer sends them in order."""
        me = asyncio.current_task()
        if me is not None:
            self._tasks.add(me)
        self._writers.add(writer)
        name = writer.get_extra_info("peername")
        peer = f"{name[0]}:{name[1]}" if name else "?"
        slots: asyncio.Queue[asyncio.Future[bytes | None] | None] = asyncio.Queue()
        sending = self._track(self._write_answers(slots, writer, peer), f"kraft-tck-server-writer {peer}")
        session = self._sasl.session() if self._sasl is not None else None
        try:
            while True:
                try:
                    payload = await read_frame(reader, self._max_frame)
                except DecodeError as exc:  # oversized or cut short: nothing more can be read
                    log.debug("connection %s: %s", peer, exc)
                    break
                if payload is None:
                    break
                slot = self._answer(payload, peer, session)
                slots.put_nowait(slot)
                if (slot.done() and slot.result() is None) or (session is not None and session.closing):
                    break  # the connection closes there: read no more
        except (ConnectionError, OSError):
            pass
        finally:
            slots.put_nowait(None)  # answers already due still go out, then the connection closes
            with contextlib.suppress(BaseException):
                await sending
            self._writers.discard(writer)
            if me is not None:
                self._tasks.discard(me)

    def _answer(self, payload: bytes, peer: str,
                session: SaslServerSession | None = None) -> asyncio.Future[bytes | None]:
        """The slot of one request's answer: a finished future, or a task running the handler."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes | None] = loop.create_future()
        try:
            header, body = codec.decode_request(payload)
        except UnsupportedVersionError as exc:
            if exc.api_key == API_VERSIONS and exc.correlation_id is not None:
                # KIP-511: an ApiVersions version we do not know is answered at v0 with our ranges.
                answer = api_versions_response(self.api_ranges, Errors.UNSUPPORTED_VERSION)
                done.set_result(codec.encode_response(API_VERSIONS, 0, exc.correlation_id, answer))
            else:
                log.debug("closing %s: %s", peer, exc)
                done.set_result(None)
            return done
        except DecodeError as exc:
            log.debug("closing %s: malformed request: %s", peer, exc)
            done.set_result(None)
            return done
        req = ServerRequest(
            api_key=int(header["RequestApiKey"]),
            api_version=int(header["RequestApiVersion"]),
            correlation_id=int(header["CorrelationId"]),
            client_id=header.get("ClientId"),
            body=body,
            peer=peer,
        )
        if session is not None and req.api_key != API_VERSIONS and (
                not session.authenticated or req.api_key in SASL_RANGES):
            # Before the login only ApiVersions and the SASL apis (Kafka's SaslServerAuthenticator); those
            # are transport, not protocol: the observer does not see them.
            if req.api_key not in SASL_RANGES:
                log.debug("closing %s: api key %d before the SASL login", peer, req.api_key)
                done.set_result(None)
                return done
            answer = session.handle(req.api_key, body)
            done.set_result(codec.encode_response(req.api_key, req.api_version, req.correlation_id, answer))
            return done
        if self._observer:
            self._observer("recv", req.api_key, req.api_version, req.correlation_id, body, peer)
        if req.api_key == API_VERSIONS:
            features = self.supported_features if req.api_version >= 3 else None
            done.set_result(self._frame(req, api_versions_response(self.api_ranges, features=features)))
            return done
        lo_hi = self.api_ranges.get(req.api_key)
        if lo_hi is None or not lo_hi[0] <= req.api_version <= lo_hi[1]:
            log.debug("closing %s: api key %d v%d is not served here", peer, req.api_key, req.api_version)
            done.set_result(None)
            return done
        return self._track(self._run_handler(req), f"kraft-tck-handler {peer} #{req.correlation_id}")

    async def _run_handler(self, req: ServerRequest) -> bytes | None:
        try:
            answer = self._handler(req)
            if inspect.isawaitable(answer):
                answer = await answer
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handler failed for a request from %s; closing the connection", req.peer)
            return None
        if answer is None:
            return None
        return self._frame(req, answer)

    def _frame(self, req: ServerRequest, answer: Body) -> bytes | None:
        try:
            frame = codec.encode_response(req.api_key, req.api_version, req.correlation_id, answer)
        except Exception:
            log.exception("cannot encode the answer to a request from %s; closing the connection", req.peer)
            return None
        if self._observer:
            self._observer("send", req.api_key, req.api_version, req.correlation_id, answer, req.peer)
        return frame

    async def _write_answers(
        self, slots: asyncio.Queue[asyncio.Future[bytes | None] | None], writer: asyncio.StreamWriter, peer: str
    ) -> None:
        try:
            while True:
                slot = await slots.get()
                if slot is None:
                    break
                try:
                    frame = await slot
                except asyncio.CancelledError:
                    if not slot.cancelled():
                        raise
                    frame = None
                if frame is None:
                    break
                writer.write(frame)
                await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %s: %s", peer, exc)
        finally:
            while not slots.empty():  # answers after a close are dropped
                left = slots.get_nowait()
                if left is not None and not left.done():
                    left.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 2)
