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
    mark = sc.frames.mark()
    new_epoch = await sc.make_follower(b)
    first = sc.frames.select(
        lambda f: sc.from_target("Fetch", dst=b)(f) and f.part.get("CurrentLeaderEpoch") == new_epoch, mark
    )[0]
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
