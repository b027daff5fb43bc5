"""Broker registration and liveness: KIP-631 BrokerRegistration / BrokerHeartbeat against the target as the
active controller, with the global broker states of the registration proposal (KIP-631).

The target is one voter; the harness elects it and keeps a majority of virtual followers fetching, so what it
appends commits and the harness holds a mirror of its committed log. The harness then plays brokers (ids 101+,
apart from every voter id) that speak only the wire protocol. A broker's state is judged twice: from the
heartbeat answers (what the broker is told) and from the committed log (what every node replays).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.conformance.brokerstate import BrokerState, replay
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.transport import KafkaClient, RequestError
from kraft_tck.spec.errors import Errors

BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
BROKER_APIS = {BROKER_REGISTRATION: "BrokerRegistration", BROKER_HEARTBEAT: "BrokerHeartbeat"}
PLAINTEXT = 0  # Kafka's SecurityProtocol id
OTHER_ID = "b3RoZXItY2x1c3Rlci1pZA"  # a well-formed cluster id that is not the target's

#: (offset, record name, state after the record, broker epoch) for one broker, in log order.
History = list[tuple[int, str, BrokerState, int]]


def err_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error {code}"


def describe(body: dict[str, Any]) -> str:
    keys = ("ErrorCode", "BrokerEpoch", "IsCaughtUp", "IsFenced", "ShouldShutDown")
    return ", ".join(f"{k}={err_name(body[k]) if k == 'ErrorCode' else body[k]}" for k in keys if k in body)


# ---------------------------------------------------------------------------------------------- the broker


@dataclass
class Broker:
    """A broker as the controller sees one: registrations and heartbeats, recorded in the case's frames."""

    sc: Scenario
    broker_id: int
    incarnation: uuid.UUID = field(default_factory=uuid.uuid4)
    epoch: int = -1
    last: dict[str, Any] = field(default_factory=dict)  # the last heartbeat answer
    client: KafkaClient | None = None

    def __post_init__(self) -> None:
        self.sc.q.spawn(self._close_at_case_end())

    async def _close_at_case_end(self) -> None:
        """The harness cancels a case's tasks when it ends: that is when this broker's connection goes."""
        try:
            await asyncio.Event().wait()
        finally:
            if self.client is not None:
                await self.client.close()

    def _observe(self, direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], _p: str) -> None:
        t = self.sc.target_id
        if direction == "send":
            self.sc.q.record(self.broker_id, t, api_key, "request", version, corr, body)
        else:
            self.sc.q.record(t, self.broker_id, api_key, "response", version, corr, body)

    async def _client(self) -> KafkaClient:
        if self.client is not None and self.client.connected:
            return self.client
        t = self.sc.target
        client = KafkaClient(t.host, t.port, client_id=f"kraft-tck-broker-{self.broker_id}", observer=self._observe,
                             ssl=t.ssl, sasl=t.sasl)
        await client.connect(timeout_s=self.sc.q.request_timeout_s)
        missing = [name for key, name in BROKER_APIS.items() if key not in client.versions]
        if missing:
            await client.close()
            self.sc.skip(
                f"the target does not advertise {' and '.join(missing)} (KIP-631 api keys 62/63) in ApiVersions; "
                "these cases need a controller that serves broker registration and heartbeats"
            )
        self.client = client
        return client

    async def request(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        """One request; RequestError when no answer comes (the connection is dropped for the next try)."""
        client = await self._client()
        try:
            # request_timeout_s (>= 2 s) leaves room for a registration answered only once its record commits.
            return await client.request(api_key, client.best_version(api_key), body, self.sc.q.request_timeout_s)
        except RequestError:
            await client.close()
            self.client = None
            raise

    async def call(self, api_key: int, body: dict[str, Any], follow: bool = True) -> dict[str, Any]:
        """One request that must be answered. ``follow``: NOT_CONTROLLER is retried for a while, because a
        just-elected leader becomes the active controller only once its epoch's first entry commits."""
        deadline = time.monotonic() + self.sc.bound_ms(self.sc.timeouts.election_ms) / 1000
        while True:
            try:
                resp = await self.request(api_key, body)
            except RequestError as exc:
                what = f"{BROKER_APIS[api_key]} from broker {self.broker_id} is answered"
                self.sc.fail(what, "a response", str(exc))
            if not follow or resp.get("ErrorCode") != Errors.NOT_CONTROLLER or time.monotonic() > deadline:
                return resp
            await idle(self.sc, 0.05)

    def registration(self, *, cluster_id: str | None = None, incarnation: uuid.UUID | None = None) -> dict[str, Any]:
        return {
            "BrokerId": self.broker_id,
            "ClusterId": self.sc.q.cluster_id if cluster_id is None else cluster_id,
            "IncarnationId": incarnation or self.incarnation,
            "Listeners": [
                {
                    "Name": "PLAINTEXT",
                    "Host": "127.0.0.1",
                    "Port": 29000 + self.broker_id,
                    "SecurityProtocol": PLAINTEXT,
                }
            ],
            "Features": [],
            "Rack": None,
            "IsMigratingZkBroker": False,
            "LogDirs": [],
            "PreviousBrokerEpoch": -1,
        }

    async def register(self, **overrides: Any) -> dict[str, Any]:
        """BrokerRegistration; with no overrides a success sets ``epoch``."""
        resp = await self.call(BROKER_REGISTRATION, self.registration(**overrides))
        if resp.get("ErrorCode") == Errors.NONE and not overrides:
            self.epoch = int(resp["BrokerEpoch"])
        return resp

    async def register_ok(self, clause: Clause | None = None) -> int:
        resp = await self.register()
        self.sc.check(
            resp.get("ErrorCode") == Errors.NONE and int(resp.get("BrokerEpoch", -1)) >= 0,
            f"the active controller accepts the registration of broker {self.broker_id}",
            "ErrorCode NONE and a broker epoch >= 0",
            describe(resp),
            clause,
        )
        return self.epoch

    def heartbeat_body(
        self, *, offset: int | None = None, epoch: int | None = None, want_shutdown: bool = False
    ) -> dict[str, Any]:
        return {
            "BrokerId": self.broker_id,
            "BrokerEpoch": self.epoch if epoch is None else epoch,
            "CurrentMetadataOffset": caught_up_offset(self.sc) if offset is None else offset,
            "WantFence": False,
            "WantShutDown": want_shutdown,
            "OfflineLogDirs": [],
        }

    async def heartbeat(self, follow: bool = True, **kw: Any) -> dict[str, Any]:
        self.last = await self.call(BROKER_HEARTBEAT, self.heartbeat_body(**kw), follow)
        return self.last

    async def beat_until(
        self, pred: Callable[[dict[str, Any]], bool], bound_ms: float, what: str, expected: str, **kw: Any
    ) -> dict[str, Any]:
        """Heartbeat every interval until an answer satisfies ``pred`` (each answer must be error-free)."""
        deadline = time.monotonic() + bound_ms / 1000
        while True:
            resp = await self.heartbeat(**kw)
            self.sc.check(resp.get("ErrorCode") == Errors.NONE, what, expected, describe(resp))
            if pred(resp):
                return resp
            if time.monotonic() > deadline:
                self.sc.fail(what, f"{expected} within {bound_ms:.0f} ms", f"last answer: {describe(resp)}")
            await idle(self.sc, interval_s(self.sc))

    def keep_beating(self) -> asyncio.Task[Any]:
        """Heartbeats in the background until cancelled (or the case ends); failures are only recorded."""

        async def loop() -> None:
            while True:
                with contextlib.suppress(RequestError):
                    self.last = await self.request(BROKER_HEARTBEAT, self.heartbeat_body())
                await asyncio.sleep(interval_s(self.sc))

        return self.sc.q.spawn(loop())

    async def go_online(self, clause: Clause | None = None) -> int:
        """Register, then heartbeat as caught up until the controller unfences it."""
        epoch = await self.register_ok(clause)
        await wait_committed(self.sc, epoch + 1)
        await self.beat_until(
            lambda r: not r.get("IsFenced", True),
            self.sc.bound_ms(2 * self.sc.timeouts.request_timeout_ms),
            f"setup: broker {self.broker_id}, caught up, is unfenced",
            "IsFenced false",
        )
        return epoch


# ---------------------------------------------------------------------------------------------- the log


def interval_s(sc: Scenario) -> float:
    """Heartbeat interval: a sixth of the session (Kafka's defaults 2 s of 9 s are similar)."""
    return max(0.05, sc.timeouts.broker_session_timeout_ms / 6000)


async def idle(sc: Scenario, seconds: float) -> None:
    await asyncio.sleep(seconds)
    sc.frames.waited_s += seconds


def caught_up_offset(sc: Scenario) -> int:
    """The last committed offset the harness has mirrored: an honest CurrentMetadataOffset claim."""
    return sc.q.log.committed - 1


def history(sc: Scenario, broker_id: int) -> History:
    """Every broker record for ``broker_id`` in the committed log the virtual followers mirrored (replayed by
    the harness's own reader of the metadata records, conformance/brokerstate.py)."""
    log = sc.q.log
    events = replay(log.batches, log.committed).history(broker_id)
    return [(e.offset, e.record, e.state, e.broker_epoch) for e in events]


def show(h: History) -> str:
    return "[" + ", ".join(f"{off}:{rec}→{state}(epoch {ep})" for off, rec, state, ep in h) + "]" if h else "[]"


def states(h: History, epoch: int) -> list[BrokerState]:
    out: list[BrokerState] = []
    for _off, _rec, state, ep in h:
        if ep == epoch and (not out or out[-1] != state):
            out.append(state)
    return out


async def wait_committed(sc: Scenario, end: int) -> None:
    """Until the mirrored committed log reaches ``end`` (the followers fetch every fetch.timeout/6)."""
    bound = sc.bound_ms(sc.timeouts.request_timeout_ms)
    deadline = time.monotonic() + bound / 1000
    while sc.q.log.committed < end:
        if time.monotonic() > deadline:
            sc.fail(
                "what the controller answered is committed (KIP-631: answers follow the commit)",
                f"committed log end >= {end} within {bound:.0f} ms",
                f"committed log end {sc.q.log.committed}",
            )
        await idle(sc, 0.02)


async def expect_log(
    sc: Scenario,
    broker_id: int,
    pred: Callable[[History], bool],
    bound_ms: float,
    what: str,
    expected: str,
    clause: Clause | None = None,
) -> tuple[History, float]:
    """Wait until the mirrored committed log satisfies ``pred``; returns it and when it did (monotonic)."""
    deadline = time.monotonic() + bound_ms / 1000
    while True:
        h = history(sc, broker_id)
        if pred(h):
            return h, time.monotonic()
        if time.monotonic() > deadline:
            sc.fail(what, f"{expected} within {bound_ms:.0f} ms", f"broker {broker_id} in the log: {show(h)}", clause)
        await idle(sc, 0.02)


async def elect(sc: Scenario) -> list[asyncio.Task[Any]]:
    """Make the target leader and keep a majority fetching from it, so what it appends commits."""
    sc.require("broker-rpcs", "the case plays brokers speaking BrokerRegistration / BrokerHeartbeat (KIP-631)")
    epoch = await sc.make_leader()
    return [sc.keep_fetching(vid, epoch) for vid in sc.followers]


def check_error(sc: Scenario, resp: dict[str, Any], allowed: set[int], what: str) -> None:
    names = " or ".join(err_name(e) for e in sorted(allowed))
    sc.check(int(resp.get("ErrorCode", -1)) in allowed, what, f"ErrorCode {names}", describe(resp))


# ---------------------------------------------------------------------------------------------- cases


@case("KIP-631/Brokers/1")
async def test_register_fenced_then_online(sc: Scenario) -> None:
    await elect(sc)
    b = Broker(sc, 101)
    epoch = await b.register_ok()
    await wait_committed(sc, epoch + 1)
    h = history(sc, b.broker_id)
    sc.check(
        bool(h) and h[0][0] == epoch and h[0][2] == BrokerState.FENCED and h[0][3] == epoch,
        "the registration is a committed record at the broker epoch's offset, leaving the broker Fenced",
        f"first record for broker 101 at offset {epoch}: Fenced, epoch {epoch}",
        show(h),
    )
    resp = await b.heartbeat(offset=-1)
    sc.check(
        resp.get("ErrorCode") == Errors.NONE and resp.get("IsFenced") is True and resp.get("IsCaughtUp") is False,
        "a broker that has not caught up stays fenced",
        "ErrorCode NONE, IsCaughtUp false, IsFenced true",
        describe(resp),
    )
    await wait_committed(sc, sc.q.log.end)
    sc.check(
        states(history(sc, b.broker_id), epoch) == [BrokerState.FENCED],
        "no unfencing before the broker caught up",
        "broker 101 still Fenced in the log",
        show(history(sc, b.broker_id)),
    )
    await b.beat_until(
        lambda r: r.get("IsFenced") is False,
        sc.bound_ms(2 * sc.timeouts.request_timeout_ms),
        "a broker reporting a metadata offset past its registration is unfenced",
        "IsFenced false",
    )
    await expect_log(
        sc,
        b.broker_id,
        lambda hh: states(hh, epoch) == [BrokerState.FENCED, BrokerState.ONLINE],
        sc.bound_ms(sc.timeouts.request_timeout_ms),
        "the unfencing is a committed record",
        "broker 101: Fenced, then Online",
    )


@case("KIP-631/Brokers/2")
async def test_missed_heartbeats_fence(sc: Scenario) -> None:
    await elect(sc)
    b = Broker(sc, 111)
    control = Broker(sc, 112)
    epoch = await b.go_online()
    control_epoch = await control.go_online()
    session = sc.timeouts.broker_session_timeout_ms
    # Control, through the same window: broker 112 heartbeating on time stays Online for longer than one session
    # (1.2 x), while broker 111 stops and must be fenced.
    beating = sc.q.spawn(beat_on_time(sc, control, 1.2 * session / 1000))
    sent = time.monotonic()
    await b.heartbeat()  # the last one: its session ends session.timeout after the controller received it
    sc.frames.note(b.broker_id, f"broker {b.broker_id} stops heartbeating; broker {control.broker_id} goes on")
    _h, at = await expect_log(
        sc,
        b.broker_id,
        lambda hh: states(hh, epoch)[-1:] == [BrokerState.FENCED],
        sc.bound_ms(session),
        "a broker that stopped heartbeating is fenced after broker.session.timeout.ms",
        f"broker {b.broker_id} Fenced in the log (session {session} ms + slack {sc.slack_ms} ms)",
    )
    early = session - 100  # the controller cannot have heard the last heartbeat before we sent it
    sc.check(
        (at - sent) * 1000 >= early,
        "the broker is not fenced before its session expired",
        f"fenced at least {early} ms after the last heartbeat was sent",
        f"fenced in the log {(at - sent) * 1000:.0f} ms after it",
    )
    for resp in await beating:
        sc.check(
            resp.get("ErrorCode") == Errors.NONE and resp.get("IsFenced") is False,
            "a broker heartbeating on time stays unfenced",
            "ErrorCode NONE, IsFenced false",
            describe(resp),
        )
    sc.check(
        states(history(sc, control.broker_id), control_epoch)[-1] == BrokerState.ONLINE,
        "a broker heartbeating on time stays Online in the log",
        "Online",
        show(history(sc, control.broker_id)),
    )


async def beat_on_time(sc: Scenario, broker: Broker, seconds: float) -> list[dict[str, Any]]:
    """``broker`` heartbeats every interval for ``seconds``; its answers."""
    answers: list[dict[str, Any]] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        answers.append(await broker.heartbeat())
        await idle(sc, interval_s(sc))
    return answers


@case("KIP-631/Brokers/3")
async def test_controlled_shutdown(sc: Scenario) -> None:
    await elect(sc)
    b = Broker(sc, 121)
    epoch = await b.go_online()
    session = sc.timeouts.broker_session_timeout_ms
    await b.beat_until(
        lambda r: r.get("ShouldShutDown") is True,
        sc.bound_ms(2 * session),
        "a broker asking for a controlled shutdown is eventually told to shut down",
        "ShouldShutDown true",
        want_shutdown=True,
    )
    await expect_log(
        sc,
        b.broker_id,
        lambda hh: (
            states(hh, epoch) == [BrokerState.FENCED, BrokerState.ONLINE, BrokerState.STOPPING, BrokerState.OFFLINE]
        ),
        sc.bound_ms(sc.timeouts.request_timeout_ms),
        "controlled shutdown is committed as Stopping, then Offline",
        f"broker {b.broker_id}: Fenced, Online, Stopping, Offline",
    )


@case("KIP-631/Brokers/4")
async def test_foreign_cluster_id_refused(sc: Scenario) -> None:
    if sc.q.cluster_id is None:
        sc.skip("the target's cluster id is unknown; pass --cluster-id")
    await elect(sc)
    other = Broker(sc, 131)
    resp = await other.register(cluster_id=OTHER_ID)
    check_error(sc, resp, {Errors.INCONSISTENT_CLUSTER_ID}, f"BrokerRegistration with ClusterId={OTHER_ID!r}")
    await wait_committed(sc, sc.q.log.end)
    sc.check(
        not history(sc, other.broker_id),
        "a refused registration writes nothing",
        "no record for broker 131",
        show(history(sc, other.broker_id)),
    )
    # Control: the refusal was about the cluster id, not the broker.
    epoch = await other.register_ok()
    await wait_committed(sc, epoch + 1)
    regs = [x for x in history(sc, other.broker_id) if x[1] == "RegisterBrokerRecord"]
    sc.check(
        [x[0] for x in regs] == [epoch],
        "only the accepted registration is in the log",
        f"one RegisterBrokerRecord for broker 131, at offset {epoch}",
        show(history(sc, other.broker_id)),
    )


@case("KIP-631/Brokers/5")
async def test_duplicate_incarnation_refused(sc: Scenario) -> None:
    await elect(sc)
    first = Broker(sc, 141)
    epoch = await first.register_ok()
    beating = first.keep_beating()
    second = Broker(sc, 141)
    resp = await second.register()
    check_error(
        sc, resp, {Errors.DUPLICATE_BROKER_REGISTRATION}, "BrokerRegistration of broker 141 with another IncarnationId"
    )
    await wait_committed(sc, sc.q.log.end)
    h = history(sc, 141)
    sc.check(
        [x[0] for x in h if x[1] == "RegisterBrokerRecord"] == [epoch],
        "the live incarnation keeps its registration",
        f"one RegisterBrokerRecord for broker 141, at offset {epoch}",
        show(h),
    )
    beating.cancel()
    sc.frames.note(141, "incarnation A stops heartbeating")
    session = sc.timeouts.broker_session_timeout_ms
    # Once the first incarnation's session has expired, the id is free again (control).
    await idle(sc, session / 1000)
    deadline = time.monotonic() + sc.bound_ms(session) / 1000
    while True:
        resp = await second.register()
        if resp.get("ErrorCode") != Errors.DUPLICATE_BROKER_REGISTRATION or time.monotonic() > deadline:
            break
        await idle(sc, interval_s(sc))
    sc.check(
        resp.get("ErrorCode") == Errors.NONE and int(resp.get("BrokerEpoch", -1)) > epoch,
        "once the first incarnation's session expired, another incarnation may register",
        f"ErrorCode NONE and a broker epoch > {epoch}",
        describe(resp),
    )


@case("KIP-631/Brokers/6")
async def test_stale_broker_epoch_refused(sc: Scenario) -> None:
    await elect(sc)
    b = Broker(sc, 151)
    old = await b.register_ok()
    new = await b.register_ok()
    sc.check(new > old, "a new registration gets a new broker epoch", f"epoch > {old}", new)
    resp = await b.heartbeat(epoch=old)
    check_error(sc, resp, {Errors.STALE_BROKER_EPOCH}, f"BrokerHeartbeat with the superseded broker epoch {old}")
    resp = await b.heartbeat(epoch=new)
    check_error(sc, resp, {Errors.NONE}, f"control: BrokerHeartbeat with the current broker epoch {new}")


@case("KIP-631/Brokers/7")
async def test_unknown_broker_told_to_register(sc: Scenario) -> None:
    await elect(sc)
    b = Broker(sc, 161)
    resp = await b.heartbeat(epoch=5, offset=-1)
    # Kafka answers STALE_BROKER_EPOCH ("no registration found"); both mean "register again".
    check_error(
        sc,
        resp,
        {Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED},
        "BrokerHeartbeat from broker 161, which never registered",
    )
    await b.register_ok()
    resp = await b.heartbeat()
    check_error(sc, resp, {Errors.NONE}, "control: after registering as told, its heartbeat is accepted")


@case("KIP-631/Brokers/8")
async def test_new_controller_knows_brokers(sc: Scenario) -> None:
    fetchers = await elect(sc)
    online, fenced = Broker(sc, 171), Broker(sc, 172)
    e_online = await online.go_online()
    e_fenced = await fenced.register_ok()
    await fenced.heartbeat(offset=-1)
    await wait_committed(sc, sc.q.log.end)
    for task in fetchers:
        task.cancel()
    sc.frames.note(sc.virtual_ids[0], "a virtual voter takes over leadership")
    await sc.make_follower(sc.virtual_ids[0])
    resp = await online.heartbeat(follow=False)
    check_error(sc, resp, {Errors.NOT_CONTROLLER}, "BrokerHeartbeat to a follower (it is not the active controller)")
    await elect(sc)
    # The new active controller learned the brokers from the log only; its answers show what it knows.
    resp = await online.heartbeat()
    sc.check(
        resp.get("ErrorCode") == Errors.NONE and resp.get("IsFenced") is False,
        f"the new controller knows broker 171 at epoch {e_online} and that it is Online",
        "ErrorCode NONE, IsFenced false",
        describe(resp),
    )
    resp = await fenced.heartbeat(offset=-1)
    sc.check(
        resp.get("ErrorCode") == Errors.NONE and resp.get("IsFenced") is True,
        f"the new controller knows broker 172 (epoch {e_fenced}) is still Fenced",
        "ErrorCode NONE, IsFenced true",
        describe(resp),
    )
    resp = await Broker(sc, 171).register()
    check_error(
        sc,
        resp,
        {Errors.DUPLICATE_BROKER_REGISTRATION},
        "the new controller knows broker 171 is alive: another incarnation is refused",
    )
