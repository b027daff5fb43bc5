"""bench/bench_commit_timeline.py's probe, loaded by node processes that find this directory first on PYTHONPATH.

With ``KRAFT_TCK_TIMELINE_DIR`` set, it timestamps (``time.perf_counter_ns``, one clock for every process of the
machine) each socket read and write of the node's server and clients, the leader's client writes and their commits,
and writes them to ``DIR/<pid>.json`` when the process exits. It wraps private methods of reference/net.py and
reference/node.py: a benchmark's probe, never loaded by the node itself, and it fails loudly if they change. Each
probe costs about half a microsecond, so the timeline is a little slower than the benchmark's own rounds."""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any

_DIR = os.environ.get("KRAFT_TCK_TIMELINE_DIR")


def _install(out_dir: str) -> None:
    from kraft_tck.reference import net, node

    events: list[tuple[int, str, int]] = []  # (ns, what, connection: the connection's ephemeral port, or 0)
    now = time.perf_counter_ns

    def dump() -> None:
        with open(os.path.join(out_dir, f"{os.getpid()}.json"), "w") as fh:
            json.dump(events, fh)

    atexit.register(dump)

    def conn_of(transport: Any) -> int:
        """Both ends of a loopback connection name it alike: its larger port (the client's ephemeral one)."""
        try:
            return max(transport.get_extra_info("sockname")[1], transport.get_extra_info("peername")[1])
        except (TypeError, IndexError):
            return 0

    class Probe:
        """A transport whose writes are timestamped before they are made."""

        def __init__(self, transport: Any, what: str) -> None:
            self._transport, self._what, self._conn = transport, what, conn_of(transport)

        def write(self, data: bytes) -> None:
            events.append((now(), self._what, self._conn))
            self._transport.write(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._transport, name)

    responses_init = net._InOrderResponses.__init__

    def responses(self: Any, transport: Any, *args: Any, **kwargs: Any) -> None:
        responses_init(self, Probe(transport, "answer out"), *args, **kwargs)

    net._InOrderResponses.__init__ = responses

    def get_transport(self: Any) -> Any:
        return self.__dict__.get("_probe")

    def set_transport(self: Any, transport: Any) -> None:
        self.__dict__["_probe"] = None if transport is None else Probe(transport, "request out")

    net.KafkaClient._transport = property(get_transport, set_transport)

    def reads(cls: Any, what: str, transport_of: Any) -> None:
        read = cls.buffer_updated

        def buffer_updated(self: Any, nbytes: int) -> None:
            conn = self.__dict__.get("_probe_conn")
            if conn is None:
                transport = transport_of(self)
                conn = self.__dict__["_probe_conn"] = conn_of(getattr(transport, "_transport", transport))
            events.append((now(), what, conn))
            read(self, nbytes)

        cls.buffer_updated = buffer_updated

    reads(net._ServerConnection, "request in", lambda self: self._transport)
    reads(net._ClientProtocol, "answer in", lambda self: self._client._transport)

    append = node.Node._append

    def timed_append(self: Any, batch: Any) -> Any:
        events.append((now(), "client write", 0))
        return append(self, batch)

    node.Node._append = timed_append
    release = node.Node._release_commits

    def timed_release(self: Any) -> Any:
        waiting = len(self._commit_waiters)
        released = release(self)
        if len(self._commit_waiters) < waiting:
            events.append((now(), "committed", 0))
        return released

    node.Node._release_commits = timed_release


if _DIR:
    _install(_DIR)
