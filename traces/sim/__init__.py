"""The deterministic cluster simulator: seeded runs of N reference cores under faults, with
online invariant checks and one NDJSON trace per seed. See ``cluster.py`` for the design."""

from kraft_tck.traces.sim.cluster import (
    SimConfig,
    SimResult,
    Simulation,
    SimulationError,
    simulate,
)
from kraft_tck.traces.sim.faults import (
    PROFILES,
    ClockConfig,
    Crash,
    Fault,
    FaultProfile,
    Figure8,
    IsolateLeader,
    Lossy,
    NetConfig,
    OneWay,
    Partition,
    ScheduledVoterChange,
    SnapshotCrash,
    VoteCrash,
    extra_schedule,
    random_schedule,
    reconfig_schedule,
)
from kraft_tck.traces.sim.invariants import INVARIANTS, InvariantChecker, InvariantViolation

__all__ = [
    "INVARIANTS",
    "PROFILES",
    "ClockConfig",
    "Crash",
    "Fault",
    "FaultProfile",
    "Figure8",
    "InvariantChecker",
    "InvariantViolation",
    "IsolateLeader",
    "Lossy",
    "NetConfig",
    "OneWay",
    "Partition",
    "ScheduledVoterChange",
    "SimConfig",
    "SimResult",
    "Simulation",
    "SimulationError",
    "SnapshotCrash",
    "VoteCrash",
    "extra_schedule",
    "random_schedule",
    "reconfig_schedule",
    "simulate",
]
