"""Codec throughput: kraft_tck.spec.codec vs kafka-python's protocol classes, in the same run.

Run: ``python bench/bench_codec.py`` (``--seconds`` per measurement, default 2). Prints one row per
workload with encode+decode operations per second for both codecs and the ratio ours/theirs (> 1 means
we are faster). Workloads:

* a Fetch v16 response carrying 1 MiB of uncompressed RecordBatch v2 data (one partition);
* a DescribeQuorum v2 response with 5 voters, 20 observers and their listener endpoints.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from kraft_tck.spec import codec, records
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
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
