"""Message events for simulator traces: the core's typed messages as Kafka bodies (spec/trace.schema.json
``msg``), converted by ``reference/wire.py`` and encoded once per message: the Send event and every
Receive of a message carry the same ``msg`` bytes. Bodies are encoded as wire makes them
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
from kraft_tck.spec.trace import batch_summary, encode_line

#: Kafka's api key of Vote.
VOTE_API_KEY = 52


class MessageBodies:
    """Builds encoded ``msg`` objects; caches versions, each message type's constant head and batch
    summaries across one run."""

    def __init__(self, pre_vote: bool = False) -> None:
        self._versions: dict[int, int] = {}
        # Vote v2 carries PreVote (KIP-996); a node without pre-vote advertises and sends Vote 0-1
        # (reference/config.py PRE_VOTE_KEY), so two of them negotiate v1.
        self._pre_vote = pre_vote
        self._batches: dict[int, tuple[RecordBatch, dict[str, Any], int]] = {}  # id -> (batch, summary, size)
        # message type -> (version, the encoded msg up to its correlation id)
        self._heads: dict[type, tuple[int, bytes]] = {}

    def version(self, key: int) -> int:
        """The newest version this kit's codec knows: what two reference nodes negotiate."""
        v = self._versions.get(key)
        if v is None:
            v = codec.supported_versions(key)[1]
            if key == VOTE_API_KEY and not self._pre_vote:
                v = min(v, 1)
            self._versions[key] = v
        return v

    def _head(self, message: Request | Response, kind: str) -> tuple[int, bytes]:
        """A ``msg`` is ``{"api", "apiKey", "kind", "version", "correlationId", "from", "to", "body"}`` in
        this order; everything before the correlation id is the same for every message of one type and
        is encoded once per run."""
        key = wire.api_key(message)
        version = self.version(key)
        head = b'{"api":%b,"apiKey":%d,"kind":"%b","version":%d,"correlationId":' % (
            encode_line(api_name(message)), key, kind.encode(), version
        )
        self._heads[type(message)] = hit = (version, head)
        return hit

    def request(self, req: Request, corr: int, src: int, dst: int) -> bytes:
        """The encoded ``msg`` of a request, from its type's head and the encoded body: the bytes
        ``encode_line`` gives the whole ``msg`` dict, since it writes a dict's values as it writes them alone."""
        hit = self._heads.get(type(req))
        version, head = hit if hit is not None else self._head(req, "request")
        body = encode_line(wire.request_to_body(req, version))
        return b'%b%d,"from":%d,"to":%d,"body":%b}' % (head, corr, src, dst, body)

    def response(self, resp: Response, corr: int, src: int, dst: int) -> bytes:
        """Like ``request``, for a response (a Fetch response's records summarised, see the module doc)."""
        hit = self._heads.get(type(resp))
        version, head = hit if hit is not None else self._head(resp, "response")
        if type(resp) is FetchResponse and resp.batches:
            body = wire.response_to_body(_without_batches(resp), version)
            body["Responses"][0]["Partitions"][0]["Records"] = self.records_summary(resp.batches, resp.encoded)
        else:
            body = wire.response_to_body(resp, version)
        return b'%b%d,"from":%d,"to":%d,"body":%b}' % (head, corr, src, dst, encode_line(body))

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

