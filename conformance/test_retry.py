"""KIP-595 "Leader Election": a candidate whose election fails (refused, or unanswered until its election
timeout) starts the next one in a higher epoch; it never asks again for votes of the epoch it lost."""

from __future__ import annotations

from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.test_majority import RETRY, campaign, election_window_ms
from kraft_tck.conformance.virtual import Frame


async def next_election(sc: Scenario, first: Frame, why: str) -> None:
    """The Vote after ``first`` that is not a resend of its epoch must carry CandidateEpoch E+1, its
    CandidateId and the same log end (nothing was appended meanwhile)."""
    epoch = int(first.part["CandidateEpoch"])
    bound = election_window_ms(sc)
    nxt = await sc.expect_frame(
        # a pre-vote (KIP-996, Vote v2 PreVote=true) is no election of its own
        lambda f: (sc.from_target("Vote")(f) and not f.part.get("PreVote")
                   and int(f.part.get("CandidateEpoch", -1)) != epoch),
        bound,
        f"a candidate whose election failed ({why}) starts a new election in a bumped epoch",
        f"Vote(epoch={epoch + 1}) within {bound:.0f} ms (2 x election.timeout + backoff + request timeout + slack)",
        first.seq + 1,
        RETRY,
    )
    p = nxt.part
    sc.check(
        int(p.get("CandidateEpoch", -1)) == epoch + 1 and p.get("CandidateId") == sc.target_id,
        "the next election's epoch: the lost one plus one (no other epoch was seen meanwhile)",
        f"CandidateEpoch={epoch + 1}, CandidateId={sc.target_id}",
        nxt.summary(),
        RETRY,
    )
    sc.check(
        (p.get("LastOffsetEpoch"), p.get("LastOffset"))
        == (first.part.get("LastOffsetEpoch"), first.part.get("LastOffset")),
        "the retry reports the same log end (a candidate appends nothing)",
        f"LastOffsetEpoch={first.part.get('LastOffsetEpoch')}, LastOffset={first.part.get('LastOffset')}",
        nxt.summary(),
        RETRY,
    )


@case("KIP-595/Retry/1")
async def test_refused_candidate_bumps_epoch(sc: Scenario) -> None:
    first = await campaign(sc, granting=[])
    await next_election(sc, first, "every voter answered VoteGranted=false")


@case("KIP-595/Retry/2")
async def test_unanswered_candidate_bumps_epoch(sc: Scenario) -> None:
    first = await campaign(sc, granting=[], silent=True)
    await next_election(sc, first, "no voter answered before the election timeout")
