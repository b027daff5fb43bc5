"""KIP-595 "EndQuorumEpoch Request Handling"."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario


@case("KIP-595/EndQuorumEpoch/1")
async def test_first_successor_elects_at_once(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    await sc.catch_up(a, epoch)
    mark = sc.frames.mark()
    others = [v for v in sc.virtual_ids if v != a]
    resp = await sc.call("EndQuorumEpoch is answered", sc.v(0).end_quorum_epoch(epoch, [sc.target_id, *others]))
    err = int(resp.get("ErrorCode", 0)) or int(B.partition(resp).get("ErrorCode", 0))
    sc.check(
        err == 0,
        "EndQuorumEpoch from the leader of the current epoch is accepted",
        "ErrorCode NONE",
        B.describe("EndQuorumEpoch", "response", resp),
    )
    bound = sc.timeouts.election_ms // 2 + 250
    await sc.expect_frame(
        lambda f: sc.from_target("Vote")(f) and f.part.get("CandidateEpoch") == epoch + 1,
        bound,
        "the first preferred successor starts its election at once (its leader still answers "
        "fetches, so no fetch timeout can be the cause)",
        f"Vote(epoch={epoch + 1}) within {bound} ms",
        mark,
    )
