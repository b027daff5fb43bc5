"""KIP-595: a node that learns of a higher epoch moves to it whatever its role (a leader asked for a vote
included), and a follower follows the leader that its leader's FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER
answer names (KafkaRaftClient.maybeHandleCommonResponse)."""

from __future__ import annotations

from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.errors import Errors


def leads(resp: dict[str, Any], target: int, epoch: int) -> bool:
    part = B.partition_or_none(resp) or {}
    return (
        not resp.get("ErrorCode")
        and not part.get("ErrorCode")
        and part.get("LeaderId") == target
        and part.get("LeaderEpoch") == epoch
    )


@case("KIP-595/Epochs/1")
async def test_leader_adopts_higher_epoch_of_vote(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("Vote is answered", sc.v(1).vote(e, log.last_epoch, log.end))
    part = B.partition(resp)
    summary = B.describe("Vote", "response", resp)
    sc.check(
        part.get("LeaderEpoch") == e and not part.get("ErrorCode"),
        f"the leader of epoch {epoch} asked for a vote in epoch {e} moves to the candidate's epoch",
        f"LeaderEpoch={e}, no error",
        summary,
    )
    sc.check(
        bool(part.get("VoteGranted")),
        "the candidate's log is the leader's own (last epoch and end offset): the vote is granted",
        "VoteGranted=true",
        summary,
    )
    dq = await sc.call("DescribeQuorum is answered", sc.v(0).describe_quorum())
    sc.check(
        not leads(dq, sc.target_id, epoch),
        f"after moving to epoch {e} the node no longer leads epoch {epoch}",
        f"not LeaderId={sc.target_id}, LeaderEpoch={epoch}",
        B.describe("DescribeQuorum", "response", dq),
    )


async def follows_hinted_leader(sc: Scenario, error: Errors) -> None:
    """The target follows v_a in E; v_a answers a fetch with ``error`` naming (v_b, E+1), v_b leading E+1
    and nobody sending BeginQuorumEpoch: the target must fetch from v_b in E+1 before its fetch timeout."""
    a, b = sc.virtual_ids[0], sc.virtual_ids[1]
    epoch = await sc.make_follower(a)
    await sc.catch_up(a, epoch)
    new = sc.q.next_epoch()
    mark = sc.frames.mark()
    if error == Errors.NOT_LEADER_OR_FOLLOWER:
        # v_a no longer leads: its parked and next fetches answer NOT_LEADER_OR_FOLLOWER naming (v_b, E+1)
        sc.q.set_leader(b, new)
    else:
        answered: list[int] = []

        def fenced(body: dict[str, Any], version: int) -> dict[str, Any] | None:
            if answered:
                return None
            answered.append(1)
            sc.q.set_leader(b, new)  # v_b serves E+1 from now on; v_a answers this fetch as fenced
            return B.fetch_response(version, error=error, leader=(b, new))

        sc.v(0).fetch_hook = fenced
    t = sc.timeouts
    await sc.expect_frame(
        lambda f: f.src == a
        and f.api == "Fetch"
        and f.kind == "response"
        and f.part.get("ErrorCode") == error
        and (f.part.get("CurrentLeader") or {}).get("LeaderId") == b,
        sc.bound_ms(t.fetch_max_wait_ms + t.request_timeout_ms),
        f"setup: v{a} answers the target's Fetch {error.name} naming v{b} as leader of epoch {new}",
        f"Fetch response {error.name}, CurrentLeader=({b}, {new})",
        mark,
    )
    bound = sc.bound_ms(t.fetch_max_wait_ms + t.request_timeout_ms)
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=b)(f) and f.part.get("CurrentLeaderEpoch") == new,
        bound,
        f"the follower told {error.name} with CurrentLeader=(v{b}, {new}) follows v{b}",
        f"Fetch(CurrentLeaderEpoch={new}) to v{b} within {bound:.0f} ms (no BeginQuorumEpoch, no fetch timeout needed)",
        mark,
    )


@case("KIP-595/Epochs/2")
async def test_follower_follows_not_leader_hint(sc: Scenario) -> None:
    await follows_hinted_leader(sc, Errors.NOT_LEADER_OR_FOLLOWER)


@case("KIP-595/Epochs/3")
async def test_follower_follows_fenced_hint(sc: Scenario) -> None:
    await follows_hinted_leader(sc, Errors.FENCED_LEADER_EPOCH)


@case("KIP-595/Epochs/4")
async def test_fed_follower_starts_no_election(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    await sc.catch_up(a, epoch)
    mark, t0 = sc.frames.mark(), sc.frames.now_ms()
    span = 2 * sc.timeouts.fetch_ms
    await sc.idle(span / 1000)
    votes = sc.frames.select(sc.from_target("Vote"), mark)
    sc.check(
        not votes,
        f"a follower whose leader v{a} answers every Fetch (fetch timeout reset by each answer, KIP-595 "
        f'"Fetch Response Handling")',
        f"no Vote from the target for 2 x fetch.timeout = {span} ms",
        votes[0].summary() if votes else "",
    )
    late = sc.frames.select(lambda f: sc.from_target("Fetch", dst=a)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
                            mark)
    sc.check(
        bool(late) and late[-1].ts_ms - t0 >= span / 2,
        f"the follower keeps fetching from v{a} in epoch {epoch}",
        f"Fetch(CurrentLeaderEpoch={epoch}) to v{a} throughout the {span} ms",
        late[-1].summary() if late else "no Fetch",
    )
