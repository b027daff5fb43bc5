"""Bound codecs (spec/binding.py) against the dict codec, their oracle, on a message the node does not
bind (Vote), so the generator is checked apart from the one binding the node uses (Fetch:
tests/reference/test_typed_wire.py).

* A bound encoder writes the bytes the dict codec writes for the body the binding describes.
* A bound decoder reads those bytes back into the same parameters; a frame the binding cannot hold
  (two partitions, another topic) raises, so the caller takes the dict path.
* A binding that does not fit the definition is refused when the code is generated, naming the path.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.spec import binding, codec
from kraft_tck.spec.binding import Expect

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
VOTE = 52
TOPIC = "__cluster_metadata"
PART = "Topics[0].Partitions[0]."

VOTE_BINDING: binding.Binding = {
    "ClusterId": "cluster_id",
    "VoterId": "voter_id",  # v1+
    "Topics[0].TopicName": Expect(TOPIC),
    PART + "PartitionIndex": Expect(0),
    PART + "CandidateEpoch": "candidate_epoch",
    PART + "CandidateId": "candidate_id",
    PART + "LastOffsetEpoch": "last_offset_epoch",
    PART + "LastOffset": "last_offset",
}
VOTE_PARAMS: binding.Params = (
    ("cluster_id", None), ("voter_id", -1), ("candidate_epoch", 0), ("candidate_id", 0),
    ("last_offset_epoch", 0), ("last_offset", 0),
)
VERSIONS = range(codec.supported_versions(VOTE)[0], codec.supported_versions(VOTE)[1] + 1)

int32 = st.integers(-(2**31), 2**31 - 1)
values = st.tuples(st.none() | st.text(max_size=8), int32, int32, int32, int32, st.integers(-(2**63), 2**63 - 1))


def _header(version: int) -> binding.Struct:
    return codec.message_struct("RequestHeader", codec.request_header_version(VOTE, version))


def _body(cluster_id: str | None, voter_id: int, epoch: int, cand: int, last_epoch: int, last_offset: int,
          version: int, topics: int = 1) -> dict[str, Any]:
    """The dict body the binding describes (what wire.request_to_body writes for a Vote)."""
    part = {"PartitionIndex": 0, "CandidateEpoch": epoch, "CandidateId": cand, "LastOffsetEpoch": last_epoch,
            "LastOffset": last_offset}
    body: dict[str, Any] = {"ClusterId": cluster_id,
                            "Topics": [{"TopicName": TOPIC, "Partitions": [part]} for _ in range(topics)]}
    if version >= 1:
        body["VoterId"] = voter_id
    return body


def _encoder(version: int) -> Any:
    return binding.request_encoder(_header(version), codec.message_struct("VoteRequest", version), VOTE,
                                   VOTE_BINDING, VOTE_PARAMS, f"Vote v{version}")


def _decoder(version: int) -> Any:
    return binding.frame_decoder(_header(version), codec.message_struct("VoteRequest", version), VOTE_BINDING,
                                 VOTE_PARAMS, lambda *args: args, f"Vote v{version}", response=False)


@pytest.mark.parametrize("version", VERSIONS)
@SETTINGS
@given(v=values, corr=int32, client_id=st.none() | st.text(max_size=6))
def test_bound_vote_writes_the_dict_codecs_bytes_and_reads_them_back(
        version: int, v: tuple[Any, ...], corr: int, client_id: str | None) -> None:
    frame = _encoder(version)(corr, client_id, *v)
    assert frame == codec.encode_request(VOTE, version, corr, client_id, _body(*v, version=version))
    header, got = _decoder(version)(frame[4:])
    assert header == codec.decode_request(frame[4:])[0]
    # VoterId is v1+: at v0 the parameter takes its declared default.
    assert got == (v if version >= 1 else (v[0], -1, *v[2:]))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_frame_the_binding_cannot_hold_is_left_to_the_dict_path(version: int) -> None:
    decode = _decoder(version)
    two = codec.encode_request(VOTE, version, 1, "c", _body("x", 1, 2, 3, 4, 5, version, topics=2))[4:]
    with pytest.raises(binding.Fallback):
        decode(two)
    other = _body("x", 1, 2, 3, 4, 5, version)
    other["Topics"][0]["TopicName"] = "payments"
    with pytest.raises(binding.Fallback):
        decode(codec.encode_request(VOTE, version, 1, "c", other)[4:])
    good = codec.encode_request(VOTE, version, 1, "c", _body("x", 1, 2, 3, 4, 5, version))[4:]
    with pytest.raises(binding.Fallback):  # a trailing byte: the dict path reports it precisely
        decode(good + b"\x00")
    assert decode(good)[1][2:] == (2, 3, 4, 5)


@SETTINGS
@given(successors=st.lists(int32, max_size=5), epoch=int32)
def test_a_list_of_primitives_binds_whole(successors: list[int], epoch: int) -> None:
    # EndQuorumEpoch v0 (KIP-595): PreferredSuccessors is an int32 array, bound as one list parameter.
    end_quorum, part = 54, "Topics[0].Partitions[0]."
    bind: binding.Binding = {"Topics[0].TopicName": Expect(TOPIC), part + "PartitionIndex": Expect(0),
                             part + "LeaderEpoch": "epoch", part + "PreferredSuccessors": "successors"}
    params: binding.Params = (("epoch", -1), ("successors", None))
    header = codec.message_struct("RequestHeader", codec.request_header_version(end_quorum, 0))
    body = codec.message_struct("EndQuorumEpochRequest", 0)
    frame = binding.request_encoder(header, body, end_quorum, bind, params, "EndQuorumEpoch v0")(1, "c", epoch,
                                                                                                successors)
    want = {"ClusterId": None, "Topics": [{"TopicName": TOPIC, "Partitions": [
        {"PartitionIndex": 0, "LeaderId": 0, "LeaderEpoch": epoch, "PreferredSuccessors": successors}]}]}
    assert frame == codec.encode_request(end_quorum, 0, 1, "c", want)
    decode = binding.frame_decoder(header, body, bind, params, lambda *a: a, "EndQuorumEpoch v0", response=False)
    assert decode(frame[4:])[1] == (epoch, successors)


@pytest.mark.parametrize(("patch", "message"), [
    ({"Topics[0].Partitions[0].CandidateEpok": "candidate_epoch"}, "no field 'CandidateEpok'"),
    ({"Topics.TopicName": Expect(TOPIC)}, "add the [0]"),
    ({"ClusterId[0]": "cluster_id"}, "drop the [0]"),
    ({"Topics[0]": "cluster_id"}, "ends at a struct"),
    ({"ClusterId": "cluster"}, "parameter 'cluster'"),
])
def test_a_binding_that_does_not_fit_the_definition_is_refused(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        binding.request_encoder(_header(1), codec.message_struct("VoteRequest", 1), VOTE,
                                {**VOTE_BINDING, **patch}, VOTE_PARAMS, "Vote v1")


def test_a_list_of_primitives_cannot_be_indexed() -> None:
    with pytest.raises(ValueError, match=r"is \[\]int32; bind the whole list"):
        binding.body_encoder(codec.message_struct("EndQuorumEpochRequest", 0),
                             {"Topics[0].Partitions[0].PreferredSuccessors[0]": "first"}, (("first", -1),),
                             "EndQuorumEpoch v0")


def test_an_expected_value_on_a_tagged_field_is_refused() -> None:
    # FetchRequest v12+ ClusterId is tagged: when it is absent it holds its default, so an Expect on it
    # could not be checked on read. The generator says so rather than guess.
    with pytest.raises(ValueError, match="ClusterId is tagged"):
        binding.body_encoder(codec.message_struct("FetchRequest", 17), {"ClusterId": Expect("x")}, (), "Fetch v17")
