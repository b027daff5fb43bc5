"""Differential: our codec vs kafka-python's own protocol classes (kafka-python 3.x, a test dependency).

kafka-python 3.x ships ApiVersions 0-4, Fetch 4-18 and DescribeQuorum 0-2. We define Fetch 0-17, so
Fetch is compared at 4-17 (the versions both have; KRaft itself uses 12+). Both directions: frames we
encode decode in kafka-python to the same values, and frames kafka-python encodes decode here to the
same values and re-encode to the same bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kraft_tck.spec import codec
from kraft_tck.spec.kafka_python_bridge import from_kafka_python, to_kafka_python
from kraft_tck.spec.strategies import body_strategy

kafka_api_versions = pytest.importorskip(
    "kafka.protocol.metadata.api_versions", reason="pip install kafka-python"
)
from kafka.protocol.admin.cluster import DescribeQuorumRequest, DescribeQuorumResponse  # noqa: E402
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse  # noqa: E402

ApiVersionsRequest = kafka_api_versions.ApiVersionsRequest
ApiVersionsResponse = kafka_api_versions.ApiVersionsResponse

CLASSES = {
    18: (ApiVersionsRequest, ApiVersionsResponse, range(0, 5)),
    1: (FetchRequest, FetchResponse, range(4, 18)),
    55: (DescribeQuorumRequest, DescribeQuorumResponse, range(0, 3)),
}
CASES = [
    (key, v, kind) for key, (_, _, vs) in CLASSES.items() for v in vs for kind in ("Request", "Response")
]
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def strip_unknown(body: Any) -> Any:
    # kafka-python does not keep unknown tagged fields in the same form; compare the known fields.
    if isinstance(body, dict):
        return {k: strip_unknown(v) for k, v in body.items() if k != codec.UNKNOWN_TAGGED}
    if isinstance(body, list):
        return [strip_unknown(x) for x in body]
    return body


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES, ids=lambda x: str(x))
def test_both_directions(api_key: int, version: int, kind: str) -> None:
    req_cls, resp_cls, _ = CLASSES[api_key]
    cls = req_cls if kind == "Request" else resp_cls

    @SETTINGS
    @given(body_strategy(codec.api_name(api_key) + kind, version))
    def check(body: dict[str, Any]) -> None:
        body = strip_unknown(body)
        if api_key == 18 and kind == "Response":
            # kafka-python reads every ApiVersions response with a non-zero error as v0 (the server's
            # UNSUPPORTED_VERSION answer); compare error-free bodies, the v0 path has its own test.
            body["ErrorCode"] = 0
        if kind == "Request":
            ours = codec.encode_request(api_key, version, 99, "kraft-tck", body)
        else:
            ours = codec.encode_response(api_key, version, 99, body)
        # ours -> kafka-python
        theirs_obj = cls.decode(ours[4:], version=version, header=True)
        assert theirs_obj.header.correlation_id == 99
        assert from_kafka_python(cls._struct, theirs_obj, version) == body
        # kafka-python -> ours
        obj = to_kafka_python(cls._struct, cls, body, version)
        obj.with_header(correlation_id=99, client_id="kraft-tck")
        theirs = bytes(obj.encode(header=True, framed=True))
        assert theirs == ours
        if kind == "Request":
            header, decoded = codec.decode_request(theirs[4:])
            assert header["CorrelationId"] == 99 and header["ClientId"] == "kraft-tck"
        else:
            _, decoded = codec.decode_response(api_key, version, theirs[4:])
        assert decoded == body

    check()


def test_unsupported_version_answer_reads_in_kafka_python() -> None:
    frame = codec.unsupported_version_response(18, 7, 5)
    obj = ApiVersionsResponse.decode(frame[4:], version=4, header=True)
    assert obj.header.correlation_id == 5
    assert obj.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in obj.api_keys}[55] == (0, 2)
