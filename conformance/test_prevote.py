"""KIP-996 "Pre-Vote": the target as a voter asked for pre-votes, and as a prospective asking for them.

A target that advertises Vote v2 (ApiVersions) implements pre-vote as Kafka 4.x does: a pre-vote (Vote v2
``PreVote=true``) is sent in the nominee's *current* epoch, is granted on an up-to-date log alone, changes
and persists nothing, and is refused by a voter that follows a live leader. A target that advertises Vote
0-1 only (Kafka 3.x) knows no pre-vote: these cases are skipped for it, saying so.

Kafka sources: ``KafkaRaftClient.handleVoteRequest`` / ``handleVoteResponse`` / ``pollProspective`` /
``pollFollowerAsVoter``, ``QuorumState.transitionToProspective`` / ``unattachedOrProspectiveCanGrantVote``,
``FollowerState.canGrantVote``, ``LeaderState.canGrantVote``; ``KafkaRaftClientPreVoteTest``.
"""

from __future__ import annotations

from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import INFO, Scenario
from kraft_tck.conformance.virtual import Frame, refuse_all
from kraft_tck.spec.errors import Errors

FAR = 1_000_000  # a LastOffset no target log reaches in a test
GRANTING = Clause("KIP-996", "Proposed Changes", "granting a pre-vote")
PROSPECTIVE = Clause("KIP-996", "Proposed Changes", "prospective state")
MIXED = Clause("KIP-996", "Compatibility, Deprecation, and Migration Plan")


def granted(resp: dict[str, Any]) -> bool:
    return bool(B.partition(resp).get("VoteGranted"))


def summary(resp: dict[str, Any]) -> str:
    return B.describe("Vote", "response", resp)


def is_pre_vote(f: Frame) -> bool:
    return bool(f.part.get("PreVote"))


async def require_pre_vote(sc: Scenario) -> None:
    """Skip unless the target advertises Vote v2 (KIP-996). The decision is the target's ApiVersions answer."""
    if not await sc.target_pre_vote():
        client = await sc.v(0).connect()
        lo, hi = client.versions.get(B.VOTE, (0, 0))
        sc.skip(f"the target advertises Vote {lo}-{hi}: no KIP-996 pre-vote (Kafka 3.x elections); "
                "pre-vote needs Vote v2")


async def unattached_with_records(sc: Scenario) -> int:
    """The target holds 2 records of a virtual leader's epoch, then a stale candidate's real Vote of a fresh
    epoch E moves it to Unattached(E) (refused: KIP-595 "Vote Request Handling"). The virtual voters refuse
    its own pre-votes, so it stays in E. Returns E, or skips when the target had moved past it."""
    for v in sc.q.voters.values():
        v.pre_vote_policy = refuse_all
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 2)
    sc.q.set_leader(-1, -1)
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("setup: a stale Vote is answered", sc.v(0).vote(e, log.last_epoch, log.end - 1))
    sc.check(
        not granted(resp) and B.partition(resp).get("LeaderEpoch") == e,
        f"setup: the target refuses a stale candidate and moves to its epoch {e}",
        f"VoteGranted=false, LeaderEpoch={e}",
        summary(resp),
        Clause("KIP-595", "Vote Request Handling"),
    )
    return e


@case("KIP-996/PreVote/1")
async def test_pre_vote_granted_without_epoch_change_or_vote(sc: Scenario) -> None:
    await require_pre_vote(sc)
    e = await unattached_with_records(sc)
    log = sc.q.log
    resp = await sc.call("the pre-vote is answered",
                         sc.v(1).vote(e, log.last_epoch, log.end, pre_vote=True), GRANTING)
    sc.check(
        granted(resp),
        f"a pre-vote of epoch {e} with a log equal to the target's is granted",
        "VoteGranted=true",
        summary(resp),
        GRANTING,
    )
    sc.check(
        B.partition(resp).get("LeaderEpoch") == e,
        "granting a pre-vote leaves the voter in its epoch (no epoch bump)",
        f"LeaderEpoch={e}",
        summary(resp),
        GRANTING,
    )
    resp = await sc.call("the Vote is answered", sc.v(0).vote(e, log.last_epoch, log.end), GRANTING)
    sc.check(
        granted(resp),
        f"the pre-vote for v{sc.virtual_ids[1]} recorded no vote: a real Vote of epoch {e} from "
        f"v{sc.virtual_ids[0]} is still granted",
        "VoteGranted=true",
        summary(resp),
        GRANTING,
    )


