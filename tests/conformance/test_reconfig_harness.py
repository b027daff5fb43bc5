"""The harness's KIP-853 pieces on their own: the dynamic-quorum properties and --initial-controllers value, the
--standalone format (conformance/target.py), Kafka's Uuid strings, the virtual voters' ApiVersions features and their
UpdateRaftVoter answers (conformance/virtual.py, conformance/transport.py), the VotersRecord the harness writes, read
back with the spec codec, and the one-line summaries of the voter-change RPCs (conformance/bodies.py)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    DynamicQuorum,
    EmbeddedTarget,
    QuorumLayout,
    target_properties,
)
from kraft_tck.conformance.transport import KafkaClient, KafkaServer, ServerRequest
from kraft_tck.conformance.virtual import Quorum, TargetAddress, VLog, directory_id_of, kafka_uuid, parse_kafka_uuid
from kraft_tck.reference.bootstrap import read_bootstrap_voters
from kraft_tck.reference.config import parse_properties
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
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


def test_a_standalone_quorum_formats_the_target_alone_with_a_directory_id_of_its_own(tmp_path: Path) -> None:
    # Bootstrap/1's life: kraft-tck format --standalone (Kafka's StorageTool), the target alone on its listener; the
    # template form {initial_controllers} names the same single voter; the bootstrap servers are the target itself.
    layout = QuorumLayout(1, "127.0.0.1", 9093, "127.0.0.1", (19092, 19093))
    dyn = DynamicQuorum(((1, "127.0.0.1", 9093, kafka_uuid(directory_id_of(1, "-target"))),), standalone=True)
    assert dyn.initial_controllers == f"1@127.0.0.1:9093:{kafka_uuid(directory_id_of(1, '-target'))}"
    props = target_properties(layout, EMBEDDED_TIMEOUTS, "/d", dynamic=dyn)
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    target = EmbeddedTarget(layout, EMBEDDED_TIMEOUTS, "AAAAAAAAAAAAAAAAAAAAAQ", workdir=tmp_path)
    target.dynamic = dyn
    target.write_config()
    target.prepare(formatted=True)
    voters = read_bootstrap_voters(target.data_dir)
    assert voters is not None and voters.sorted_ids() == (1,)
    node = voters.node(1)
    assert node is not None and node.key.directory_id is not None
    assert node.key.directory_id != kafka_uuid(directory_id_of(1, "-target"))  # --standalone picks its own
    assert [(e.host, e.port) for e in node.endpoints] == [("127.0.0.1", 9093)]


def test_a_virtual_leader_answers_update_raft_voter_for_its_epoch_only() -> None:
    # UpdateVoter/2: the target sends its leader UpdateRaftVoter; a virtual voter advertises api 82 and answers it as
    # Kafka's validateLeaderOnlyRequest does (the case writes the leader's VotersRecord itself).
    async def run() -> tuple[tuple[int, int] | None, dict[int, dict[str, object]], dict[str, object]]:
        q = Quorum(TargetAddress(1, "127.0.0.1", 1), "cid", {2: 0, 3: 0}, "127.0.0.1")
        await q.start()
        q.set_leader(2, 5)
        seen: dict[int, dict[str, object]] = {}
        clients = [KafkaClient("127.0.0.1", q.voters[v].port) for v in (2, 3)]
        try:
            for c in clients:
                await c.connect()
            rng = clients[0].versions.get(B.UPDATE_RAFT_VOTER)
            for epoch in (4, 5, 6):
                body = {"ClusterId": "cid", "CurrentLeaderEpoch": epoch, "VoterId": 1,
                        "VoterDirectoryId": directory_id_of(1), "Listeners": [],
                        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}
                seen[epoch] = await clients[0].request(B.UPDATE_RAFT_VOTER, 0, body, 5)
            other = await clients[1].request(B.UPDATE_RAFT_VOTER, 0, {**body, "CurrentLeaderEpoch": 5}, 5)
        finally:
            for c in clients:
                await c.close()
            await q.close()
        return rng, seen, other

    rng, seen, other = asyncio.run(run())
    assert rng == (0, 0)
    assert [seen[e]["ErrorCode"] for e in (4, 5, 6)] == [
        Errors.FENCED_LEADER_EPOCH, Errors.NONE, Errors.UNKNOWN_LEADER_EPOCH]
    leader = seen[5]["CurrentLeader"]
    assert isinstance(leader, dict) and (leader["LeaderId"], leader["LeaderEpoch"]) == (2, 5) and leader["Port"] > 0
    assert other["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER  # v3 does not lead


def test_voter_change_frames_say_the_voter_key_the_error_and_the_leader() -> None:
    d = directory_id_of(4)
    add = {"ClusterId": "c", "TimeoutMs": 1, "VoterId": 4, "VoterDirectoryId": d,
           "Listeners": [{"Name": "CONTROLLER", "Host": "h", "Port": 9}]}
    assert B.describe("AddRaftVoter", "request", add) == (
        f"AddRaftVoter(voter=4, dir={kafka_uuid(d)[:8]}, listeners=CONTROLLER://h:9)")
    zero = uuid.UUID(int=0)
    assert B.describe("RemoveRaftVoter", "request", {"VoterId": 3, "VoterDirectoryId": zero}) == (
        "RemoveRaftVoter(voter=3, dir=none)")
    update = {**add, "CurrentLeaderEpoch": 7, "KRaftVersionFeature": {"MinSupportedVersion": 0,
                                                                      "MaxSupportedVersion": 1}}
    assert "epoch=7" in B.describe("UpdateRaftVoter", "request", update) and "kraft=0-1" in B.describe(
        "UpdateRaftVoter", "request", update)
    timed_out = {"ErrorCode": int(Errors.REQUEST_TIMED_OUT), "ErrorMessage": "add of 4 timed out"}
    assert B.describe("AddRaftVoter", "response", timed_out) == "AddRaftVoter→(REQUEST_TIMED_OUT: add of 4 timed out)"
    assert B.describe("RemoveRaftVoter", "response", {"ErrorCode": 0, "ErrorMessage": "NONE"}) == (
        "RemoveRaftVoter→(NONE)")
    answer = B.update_raft_voter_response(0, 2, 5, ("h", 3))
    assert B.describe("UpdateRaftVoter", "response", answer) == "UpdateRaftVoter→(NONE, leader=2/5 at h:3)"
    for api, body in (("AddRaftVoter", timed_out), ("UpdateRaftVoter", answer)):
        assert "None" not in B.describe(api, "response", body)
    # the wire form round-trips through the spec codec
    _corr, back = codec.decode_response(82, 0, codec.encode_response(82, 0, 7, answer)[4:])
    assert back["CurrentLeader"] == {"LeaderId": 2, "LeaderEpoch": 5, "Host": "h", "Port": 3}
