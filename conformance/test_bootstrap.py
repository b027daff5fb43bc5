"""The cluster id: KIP-595 "Fetch Request Handling" step 1 (checked by every KRaft RPC) and
"Cluster Bootstrapping"."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.errors import Errors

OTHER_ID = "b3RoZXItY2x1c3Rlci1pZA"


def need_cluster_id(sc: Scenario) -> str:
    if sc.q.cluster_id is None:
        sc.skip("the target's cluster id is unknown; pass --cluster-id")
    return sc.q.cluster_id


@case("KIP-595/ClusterId/1")
async def test_requests_carry_cluster_id(sc: Scenario) -> None:
    cid = need_cluster_id(sc)
    await sc.make_leader()
    await sc.make_follower(sc.virtual_ids[1])
    sent = sc.frames.select(
        lambda f: (
            f.src == sc.target_id
            and f.kind == "request"
            and f.api in ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch")
        )
    )
    apis = {f.api for f in sent}
    sc.check(
        {"Vote", "BeginQuorumEpoch", "Fetch"} <= apis,
        "setup: the target sent Vote, BeginQuorumEpoch, Fetch",
        "all three",
        sorted(apis),
    )
    for f in sent:
        sc.check(
            f.body.get("ClusterId") == cid,
            f"ClusterId of the target's {f.api} request #{f.seq}",
            repr(cid),
            repr(f.body.get("ClusterId")),
        )


@case("KIP-595/ClusterId/2")
async def test_other_cluster_id_rejected(sc: Scenario) -> None:
    need_cluster_id(sc)
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    log = sc.q.log
    v2, v3 = sc.v(0), sc.v(1)
    calls = {
        "Vote": v3.vote(sc.q.next_epoch(), log.last_epoch, log.end + 1000, cluster_id=OTHER_ID),
        "BeginQuorumEpoch": v3.begin_quorum_epoch(sc.q.next_epoch(), cluster_id=OTHER_ID),
        "EndQuorumEpoch": v2.end_quorum_epoch(epoch, [sc.target_id], cluster_id=OTHER_ID),
        "Fetch": v3.fetch(epoch, log.end, log.last_epoch, cluster_id=OTHER_ID),
    }
    for api, coro in calls.items():
        resp = await sc.call(f"{api} is answered", coro)
        sc.check(
            resp.get("ErrorCode") == Errors.INCONSISTENT_CLUSTER_ID,
            f"{api} with ClusterId={OTHER_ID!r}",
            "top-level ErrorCode INCONSISTENT_CLUSTER_ID",
            B.describe(api, "response", resp),
        )
        if api == "Vote":
            part = B.partition_or_none(resp) or {}
            sc.check(
                not part.get("VoteGranted"),
                "no vote for another cluster",
                "VoteGranted=false",
                B.describe(api, "response", resp),
            )
    mark = sc.frames.mark()
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=a)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
        sc.bound_ms(sc.timeouts.fetch_max_wait_ms + sc.timeouts.request_timeout_ms),
        "requests of another cluster changed nothing",
        f"Fetch(epoch={epoch}) to v{a}",
        mark,
    )


@case("KIP-595/ClusterId/3")
async def test_null_cluster_id_accepted(sc: Scenario) -> None:
    epoch = await sc.make_follower()
    log = sc.q.log
    v3 = sc.v(1)
    resp = await sc.call("Vote is answered", v3.vote(epoch - 1, log.last_epoch, log.end, cluster_id=None))
    sc.check(
        resp.get("ErrorCode") == 0,
        "Vote with ClusterId=null",
        "top-level ErrorCode NONE",
        B.describe("Vote", "response", resp),
    )
    resp = await sc.call("Fetch is answered", v3.fetch(epoch, log.end, log.last_epoch, cluster_id=None))
    sc.check(
        resp.get("ErrorCode") == 0,
        "Fetch with ClusterId=null",
        "top-level ErrorCode NONE",
        B.describe("Fetch", "response", resp),
    )
    new_epoch = sc.q.next_epoch()
    sc.q.set_leader(v3.node_id, new_epoch)
    mark = sc.frames.mark()
    resp = await sc.call("BeginQuorumEpoch is answered", v3.begin_quorum_epoch(new_epoch, cluster_id=None))
    err = int(resp.get("ErrorCode", 0)) or int(B.partition(resp).get("ErrorCode", 0))
    sc.check(
        err == 0, "BeginQuorumEpoch with ClusterId=null", "no error", B.describe("BeginQuorumEpoch", "response", resp)
    )
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=v3.node_id)(f) and f.part.get("CurrentLeaderEpoch") == new_epoch,
        sc.bound_ms(sc.timeouts.request_timeout_ms),
        "the target follows the leader announced with a null id",
        f"Fetch(epoch={new_epoch}) to v{v3.node_id}",
        mark,
    )


@case("KIP-595/ClusterId/4")
async def test_unformatted_node_adopts_cluster_id(sc: Scenario) -> None:
    cid = need_cluster_id(sc)
    await sc.restart_target(wipe=True, formatted=False)
    a = sc.virtual_ids[0]
    log = sc.q.log
    cid_offset = log.end
    log.append_cluster_id(sc.q.next_epoch() - 1 if log.last_epoch < sc.q.known_epoch else log.last_epoch, cid)
    log.committed = log.end
    saved, sc.q.cluster_id = sc.q.cluster_id, None  # announce ourselves without an id, as at bootstrap
    try:
        epoch = await sc.make_follower(a)
    finally:
        sc.q.cluster_id = saved
    mark = sc.frames.mark()
    fr = await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=a)(f) and f.body.get("ClusterId") == cid,
        sc.bound_ms(3000),
        f"once the cluster-id record at offset {cid_offset} is committed, the node adopts it",
        f"Fetch with ClusterId={cid!r}",
        0,
    )
    sc.check(
        fr.part.get("CurrentLeaderEpoch") == epoch,
        "the adopting node follows its leader",
        f"CurrentLeaderEpoch={epoch}",
        fr.summary(),
    )
    del mark
