"""The harness's KIP-853 pieces on their own: the dynamic-quorum properties and --initial-controllers value
(conformance/target.py), Kafka's Uuid strings and the virtual voters' ApiVersions features (conformance/virtual.py,
conformance/transport.py), and the VotersRecord the harness writes, read back with the spec codec."""

from __future__ import annotations

import asyncio
import uuid

from kraft_tck.conformance.target import EMBEDDED_TIMEOUTS, DynamicQuorum, QuorumLayout, target_properties
from kraft_tck.conformance.transport import KafkaClient, KafkaServer, ServerRequest
from kraft_tck.conformance.virtual import VLog, directory_id_of, kafka_uuid, parse_kafka_uuid
from kraft_tck.reference.config import parse_properties
from kraft_tck.spec import codec
from kraft_tck.spec.records import ControlType


def test_kafka_uuid_strings_round_trip_and_are_kafkas_form() -> None:
    u = directory_id_of(2)
    text = kafka_uuid(u)
    assert len(text) == 22 and "=" not in text and parse_kafka_uuid(text) == u
    assert kafka_uuid(None) == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID
    assert directory_id_of(2) != directory_id_of(3) != directory_id_of(3, "-target")


def test_a_dynamic_quorum_is_found_through_bootstrap_servers_not_static_voters() -> None:
    layout = QuorumLayout(1, "127.0.0.1", 9093, "127.0.0.1", (19092, 19093))
    dyn = DynamicQuorum(((1, "127.0.0.1", 9093, "d1"), (2, "127.0.0.1", 19092, "d2"), (3, "127.0.0.1", 19093, "d3")))
    assert dyn.initial_controllers == "1@127.0.0.1:9093:d1,2@127.0.0.1:19092:d2,3@127.0.0.1:19093:d3"
    static = target_properties(layout, EMBEDDED_TIMEOUTS, "/d")
    dynamic = target_properties(layout, EMBEDDED_TIMEOUTS, "/d", dynamic=dyn)
    assert "controller.quorum.voters" in static and "controller.quorum.bootstrap.servers" not in static
    assert "controller.quorum.voters" not in dynamic
    assert dynamic["controller.quorum.bootstrap.servers"] == "127.0.0.1:19092,127.0.0.1:19093"  # the others
    assert parse_properties("\n".join(f"{k}={v}" for k, v in dynamic.items()))["node.id"] == "1"


def test_api_versions_answers_list_the_supported_features_from_v3() -> None:
    async def run() -> dict[int, dict[str, object]]:
        async def handler(_req: ServerRequest) -> None:
            return None

        server = KafkaServer(handler, {52: (0, 1)})
        server.supported_features = {"kraft.version": (0, 1)}
        await server.start()
        seen: dict[int, dict[str, object]] = {}
        client = KafkaClient("127.0.0.1", server.port)
        try:
            await client.connect(negotiate=False)
            for version in (2, 3, 4):
                seen[version] = await client.request(18, version, {"ClientSoftwareName": "t",
                                                                   "ClientSoftwareVersion": "1"}, 5)
        finally:
            await client.close()
            await server.close()
        return seen

    seen = asyncio.run(run())
    assert "SupportedFeatures" not in seen[2] or not seen[2]["SupportedFeatures"]
    for v in (3, 4):
        feats = {f["Name"]: (f["MinVersion"], f["MaxVersion"]) for f in seen[v]["SupportedFeatures"]}  # type: ignore[attr-defined]
        assert feats == {"kraft.version": (0, 1)}, (v, seen[v])


def test_the_harness_log_reads_back_its_voters_records() -> None:
    log = VLog()
    log.writer_id, log.voters = 2, [1, 2, 3]
    d = uuid.uuid4()
    body = {"Version": 0, "Voters": [{"VoterId": 1, "VoterDirectoryId": d, "Endpoints": [
        {"Name": "CONTROLLER", "Host": "h", "Port": 1}], "KRaftVersionFeature": {"MinSupportedVersion": 0,
                                                                                "MaxSupportedVersion": 1}}]}
    off = log.append_control(3, ControlType.KRAFT_VOTERS, body, commit=False)
    assert off == 1 and log.committed == 0  # the epoch's LeaderChange first, then the VotersRecord
    [(at, read)] = log.control_records(ControlType.KRAFT_VOTERS)
    assert at == 1 and read["Voters"][0]["VoterDirectoryId"] == d
    assert codec.supported_versions(80) == (0, 0)  # AddRaftVoter v0 (Kafka 3.9)
