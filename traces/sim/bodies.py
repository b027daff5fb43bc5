"""Message events for simulator traces: the core's typed messages as Kafka bodies (spec/trace.schema.json
``msg``), converted by ``reference/wire.py`` and encoded once per message (``traces.trace.Encoded``): the
Send event and every Receive of a message carry the same ``msg``. Bodies are encoded as wire makes them
(uuids and all); the encoder writes them as ``to_jsonable`` would, without a converted copy of each.

The simulator passes typed values between cores, never bytes, so only the trace needs the Kafka form.
One shortcut keeps that affordable: a Fetch response's ``Records`` would be encoded by wire and decoded
again by the trace encoder just to be summarised. Each batch is summarised once instead (batches are
immutable and shared by every log that holds them) and the summary is put where the bytes would go —
the same value ``to_jsonable`` produces (a test compares the two).
"""

from __future__ import annotations

from typing import Any

from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchResponse, Request, Response, api_name
from kraft_tck.spec import codec
from kraft_tck.spec.records import HEADER_SIZE, RecordBatch, crc32c, encode_batch
from kraft_tck.traces.trace import Encoded, batch_summary


class MessageBodies:
    """Builds encoded ``msg`` objects; caches versions and batch summaries across one run."""

    def __init__(self) -> None:
        self._versions: dict[int, int] = {}
        self._batches: dict[int, tuple[RecordBatch, dict[str, Any], int]] = {}  # id -> (batch, summary, size)

    def version(self, key: int) -> int:
        """The newest version this kit's codec knows: what two reference nodes negotiate."""
        v = self._versions.get(key)
        if v is None:
            v = self._versions[key] = codec.supported_versions(key)[1]
        return v

    def request(self, req: Request, corr: int, src: int, dst: int) -> Encoded:
        key = wire.api_key(req)
        version = self.version(key)
        body = wire.request_to_body(req, version)
        return Encoded(_msg(api_name(req), key, "request", version, corr, src, dst, body))

    def response(self, resp: Response, corr: int, src: int, dst: int) -> Encoded:
        key = wire.api_key(resp)
        version = self.version(key)
        if isinstance(resp, FetchResponse) and resp.batches:
            body = wire.response_to_body(_without_batches(resp), version)
            body["Responses"][0]["Partitions"][0]["Records"] = self.records_summary(resp.batches, resp.encoded)
        else:
            body = wire.response_to_body(resp, version)
        return Encoded(_msg(api_name(resp), key, "response", version, corr, src, dst, body))

    def records_summary(
        self, batches: tuple[RecordBatch, ...], encoded: tuple[bytes, ...] | None = None
    ) -> dict[str, Any]:
        """``summarize_records(encode_batches(batches))`` without encoding or decoding twice. ``encoded``:
        the batches' bytes when the response carries them (what wire sends then), so none is encoded."""
        total = 0
        summaries = []
        cache = self._batches
        for i, b in enumerate(batches):
            hit = cache.get(id(b))
            if hit is None or hit[0] is not b:
                if encoded is None:
                    hit = (b, batch_summary(b), len(encode_batch(b)))
                else:
                    data = encoded[i]
                    # spec.records.batch_digest from the bytes: the CRC32C of the records section
                    digest = f"{crc32c(memoryview(data)[HEADER_SIZE:]):08x}"
                    summary = {"baseOffset": b.base_offset, "lastOffset": b.last_offset,
                               "epoch": b.partition_leader_epoch, "control": b.is_control, "digest": digest}
                    hit = (b, summary, len(data))
                cache[id(b)] = hit
            summaries.append(hit[1])  # shared, never changed: the line is encoded, not kept
            total += hit[2]
        return {"bytes": total, "batches": summaries}


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
