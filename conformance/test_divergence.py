"""KIP-595 divergence: "Fetch Response Handling" 2 (the target as follower) and "Fetch Request Handling" 3
(the target as leader)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.conformance.transport import KafkaClient, RequestError
from kraft_tck.conformance.virtual import Frame

#: spec/kafka-behaviour.yaml: a follower told to truncate below its high watermark halts.
ROW_HALT_BELOW_HW = "fetch.truncate-below-hw-fails"


def fetch_pos(f: Frame) -> tuple[int, int]:
    return int(f.part.get("FetchOffset", -1)), int(f.part.get("LastFetchedEpoch", -1))


async def expect_fetches(
    sc: Scenario, leader: int, epoch: int, expected: list[tuple[int, int]], hw: int, start: int
) -> None:
    """The target's fetches to ``leader`` in ``epoch`` from ``start`` on must be exactly ``expected``
    (FetchOffset, LastFetchedEpoch), in order; none may go below the high watermark ``hw``."""
    seen: list[tuple[int, int]] = []
    pos = start
    for want in expected:
        fr = await sc.expect_frame(
            lambda f: sc.from_target("Fetch", dst=leader)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
            sc.bound_ms(sc.timeouts.request_timeout_ms + sc.timeouts.fetch_max_wait_ms),
            "the follower keeps fetching",
            f"Fetch(offset={want[0]}, lastFetchedEpoch={want[1]})",
            pos,
        )
        pos = fr.seq + 1
        got = fetch_pos(fr)
        seen.append(got)
        sc.check(
            got[0] >= hw,
            "a follower never truncates below its high watermark",
            f"FetchOffset >= {hw}",
            f"Fetch(offset={got[0]}, lastFetchedEpoch={got[1]}); fetches so far {seen}",
        )
        sc.check(
            got == want,
            "the follower truncates to the divergence point and refetches from there",
            f"Fetch(offset={want[0]}, lastFetchedEpoch={want[1]}); the whole sequence of fetches {expected}",
            f"Fetch(offset={got[0]}, lastFetchedEpoch={got[1]}); the fetches so far {seen}",
        )


@case("KIP-595/Divergence/1")
async def test_follower_truncates_once(sc: Scenario) -> None:
    a, b = sc.virtual_ids[0], sc.virtual_ids[1]
    log = sc.q.log
    e1 = await sc.make_follower(a)
    await sc.feed(a, e1, 2, commit=True)
    base = log.end
    await sc.feed(a, e1, 3, commit=False)
    tip = log.end
    log.truncate(base)  # the next leader never had the uncommitted records
    mark = sc.frames.mark()
    e2 = await sc.make_follower(b)
    await expect_fetches(sc, b, e2, [(tip, e1), (base, e1)], log.committed, mark)
    await sc.feed(b, e2, 1)


@case("KIP-595/Divergence/2")
async def test_follower_truncates_in_rounds(sc: Scenario) -> None:
    a, b = sc.virtual_ids[0], sc.virtual_ids[1]
    log = sc.q.log
    ea = await sc.make_follower(a)
    await sc.feed(a, ea, 1, commit=True)
    b0 = log.end
    await sc.feed(a, ea, 2, commit=False)  # [b0, b0+2) of Ea, uncommitted
    ex = sc.q.next_epoch()  # an epoch whose leader the target never heard of
    eb = await sc.make_follower(a)
    await sc.feed(a, eb, 2, commit=False)  # [b0+2, tip) of Eb (its LeaderChange, 2 records), uncommitted
    tip = log.end
    log.truncate(b0)
    log.append_metadata(ex, 3, commit=False)  # [b0, b0+4) of Ex (its LeaderChange, 3 records)
    mark = sc.frames.mark()
    ec = await sc.make_follower(b)
    fetches = [(tip, eb), (b0 + 2, ea), (b0, ea), (log.end, ex)]
    await expect_fetches(sc, b, ec, fetches, log.committed, mark)
    log.committed = log.end
    await sc.feed(b, ec, 1)


@case("KIP-595/Divergence/3")
async def test_never_below_high_watermark(sc: Scenario) -> None:
    # Told to truncate below its high watermark, Kafka's follower throws before truncating
    # (KafkaRaftClient.handleFetchResponse: "The leader requested truncation to offset ... below the
    # current high watermark") and the fatal fault handler halts the process; a follower that refuses
    # the answer and keeps fetching from its log end is as safe. The harness restarts a halted target.
    sc.require("restart", "a follower may halt when told to truncate below its high watermark (Kafka does)")
    a = sc.virtual_ids[0]
    log = sc.q.log
    epoch = await sc.make_follower(a)
    await sc.feed(a, epoch, 3, commit=True)
    hw = log.committed
    answered: list[int] = []

    def lie(body: dict[str, Any], version: int) -> dict[str, Any] | None:
        if answered:
            return None
        answered.append(1)
        return B.fetch_response(version, high_watermark=hw, diverging=(epoch, hw - 2), leader=(a, epoch))

    sc.v(0).fetch_hook = lie
    mark = sc.frames.mark()
    sc.q.changed()
    await sc.expect_frame(
        lambda f: f.src == a and f.api == "Fetch" and f.kind == "response" and B.diverging_of(f.part) is not None,
        sc.bound_ms(2000),
        "the leader's DivergingEpoch below the high watermark reaches the target",
        f"DivergingEpoch({epoch}, {hw - 2}) sent",
        mark,
    )
    after = sc.frames.mark()
    # a refused answer may leave the fetch to time out before the next one goes
    bound = sc.bound_ms(2 * sc.timeouts.request_timeout_ms + sc.timeouts.fetch_max_wait_ms)
    fr = await fetch_unless_exited(sc, sc.from_target("Fetch", dst=a), bound / 1000, after)
    if fr is not None:
        got = fetch_pos(fr)
        sc.check(
            got[0] >= hw,
            "a follower never truncates committed records",
            f"FetchOffset >= {hw} (its high watermark)",
            f"Fetch(offset={got[0]}, lastFetchedEpoch={got[1]})",
        )
        sc.check(
            False,
            "a follower told to truncate below its high watermark halts (Kafka's choice)",
            "the node halts",
            f"it refused the truncation and kept fetching: Fetch(offset={got[0]}, lastFetchedEpoch={got[1]})",
            level=KAFKA,
            kafka=ROW_HALT_BELOW_HW,
        )
        return
    if await answers_connections(sc):
        sc.fail(
            "a follower told to truncate below its high watermark refuses: it halts or keeps fetching",
            f"another Fetch to v{a} (FetchOffset >= {hw}) or the node halted",
            f"no Fetch within {bound:.0f} ms, and the node still accepts connections",
        )
    sc.frames.note(sc.target_id, "the target halted (refuses connections); restarting it on the same directory")
    await sc.restart_target()
    mark = sc.frames.mark()
    again = await sc.make_follower(a)
    fr = await sc.expect_frame(
        sc.from_target("Fetch", dst=a),
        sc.bound_ms(sc.timeouts.request_timeout_ms),
        "the restarted follower fetches",
        f"Fetch(epoch={again}) to v{a}",
        mark,
    )
    got = fetch_pos(fr)
    sc.check(
        got[0] >= hw,
        "a follower never truncates committed records (it halted before truncating)",
        f"FetchOffset >= {hw} after the restart (its high watermark)",
        f"Fetch(offset={got[0]}, lastFetchedEpoch={got[1]})",
    )


#: After the launched target's process is seen dead: time for the harness's event loop to read whatever it had
#: sent before dying (already in the kernel's socket buffers), so a Fetch it sent is never missed.
EXIT_GRACE_S = 0.2


async def fetch_unless_exited(sc: Scenario, pred: Callable[[Frame], bool], bound_s: float, start: int) -> Frame | None:
    """The first frame from ``start`` matching ``pred`` within ``bound_s``; None at the bound, or as soon as a target
    the harness launched is seen to have exited (a halted node sends nothing more: the rest of the bound would be
    waited for nothing). A target the harness cannot watch waits the whole bound."""
    deadline = time.monotonic() + bound_s
    while (left := deadline - time.monotonic()) > 0:
        fr = await sc.frames.wait_for(pred, min(0.05, left), start)
        if fr is not None:
            return fr
        if sc.target.exited():
            return await sc.frames.wait_for(pred, EXIT_GRACE_S, start)
    return None


async def answers_connections(sc: Scenario) -> bool:
    """Whether the target still accepts a connection and answers ApiVersions (a halted one does not)."""
    probe = KafkaClient(sc.target.host, sc.target.port, client_id="kraft-tck-probe", ssl=sc.target.ssl,
                        sasl=sc.target.sasl)
    try:
        await probe.connect(timeout_s=2)
    except (RequestError, OSError, TimeoutError):
        return False
    finally:
        await probe.close()
    return True


async def leader_with_history(sc: Scenario) -> int:
    lead = sc.virtual_ids[0]
    epoch = await sc.make_follower(lead)
    await sc.feed(lead, epoch, 2)
    return await sc.make_leader()


@case("KIP-595/Divergence/4")
async def test_leader_answers_inconsistent_offset(sc: Scenario) -> None:
    epoch = await leader_with_history(sc)
    log = sc.q.log
    older = [(e, s) for e, s in log.epochs() if e < epoch]
    sc.check(bool(older), "setup: the leader's log holds an epoch before its own", "an older epoch", log.epochs())
    prev, _ = older[-1]
    _, prev_end = log.epoch_end_offset(prev)
    offset = prev_end + 1
    want = log.diverging(offset, prev)
    resp = await sc.call("Fetch is answered", sc.v(1).fetch(epoch, offset, prev))
    part = B.partition(resp)
    sc.check(
        B.diverging_of(part) == want and not B.records_of(part),
        f"Fetch(offset={offset}, lastFetchedEpoch={prev}) past the end of epoch {prev}",
        f"DivergingEpoch{want}, no records",
        B.describe("Fetch", "response", resp),
    )


@case("KIP-595/Divergence/5")
async def test_leader_answers_unknown_epoch(sc: Scenario) -> None:
    epoch = await leader_with_history(sc)
    log = sc.q.log
    phantom = epoch - 1
    if phantom in [e for e, _ in log.epochs()]:
        sc.fail(
            "setup: an epoch before the leader's with no records", f"epoch {phantom} absent from the log", log.epochs()
        )
    want = log.diverging(log.end, phantom)
    resp = await sc.call("Fetch is answered", sc.v(1).fetch(epoch, log.end, phantom))
    part = B.partition(resp)
    sc.check(
        B.diverging_of(part) == want and not B.records_of(part),
        f"Fetch(offset={log.end}, lastFetchedEpoch={phantom}) with an epoch the leader has no records of",
        f"DivergingEpoch{want} (largest epoch below, its end offset), no records",
        B.describe("Fetch", "response", resp),
    )
