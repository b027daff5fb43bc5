"""Codec throughput: kraft_tck.spec.codec vs kafka-python's protocol classes, in the same run.

Run: ``python bench/bench_codec.py`` (``--seconds`` per measurement, default 2). Prints one row per
workload with encode+decode operations per second for both codecs and the ratio ours/theirs (> 1 means
we are faster). Workloads:

* a Fetch v16 response carrying 1 MiB of uncompressed RecordBatch v2 data (one partition);
* a DescribeQuorum v2 response with 5 voters, 20 observers and their listener endpoints.

A second table times RecordBatch v2 alone (``spec.records``), the per-record work of a leader (build a
data batch and encode it) and of a follower (decode a batch, CRC check included), for 1,000 records of
100 bytes, against kafka-python's DefaultRecordBatchBuilder / DefaultRecordBatch on the same bytes.

A third table times one socket read of a Fetch-sized frame on loopback TCP, cut by ``FrameSplitter``: the
way reference/net.py reads (into the splitter's reused buffer, as an ``asyncio.BufferedProtocol``)
against the way an ``asyncio.Protocol`` is fed (a fresh ``bytes`` of asyncio's read size per read).
"""

from __future__ import annotations

import argparse
import asyncio.selector_events
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kraft_tck.spec import codec, records
from kraft_tck.spec.framing import FrameSplitter, frame
from kraft_tck.spec.kafka_python_bridge import to_kafka_python


def fetch_body() -> dict[str, Any]:
    batches = []
    offset = 0
    size = 0
    while size < 1 << 20:
        values = [bytes([i % 256]) * 1000 for i in range(16)]
        b = records.data_batch(offset, 3, values, timestamp=1_700_000_000_000)
        raw = records.encode_batch(b)
        batches.append(raw)
        size += len(raw)
        offset += 16
    return {
        "ThrottleTimeMs": 0,
        "ErrorCode": 0,
        "SessionId": 0,
        "Responses": [
            {
                "TopicId": uuid.UUID(int=1),
                "Partitions": [
                    {
                        "PartitionIndex": 0,
                        "ErrorCode": 0,
                        "HighWatermark": offset,
                        "LastStableOffset": offset,
                        "LogStartOffset": 0,
                        "AbortedTransactions": None,
                        "PreferredReadReplica": -1,
                        "Records": b"".join(batches),
                        "DivergingEpoch": {"Epoch": -1, "EndOffset": -1},
                        "CurrentLeader": {"LeaderId": 1, "LeaderEpoch": 3},
                        "SnapshotId": {"EndOffset": -1, "Epoch": -1},
                    }
                ],
            }
        ],
        "NodeEndpoints": [],
    }


def describe_quorum_body() -> dict[str, Any]:
    def replica(i: int) -> dict[str, Any]:
        return {
            "ReplicaId": i,
            "ReplicaDirectoryId": uuid.UUID(int=i + 1),
            "LogEndOffset": 1000 + i,
            "LastFetchTimestamp": 1_700_000_000_000 + i,
            "LastCaughtUpTimestamp": 1_700_000_000_000 - i,
        }

    return {
        "ErrorCode": 0,
        "ErrorMessage": None,
        "Topics": [
            {
                "TopicName": "__cluster_metadata",
                "Partitions": [
                    {
                        "PartitionIndex": 0,
                        "ErrorCode": 0,
                        "ErrorMessage": None,
                        "LeaderId": 1,
                        "LeaderEpoch": 7,
                        "HighWatermark": 1000,
                        "CurrentVoters": [replica(i) for i in range(5)],
                        "Observers": [replica(i) for i in range(100, 120)],
                    }
                ],
            }
        ],
        "Nodes": [
            {"NodeId": i, "Listeners": [{"Name": "CONTROLLER", "Host": f"10.0.0.{i}", "Port": 9093}]}
            for i in range(5)
        ],
    }


def rate(fn: Callable[[], object], seconds: float) -> float:
    fn()  # warm up (compiles plans on both sides)
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        fn()
        n += 1
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--socket-reads", action="store_true", help="only the socket read table, in this process")
    args = parser.parse_args()
    if args.socket_reads:
        socket_read_table(args.seconds)
        return

    from kafka.protocol.admin.cluster import DescribeQuorumResponse
    from kafka.protocol.consumer.fetch import FetchResponse

    workloads = [
        ("Fetch v16 response, 1 MiB records", 1, 16, fetch_body(), FetchResponse),
        ("DescribeQuorum v2 response, 25 replicas", 55, 2, describe_quorum_body(), DescribeQuorumResponse),
    ]
    rows = []
    for label, api_key, version, body, kp_cls in workloads:
        frame = codec.encode_response(api_key, version, 1, body)
        kp_obj = to_kafka_python(kp_cls._struct, kp_cls, body, version)
        kp_obj.with_header(correlation_id=1)
        kp_frame = bytes(kp_obj.encode(header=True, framed=True))
        assert kp_frame == frame, f"{label}: the two codecs disagree on the bytes"

        def ours(api_key: int = api_key, version: int = version, body: dict[str, Any] = body) -> None:
            f = codec.encode_response(api_key, version, 1, body)
            codec.decode_response(api_key, version, memoryview(f)[4:])

        def theirs(obj: Any = kp_obj, cls: Any = kp_cls, version: int = version) -> None:
            f = obj.encode(header=True, framed=True)
            cls.decode(memoryview(f)[4:], version=version, header=True)

        r_ours = rate(ours, args.seconds)
        r_theirs = rate(theirs, args.seconds)
        rows.append((label, len(frame), r_ours, r_theirs))

    print(
        f"{'workload':42} {'frame bytes':>12} {'kraft-tck ops/s':>16} {'kafka-python ops/s':>19} {'ratio':>7}"
    )
    for label, size, r_ours, r_theirs in rows:
        print(f"{label:42} {size:12d} {r_ours:16.0f} {r_theirs:19.0f} {r_ours / r_theirs:7.2f}")
    print("(ops = one encode + one decode of the whole framed response; ratio = kraft-tck / kafka-python)")
    print()
    record_batch_table(args.seconds)
    print()
    # In a new process: how large reads cost depends on the heap's history (glibc serves 256 KiB with a
    # fresh mmap until a large enough block has been freed, as the 1 MiB workloads above do); a node
    # process, like the child, never frees one.
    subprocess.run([sys.executable, __file__, "--socket-reads", "--seconds", str(args.seconds)], check=True)


