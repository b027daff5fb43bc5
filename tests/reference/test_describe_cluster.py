"""DescribeCluster (api key 60) on the reference node, as Kafka's controller answers it (KIP-919;
``ControllerApis.handleDescribeCluster`` and ``AuthHelper.computeDescribeClusterResponse``), and the
ClusterId line of ``kraft-tck quorum describe --status`` it feeds (``MetadataQuorumCommand.handleDescribeStatus``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import describe_cluster as dc
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.trace import line_errors

CONTROLLERS = [(2, "127.0.0.1", 9002), (1, "127.0.0.1", 9001), (3, "127.0.0.1", 9003)]


def test_a_controller_describes_controllers_with_the_leader_as_controller_id() -> None:
    for version in (1, 2):
        body = dc.answer({"IncludeClusterAuthorizedOperations": False, "EndpointType": 2}, version, "cid", 3,
                         CONTROLLERS)
        assert body["ErrorCode"] == Errors.NONE and body["ErrorMessage"] is None
        assert (body["ClusterId"], body["ControllerId"], body["EndpointType"]) == ("cid", 3, 2)
        assert [(b["BrokerId"], b["Host"], b["Port"], b["Rack"]) for b in body["Brokers"]] == [
            (1, "127.0.0.1", 9001, None), (2, "127.0.0.1", 9002, None), (3, "127.0.0.1", 9003, None)]
        assert body["ClusterAuthorizedOperations"] == -(2**31)  # not asked for: the schema's default
        codec.encode_response(60, version, 1, body)  # every field fits the schema at this version


def test_an_unknown_leader_or_one_not_listed_is_controller_id_minus_one() -> None:
    assert dc.answer({"EndpointType": 2}, 1, "cid", -1, CONTROLLERS)["ControllerId"] == -1
    # computeDescribeClusterResponse: a controller id absent from the node list is reported as -1.
    assert dc.answer({"EndpointType": 2}, 1, "cid", 7, CONTROLLERS)["ControllerId"] == -1


def test_authorized_operations_without_an_authorizer_are_every_cluster_operation() -> None:
    body = dc.answer({"IncludeClusterAuthorizedOperations": True, "EndpointType": 2}, 1, "cid", 1, CONTROLLERS)
    # CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
    assert body["ClusterAuthorizedOperations"] == 0b1_1111_1010_0000 == 8096


@pytest.mark.parametrize(("version", "endpoint_type", "error", "message"), [
    (0, None, Errors.INVALID_REQUEST, "of type CONTROLLER, but we wanted an endpoint of type BROKER"),
    (1, 1, Errors.MISMATCHED_ENDPOINT_TYPE, "of type CONTROLLER, but we wanted an endpoint of type BROKER"),
    (2, 1, Errors.MISMATCHED_ENDPOINT_TYPE, "of type CONTROLLER, but we wanted an endpoint of type BROKER"),
    (1, 0, Errors.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
    (2, 9, Errors.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 9"),
])
def test_a_controller_refuses_other_endpoint_types_as_kafka_does(version: int, endpoint_type: int | None,
                                                                  error: Errors, message: str) -> None:
    req: dict[str, Any] = {"IncludeClusterAuthorizedOperations": False}
    if endpoint_type is not None:
        req["EndpointType"] = endpoint_type
    body = dc.answer(req, version, "cid", 1, CONTROLLERS)
    assert body["ErrorCode"] == error and message in body["ErrorMessage"]
    assert body["Brokers"] == [] and body["ControllerId"] == -1 and body["ClusterId"] == ""
    codec.encode_response(60, version, 1, body)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_our_request_frames_read_the_same_in_kafka_python(version: int) -> None:
    cluster = pytest.importorskip("kafka.protocol.admin.cluster", reason="pip install kafka-python")
    body: dict[str, Any] = {"IncludeClusterAuthorizedOperations": True}
    if version >= 1:
        body["EndpointType"] = 2
    if version >= 2:
        body["IncludeFencedBrokers"] = True
    frame = codec.encode_request(60, version, 7, "kraft-tck", body)
    theirs = cluster.DescribeClusterRequest.decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 7 and theirs.include_cluster_authorized_operations is True
    if version >= 1:
        assert theirs.endpoint_type == 2
    if version >= 2:
        assert theirs.include_fenced_brokers is True


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_a_live_node_serves_describe_cluster_and_the_tool_prints_its_cluster_id(tmp_path: Path) -> None:
    port = free_base_port(3)
    cluster = LocalCluster(tmp_path / "c", voters=3, base_port=port, trace=True)
    cid = cluster.prepare()
    cluster.start_all()

    async def ask(node_id: int) -> tuple[tuple[int, int] | None, list[dict[str, Any]]]:
        client = KafkaClient("127.0.0.1", cluster.port(node_id), client_id="adminclient-1")
        await client.connect(5.0)
        try:
            answers = []
            for version, req in ((0, {"IncludeClusterAuthorizedOperations": False}),
                                 (1, {"IncludeClusterAuthorizedOperations": False, "EndpointType": 2}),
                                 (2, {"IncludeClusterAuthorizedOperations": True, "EndpointType": 2,
                                      "IncludeFencedBrokers": False}),
                                 (1, {"IncludeClusterAuthorizedOperations": False, "EndpointType": 1})):
                answers.append(await client.request(60, version, req, 5.0))
            return client.versions.get(60), answers
        finally:
            await client.close()

    try:
        info = asyncio.run(cluster.wait_for_leader(60))
        follower = next(r.replica_id for r in info.voters if r.replica_id != info.leader_id)
        advertised, (v0, v1, v2, brokers) = asyncio.run(ask(follower))  # any controller answers, not only the leader
        status, as_server = (subprocess.run(
            [sys.executable, "-m", "kraft_tck.reference.cli", "quorum", option, f"127.0.0.1:{cluster.port(follower)}",
             "describe", "--status"], capture_output=True, text=True, timeout=60)
            for option in ("--bootstrap-controller", "--bootstrap-server"))
    finally:
        cluster.stop_all()
    assert advertised == (0, 2)  # ApiVersions: Kafka 4.0's range on a controller
    assert v0["ErrorCode"] == Errors.INVALID_REQUEST  # v0 means brokers: a controller refuses it
    assert brokers["ErrorCode"] == Errors.MISMATCHED_ENDPOINT_TYPE
    for body in (v1, v2):
        assert body["ErrorCode"] == Errors.NONE
        assert body["ClusterId"] == cid and body["ControllerId"] == info.leader_id
        assert sorted((b["BrokerId"], b["Port"]) for b in body["Brokers"]) == [(i, cluster.port(i)) for i in (1, 2, 3)]
    assert v2["ClusterAuthorizedOperations"] == 8096
    # The node's trace records the exchange, and every line of it is valid (spec/trace.schema.json).
    lines = [json.loads(line) for line in cluster.trace_files(follower)[-1].read_text().splitlines()]
    assert not [(obj, problems) for obj in lines if (problems := line_errors(obj))]
    exchanged = [(o["event"], o["msg"]["version"]) for o in lines
                 if (o.get("msg") or {}).get("api") == "DescribeCluster"]
    assert ("Receive", 2) in exchanged and ("Send", 2) in exchanged
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[0] == f"ClusterId:              {cid}"
    assert "DescribeCluster" not in status.stderr
    # With --bootstrap-server Kafka's admin client asks for brokers, which a controller refuses: Java's null.
    assert as_server.returncode == 0 and as_server.stdout.splitlines()[0] == "ClusterId:              null"
    assert "DescribeCluster (api key 60) for brokers" in as_server.stderr
