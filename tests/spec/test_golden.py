"""Golden vectors: frames checked byte by byte against bytes derived by hand from the protocol rules."""

from __future__ import annotations

import re
import uuid

from kraft_tck.spec import codec


def h(text: str) -> bytes:
    """Hex bytes, one group per line; two or more spaces start a comment."""
    hexes = [re.split(r"\s{2,}", line.strip())[0] for line in text.splitlines()]
    return bytes.fromhex("".join("".join(hexes).split()))


def test_vote_request_v0() -> None:
    body = {
        "ClusterId": "abc",
        "Topics": [
            {
                "TopicName": "t",
                "Partitions": [
                    {
                        "PartitionIndex": 0,
                        "CandidateEpoch": 3,
                        "CandidateId": 1,
                        "LastOffsetEpoch": 2,
                        "LastOffset": 10,
                    }
                ],
            }
        ],
    }
    expected = h(
        """
        0000002f                 length 47
        0034 0000 00000007       api key 52, version 0, correlation id 7 (header v2: Vote is flexible from 0)
        0001 63                  client id: int16-length string even in header v2 ("flexibleVersions": "none")
        00                       header tagged fields
        04 616263                ClusterId: compact string, length+1
        02                       Topics: compact array of 1
        02 74                    TopicName "t"
        02                       Partitions: 1
        00000000 00000003 00000001 00000002 000000000000000a
        00 00 00                 partition, topic and body tagged fields
        """
    )
    assert codec.encode_request(52, 0, 7, "c", body) == expected
    header, decoded = codec.decode_request(expected[4:])
    assert header == {"RequestApiKey": 52, "RequestApiVersion": 0, "CorrelationId": 7, "ClientId": "c"}
    assert decoded == body


def test_api_versions_v3_request() -> None:
    body = {"ClientSoftwareName": "kraft-tck", "ClientSoftwareVersion": "0.1"}
    expected = h(
        """
        0000001f                 length 31
        0012 0003 0000002a       ApiVersions v3, correlation id 42: request header v2
        0005 6b72616674          client id "kraft" as an int16-length string
        00                       header tagged fields
        0a 6b726166742d74636b    ClientSoftwareName, compact (9+1)
        04 302e31                ClientSoftwareVersion "0.1"
        00
        """
    )
    assert codec.encode_request(18, 3, 42, "kraft", body) == expected
    assert codec.decode_request(expected[4:])[1] == body


def test_api_versions_v3_response_uses_header_v0() -> None:
    body = {
        "ErrorCode": 0,
        "ApiKeys": [{"ApiKey": 52, "MinVersion": 0, "MaxVersion": 1}],
        "ThrottleTimeMs": 0,
    }
    expected = h(
        """
        00000013                 length 19
        0000002a                 response header v0: no tagged-field byte even though v3 is flexible
        0000                     ErrorCode
        02 0034 0000 0001 00     ApiKeys: one entry + its tagged fields
        00000000                 ThrottleTimeMs
        00                       body tagged fields (none of SupportedFeatures etc. differ from default)
        """
    )
    assert codec.encode_response(18, 3, 42, body) == expected
    assert codec.decode_response(18, 3, expected[4:]) == (
        42,
        {
            **body,
            "SupportedFeatures": [],
            "FinalizedFeaturesEpoch": -1,
            "FinalizedFeatures": [],
            "ZkMigrationReady": False,
        },
    )


def test_fetch_response_v13_with_diverging_epoch() -> None:
    topic = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    body = {
        "ThrottleTimeMs": 0,
        "ErrorCode": 0,
        "SessionId": 0,
        "Responses": [
            {
                "TopicId": topic,
                "Partitions": [
                    {
                        "PartitionIndex": 0,
                        "ErrorCode": 0,
                        "HighWatermark": 5,
                        "LastStableOffset": -1,
                        "LogStartOffset": -1,
                        "AbortedTransactions": None,
                        "PreferredReadReplica": -1,
                        "Records": None,
                        "DivergingEpoch": {"Epoch": 2, "EndOffset": 7},
                        "CurrentLeader": {"LeaderId": -1, "LeaderEpoch": -1},
                        "SnapshotId": {"EndOffset": -1, "Epoch": -1},
                    }
                ],
            }
        ],
    }
    expected = h(
        """
        00000057                 length 87
        00000009 00              response header v1: correlation id 9 + tagged fields
        00000000 0000 00000000   ThrottleTimeMs, ErrorCode, SessionId
        02                       Responses: 1
        00112233445566778899aabbccddeeff
        02                       Partitions: 1
        00000000 0000 0000000000000005 ffffffffffffffff ffffffffffffffff
        00                       AbortedTransactions: null (compact)
        ffffffff                 PreferredReadReplica
        00                       Records: null (compact)
        01                       one tagged field
        00 0d                    tag 0 (DivergingEpoch), 13 bytes:
        00000002 0000000000000007 00   Epoch, EndOffset, the struct's own tagged fields
        00 00                    topic and body tagged fields
        """
    )
    assert codec.encode_response(1, 13, 9, body) == expected
    assert codec.decode_response(1, 13, expected[4:]) == (9, body)


def test_quorum_state_data_v1() -> None:
    body = {"LeaderId": 2, "LeaderEpoch": 5, "VotedId": -1, "VotedDirectoryId": uuid.UUID(int=1)}
    expected = h("00000002 00000005 ffffffff 00000000000000000000000000000001 00")
    assert codec.encode_data("QuorumStateData", 1, body) == expected
    assert codec.decode_data("QuorumStateData", 1, expected) == body


def test_unsupported_api_versions_answer() -> None:
    frame = codec.unsupported_version_response(18, 9, 77)
    corr, body = codec.decode_response(18, 0, frame[4:])
    assert corr == 77
    assert body["ErrorCode"] == 35  # UNSUPPORTED_VERSION
    ranges = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in body["ApiKeys"]}
    assert ranges[18] == (0, 4) and ranges[52] == (0, 2) and ranges[1] == (0, 17)  # Vote v2: KIP-996
    # v0 body: int16 error, int32-count array of (int16, int16, int16); no throttle time.
    assert frame[4:12] == h("0000004d 0023 0000")
