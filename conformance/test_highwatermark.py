"""KIP-595 "Fetch Request Handling" step 4: the leader's high watermark."""

from __future__ import annotations

from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import KAFKA, Scenario

OBSERVER = 99


def hw_of(resp: dict[str, Any]) -> int:
    return int(B.partition(resp).get("HighWatermark", -1))


async def until_hw(sc: Scenario, epoch: int, want: int, what: str) -> None:
    """Every follower fetches (up to two rounds) until a response carries HighWatermark ``want``."""
    seen = []
    for _ in range(2):
        for vid in sc.followers:
            resp = await sc.call("Fetch is answered", sc.q.voters[vid].follow_once(epoch))
            seen.append(hw_of(resp))
            if hw_of(resp) == want:
                return
    sc.fail(what, f"HighWatermark = {want} within two fetch rounds", f"HighWatermark {seen}")


@case("KIP-595/HighWatermark/1")
async def test_needs_entry_of_own_epoch(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    log = sc.q.log
    e0 = await sc.make_follower(a)
    await sc.feed(a, e0, 1, commit=True)
    h = log.committed
    await sc.feed(a, e0, 2, commit=False)
    epoch = await sc.make_leader(follow=False)
    lc = log.end  # where the leader's LeaderChange record sits
    first, *others = sc.followers
    for vid in others:  # the rest of the majority holds everything the leader sends
        await sc.call("Fetch is answered", sc.q.voters[vid].follow_once(epoch))
    resp = await sc.call("Fetch is answered", sc.q.voters[first].fetch(epoch, lc, e0))
    sc.check(
        hw_of(resp) <= h,
        f"v{first} holds the old-epoch records up to {lc} but no entry of epoch {epoch}",
        f"HighWatermark <= {h} (the old records are not committed by this leader yet)",
        B.describe("Fetch", "response", resp),
    )
    # How "not known yet" is said is Kafka's choice: -1 (LeaderState.highWatermark() is empty until an
    # entry of its epoch commits; KafkaRaftClient.handleDescribeQuorumRequest: orElse(-1)).
    sc.check(
        hw_of(resp) == -1,
        "a new leader's high watermark is unknown (-1) until an entry of its epoch commits",
        "HighWatermark -1",
        B.describe("Fetch", "response", resp),
        level=KAFKA,
        kafka="fetch.new-leader-hw-unknown",
    )
    dq = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    dq_part = B.partition_or_none(dq) or {}
    sc.check(
        dq_part.get("HighWatermark") == -1,
        "DescribeQuorum of a new leader shows its high watermark unknown (-1)",
        "HighWatermark -1",
        B.describe("DescribeQuorum", "response", dq),
        level=KAFKA,
        kafka="describe.hw-unknown",
    )
    if not others:
        await sc.call("Fetch is answered", sc.q.voters[first].follow_once(epoch))
    sc.check(log.end > lc, "setup: the leader served its LeaderChange record", f"records from {lc}", log.end)
    await until_hw(sc, epoch, log.end, f"a majority now holds the epoch-{epoch} record")


@case("KIP-595/HighWatermark/2")
async def test_observers_do_not_count(sc: Scenario) -> None:
    log = sc.q.log
    epoch = await sc.make_leader(follow=False)
    first, *others = sc.followers
    lc = log.end
    await sc.call("Fetch is answered", sc.q.voters[first].follow_once(epoch))  # gets LeaderChange, reports lc
    sc.check(log.end > lc, "setup: the leader served its LeaderChange record", f"records from {lc}", log.end)
    for vid in others:  # all but one of the majority hold it: one more holder would commit it
        await sc.call("Fetch is answered", sc.q.voters[vid].follow_once(epoch))
    resp = await sc.call(
        "observer Fetch is answered",
        sc.q.voters[sc.bystander].fetch(epoch, log.end, log.last_epoch, replica_id=OBSERVER),
    )
    sc.check(
        hw_of(resp) <= lc,
        f"observer {OBSERVER} completes a 'majority' at offset {lc + 1} only if observers counted",
        f"HighWatermark <= {lc} (observers never count)",
        B.describe("Fetch", "response", resp),
    )
    await until_hw(sc, epoch, log.end, f"control: voter v{first} now holds offset {lc}")


@case("KIP-595/HighWatermark/3")
async def test_never_goes_backwards(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    lagging = sc.q.voters[sc.bystander]
    for offset in range(min(log.end, 4)):
        # LastFetchedEpoch: the epoch of the record before FetchOffset, 0 at offset 0 (never negative:
        # KafkaRaftClient.handleFetchRequest answers INVALID_REQUEST to that)
        await sc.call("Fetch is answered", lagging.fetch(epoch, offset, log.epoch_at(offset - 1) if offset else 0))
    await sc.call("Fetch is answered", sc.v(0).follow_once(epoch))
    # A HighWatermark of -1 is "unknown", not a value: a new leader's until an entry of its epoch
    # commits, and every error answer's (KafkaRaftClient.buildEmptyFetchResponse). Only the known
    # high watermarks of answers without error are compared.
    hws = [
        (f.seq, int(f.part.get("HighWatermark", -1)))
        for f in sc.frames.select(lambda f: f.src == sc.target_id and f.api == "Fetch" and f.kind == "response")
        if not f.body.get("ErrorCode") and not f.part.get("ErrorCode") and int(f.part.get("HighWatermark", -1)) >= 0
    ]
    sc.check(bool(hws), "setup: the leader answered fetches with a known high watermark", "some", hws)
    best = -1
    for seq, hw in hws:
        sc.check(
            hw >= best,
            "the leader's known high watermark in fetch responses",
            f"never below {best}",
            f"{hw} in response #{seq}; sequence {[h for _, h in hws]}",
        )
        best = max(best, hw)