@case("KIP-996/PreVote/2")
async def test_pre_vote_refused_while_following_a_live_leader(sc: Scenario) -> None:
    await require_pre_vote(sc)
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 2)  # the target fetched from its leader: the leader is alive
    log = sc.q.log
    mark = sc.frames.mark()
    resp = await sc.call("the pre-vote is answered",
                         sc.v(1).vote(epoch, log.last_epoch, log.end + FAR, pre_vote=True), GRANTING)
    part = B.partition(resp)
    sc.check(
        not granted(resp),
        "a follower whose leader answers its fetches refuses a pre-vote, even from a longer log",
        "VoteGranted=false",
        summary(resp),
        GRANTING,
    )
    sc.check(
        part.get("LeaderEpoch") == epoch,
        "the pre-vote does not move the follower out of its epoch",
        f"LeaderEpoch={epoch}",
        summary(resp),
        GRANTING,
    )
    sc.check(
        part.get("LeaderId") == lead,
        "the refusal names the leader the voter follows (KafkaRaftClient.buildVoteResponse)",
        f"LeaderId={lead}",
        summary(resp),
        GRANTING,
        level=INFO,
    )
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=lead)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
        sc.bound_ms(sc.timeouts.request_timeout_ms + sc.timeouts.fetch_max_wait_ms),
        "the follower keeps fetching from its leader in the same epoch",
        f"Fetch(CurrentLeaderEpoch={epoch}) to v{lead}",
        mark,
        GRANTING,
    )


@case("KIP-996/PreVote/3")
async def test_pre_vote_refused_to_a_stale_log(sc: Scenario) -> None:
    await require_pre_vote(sc)
    e = await unattached_with_records(sc)
    log = sc.q.log
    for what, last_epoch, last_offset in (
        ("a shorter log of the same last epoch", log.last_epoch, log.end - 1),
        ("an older last epoch, however long", log.last_epoch - 1, log.end + FAR),
    ):
        resp = await sc.call("the pre-vote is answered",
                             sc.v(1).vote(e, last_epoch, last_offset, pre_vote=True), GRANTING)
        sc.check(
            not granted(resp),
            f"a pre-vote from {what} is refused (last epoch first, then offset)",
            "VoteGranted=false",
            summary(resp),
            GRANTING,
        )
    resp = await sc.call("the pre-vote is answered",
                         sc.v(1).vote(e, log.last_epoch, log.end, pre_vote=True), GRANTING)
    sc.check(
        granted(resp),
        "the same voter's pre-vote from an up-to-date log is granted (the refusals were for the log)",
        "VoteGranted=true",
        summary(resp),
        GRANTING,
    )


@case("KIP-996/PreVote/4")
async def test_prospective_pre_votes_in_its_epoch_before_any_vote(sc: Scenario) -> None:
    await require_pre_vote(sc)
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 1)
    log = sc.q.log
    mark = sc.frames.mark()
    sc.q.partition(lead)
    t = sc.timeouts
    first = await sc.expect_frame(
        sc.from_target("Vote"),
        sc.bound_ms(t.fetch_ms + t.election_ms),
        "the follower, no longer hearing from its leader, asks for votes",
        "a Vote request within fetch.timeout",
        mark,
        PROSPECTIVE,
    )
    p = first.part
    sc.check(
        is_pre_vote(first) and first.version >= 2,
        "the first Vote after the fetch timeout is a pre-vote (Vote v2 PreVote=true), not a real vote",
        "Vote v2 PreVote=true",
        f"v{first.version} {first.summary()}",
        PROSPECTIVE,
    )
    sc.check(
        p.get("CandidateEpoch") == epoch and p.get("CandidateId") == sc.target_id,
        "a pre-vote names the prospective's current epoch (no epoch bump before the pre-vote is won)",
        f"CandidateEpoch={epoch}, CandidateId={sc.target_id}",
        first.summary(),
        PROSPECTIVE,
    )
    sc.check(
        (p.get("LastOffsetEpoch"), p.get("LastOffset")) == (log.last_epoch, log.end),
        "the prospective reports its true log end",
        f"LastOffsetEpoch={log.last_epoch}, LastOffset={log.end}",
        first.summary(),
        PROSPECTIVE,
    )
    for vid in sc.virtual_ids:
        await sc.expect_frame(
            lambda f, v=vid: (sc.from_target("Vote", dst=v)(f) and is_pre_vote(f)
                              and f.part.get("CandidateEpoch") == epoch),
            sc.bound_ms(t.request_timeout_ms),
            f"the prospective asks every voter (v{vid})",
            f"Vote(PreVote=true, epoch={epoch}) to v{vid}",
            mark,
            PROSPECTIVE,
        )
    # The voters that lost the leader too grant the pre-vote (the harness's rule): the real election follows.
    real = await sc.expect_frame(
        lambda f: sc.from_target("Vote")(f) and not is_pre_vote(f),
        sc.bound_ms(t.election_ms + t.request_timeout_ms),
        "a majority of pre-vote grants starts the real election",
        f"Vote(PreVote=false, epoch={epoch + 1})",
        mark,
        PROSPECTIVE,
    )
    sc.check(
        real.part.get("CandidateEpoch") == epoch + 1,
        "the real election is in epoch + 1",
        f"CandidateEpoch={epoch + 1}",
        real.summary(),
        Clause("KIP-595", "Leader Election"),
    )
    grants = sc.frames.select(
        lambda f: (f.api == "Vote" and f.kind == "response" and f.dst == sc.target_id
                   and bool(f.part.get("VoteGranted"))),
        mark,
    )
    sc.check(
        bool(grants) and grants[0].seq < real.seq,
        "the real Vote is sent only after a pre-vote grant came back",
        "a granted pre-vote answer before the first real Vote",
        f"first grant at frame {grants[0].seq if grants else None}, first real Vote at frame {real.seq}",
        PROSPECTIVE,
    )


