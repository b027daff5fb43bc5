"""KIP-595 "Fetch Request Handling" step 4: the leader's high watermark."""

from __future__ import annotations

from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
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


@case("KIP-595/HighWatermark/4")
async def test_diverging_fetch_is_not_progress(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    log = sc.q.log
    e0 = await sc.make_follower(a)
    await sc.feed(a, e0, 2)
    epoch = await sc.make_leader(follow=False)
    lc = log.end  # the leader's LeaderChange record sits here; nobody holds it yet
    # The bystander takes the LeaderChange record: its Fetch reports lc, the harness log now ends at lc + 1.
    await sc.call("Fetch is answered", sc.q.voters[sc.bystander].follow_once(epoch))
    sc.check(log.end > lc, "setup: the leader served its LeaderChange record", f"records from {lc}", log.end)
    # Each follower claims lc + 1 records whose last one is of epoch e0: the leader's epoch e0 ends at lc, so it
    # answers DivergingEpoch (e0, lc). Counted as progress, these fetches would make a majority at lc + 1.
    for vid in sc.followers:
        resp = await sc.call("Fetch is answered", sc.q.voters[vid].fetch(epoch, lc + 1, e0))
        sc.check(
            B.diverging_of(B.partition(resp)) is not None,
            f"setup: v{vid}'s Fetch(FetchOffset={lc + 1}, LastFetchedEpoch={e0}) diverges (epoch {e0} ends at {lc})",
            f"DivergingEpoch=({e0}, {lc})",
            B.describe("Fetch", "response", resp),
            Clause("KIP-595", "Fetch Request Handling", "3"),
        )
    dq = await sc.call("DescribeQuorum is answered", sc.q.voters[sc.bystander].describe_quorum())
    hw = int((B.partition_or_none(dq) or {}).get("HighWatermark", -1))
    sc.check(
        hw <= lc,
        f"only v{sc.bystander} holds the LeaderChange record at {lc}; the fetches at {lc + 1} were answered "
        "with DivergingEpoch, which says nothing about what the follower holds",
        f"HighWatermark <= {lc} (a diverging fetch is not progress)",
        B.describe("DescribeQuorum", "response", dq),
    )
    first = sc.followers[0]
    resp = await sc.call("Fetch is answered", sc.q.voters[first].fetch(epoch, lc, e0))
    sc.check(
        hw_of(resp) <= lc,
        f"v{first} now fetches validly at {lc} (it holds everything before the LeaderChange record)",
        f"HighWatermark <= {lc}",
        B.describe("Fetch", "response", resp),
    )
    await until_hw(sc, epoch, log.end, "control: the followers now take the LeaderChange record")


@case("KIP-595/HighWatermark/5")
async def test_leader_hw_never_past_its_log(sc: Scenario) -> None:
    """The virtual voters elect the target while it is behind the high watermark its old leader announced
    (a history Raft excludes: it is there to expose a follower that took the leader's high watermark past its
    own log end). The clause is the node's own: its high watermark is min(leader's, its log end) as follower,
    so whatever its peers do, no high watermark it publishes lies past its own log."""
    a = sc.virtual_ids[0]
    leader_voter = sc.q.voters[a]
    log = sc.q.log
    e0 = await sc.make_follower(a)
    await sc.feed(a, e0, 1)
    start = log.end
    served: list[int] = []
    appended: list[int] = []  # the announced high watermark, once the 4 records are there

    def one_batch(body: dict[str, Any], version: int) -> dict[str, Any] | None:
        # No long-poll while this hook answers: a parked Fetch would be served the whole log on wake-up.
        if int(B.partition(body).get("CurrentLeaderEpoch", -1)) != e0:
            return None
        if not appended or served:
            return B.fetch_response(version, high_watermark=min(log.committed, log.end), leader=(a, e0))
        offset = int(B.partition(body)["FetchOffset"])
        served.append(offset)
        return B.fetch_response(version, high_watermark=appended[0], batches=log.read(offset, limit=1),
                                leader=(a, e0))

    leader_voter.fetch_hook = one_batch
    sc.q.changed()  # a Fetch parked before the hook is answered now, with nothing new
    mark = sc.frames.mark()
    await sc.expect_frame(sc._fetch_to(a, e0), sc.bound_ms(1000), "setup: the follower keeps fetching",
                          f"Fetch(epoch={e0}) to v{a}", mark)
    log.append_metadata(e0, 4, commit=True)
    announced = log.end
    appended.append(announced)
    got = await sc.expect_frame(
        lambda f: sc._fetch_to(a, e0)(f) and int(f.part.get("FetchOffset", -1)) > start,
        sc.bound_ms(3000),
        "setup: the follower appends the one batch served with HighWatermark ahead of it",
        f"Fetch(FetchOffset={start + 1}) to v{a}",
        mark,
        Clause("KIP-595", "Fetch Response Handling"),
    )
    held = int(got.part["FetchOffset"])
    sc.q.partition(a)  # the old leader goes quiet; it resigns naming the target first
    target = sc.target_id
    for v in sc.q.voters.values():
        v.vote_policy = lambda cand, _e, _p: cand == target
    mark = sc.frames.mark()
    others = [vid for vid in sc.virtual_ids if vid != a]
    await sc.call("setup: EndQuorumEpoch is answered", leader_voter.end_quorum_epoch(e0, [target, *others]))
    sc.q.set_leader(-1, -1)
    t = sc.timeouts
    bqe = await sc.expect_frame(
        lambda f: sc.from_target("BeginQuorumEpoch")(f) and int(f.part.get("LeaderEpoch", -1)) > e0,
        sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms),
        "setup: the target, granted every vote, becomes leader",
        "BeginQuorumEpoch from the target",
        mark,
    )
    epoch = int(bqe.part["LeaderEpoch"])
    for v in sc.q.voters.values():
        v.vote_policy = lambda _c, _e, _p: False
    resp = await sc.call("Fetch is answered", sc.q.voters[others[0]].fetch(epoch, held, e0))
    records = B.records_of(B.partition(resp))
    end = max([held, *(b.last_offset + 1 for b in records)])
    hw = hw_of(resp)
    # Put the harness log back in line with the target's (the records it never got were never its to commit).
    log.committed = min(log.committed, held)
    log.truncate(held)
    sc.check(
        hw <= end,
        f"the target holds {held} records (it got one batch while its leader announced HighWatermark "
        f"{announced}), then leads epoch {epoch} with its LeaderChange record at {held}",
        f"HighWatermark <= {end}, its own log end (a follower's high watermark is min(leader's, its log end))",
        B.describe("Fetch", "response", resp),
        Clause("KIP-595", "Fetch Response Handling", "high watermark = min(leader's, log end)"),
    )


