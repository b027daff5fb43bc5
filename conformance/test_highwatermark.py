"""KIP-595 "Fetch Request Handling" step 4: the leader's high watermark."""

from __future__ import annotations

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario

OBSERVER = 99


def hw_of(resp: dict[str, object]) -> int:
    return int(B.partition(resp).get("HighWatermark", -1))  # type: ignore[arg-type]


@case("KIP-595/HighWatermark/1")
async def test_needs_entry_of_own_epoch(sc: Scenario) -> None:
    a = sc.virtual_ids[0]
    log = sc.q.log
    e0 = await sc.make_follower(a)
    await sc.feed(a, e0, 1, commit=True)
    h = log.committed
    await sc.feed(a, e0, 2, commit=False)
    epoch = await sc.make_leader(follow=False)
    v = sc.v(0)
    lc = log.end  # where the leader's LeaderChange record sits
    resp = await sc.call("Fetch is answered", v.follow_once(epoch))
    sc.check(hw_of(resp) <= h, f"v{a} holds the old-epoch records up to {lc} but no entry of epoch {epoch}",
             f"HighWatermark <= {h} (the old records are not committed by this leader yet)",
             B.describe("Fetch", "response", resp))
    sc.check(log.end > lc, "setup: the leader served its LeaderChange record", f"records from {lc}", log.end)
    target_hw = log.end
    seen = []
    for _ in range(2):
        resp = await sc.call("Fetch is answered", v.follow_once(epoch))
        seen.append(hw_of(resp))
        if hw_of(resp) == target_hw:
            return
    sc.fail(f"v{a} now holds the epoch-{epoch} record too: a majority has an entry of the leader's epoch",
            f"HighWatermark = {target_hw} within two fetches", f"HighWatermark {seen}")


@case("KIP-595/HighWatermark/2")
async def test_observers_do_not_count(sc: Scenario) -> None:
    log = sc.q.log
    epoch = await sc.make_leader(follow=False)
    v2, v3 = sc.v(0), sc.v(1)
    lc = log.end
    resp = await sc.call("Fetch is answered", v2.follow_once(epoch))
    sc.check(log.end > lc, "setup: the leader served its LeaderChange record", f"records from {lc}", log.end)
    resp = await sc.call("observer Fetch is answered",
                         v3.fetch(epoch, log.end, log.last_epoch, replica_id=OBSERVER))
    sc.check(hw_of(resp) <= lc, f"only the leader and observer {OBSERVER} hold offset {lc}",
             f"HighWatermark <= {lc} (observers never count)", B.describe("Fetch", "response", resp))
    seen = []
    for _ in range(2):
        resp = await sc.call("Fetch is answered", v2.follow_once(epoch))
        seen.append(hw_of(resp))
        if hw_of(resp) == log.end:
            return
    sc.fail(f"control: voter v{v2.node_id} now holds offset {lc}", f"HighWatermark = {log.end}",
            f"HighWatermark {seen}")


@case("KIP-595/HighWatermark/3")
async def test_never_goes_backwards(sc: Scenario) -> None:
    epoch = await sc.make_leader()
    log = sc.q.log
    v3 = sc.v(1)
    for offset in range(min(log.end, 4)):
        await sc.call("Fetch is answered", v3.fetch(epoch, offset, log.epoch_at(offset - 1) if offset else -1))
    await sc.call("Fetch is answered", sc.v(0).follow_once(epoch))
    hws = [(f.seq, int(f.part.get("HighWatermark", -1)))
           for f in sc.frames.select(lambda f: f.src == sc.target_id and f.api == "Fetch" and f.kind == "response")]
    best = -1
    for seq, hw in hws:
        sc.check(hw >= best, "the leader's high watermark in fetch responses", f"never below {best}",
                 f"{hw} in response #{seq}; sequence {[h for _, h in hws]}")
        best = max(best, hw)