@case("KIP-996/PreVote/5")
async def test_rejoining_voter_does_not_disrupt_the_leader(sc: Scenario) -> None:
    await require_pre_vote(sc)
    epoch = await sc.make_leader()
    for vid in sc.followers:
        sc.keep_fetching(vid, epoch)
    rejoin = sc.quorum.voters[sc.bystander]
    log = sc.q.log
    mark = sc.frames.mark()
    # The bystander was cut off since epoch E began and timed out: it asks for pre-votes in E.
    for what, last_offset in (("its log", log.end), ("a longer log", log.end + FAR)):
        resp = await sc.call("the pre-vote is answered",
                             rejoin.vote(epoch, log.last_epoch, last_offset, pre_vote=True), GRANTING)
        part = B.partition(resp)
        sc.check(
            not granted(resp),
            f"the leader refuses a rejoining voter's pre-vote ({what})",
            "VoteGranted=false",
            summary(resp),
            GRANTING,
        )
        sc.check(
            part.get("LeaderEpoch") == epoch and part.get("LeaderId") == sc.target_id
            and int(part.get("ErrorCode", 0)) == Errors.NONE,
            "the leader stays leader of its epoch and says so",
            f"LeaderId={sc.target_id}, LeaderEpoch={epoch}",
            summary(resp),
            GRANTING,
        )
    await sc.idle(sc.bound_ms(sc.timeouts.election_ms) / 1000)
    resp = await sc.call("Fetch is answered", sc.v(0).follow_once(epoch))
    leader = B.partition(resp).get("CurrentLeader") or {}
    sc.check(
        int(B.partition(resp).get("ErrorCode", 0)) == 0
        and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (sc.target_id, epoch),
        "after the rejoining voter's pre-votes the quorum keeps its leader and epoch",
        f"CurrentLeader=({sc.target_id}, {epoch})",
        B.describe("Fetch", "response", resp),
        GRANTING,
    )
    later = sc.frames.select(
        lambda f: f.src == sc.target_id and f.kind == "request" and (
            f.api == "Vote" or int(f.part.get("LeaderEpoch", epoch)) > epoch), mark)
    sc.check(
        not later,
        "the leader neither campaigns nor announces a higher epoch",
        "no Vote and no BeginQuorumEpoch/EndQuorumEpoch above the leader's epoch",
        "; ".join(f.summary() for f in later[:3]),
        GRANTING,
    )


@case("KIP-996/PreVote/6")
async def test_voter_without_pre_vote_makes_the_prospective_a_candidate(sc: Scenario) -> None:
    await require_pre_vote(sc)
    lead = sc.virtual_ids[0]
    old = sc.virtual_ids[1]

    def unsupported(body: dict[str, Any], _version: int) -> dict[str, Any] | None:
        part = B.partition_or_none(body) or {}
        if part.get("PreVote"):
            return B.election_response(B.VOTE, -1, -1, top_error=Errors.UNSUPPORTED_VERSION, granted=False)
        return None  # a real Vote is answered as usual (it refuses: the case only watches the candidacy)

    sc.q.voters[old].vote_hook = unsupported
    for vid in sc.virtual_ids[2:]:
        sc.q.voters[vid].pre_vote_policy = refuse_all
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 1)
    mark = sc.frames.mark()
    sc.q.partition(lead)
    t = sc.timeouts
    asked = await sc.expect_frame(
        lambda f: sc.from_target("Vote", dst=old)(f) and is_pre_vote(f),
        sc.bound_ms(t.fetch_ms + t.election_ms),
        f"the prospective sends its pre-vote to v{old} too",
        f"Vote(PreVote=true) to v{old}",
        mark,
        PROSPECTIVE,
    )
    real = await sc.expect_frame(
        lambda f: sc.from_target("Vote")(f) and not is_pre_vote(f) and f.seq > asked.seq,
        sc.bound_ms(t.request_timeout_ms + t.election_ms),
        f"a voter that cannot take a pre-vote (v{old}: UNSUPPORTED_VERSION) makes the prospective a candidate "
        "without a pre-vote majority",
        f"Vote(PreVote=false, epoch={epoch + 1}) soon after v{old}'s answer",
        mark,
        MIXED,
    )
    sc.check(
        real.part.get("CandidateEpoch") == epoch + 1,
        "the fallback election is an ordinary one, in epoch + 1",
        f"CandidateEpoch={epoch + 1}",
        real.summary(),
        MIXED,
    )
