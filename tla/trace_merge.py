"""Merge: one trace of a cluster from the traces its nodes wrote (one file per node incarnation)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kraft_tck.tla.trace_translate import TraceFormatError, message_key

#: What a Restart recovers from disk; a traced step that changed none of it on disk never took effect.
#: (``logStartOffset``, KIP-630: absent in a state means 0.)
_DURABLE = ("epoch", "votedId", "logEndOffset", "lastFetchedEpoch", "logStartOffset")
_ABSENT = {"logStartOffset": 0}


def _torn_step(stream: list[dict[str, Any]], restart: dict[str, Any]) -> int:
    """Where the incarnation before ``restart`` really ended: ``len(stream)``, or the first event of its
    last steps when a kill -9 tore them. The node writes a step's trace before its disk changes and its
    messages after both, so such a step is traced, not durable, and announced nothing: the same as a crash
    just before it. It is cut only where the state before it is what the Restart recovered."""
    def durable(state: dict[str, Any]) -> dict[str, Any]:
        return {k: state.get(k, _ABSENT.get(k)) for k in _DURABLE}

    recovered = durable(restart["state"])

    # the ending incarnation only: from its Restart on (whose own row is never cut)
    start = max((i for i, obj in enumerate(stream) if obj["event"] == "Restart"), default=0)
    states = [i for i in range(start, len(stream)) if "state" in stream[i]]
    if not states or durable(stream[states[-1]]["state"]) == recovered:
        return len(stream)
    last_send = max((i for i in range(start, len(stream)) if stream[i]["event"] == "Send"), default=-1)
    for before, at in zip(reversed(states[:-1]), reversed(states[1:]), strict=True):
        if at <= last_send:
            break  # announced: its effect must have survived
        if durable(stream[before]["state"]) == recovered:
            return at
    return len(stream)  # not a torn step: validation says where the restart goes wrong


def merge_node_traces(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Write one trace of a cluster from the traces its nodes wrote (``kraft-tck node --trace-file``).

    Each node's files (one per incarnation, in the order given) keep their order; across nodes the
    events are merged by timestamp, except that a ``Receive`` never goes before the ``Send`` of the same
    message (clocks tick in milliseconds, so a message can be sent and received in the same one). The last
    steps of an incarnation that kill -9 kept from disk are left out (``_torn_step``).
    """
    streams: dict[int, list[dict[str, Any]]] = {}
    header: dict[str, Any] | None = None
    for path in paths:
        lines = [json.loads(raw) for raw in Path(path).read_text().splitlines() if raw.strip()]
        if not lines or lines[0].get("type") != "header":
            raise TraceFormatError(f"{path}: the first line must be the header")
        if header is None:
            header = dict(lines[0])
        elif lines[0]["voters"] != header["voters"]:
            raise TraceFormatError(f"{path}: voters differ from {paths[0]}")
        elif lines[0].get("clusterId") and header.get("clusterId") != lines[0]["clusterId"]:
            # a node that started unformatted writes its later headers with the id it adopted
            if header.get("clusterId"):
                raise TraceFormatError(f"{path}: cluster id differs from {paths[0]}")
            header["clusterId"] = lines[0]["clusterId"]
        for obj in lines[1:]:
            stream = streams.setdefault(obj["node"], [])
            if obj["event"] == "Restart" and stream:
                del stream[_torn_step(stream, obj):]
            stream.append(obj)
    if header is None:
        raise TraceFormatError("merge_node_traces: no trace files given")
    # Per message key: sends still to come, and copies sent but not yet received. Keys leave out the body
    # and correlation ids restart with every incarnation, so a key recurs: matching is first in, first out.
    to_come: dict[str, int] = {}
    for stream in streams.values():
        for obj in stream:
            if obj["event"] == "Send" and "msg" in obj:
                key = message_key(obj["msg"])
                to_come[key] = to_come.get(key, 0) + 1
    in_flight: dict[str, int] = {}
    addressed: dict[int, set[str]] = {}  # receiver -> keys with copies in flight to it
    heads = {node: 0 for node in streams}
    merged: list[dict[str, Any]] = []

    def ready(obj: dict[str, Any]) -> bool:
        if obj["event"] != "Receive" or "msg" not in obj or obj["msg"]["from"] not in streams:
            return True
        key = message_key(obj["msg"])
        # a copy is on its way, or no send is left that it could be (a duplicate, or a send the sender's
        # trace lost to kill -9)
        return in_flight.get(key, 0) > 0 or to_come.get(key, 0) == 0

    while any(heads[n] < len(streams[n]) for n in streams):
        candidates = [n for n in streams if heads[n] < len(streams[n]) and ready(streams[n][heads[n]])]
        if not candidates:  # a Receive whose Send comes later everywhere: the clocks disagree, keep ts order
            candidates = [n for n in streams if heads[n] < len(streams[n])]
        node = min(candidates, key=lambda n: (streams[n][heads[n]]["ts"], n))
        obj = streams[node][heads[node]]
        heads[node] += 1
        if obj["event"] == "Restart":
            # what was addressed to the old incarnation died with its connections
            for key in addressed.pop(node, set()):
                in_flight.pop(key, None)
        elif obj["event"] == "Send" and "msg" in obj:
            key = message_key(obj["msg"])
            to_come[key] -= 1
            in_flight[key] = in_flight.get(key, 0) + 1
            addressed.setdefault(obj["msg"]["to"], set()).add(key)
        elif obj["event"] == "Receive" and "msg" in obj:
            key = message_key(obj["msg"])
            if in_flight.get(key, 0) > 0:
                in_flight[key] -= 1
        merged.append(obj)
    out = Path(out)
    head = dict(header, run=f"merged:{header.get('run', '')}")
    with out.open("w") as f:
        f.write(json.dumps(head) + "\n")
        for seq, obj in enumerate(merged):
            f.write(json.dumps(dict(obj, seq=seq)) + "\n")
    return out
