"""Simulated brokers: KIP-631 BrokerRegistration / BrokerHeartbeat clients on the virtual clock.

Each broker plays what ``reference/broker_client.py`` does against a real node, reduced to what the
controller sees (KIP-631 "Register Flow"): register with the active controller, heartbeat every
``broker_heartbeat_interval_ms`` with its metadata offset, follow NOT_CONTROLLER (or a silent node) to
the next voter, register again when told its epoch is stale or unknown. From the seed's own random
stream it sometimes crashes (stops heartbeating: the controller fences it once the session expires)
and sometimes shuts down in a controlled way (WantShutDown until ShouldShutDown: Stopping, Offline),
then comes back later as a new incarnation.

Determinism: a broker fleet draws only from its own ``random.Random`` derived from the seed, never from
the simulation's main stream, and its events are the only heap entries it adds. With ``brokers=0``
nothing here runs and a seed's trace is the one it was before brokers existed; with brokers, a seed
keeps its fault schedule, clock skews and network settings (all drawn before the fleet exists).

Simplifications, on purpose: broker↔controller messages are not trace events (the controller's side
of them is: the records it appends and the ``BrokerEvent``s every node emits when they commit); they
see the network's delay and loss but not partitions, which are about voters. A broker learns how far
the committed log reaches from the controller that answered it (the high watermark it piggybacks in
the simulation, standing in for the broker's own metadata fetches), so its next heartbeat's
``CurrentMetadataOffset`` lags by one exchange, like a broker replaying the log behind the leader.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.reference.controller import BROKER_HEARTBEAT, BROKER_REGISTRATION
from kraft_tck.spec.errors import Errors

#: Broker ids start here so they never look like voter ids in a trace.
FIRST_BROKER_ID = 100
PLAINTEXT = 0  # Kafka's SecurityProtocol id
RETRY_BACKOFF_MS = 100  # after NOT_CONTROLLER or a silent controller (Kafka's retry.backoff.ms order)


@dataclass
class SimBroker:
    """One broker process; ``generation`` changes on every crash or stop, so its old timers and answers
    are recognised as stale."""

    id: int
    incarnation: uuid.UUID
    target: int  # the voter it believes is the active controller
    running: bool = False
    generation: int = 0
    epoch: int = -1  # broker epoch from the last successful registration
    previous_epoch: int = -1  # after a controlled shutdown: KIP-966 PreviousBrokerEpoch
    metadata_offset: int = -1
    want_shutdown: bool = False
    inflight: int | None = None  # correlation id of the one request awaiting an answer
    starts: int = 0
    misses: int = 0  # answers in a row that were not from the active controller
    # Planned disruptions, as virtual times, consumed in order: ("crash" | "shutdown", at_ms).
    plan: list[tuple[str, int]] = field(default_factory=list)

    def registration_body(self, cluster_id: str) -> dict[str, Any]:
        """KIP-631 BrokerRegistrationRequest (the fields reference/broker_client.py sends)."""
        return {
            "BrokerId": self.id,
            "ClusterId": cluster_id,
            "IncarnationId": self.incarnation,
            "Listeners": [
                {"Name": "PLAINTEXT", "Host": f"broker-{self.id}.sim", "Port": 9092, "SecurityProtocol": PLAINTEXT}
            ],
            "Features": [],
            "Rack": None,
            "IsMigratingZkBroker": False,
            "LogDirs": [],
            "PreviousBrokerEpoch": self.previous_epoch,
        }

    def heartbeat_body(self) -> dict[str, Any]:
        """KIP-631 BrokerHeartbeatRequest: the session, the metadata offset, and the shutdown wish."""
        return {
            "BrokerId": self.id,
            "BrokerEpoch": self.epoch,
            "CurrentMetadataOffset": self.metadata_offset,
            "WantFence": False,
            "WantShutDown": self.want_shutdown,
            "OfflineLogDirs": [],
        }


@dataclass(frozen=True, slots=True)
class BrokerReply:
    """What a broker does next after an answer (or a timeout): ``delay_ms`` until its next request."""

    delay_ms: int
    stopped: bool = False  # ShouldShutDown: the process ends (and restarts ``restart_ms`` later)
    restart_ms: int = 0


class BrokerFleet:
    """The brokers of one run, with their own random stream."""

    def __init__(
        self,
        seed: int,
        count: int,
        voters: list[int],
        duration_ms: int,
        heartbeat_interval_ms: int,
        crashes_per_min: float,
        shutdowns_per_min: float,
    ) -> None:
        # A stream of its own (str seeds are hashed with SHA-512: stable across runs and platforms).
        self.rng = random.Random(f"kraft-tck/sim/brokers/{seed}")
        self.voters = sorted(voters)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.brokers: dict[int, SimBroker] = {}
        rng = self.rng
        for i in range(count):
            bid = FIRST_BROKER_ID + i
            broker = SimBroker(bid, self.new_incarnation(), rng.choice(self.voters))
            broker.plan = _plan(rng, duration_ms, crashes_per_min, shutdowns_per_min)
            self.brokers[bid] = broker
        self._corr = 0

    def new_incarnation(self) -> uuid.UUID:
        """A version-4 uuid from the fleet's stream (uuid4() would read the OS's randomness)."""
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def start(self, broker: SimBroker) -> None:
        """The process starts (again: as a new incarnation) and has to register."""
        if broker.starts:
            broker.incarnation = self.new_incarnation()
        broker.starts += 1
        broker.running = True
        broker.generation += 1
        broker.epoch = -1
        broker.metadata_offset = -1
        broker.want_shutdown = False
        broker.inflight = None
        broker.misses = 0

    def stop(self, broker: SimBroker, clean: bool) -> None:
        """The process ends: after a controlled shutdown (``clean``) it remembers its epoch for the next
        registration (KIP-966 PreviousBrokerEpoch); after a crash it does not."""
        broker.running = False
        broker.generation += 1
        broker.inflight = None
        broker.previous_epoch = broker.epoch if clean else -1
        broker.epoch = -1
        broker.want_shutdown = False

    def start_times(self) -> list[tuple[int, int]]:
        """(broker id, when it first starts): staggered over the first seconds, like brokers booting."""
        return [(bid, self.rng.randrange(0, 3_000)) for bid in sorted(self.brokers)]

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def delay(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def lost(self, loss: float) -> bool:
        return loss > 0 and self.rng.random() < loss

    def downtime_ms(self) -> int:
        return self.rng.randrange(1_000, 6_000)

    def next_target(self, broker: SimBroker) -> BrokerReply:
        """NOT_CONTROLLER or silence: ask the next voter soon (brokers find the leader by asking around);
        once every voter said no, there is no controller right now: wait a heartbeat interval."""
        i = self.voters.index(broker.target)
        broker.target = self.voters[(i + 1) % len(self.voters)]
        broker.misses += 1
        return BrokerReply(RETRY_BACKOFF_MS if broker.misses < len(self.voters) else self.heartbeat_interval_ms)

    def request(self, broker: SimBroker, cluster_id: str | None) -> tuple[int, dict[str, Any]] | None:
        """The request a running broker sends now: registration until it has an epoch, then heartbeats.
        None while it cannot register yet (no cluster id formatted/bootstrapped anywhere)."""
        if broker.epoch < 0:
            if cluster_id is None:
                return None
            return BROKER_REGISTRATION, broker.registration_body(cluster_id)
        return BROKER_HEARTBEAT, broker.heartbeat_body()

    def on_response(self, broker: SimBroker, api_key: int, body: dict[str, Any], committed_end: int) -> BrokerReply:
        """Act on an answer. ``committed_end``: the answering controller's high watermark (how far the
        broker's own metadata replay would have reached by now)."""
        error = Errors(body["ErrorCode"])
        interval = self.heartbeat_interval_ms
        if error == Errors.NOT_CONTROLLER:
            return self.next_target(broker)
        broker.misses = 0
        if api_key == BROKER_REGISTRATION:
            if error != Errors.NONE:
                # DUPLICATE_BROKER_REGISTRATION: the old incarnation's session is still alive; wait it out.
                return BrokerReply(interval)
            broker.epoch = body["BrokerEpoch"]
            broker.previous_epoch = -1
            broker.metadata_offset = max(broker.metadata_offset, committed_end - 1)
            return BrokerReply(interval)
        if error in (Errors.BROKER_ID_NOT_REGISTERED, Errors.STALE_BROKER_EPOCH):
            broker.epoch = -1  # the controller forgot us (or a newer incarnation took over): register again
            return BrokerReply(RETRY_BACKOFF_MS)
        if error != Errors.NONE:
            return BrokerReply(interval)
        broker.metadata_offset = max(broker.metadata_offset, committed_end - 1)
        if body["ShouldShutDown"]:
            # Seed 002 "Stopping": the controller lets it go; the process ends and comes back later.
            return BrokerReply(0, stopped=True, restart_ms=self.downtime_ms())
        return BrokerReply(interval)

    def on_timeout(self, broker: SimBroker) -> BrokerReply:
        return self.next_target(broker)


def _plan(
    rng: random.Random, duration_ms: int, crashes_per_min: float, shutdowns_per_min: float
) -> list[tuple[str, int]]:
    """Crash and controlled-shutdown times of one broker (Poisson-ish counts, uniform times, sorted)."""
    minutes = duration_ms / 60_000
    start = min(2_000, duration_ms)
    out: list[tuple[str, int]] = []
    for kind, rate in (("crash", crashes_per_min), ("shutdown", shutdowns_per_min)):
        expected = rate * minutes
        n = int(expected) + (1 if rng.random() < expected - int(expected) else 0)
        out.extend((kind, rng.randrange(start, max(start + 1, duration_ms))) for _ in range(n))
    out.sort(key=lambda p: (p[1], p[0]))
    return out
