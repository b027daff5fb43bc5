"""KIP-595 "EndQuorumEpoch": a resigning leader names its PreferredSuccessors most caught-up first.

The harness cannot ask a target for a graceful shutdown, the other path to EndQuorumEpoch. It makes the
leader resign the way Kafka also does it: check quorum (KafkaRaftClient.pollLeader ->
transitionToResigned(LeaderState.nonLeaderVotersByDescendingFetchOffset()), the same successor order as
on shutdown). The virtual voters first fetch up to different offsets, highest id furthest, so that the
order asked for is not the order of the ids."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.conformance.test_leaderprogress import CHECK_QUORUM_FACTOR, declared_factor, gives_up

ORDER = Clause("KIP-595", "EndQuorumEpoch", "PreferredSuccessors")
FIRST = Clause("KIP-595", "EndQuorumEpoch Request Handling", "first preferred successor: no back-off")
#: spec/kafka-behaviour.yaml: KIP-595 asks for a list sorted by preference; which preference is Kafka's
#: choice (every other voter, highest fetch offset first).
ROW_ORDER = "end.successor-order"


def successors(part: dict[str, Any]) -> list[int]:
    """PreferredSuccessors (v0) or PreferredCandidates' ids (v1, KIP-853)."""
    if "PreferredCandidates" in part:
        return [int(c["CandidateId"]) for c in part["PreferredCandidates"]]
    return [int(s) for s in part.get("PreferredSuccessors", [])]


@case("KIP-595/Successors/1")
async def test_most_caught_up_first(sc: Scenario) -> None:
    log = sc.q.log
    voters = sc.virtual_ids
    lead = voters[0]
    # Enough records that every virtual voter can stop at an offset of its own.
    e0 = await sc.make_follower(lead)
    await sc.feed(lead, e0, len(voters))
    epoch = await sc.make_leader(follow=False)
    ranked = list(reversed(voters))  # most caught up first: the highest id at the log end, then one less each
    await sc.follow_all(ranked[0], epoch)
    end = log.end
    reached = {ranked[0]: end}
    for rank, vid in enumerate(ranked[1:], start=1):
        offset = end - rank
        await sc.call(
            f"v{vid} fetches from offset {offset}",
            sc.q.voters[vid].fetch(epoch, offset, log.epoch_at(offset - 1) if offset else 0),
        )
        reached[vid] = offset
    sc.frames.note(sc.target_id, f"fetch offsets the leader saw: {reached}; now nobody fetches")
    t = sc.timeouts
    limit = max(CHECK_QUORUM_FACTOR, declared_factor(sc)) * t.fetch_ms
    first = await sc.expect_frame(
        gives_up(sc, epoch),
        sc.bound_ms(limit),
        "setup: the leader, fetched by no voter, gives up",
        f"EndQuorumEpoch or Vote(epoch>{epoch}) within {limit:.0f} ms + slack",
        clause=Clause("KIP-595", "Leader Progress Timeout"),
    )
    if first.api != "EndQuorumEpoch":
        sc.skip(
            "the target gives up leadership by starting an election, without EndQuorumEpoch (the KIP text's "
            "Leader Progress Timeout); a graceful shutdown, its only other trigger, cannot be requested over the "
            "wire, so no PreferredSuccessors can be read"
        )
    named = successors(first.part)
    expected = [v for v in ranked if v in named]
    sc.check(
        sc.target_id not in named and len(set(named)) == len(named),
        "PreferredSuccessors names other voters, each once",
        f"a subset of {voters} without the leader {sc.target_id}",
        named,
        ORDER,
    )
    sc.check(
        named == expected and bool(named) and named[0] == ranked[0],
        "PreferredSuccessors is sorted most caught-up first (by the last fetch offset the leader saw)",
        f"{ranked} (fetch offsets {reached})",
        f"{named} in {first.summary()}",
        ORDER,
        level=KAFKA,
        kafka=ROW_ORDER,
    )
    sc.check(
        sorted(named) == voters,
        "every other voter is named (Kafka: nonLeaderVotersByDescendingFetchOffset)",
        ranked,
        named,
        ORDER,
        level=KAFKA,
        kafka=ROW_ORDER,
    )


#: Kafka's default controller.quorum.election.backoff.max.ms: long enough that a first successor which
#: backed off could not hide inside the bound below (the harness's usual 100 ms could).
LONG_BACKOFF_MS = 1000


@case("KIP-595/Successors/2")
async def test_first_successor_never_backs_off(sc: Scenario) -> None:
    sc.require("restart", f"relaunch the target with controller.quorum.election.backoff.max.ms={LONG_BACKOFF_MS}")
    target = sc.target
    usual = target.timeouts
    target.timeouts = replace(usual, election_backoff_max_ms=LONG_BACKOFF_MS)
    try:
        await sc.restart_target()  # the same directory, the properties rewritten with the long backoff
        a = sc.virtual_ids[0]
        epoch = await sc.make_follower(a)
        await sc.catch_up(a, epoch)
        mark = sc.frames.mark()
        others = [v for v in sc.virtual_ids if v != a]
        resp = await sc.call("EndQuorumEpoch is answered", sc.v(0).end_quorum_epoch(epoch, [sc.target_id, *others]))
        err = int(resp.get("ErrorCode", 0)) or int(B.partition(resp).get("ErrorCode", 0))
        sc.check(err == 0, "EndQuorumEpoch from the leader of the current epoch is accepted", "ErrorCode NONE",
                 B.describe("EndQuorumEpoch", "response", resp), FIRST)
        bound = sc.timeouts.election_ms // 2 + 250
        await sc.expect_frame(
            lambda f: sc.from_target("Vote")(f) and f.part.get("CandidateEpoch") == epoch + 1,
            bound,
            f"the first preferred successor, configured with election.backoff.max.ms={LONG_BACKOFF_MS}, stands "
            "at once: the back-off is for the later successors only (Kafka's endEpochElectionBackoff: 0 for "
            "position 0)",
            f"Vote(epoch={epoch + 1}) within {bound} ms (< {LONG_BACKOFF_MS} ms)",
            mark,
            FIRST,
        )
    finally:
        target.timeouts = usual
        await sc.restart_target()
