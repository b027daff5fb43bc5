"""The cluster id: KIP-595 "Fetch Request Handling" step 1 (checked by every KRaft RPC) and
"Cluster Bootstrapping"."""

from __future__ import annotations

import re

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import INFO, Scenario
from kraft_tck.conformance.virtual import VLog
from kraft_tck.spec.errors import Errors

OTHER_ID = "b3RoZXItY2x1c3Rlci1pZA"
#: Kafka's cluster id form: a uuid in base64url without padding (Uuid.toString).
KAFKA_CLUSTER_ID = re.compile(r"[A-Za-z0-9_-]{22}")


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
    # an older candidate epoch (changes nothing), its last epoch below it (else INVALID_REQUEST)
    last_epoch = max(0, min(log.last_epoch, epoch - 2))
    resp = await sc.call("Vote is answered", v3.vote(epoch - 1, last_epoch, log.end, cluster_id=None))
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


@case("KIP-595/ClusterId/4", own_life=True)
async def test_unformatted_first_leader_generates_cluster_id(sc: Scenario) -> None:
    # KIP-595 "Cluster Bootstrapping": a node started without a cluster id takes part in the first
    # election, and the first leader generates the id and writes it to the log; once committed every
    # node carries it. The record's form is the implementation's: the harness never reads or writes it,
    # it judges the id from the target's own requests. Kafka refuses to start unformatted
    # (kafka-storage format writes meta.properties with the id), hence the capability.
    sc.require(
        "unformatted-start",
        "the target must start without a cluster id and generate one as the first leader (KIP-595 "
        "bootstrapping); Kafka refuses to start unformatted",
    )
    saved = sc.q.cluster_id
    try:
        await sc.restart_target(wipe=True, formatted=False)
        sc.q.log = VLog()  # a new cluster: the target's log is empty, and so is the history the harness serves
        sc.q.cluster_id = None  # the harness knows no id: its requests carry null, which KIP-595 accepts
        epoch = await sc.make_leader()  # the virtual followers fetch until its first entries are committed
        await generated_id_is_carried(sc, epoch)
    finally:
        sc.q.cluster_id = saved
        sc.retire_life()  # the next case gets a target formatted with the session's cluster id


async def generated_id_is_carried(sc: Scenario, leader_epoch: int) -> None:
    log = sc.q.log
    sc.check(
        log.committed > 0,
        "setup: the first leader's entries are committed (a majority fetched them)",
        "a high watermark above 0",
        f"committed log end {log.committed}",
    )
    b = sc.virtual_ids[1]
    mark = sc.frames.mark()
    epoch = await sc.make_follower(b)  # BeginQuorumEpoch with a null id; the target fetches from v{b}
    fr = sc.frames.select(lambda f: sc.from_target("Fetch", dst=b)(f), mark)[0]
    cid = fr.body.get("ClusterId")
    sc.check(
        isinstance(cid, str) and bool(cid),
        f"the first leader of epoch {leader_epoch}, its entries committed, carries the cluster id it generated",
        "Fetch with a non-null ClusterId",
        fr.summary() + f", ClusterId={cid!r}",
    )
    assert isinstance(cid, str)
    sc.check(
        bool(KAFKA_CLUSTER_ID.fullmatch(cid)),
        "the generated id has Kafka's form (22 characters of base64url, a uuid)",
        "22 characters [A-Za-z0-9_-]",
        repr(cid),
        level=INFO,
    )
    # from that Fetch on (a Vote of the election it won may still be on its way, sent before the commit)
    sent = sc.frames.select(lambda f: f.src == sc.target_id and f.kind == "request" and "ClusterId" in f.body, fr.seq)
    other = [f for f in sent if f.body.get("ClusterId") != cid]
    sc.check(
        not other,
        "every later request carries the same id",
        repr(cid),
        f"{other[0].summary()}, ClusterId={other[0].body.get('ClusterId')!r}" if other else "",
    )
    # The harness keeps sending a null id (always accepted): the id stays the target's own, and the
    # session harness trace's black-box check never sees the harness claim an id it did not format.
    log = sc.q.log
    resp = await sc.call(
        "Vote is answered", sc.v(0).vote(sc.q.known_epoch + 1, log.last_epoch, log.end + 1000, cluster_id=OTHER_ID)
    )
    sc.check(
        resp.get("ErrorCode") == Errors.INCONSISTENT_CLUSTER_ID,
        f"the node enforces the id it generated: Vote with ClusterId={OTHER_ID!r}",
        "top-level ErrorCode INCONSISTENT_CLUSTER_ID",
        B.describe("Vote", "response", resp),
    )
    if not sc.target.can_restart:
        return
    await sc.restart_target(formatted=False)  # kill -9, same directory (not formatted again): the id is its own
    mark = sc.frames.mark()
    again = await sc.make_follower(sc.virtual_ids[0])
    fr = sc.frames.select(lambda f: sc.from_target("Fetch", dst=sc.virtual_ids[0])(f), mark)[0]
    sc.check(
        fr.body.get("ClusterId") == cid,
        f"after kill -9 the node still carries the id (following v{sc.virtual_ids[0]} in epoch {again})",
        f"Fetch with ClusterId={cid!r}",
        f"{fr.summary()}, ClusterId={fr.body.get('ClusterId')!r}",
    )
    del epoch
