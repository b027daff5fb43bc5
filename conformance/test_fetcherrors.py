"""KIP-595 "Fetch Request Handling" step 2 and CurrentLeader."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec.errors import Errors


def check_error(
    sc: Scenario, resp: dict[str, object], what: str, error: Errors, leader: tuple[int, int] | None
) -> None:
    part = B.partition(resp)
    cur = part.get("CurrentLeader") or {}
    ok = part.get("ErrorCode") == error and not B.records_of(part)
    if leader is not None:
        ok = ok and (cur.get("LeaderId"), cur.get("LeaderEpoch")) == leader
    want = f"{error.name}" + (f", CurrentLeader=({leader[0]}, {leader[1]})" if leader else "") + ", no records"
    sc.check(ok, what, want, B.describe("Fetch", "response", resp))


@case("KIP-595/FetchErrors/1")
async def test_older_epoch_fenced(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    # A well-formed fetch of an older epoch: FetchOffset 0 with LastFetchedEpoch 0 (an empty log, as Kafka
    # sends it). A negative LastFetchedEpoch, or one above CurrentLeaderEpoch, is INVALID_REQUEST before
    # any epoch check (KafkaRaftClient.handleFetchRequest); the epoch check is validateLeaderOnlyRequest.
    resp = await sc.call("Fetch is answered", sc.v(0).fetch(epoch - 1, 0, 0))
    check_error(
        sc,
        resp,
        f"Fetch(CurrentLeaderEpoch={epoch - 1}, offset 0, lastFetchedEpoch 0) to the leader of {epoch}",
        Errors.FENCED_LEADER_EPOCH,
        (sc.target_id, epoch),
    )


@case("KIP-595/FetchErrors/2")
async def test_newer_epoch_unknown(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    resp = await sc.call("Fetch is answered", sc.v(0).fetch(epoch + 1, log.end, log.last_epoch))
    check_error(
        sc, resp, f"Fetch(CurrentLeaderEpoch={epoch + 1}) to the leader of {epoch}", Errors.UNKNOWN_LEADER_EPOCH, None
    )


@case("KIP-595/FetchErrors/3")
async def test_follower_names_leader(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    epoch = await sc.make_follower(a)
    log = sc.q.log
    resp = await sc.call("Fetch is answered", sc.v(1).fetch(epoch, log.end, log.last_epoch))
    check_error(sc, resp, f"Fetch to a follower of v{a} in epoch {epoch}", Errors.NOT_LEADER_OR_FOLLOWER, (a, epoch))
