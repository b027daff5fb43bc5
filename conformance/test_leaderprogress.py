"""KIP-595 "Leader Progress Timeout" (check quorum)."""

from __future__ import annotations

from collections.abc import Callable

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.virtual import Frame


def leads(resp: dict[str, object], target: int, epoch: int) -> bool:
    part = B.partition_or_none(resp) or {}
    return (
        not resp.get("ErrorCode")
        and not part.get("ErrorCode")
        and part.get("LeaderId") == target
        and part.get("LeaderEpoch") == epoch
    )


def gives_up(sc: Scenario, epoch: int) -> Callable[[Frame], bool]:
    """The leader of ``epoch`` giving up: its EndQuorumEpoch, or a Vote request of a new election. Not a
    Vote request of the election it won: one queued for a voter it connected to late may still arrive."""

    def match(f: Frame) -> bool:
        return (sc.from_target("EndQuorumEpoch")(f) and f.part.get("LeaderEpoch") == epoch) or (
            sc.from_target("Vote")(f) and int(f.part.get("CandidateEpoch", -1)) > epoch
        )

    return match


@case("KIP-595/LeaderProgress/1")
async def test_resigns_without_fetches(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    last = sc.frames.select(lambda f: f.src == sc.target_id and f.api == "Fetch" and f.kind == "response")[-1]
    t = sc.timeouts
    mark = sc.frames.mark()

    first = await sc.expect_frame(
        gives_up(sc, epoch),
        sc.bound_ms(t.fetch_ms),
        "the leader, fetched by no voter, gives up",
        f"EndQuorumEpoch or Vote(epoch>{epoch}) within fetch.timeout {t.fetch_ms} ms + slack {sc.slack_ms} ms",
        mark,
    )
    waited = first.ts_ms - last.ts_ms
    path = "EndQuorumEpoch then Vote" if first.api == "EndQuorumEpoch" else "Vote directly"
    sc.frames.note(sc.target_id, f"path taken: {path}, {waited:.0f} ms after the last fetch")
    resp = await sc.call("DescribeQuorum is answered", sc.v(1).describe_quorum())
    sc.check(
        not leads(resp, sc.target_id, epoch),
        "after the fetch timeout the node no longer acts as leader",
        f"not leader of epoch {epoch}",
        B.describe("DescribeQuorum", "response", resp),
    )
    if first.api == "EndQuorumEpoch":
        bound = sc.bound_ms(2 * t.election_ms + t.election_backoff_max_ms)
        await sc.expect_frame(
            lambda f: sc.from_target("Vote")(f) and int(f.part.get("CandidateEpoch", -1)) > epoch,
            bound,
            "the resigned leader starts an election",
            f"Vote(epoch>{epoch}) within {bound:.0f} ms of EndQuorumEpoch",
            first.seq + 1,
        )


@case("KIP-595/LeaderProgress/2")
async def test_no_resign_while_fetched(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    mark = sc.frames.mark()
    for vid in sc.followers:
        sc.keep_fetching(vid, epoch)
    await sc.idle(sc.bound_ms(2 * sc.timeouts.fetch_ms) / 1000)
    quit_ = sc.frames.select(gives_up(sc, epoch), mark)
    sc.check(
        not quit_,
        "a leader fetched by a majority keeps leading",
        f"no EndQuorumEpoch, no Vote(epoch>{epoch})",
        quit_[0].summary() if quit_ else "",
    )
    errors = [
        f
        for f in sc.frames.select(lambda f: f.src == sc.target_id and f.api == "Fetch" and f.kind == "response", mark)
        if f.part.get("ErrorCode")
    ]
    sc.check(
        not errors,
        "fetches keep being answered by the leader",
        "no fetch errors",
        errors[0].summary() if errors else "",
    )
    resp = await sc.call("DescribeQuorum is answered", sc.v(1).describe_quorum())
    sc.check(
        leads(resp, sc.target_id, epoch),
        "the node still leads",
        f"LeaderId={sc.target_id}, LeaderEpoch={epoch}",
        B.describe("DescribeQuorum", "response", resp),
    )
