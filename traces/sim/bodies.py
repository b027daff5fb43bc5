"""Message events for simulator traces: the core's typed messages as Kafka bodies (spec/trace.schema.json
``msg``), converted by ``reference/wire.py`` and made JSON by ``traces.trace.to_jsonable``.

The simulator passes typed values between cores, never bytes, so only the trace needs the Kafka form.
One shortcut keeps that affordable: a Fetch response's ``Records`` would be encoded by wire and decoded
again by ``to_jsonable`` just to be summarised. Each batch is summarised once instead (batches are
immutable and shared by every log that holds them) and the summary is put where the bytes would go —
the same value ``to_jsonable`` produces (a test compares the two).
"""

from __future__ import annotations

import uuid
from typing import Any

from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchResponse, Request, Response, api_name
from kraft_tck.spec import codec
from kraft_tck.spec.records import RecordBatch, encode_batch
from kraft_tck.traces.trace import batch_summary, to_jsonable


class MessageBodies:
    """Builds ``msg`` objects; caches versions and batch summaries across one run."""

    def __init__(self) -> None:
        self._versions: dict[int, int] = {}
        self._batches: dict[int, tuple[RecordBatch, dict[str, Any], int]] = {}  # id -> (batch, summary, size)

    def version(self, key: int) -> int:
        """The newest version this kit's codec knows: what two reference nodes negotiate."""
        v = self._versions.get(key)
        if v is None:
            v = self._versions[key] = codec.supported_versions(key)[1]
        return v

    def request(self, req: Request, corr: int, src: int, dst: int) -> dict[str, Any]:
        key = wire.api_key(req)
        version = self.version(key)
        body = _jsonable(wire.request_to_body(req, version))
        return _msg(api_name(req), key, "request", version, corr, src, dst, body)

    def response(self, resp: Response, corr: int, src: int, dst: int) -> dict[str, Any]:
        key = wire.api_key(resp)
        version = self.version(key)
        if isinstance(resp, FetchResponse) and resp.batches:
            body = _jsonable(wire.response_to_body(_without_batches(resp), version))
            body["Responses"][0]["Partitions"][0]["Records"] = self.records_summary(resp.batches)
        else:
            body = _jsonable(wire.response_to_body(resp, version))
        return _msg(api_name(resp), key, "response", version, corr, src, dst, body)

    def records_summary(self, batches: tuple[RecordBatch, ...]) -> dict[str, Any]:
        """``summarize_records(encode_batches(batches))`` without encoding or decoding twice."""
        total = 0
        summaries = []
        cache = self._batches
        for b in batches:
            hit = cache.get(id(b))
            if hit is None or hit[0] is not b:
                hit = cache[id(b)] = (b, batch_summary(b), len(encode_batch(b)))
            summaries.append(dict(hit[1]))
            total += hit[2]
        return {"bytes": total, "batches": summaries}


def _jsonable(value: Any) -> Any:
    """``to_jsonable`` for the shapes wire produces (dicts, lists, scalars, uuids), by exact type: the
    generic version's ``Mapping`` isinstance checks are the most expensive part of tracing a message."""
    t = type(value)
    if t is dict:
        return {k: _jsonable(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_jsonable(v) for v in value]
    if t is int or t is str or t is bool or value is None:
        return value
    if t is uuid.UUID:
        return str(value)
    return to_jsonable(value)


def _without_batches(resp: FetchResponse) -> FetchResponse:
    return FetchResponse(
        resp.high_watermark,
        (),
        resp.diverging_epoch,
        resp.current_leader,
        resp.partition_error,
        resp.error,
        resp.log_start_offset,
    )


def _msg(
    api: str, key: int, kind: str, version: int, corr: int, src: int, dst: int, body: dict[str, Any]
) -> dict[str, Any]:
    return {
        "api": api,
        "apiKey": key,
        "kind": kind,
        "version": version,
        "correlationId": corr,
        "from": src,
        "to": dst,
        "body": body,
    }
