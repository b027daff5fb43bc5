"""KIP-595 "Leader Election" / "Vote Response Handling": the target as candidate."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.records import ControlType, decode_control


@case("KIP-595/Election/1")
async def test_fetch_timeout_starts_election(sc: Scenario) -> None:
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 1)
    log = sc.q.log
    mark = sc.frames.mark()
    sc.q.partition(lead)
    t = sc.timeouts
    bound = sc.bound_ms(t.fetch_ms + t.election_ms)
    first = await sc.expect_frame(
        lambda f: sc.from_target("Vote")(f) and int(f.part.get("CandidateEpoch", -1)) > epoch,
        bound,
        "the follower, no longer hearing from its leader, starts an election",
        f"Vote(epoch={epoch + 1}) within {bound:.0f} ms",
        mark,
    )
    p = first.part
    sc.check(
        p.get("CandidateEpoch") == epoch + 1 and p.get("CandidateId") == sc.target_id,
        "the candidate's epoch and id",
        f"CandidateEpoch={epoch + 1}, CandidateId={sc.target_id}",
        first.summary(),
    )
    sc.check(
        (p.get("LastOffsetEpoch"), p.get("LastOffset")) == (log.last_epoch, log.end),
        "the candidate reports its true log end",
        f"LastOffsetEpoch={log.last_epoch}, LastOffset={log.end}",
        first.summary(),
    )
    for vid in sc.virtual_ids:
        await sc.expect_frame(
            lambda f, v=vid: sc.from_target("Vote", dst=v)(f) and f.part.get("CandidateEpoch") == epoch + 1,
            sc.bound_ms(t.request_timeout_ms),
            f"the candidate asks every voter (v{vid})",
            f"Vote(epoch={epoch + 1}) to v{vid}",
            mark,
        )


@case("KIP-595/Election/2")
async def test_majority_makes_leader(sc: Scenario) -> None:
    start = sc.frames.mark()
    epoch = await sc.make_leader()
    for vid in sc.virtual_ids:
        await sc.expect_frame(
            lambda f, v=vid: sc.from_target("BeginQuorumEpoch", dst=v)(f) and f.part.get("LeaderEpoch") == epoch,
            sc.bound_ms(sc.timeouts.request_timeout_ms),
            f"the new leader announces itself to v{vid}",
            f"BeginQuorumEpoch(leader={sc.target_id}, epoch={epoch}) to v{vid}",
            start,
        )
    changes = []
    for batch in sc.q.log.batches:
        if batch.partition_leader_epoch == epoch and batch.is_control:
            for rec in batch.records:
                ctype, body = decode_control(rec)
                if ctype == ControlType.LEADER_CHANGE:
                    changes.append(body)
    sc.check(
        bool(changes),
        f"the leader appended a LeaderChange control record in epoch {epoch}",
        "a LeaderChange batch among the records it served",
        f"epochs served: {sc.q.log.epochs()}",
    )
    sc.check(
        changes[0].get("LeaderId") == sc.target_id,
        "the LeaderChange record names the leader",
        f"LeaderId={sc.target_id}",
        changes[0],
    )
    resp = await sc.call("Fetch is answered", sc.v(0).follow_once(epoch))
    part = B.partition(resp)
    leader = part.get("CurrentLeader") or {}
    sc.check(
        part.get("ErrorCode") == 0 and leader.get("LeaderId") == sc.target_id and leader.get("LeaderEpoch") == epoch,
        "the leader answers fetches as leader",
        f"no error, CurrentLeader=({sc.target_id}, {epoch})",
        B.describe("Fetch", "response", resp),
    )
