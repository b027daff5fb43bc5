"""Test-only launcher: the reference node taking the KIP text's choices where Apache Kafka takes others.

Used as ``pytest conformance --target-launcher tests/conformance/kip_literal_node.py``; takes the reference
CLI's ``node --config F --trace-file T`` arguments. The reference node follows Kafka; this one is a second,
equally allowed implementation, so the catalog must pass against it too, its KAFKA-level checks reported
as "differs from Kafka" and never failed (tests/conformance/test_faults.py). Each choice overrides one
method of the core, never a flag in the product:

* check quorum after 1.0 x fetch.timeout (KIP-595 "Leader Progress Timeout": "quorum.fetch.timeout.ms");
  Kafka waits 1.5 x (LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR);
* on that timeout, a new election at once ("it would begin a new election and start sending
  VoteRequest"); Kafka resigns first (KafkaRaftClient.pollLeader -> transitionToResigned, EndQuorumEpoch);
* a non-leader's DescribeQuorum answer names the leader it knows (KIP-595 "DescribeQuorum Request
  Handling" 1); Kafka leaves LeaderId/LeaderEpoch at 0 (DescribeQuorumResponse.singletonErrorResponse);
* told to truncate below its high watermark, the follower refuses the answer (truncates nothing) and
  fetches on from its log end; Kafka throws and its fault handler halts the process
  (KafkaRaftClient.handleFetchResponse).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any

# Run as a script: its folder is on sys.path, so the fault launcher's node runner is shared, not copied.
from faulty_node import node_arg, run_node
from kraft_tck.reference import wire
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.messages import DescribeQuorumRequest, DescribeQuorumResponse, FetchResponse, Response
from kraft_tck.reference.roles import Follower, Leader
from kraft_tck.spec.errors import Errors

Body = dict[str, Any]


class KipLiteralCore(KRaftCore):
    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.config.fetch_timeout_ms  # the KIP's fetch timeout, not Kafka's 1.5 x

    def leader_progress_timeout(self) -> None:
        self.start_election("FetchTimeout")  # the KIP: a new election at once, no EndQuorumEpoch first

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        resp = super().handle_describe_quorum_request(req)
        if resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER and not isinstance(self.role, Leader):
            # the KIP: "If the current leader is known ... include the LeaderId and LeaderEpoch"
            return DescribeQuorumResponse(self.leader_id, self.epoch, -1, partition_error=Errors.NOT_LEADER_OR_FOLLOWER)
        return resp

    def handle_fetch_response(self, sender_id: int, resp: FetchResponse) -> None:
        div = resp.diverging_epoch
        role = self.role
        if (
            div is not None
            and resp.error == Errors.NONE
            and resp.partition_error == Errors.NONE
            and isinstance(role, Follower)
            and role.leader_id == sender_id
            and self._truncation_point(*div) < self.high_watermark
        ):
            # refuse the answer: nothing truncated, the next Fetch goes from the log end after the backoff
            self._request_failed(sender_id)
            return
        super().handle_fetch_response(sender_id, resp)


_kafka_response_to_body = wire.response_to_body


def _response_to_body(
    resp: Response, version: int, endpoints: Mapping[int, wire.ListenerEndpoint] | None = None
) -> Body:
    """The reference wire layer writes Kafka's refusal (LeaderId/LeaderEpoch 0); this node puts its hint in."""
    body = _kafka_response_to_body(resp, version, endpoints)
    if (
        isinstance(resp, DescribeQuorumResponse)
        and resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER
        and resp.leader_id >= 0
        and resp.leader_epoch > 0
    ):
        part = body["Topics"][0]["Partitions"][0]
        part["LeaderId"], part["LeaderEpoch"] = resp.leader_id, resp.leader_epoch
    return body


def main(argv: list[str]) -> None:
    config = node_arg(argv, "--config")
    if argv[:1] != ["node"] or config is None:
        raise SystemExit("usage: kip_literal_node.py node --config FILE [--trace-file FILE]")
    wire.response_to_body = _response_to_body  # this process only: the node encodes through the module
    asyncio.run(run_node(NodeConfig.load(config), node_arg(argv, "--trace-file"), KipLiteralCore))


if __name__ == "__main__":
    main(sys.argv[1:])
