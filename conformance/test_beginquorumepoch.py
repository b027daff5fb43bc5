"""KIP-595 "BeginQuorumEpoch Request Handling"."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.errors import Errors


@case("KIP-595/BeginQuorumEpoch/1")
async def test_follow_announced_leader(sc: Scenario) -> None:
    a, b = sc.virtual_ids[0], sc.virtual_ids[1]
    epoch = await sc.make_follower(a)
    await sc.feed(a, epoch, 2)
    log = sc.q.log
    # One announcement of the next epoch, while the target follows v_a and fetches from it (no timer of its own is
    # near): it must follow v_b at once. (Not make_follower's retries: a target that adopts the epoch but forgets
    # the leader campaigns, and a later announcement can meet it as a candidate of that very epoch, which it then
    # follows as the same-epoch rule says; the bug would pass.)
    new_epoch = sc.q.next_epoch()
    sc.q.set_leader(b, new_epoch)
    mark = sc.frames.mark()
    resp = await sc.call(f"BeginQuorumEpoch(epoch={new_epoch}) from v{b} is answered",
                         sc.v(1).begin_quorum_epoch(new_epoch))  # fmt: skip
    part = B.partition(resp)
    err = int(resp.get("ErrorCode", 0)) or int(part.get("ErrorCode", 0))
    sc.check(err == 0, f"BeginQuorumEpoch(leader=v{b}, epoch={new_epoch}) above the target's epoch {epoch}",
             "ErrorCode NONE", B.describe("BeginQuorumEpoch", "response", resp))  # fmt: skip
    t = sc.timeouts
    to_b = sc.from_target("Fetch", dst=b)
    first = await sc.frames.wait_for(lambda f: to_b(f) and f.part.get("CurrentLeaderEpoch") == new_epoch,
                                     sc.bound_ms(t.request_timeout_ms + t.fetch_max_wait_ms) / 1000, mark)  # fmt: skip
    if first is None:
        since = sc.frames.select(sc.from_target("Vote"), mark)
        sc.fail(f"the target follows v{b}, announced leader of epoch {new_epoch}", f"Fetch to v{b} in epoch "
                f"{new_epoch}", f"none; {since[0].summary() if since else 'no Fetch to it at all'}")  # fmt: skip
    p = first.part
    sc.check(
        (p.get("FetchOffset"), p.get("LastFetchedEpoch")) == (log.end, log.last_epoch),
        f"the first Fetch to the new leader v{b}",
        f"FetchOffset={log.end}, LastFetchedEpoch={log.last_epoch}",
        first.summary(),
    )


@case("KIP-595/BeginQuorumEpoch/2")
async def test_older_epoch_fenced(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    resp = await sc.call("BeginQuorumEpoch is answered", sc.v(1).begin_quorum_epoch(epoch - 1))
    part = B.partition(resp)
    err = int(resp.get("ErrorCode", 0)) or int(part.get("ErrorCode", 0))
    sc.check(
        err == Errors.FENCED_LEADER_EPOCH,
        f"BeginQuorumEpoch of epoch {epoch - 1} < {epoch}",
        "FENCED_LEADER_EPOCH",
        B.describe("BeginQuorumEpoch", "response", resp),
    )
    sc.check(
        part.get("LeaderEpoch") == epoch,
        "the rejection names the current epoch",
        f"LeaderEpoch={epoch}",
        B.describe("BeginQuorumEpoch", "response", resp),
    )
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=a)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
        sc.bound_ms(sc.timeouts.fetch_max_wait_ms + sc.timeouts.request_timeout_ms),
        "the target keeps following its leader",
        f"Fetch(epoch={epoch}) to v{a}",
    )
