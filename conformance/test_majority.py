"""KIP-595 "Vote Response Handling" step 2: a candidate leads with exactly a majority of grants, never
with fewer (split votes: some virtual voters grant, the others answer VoteGranted=false)."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.test_leaderprogress import leads
from kraft_tck.conformance.virtual import Frame, grant_to, refuse_all

WIN = Clause("KIP-595", "Vote Response Handling", "2")
RETRY = Clause("KIP-595", "Leader Election", "election timeout → new election in epoch+1")


def majority(sc: Scenario) -> int:
    return len(sc.q.voter_ids) // 2 + 1


def election_window_ms(sc: Scenario) -> float:
    """How long a candidate may take to lose an election and start the next one: its votes answered or
    timed out (request timeout), at most the jittered election timeout (2 x election.timeout, Kafka's
    upper end), then the election backoff; plus the slack."""
    t = sc.timeouts
    return sc.bound_ms(t.request_timeout_ms + 2 * t.election_ms + t.election_backoff_max_ms)


async def campaign(sc: Scenario, granting: list[int], silent: bool = False) -> Frame:
    """Make the target a candidate: it follows v_a, v_a resigns naming it first (EndQuorumEpoch). Only the
    voters in ``granting`` grant its votes; every other virtual voter answers VoteGranted=false (or, with
    ``silent``, no virtual voter answers anything: they are all partitioned). Returns the first Vote of
    its election (CandidateEpoch E)."""
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.catch_up(lead, epoch)
    target = sc.target_id
    for vid, voter in sc.q.voters.items():
        voter.vote_policy = grant_to(target) if vid in granting else refuse_all
    if silent and await sc.target_pre_vote():
        # KIP-996: a target that nobody answers never gets past its pre-vote; the voters answer (and grant)
        # its pre-votes and hold only its real Votes.
        for vid in sc.virtual_ids:
            sc.q.silence_votes(vid)
    elif silent:
        for vid in sc.virtual_ids:
            sc.q.partition(vid)
    mark = sc.frames.mark()
    others = [v for v in sc.virtual_ids if v != lead]
    await sc.call("setup: EndQuorumEpoch is answered", sc.q.voters[lead].end_quorum_epoch(epoch, [target, *others]))
    sc.q.set_leader(-1, -1)
    t = sc.timeouts
    return await sc.expect_frame(
        lambda f: sc.from_target("Vote")(f) and int(f.part.get("CandidateEpoch", -1)) > epoch,
        sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms),
        "setup: the first preferred successor stands for election",
        f"Vote(epoch>{epoch}) from the target",
        mark,
        Clause("KIP-595", "EndQuorumEpoch Request Handling"),
    )


def answers(sc: Scenario, epoch: int, start: int) -> dict[int, bool]:
    """The virtual voters' answers to the target's Vote requests of ``epoch``: voter -> granted."""
    out: dict[int, bool] = {}
    # KIP-996: answers to the target's pre-votes (Vote v2 PreVote=true, possibly of the same epoch when it
    # retries from Prospective) are no votes: matched to their requests by correlation id and left out.
    pre_votes = {(f.dst, f.correlation_id) for f in sc.frames.select(
        lambda f: sc.from_target("Vote")(f) and bool(f.part.get("PreVote")), start)}
    for f in sc.frames.select(lambda f: f.api == "Vote" and f.kind == "response" and f.dst == sc.target_id, start):
        if (f.src, f.correlation_id) in pre_votes:
            continue
        if int(f.part.get("LeaderEpoch", -1)) == epoch and f.src not in out:
            out[f.src] = bool(f.part.get("VoteGranted"))
    return out


@case("KIP-595/Majority/1")
async def test_exact_majority_wins(sc: Scenario) -> None:
    granting = sc.followers  # with the target's own vote: exactly a majority, no more
    refusing = [v for v in sc.virtual_ids if v not in granting]
    first = await campaign(sc, granting)
    epoch = int(first.part["CandidateEpoch"])
    n, need = len(sc.q.voter_ids), majority(sc)
    bqe = await sc.expect_frame(
        lambda f: sc.from_target("BeginQuorumEpoch")(f) and int(f.part.get("LeaderEpoch", -1)) >= epoch,
        election_window_ms(sc),
        f"a candidate granted by {len(granting)} voter(s) plus itself ({need} of {n}: a majority) becomes leader, "
        f"though {len(refusing)} refused",
        f"BeginQuorumEpoch(leader={sc.target_id}, epoch={epoch})",
        first.seq,
        WIN,
    )
    # The refusals may still be on their way when the target wins: a candidate leads as soon as a majority
    # granted (Kafka's CandidateState.recordGrantedVote), possibly before it even asked the others.
    got = answers(sc, epoch, first.seq)
    sc.check(
        all(g == (v in granting) for v, g in got.items()),
        "setup: the split vote the harness answered",
        f"granted by {granting}, refused (if asked before the election ended) by {refusing}",
        got,
        WIN,
    )
    sc.check(
        int(bqe.part.get("LeaderEpoch", -1)) == epoch,
        "the candidate wins the election a majority granted (it needs no unanimity, no further election)",
        f"BeginQuorumEpoch(epoch={epoch})",
        bqe.summary(),
        WIN,
    )
    for vid in granting:
        await sc.follow_all(vid, epoch)
    resp = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    sc.check(
        leads(resp, sc.target_id, epoch),
        "DescribeQuorum shows the target leading the epoch it won with a bare majority",
        f"LeaderId={sc.target_id}, LeaderEpoch={epoch}",
        B.describe("DescribeQuorum", "response", resp),
        WIN,
    )


@case("KIP-595/Majority/2")
async def test_one_grant_short_loses(sc: Scenario) -> None:
    granting = sc.followers[:-1]  # one short: with the target's own vote, a minority
    refusing = [v for v in sc.virtual_ids if v not in granting]
    first = await campaign(sc, granting)
    epoch = int(first.part["CandidateEpoch"])
    n, need = len(sc.q.voter_ids), majority(sc)
    outcome = await sc.frames.wait_for(
        lambda f: (
            (sc.from_target("BeginQuorumEpoch")(f) and int(f.part.get("LeaderEpoch", -1)) >= epoch)
            or (sc.from_target("Vote")(f) and int(f.part.get("CandidateEpoch", -1)) > epoch)
        ),
        election_window_ms(sc) / 1000,
        first.seq,
    )
    got = answers(sc, epoch, first.seq)
    sc.check(
        all(not got.get(v, True) for v in refusing),
        "setup: the voters the harness made refuse answered VoteGranted=false",
        f"refused by {refusing}",
        got,
        WIN,
    )
    won = sc.frames.select(
        lambda f: sc.from_target("BeginQuorumEpoch")(f) and int(f.part.get("LeaderEpoch", -1)) >= epoch, first.seq
    )
    sc.check(
        not won,
        f"a candidate granted by {len(granting)} voter(s) plus itself ({len(granting) + 1} of {n}, a majority is "
        f"{need}) must not become leader; refusals are not grants",
        f"no BeginQuorumEpoch(epoch>={epoch}); refused by {refusing}",
        won[0].summary() if won else "",
        WIN,
    )
    if outcome is None:
        sc.fail(
            "a candidate that lost its election stands again",
            f"Vote(epoch>{epoch}) within {election_window_ms(sc):.0f} ms",
            "no new election",
            RETRY,
        )
    resp = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    sc.check(
        not leads(resp, sc.target_id, epoch),
        "the candidate that lost does not act as leader",
        f"not leader of epoch {epoch}",
        B.describe("DescribeQuorum", "response", resp),
        WIN,
    )
