"""Round trip every message at every version: decode(encode(x)) == x and re-encoding reproduces the bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kraft_tck.spec import codec
from kraft_tck.spec.strategies import body_strategy

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

API_CASES = [
    (key, version)
    for key in codec.api_keys()
    for version in range(codec.supported_versions(key)[0], codec.supported_versions(key)[1] + 1)
]
DATA_CASES = [
    (name, version)
    for name in codec.message_names()
    if codec.message_def(name).type in ("data", "metadata")
    for version in range(codec.message_def(name).valid.lo, codec.message_def(name).valid.hi + 1)
]


def test_every_kraft_api_is_defined() -> None:
    names = {codec.api_name(k) for k in codec.api_keys()}
    assert {
        "ApiVersions",
        "Vote",
        "BeginQuorumEpoch",
        "EndQuorumEpoch",
        "Fetch",
        "FetchSnapshot",
        "DescribeQuorum",
        "BrokerRegistration",
        "BrokerHeartbeat",
    } <= names
    assert codec.supported_versions(codec.api_key_of("Fetch")) == (0, 17)
    assert codec.supported_versions(codec.api_key_of("DescribeQuorum")) == (0, 2)
    assert codec.supported_versions(codec.api_key_of("ApiVersions")) == (0, 4)


@pytest.mark.parametrize(("api_key", "version"), API_CASES, ids=lambda x: str(x))
def test_request_round_trip(api_key: int, version: int) -> None:
    @SETTINGS
    @given(body_strategy(codec.api_name(api_key) + "Request", version))
    def check(body: dict[str, Any]) -> None:
        frame = codec.encode_request(api_key, version, 1234, "kraft-tck", body)
        header, decoded = codec.decode_request(frame[4:])
        assert header == {
            "RequestApiKey": api_key,
            "RequestApiVersion": version,
            "CorrelationId": 1234,
            "ClientId": "kraft-tck",
        }
        assert decoded == body
        assert codec.encode_request(api_key, version, 1234, header["ClientId"], decoded) == frame

    check()


@pytest.mark.parametrize(("api_key", "version"), API_CASES, ids=lambda x: str(x))
def test_response_round_trip(api_key: int, version: int) -> None:
    @SETTINGS
    @given(body_strategy(codec.api_name(api_key) + "Response", version))
    def check(body: dict[str, Any]) -> None:
        frame = codec.encode_response(api_key, version, -7, body)
        correlation_id, decoded = codec.decode_response(api_key, version, frame[4:])
        assert correlation_id == -7
        assert decoded == body
        assert codec.encode_response(api_key, version, correlation_id, decoded) == frame

    check()


@pytest.mark.parametrize(("name", "version"), DATA_CASES, ids=lambda x: str(x))
def test_data_round_trip(name: str, version: int) -> None:
    @SETTINGS
    @given(body_strategy(name, version))
    def check(body: dict[str, Any]) -> None:
        data = codec.encode_data(name, version, body)
        decoded = codec.decode_data(name, version, data)
        assert decoded == body
        assert codec.encode_data(name, version, decoded) == data
        if codec.message_def(name).type == "metadata":
            framed = codec.encode_metadata_record(name, version, body)
            assert codec.decode_metadata_record(framed) == (name, version, body)

    check()


def test_absent_fields_take_defaults() -> None:
    frame = codec.encode_response(1, 13, 1, {"Responses": [{"Partitions": [{"PartitionIndex": 3}]}]})
    _, body = codec.decode_response(1, 13, frame[4:])
    part = body["Responses"][0]["Partitions"][0]
    assert part["PartitionIndex"] == 3
    assert part["LastStableOffset"] == -1 and part["PreferredReadReplica"] == -1
    assert part["DivergingEpoch"] == {"Epoch": -1, "EndOffset": -1}
    assert part["Records"] is None


def test_unknown_tagged_fields_survive() -> None:
    body: dict[str, Any] = {"ClusterId": None, "Topics": [], codec.UNKNOWN_TAGGED: {7: b"\x01\x02", 90: b""}}
    frame = codec.encode_request(52, 1, 1, None, body)
    _, decoded = codec.decode_request(frame[4:])
    assert decoded[codec.UNKNOWN_TAGGED] == {7: b"\x01\x02", 90: b""}
    assert codec.encode_request(52, 1, 1, None, decoded) == frame


def test_encode_errors_name_the_field() -> None:
    with pytest.raises(codec.EncodeError, match="PartitionIndex"):
        codec.encode_response(1, 13, 1, {"Responses": [{"Partitions": [{"PartitionIndex": 1 << 40}]}]})
    with pytest.raises(codec.EncodeError, match="NoSuchField"):
        codec.encode_request(52, 0, 1, None, {"NoSuchField": 1})
    # VoterId is ignorable (added in v1), so a v0 request silently drops it, as Kafka does...
    codec.encode_request(52, 0, 1, None, {"VoterId": 4, "Topics": []})
    # ...but a non-ignorable field that does not exist at the version is refused.
    with pytest.raises(codec.EncodeError, match="ReplicaDirectoryId"):
        codec.encode_response(
            55,
            1,
            1,
            {
                "Topics": [
                    {
                        "Partitions": [
                            {
                                "CurrentVoters": [
                                    {"ReplicaId": 1, "ReplicaDirectoryId": __import__("uuid").uuid4()}
                                ]
                            }
                        ]
                    }
                ]
            },
        )
    with pytest.raises(codec.EncodeError, match="ClusterId"):
        codec.encode_request(52, 0, 1, None, {"ClusterId": 5})


def test_header_versions() -> None:
    assert codec.request_header_version(18, 2) == 1
    assert codec.request_header_version(18, 3) == 2
    assert codec.response_header_version(18, 3) == 0  # the ApiVersions exception (KIP-511)
    assert codec.response_header_version(1, 11) == 0
    assert codec.response_header_version(1, 12) == 1
    assert codec.response_header_version(52, 0) == 1
    assert codec.api_key_of("VoteRequest") == codec.api_key_of("Vote") == 52
    assert codec.api_name(55) == "DescribeQuorum"


def test_decoders_accept_memoryview_and_bytearray() -> None:
    body = {"Responses": [{"Partitions": [{"PartitionIndex": 1, "Records": b"\x01\x02"}]}]}
    frame = codec.encode_response(1, 16, 3, body)
    expected = codec.decode_response(1, 16, frame[4:])
    for payload in (memoryview(frame)[4:], bytearray(frame[4:])):
        got = codec.decode_response(1, 16, payload)
        assert got == expected
        assert type(got[1]["Responses"][0]["Partitions"][0]["Records"]) is bytes
    req = codec.encode_request(52, 1, 3, "x", {"ClusterId": "c", "Topics": []})
    assert codec.decode_request(memoryview(req)[4:]) == codec.decode_request(req[4:])