@case("KIP-595/HighWatermark/6")
async def test_old_epoch_entries_commit_only_indirectly(sc: Scenario) -> None:
    """Raft's Figure 8 on the wire. Five voters: v2 leads E0 and gives the target two records past the
    high watermark h; the target then leads E and a majority (it, v2, v3) holds those old records, but no
    entry of E. A leader that counted them committed would refuse what comes next: v4, which led an epoch
    E1 between E0 and E that the target never saw (writing its own entry at h, elected by v3, v5 and itself
    while v3 was behind), wins E + 1 with v2, v3 and v5 (their last epoch E0 is older than E1) and has
    the target truncate to h. Only a leader that waited for an entry of its own epoch, as KIP-595 asks,
    never committed past h and follows."""
    if len(sc.q.voter_ids) < 5:
        sc.skip("needs --quorum-size 5: in three voters no leader can be elected without an entry a majority holds")
    a, v4 = sc.virtual_ids[0], sc.virtual_ids[2]
    log = sc.q.log
    e0 = await sc.make_follower(a)
    await sc.feed(a, e0, 1, commit=True)
    h = log.committed
    await sc.feed(a, e0, 2, commit=False)
    e1 = sc.q.next_epoch()  # v4's epoch: the target never hears of it
    epoch = await sc.make_leader(follow=False)
    lc = log.end
    for vid in sc.followers:  # with the target a majority holds the old records up to lc
        resp = await sc.call("Fetch is answered", sc.q.voters[vid].fetch(epoch, lc, e0))
        sc.check(
            hw_of(resp) <= h,
            f"v{vid} holds the old-epoch records up to {lc}, nobody the epoch-{epoch} record at {lc}",
            f"HighWatermark <= {h}",
            B.describe("Fetch", "response", resp),
        )
    # v4's history: its log ends at h in E0, then its own entry of E1 at h; it wins E + 1.
    log.truncate(h)
    log.writer_id, log.voters = v4, sc.q.voter_ids
    log.granting = [v for v in sc.q.voter_ids if v != sc.target_id]
    log.append_metadata(e1, 1, commit=False)
    new_epoch = await sc.make_follower(v4)
    sc.check(new_epoch > epoch, "setup: v4 leads an epoch above the target's", f"> {epoch}", new_epoch)
    log.append_metadata(new_epoch, 1, commit=True)
    sc.q.changed()
    await sc.expect_frame(
        lambda f: sc._fetch_to(v4, new_epoch)(f) and int(f.part.get("FetchOffset", -1)) <= h,
        sc.bound_ms(3000),
        f"the old leader of epoch {epoch} follows v{v4}: it truncates the epoch-{e0} records past {h}, which "
        f"it never committed (only an entry of its own epoch {epoch} on a majority would have committed them)",
        f"Fetch(FetchOffset <= {h}) to v{v4} after truncating to {h}",
        0,
    )
    await sc.catch_up(v4, new_epoch)
