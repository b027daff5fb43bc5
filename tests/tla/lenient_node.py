"""Test-only launcher: the reference node reading malformed KRaft requests the way KIP-595's text allows,
or (``KRAFT_TCK_LENIENT=adopt-then-refuse``) a faulty node that changes state on a request it refuses.

Used as ``pytest conformance/test_validation.py --target-launcher tests/tla/lenient_node.py``; takes the
reference CLI's ``node --config F --trace-file T`` arguments. ``KRAFT_TCK_LENIENT``:

* ``lenient`` (default): no field sanity checks (Kafka's ``KafkaRaftClient.handleVoteRequest`` /
  ``handleFetchRequest`` answer INVALID_REQUEST to them; KIP-595 says nothing of them): a negative
  LastOffsetEpoch / LastFetchedEpoch is an empty log's last epoch (the -1 convention before Kafka's 0), a
  negative LastOffset a log behind every other, a negative MaxWaitMs no wait; a LastOffsetEpoch not below
  the candidate epoch or a LastFetchedEpoch above the leader epoch is taken as it is; a Vote in epoch
  2^31-1 is adopted as Kafka adopts it (and no election follows it). Another partition than
  __cluster_metadata-0 and a negative FetchOffset are still refused.
* ``adopt-then-refuse``: a Vote with invalid fields moves the node to the candidate's epoch (persisted),
  then is answered INVALID_REQUEST as if nothing changed: a fault both TLC validations must see.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

import asyncio

import kraft_tck.reference.core as core_module
from faulty_node import node_arg, run_node
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft_tck.reference.roles import Unattached, Voted

EPOCH_MAX = 2**31 - 1


def _invalid_vote(req: VoteRequest) -> bool:
    return req.last_offset < 0 or req.last_offset_epoch < 0 or req.last_offset_epoch >= req.candidate_epoch


class LenientCore(KRaftCore):
    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        if req.last_offset_epoch < 0:
            req = replace(req, last_offset_epoch=0)  # an empty log's last epoch, by the -1 convention
        if not req.valid_partition or not self._cluster_id_ok(req.cluster_id) or not _invalid_vote(req):
            return super().handle_vote_request(req)
        if self._validate_voter_only_request(req.candidate_id, req.candidate_epoch) is not None:
            return super().handle_vote_request(req)  # fenced: refused as Kafka refuses it
        # KafkaRaftClient.handleVoteRequest after its sanity checks: the epoch step, then the vote
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch)
        granted = self._can_grant_vote(req.candidate_id, req.last_offset_epoch, req.last_offset)
        if granted and isinstance(self.role, Unattached):
            deadline = self._random_election_deadline() if self.config.is_voter else None
            self._transition(Voted(self.epoch, req.candidate_id, deadline))
            self._persist_vote()
        self._emit("HandleVoteRequest", note=f"lenient: {'granted' if granted else 'refused'} {req.candidate_id}")
        return VoteResponse(self.leader_id, self.epoch, granted)

    def start_election(self, cause: str) -> None:
        if self.epoch < EPOCH_MAX:  # no epoch after 2^31-1 on the wire
            super().start_election(cause)

    def handle_fetch_request(self, req: FetchRequest, reply_to: object = None) -> FetchResponse | None:
        req = replace(req, last_fetched_epoch=max(req.last_fetched_epoch, 0), max_wait_ms=max(req.max_wait_ms, 0))
        return super().handle_fetch_request(req, reply_to)

    def _validate_fetch_request(self, req: FetchRequest) -> FetchResponse | None:
        # a LastFetchedEpoch above the leader epoch is left to the divergence check (step 3)
        return super()._validate_fetch_request(
            replace(req, last_fetched_epoch=min(req.last_fetched_epoch, req.current_leader_epoch))
        )


class AdoptThenRefuseCore(KRaftCore):
    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        if req.valid_partition and _invalid_vote(req) and EPOCH_MAX > req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch)  # the fault: a state change before the refusal
        return super().handle_vote_request(req)


CORES: dict[str, type[KRaftCore]] = {"lenient": LenientCore, "adopt-then-refuse": AdoptThenRefuseCore}


def main(argv: list[str]) -> None:
    config = node_arg(argv, "--config")
    if argv[:1] != ["node"] or config is None:
        raise SystemExit("usage: lenient_node.py node --config FILE [--trace-file FILE]")
    mode = os.environ.get("KRAFT_TCK_LENIENT", "lenient")
    if mode == "lenient":
        core_module.EPOCH_LIMIT = EPOCH_MAX + 1  # this process only: adopt a Vote's epoch 2^31-1, as Kafka does
    asyncio.run(run_node(NodeConfig.load(config), node_arg(argv, "--trace-file"), CORES[mode]))


if __name__ == "__main__":
    main(sys.argv[1:])