RECORDS, RECORD_BYTES = 1000, 100


def record_batch_table(seconds: float) -> None:
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    values = [bytes([i % 256]) * RECORD_BYTES for i in range(RECORDS)]
    data = records.encode_batch(records.data_batch(0, 3, values, timestamp=1_700_000_000_000))

    def kp_encode() -> bytes:
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, batch_size=1 << 30,
        )
        for i, v in enumerate(values):
            builder.append(i, timestamp=1_700_000_000_000, key=None, value=v, headers=[])
        return bytes(builder.build())

    def kp_decode() -> None:
        batch = DefaultRecordBatch(bytearray(data))
        assert batch.validate_crc()
        for _ in batch:
            pass

    # Same bytes from both builders except the leader epoch kafka-python leaves at 0 (bytes 12..16).
    assert kp_encode()[16:] == data[16:], "kafka-python and kraft-tck encode the batch differently"
    assert records.decode_batch(data)[0].records[-1].value == values[-1]
    workloads = [
        ("build data_batch + encode", lambda: records.encode_batch(records.data_batch(0, 3, values)), kp_encode),
        ("decode (CRC checked)", lambda: records.decode_batch(data), kp_decode),
    ]
    print(f"RecordBatch v2, {RECORDS} records of {RECORD_BYTES} bytes")
    print(f"{'workload':42} {'kraft-tck us/rec':>16} {'kafka-python us/rec':>19} {'ratio':>7}")
    for label, ours, theirs in workloads:
        r_ours, r_theirs = rate(ours, seconds), rate(theirs, seconds)
        us_ours, us_theirs = 1e6 / (r_ours * RECORDS), 1e6 / (r_theirs * RECORDS)
        print(f"{label:42} {us_ours:16.2f} {us_theirs:19.2f} {r_ours / r_theirs:7.2f}")
    print("(us/rec = microseconds per record, wall clock; ratio = kraft-tck speed / kafka-python speed)")


# What an asyncio.Protocol's transport asks of each read (asyncio's selector transport, CPython 3.11).
PROTOCOL_READ = getattr(asyncio.selector_events._SelectorSocketTransport, "max_size", 256 * 1024)
FETCH_FRAME = frame(b"f" * 254)  # the size of a Fetch response carrying one 100-byte record


def socket_read_table(seconds: float) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    out = socket.create_connection(server.getsockname())
    into, _ = server.accept()
    for s in (out, into):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def measure(read: Callable[[FrameSplitter], None]) -> float:
        """Microseconds per read + cut, the frame's send excluded."""
        splitter, spent, n = FrameSplitter(), 0.0, 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            out.sendall(FETCH_FRAME)
            t0 = time.perf_counter()
            read(splitter)
            if splitter.next_frame() is None:
                raise RuntimeError("one read did not hold the whole frame")
            spent += time.perf_counter() - t0
            n += 1
        return spent / n * 1e6

    def fed(splitter: FrameSplitter) -> None:
        splitter.feed(into.recv(PROTOCOL_READ))

    def buffered(splitter: FrameSplitter) -> None:
        splitter.buffer_updated(into.recv_into(splitter.get_buffer()))

    try:
        measure(buffered)  # warm up
        us_fed, us_buffered = measure(fed), measure(buffered)
    finally:
        for s in (out, into, server):
            s.close()
    print(f"one socket read of a {len(FETCH_FRAME)}-byte frame, loopback TCP, cut into its payload")
    rows = [("recv_into the splitter's reused buffer (BufferedProtocol)", us_buffered),
            (f"recv({PROTOCOL_READ}) into a new bytes, fed (asyncio.Protocol)", us_fed)]
    print(f"{'read':62} {'us/read':>8}")
    for label, us in rows:
        print(f"{label:62} {us:8.2f}")
    print(f"(ratio {us_fed / us_buffered:.1f}x: a read buffer that large is a fresh mmap and munmap each time)")


if __name__ == "__main__":
    main()
