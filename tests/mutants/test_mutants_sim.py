"""The simulator's detection power on a sample of the mutation suite (bench/mutants_sim.py runs all of it over the
default run: ``make mutants-sim``): safety mutants of a vote's durability (the core's and the shell's), of the
follower's log repair and of the cluster id check, each caught by the invariant it names within a few seeds of the
default run, while the correct core passes the same seeds. Plus the registry's safety classification."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from kraft_tck.reference.core import KRaftCore
from kraft_tck.traces.sim import SimConfig, simulate
from kraft_tck.traces.sim.cluster import CLUSTER_ID_ISOLATION
from kraft_tck.traces.sim.invariants import INVARIANTS

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


runner = _load("kraft_tck_mutants_sim_runner", REPO / "bench" / "mutants_sim.py")
registry = runner.load_registry()

#: (mutant, the seeds of the default run it is run on; it must be caught by its named invariant in one of them)
SAMPLE = [
    ("forget-vote", range(0, 2)),  # the core: a VoteCrash, and the restart reads back no vote
    ("vote-persisted-after-grant", range(0, 2)),  # the shell: quorum-state written after the grant left
    ("fetch-no-divergence-check", range(0, 2)),  # the leader's side of the follower's log repair
    ("ignore-cluster-id", range(0, 2)),  # the default run's sender of another cluster
]


def test_every_mutant_says_whether_it_breaks_a_safety_invariant() -> None:
    names = frozenset((*INVARIANTS, CLUSTER_ID_ISOLATION))
    assert set(registry.SAFETY) == set(registry.MUTANTS)
    for m in registry.MUTANTS.values():
        assert m.safety_reason, m.name
        assert m.safety is None or m.safety in names, (m.name, m.safety)
        assert set(m.safety_also) <= names and (m.safety is not None or not m.safety_also), m.name
    safety = [m for m in registry.MUTANTS.values() if m.safety is not None]
    assert len(safety) >= 20
    # the shell's ordering of persist and send reaches the simulator's shell
    for name in ("vote-persisted-after-grant", "vote-write-behind-jitter"):
        assert registry.MUTANTS[name].sim_config == {"persist_after_send_ms": registry.MUTANTS[name].node
                                                     .SIM_PERSIST_AFTER_SEND_MS}


def test_the_runner_follows_the_simulate_command_defaults() -> None:
    d = runner.default_run()
    assert (d["seeds"], d["first_seed"], d["nodes"], d["duration"], d["faults"]) == (100, 0, 3, "60s", "default")
    assert d["pre_vote"] is False and d["brokers"] == 3
    # an observer and a foreign-cluster sender: a leader cut off from the voters still has a fetcher (observers-count),
    # and requests of another cluster reach the voters (ignore-cluster-id)
    assert d["observers"] == 1 and d["foreign_rate"] == 1.0


@pytest.mark.parametrize(("name", "seeds"), SAMPLE, ids=[s[0] for s in SAMPLE])
def test_the_default_run_catches_the_mutant_by_its_invariant(name: str, seeds: range) -> None:
    m = registry.MUTANTS[name]
    run = runner.run_mutant(name, m, seeds, runner.default_run())
    assert run.caught, f"{name} survived seeds {seeds}"
    assert run.invariant in (m.safety, *m.safety_also), (name, run.invariant, run.detail)
    assert run.verdict(runner.safety_invariants()) == "ok"
    # the correct core, the same seeds of the default run
    for seed in seeds:
        result = simulate(runner.sim_config(registry.unmutated(), seed, runner.default_run()), core_class=KRaftCore)
        assert result.violation is None, (seed, str(result.violation))


def test_a_mutant_classified_none_that_breaks_an_invariant_fails_the_runner() -> None:
    safe = runner.safety_invariants()
    wrong = runner.SimRun("x", None, (), "default", 1, 0.0, "VoteOnce", 0)
    assert wrong.verdict(safe).startswith("CLASSIFIED None")
    missed = runner.SimRun("y", "VoteOnce", (), "default", 100, 0.0)
    assert missed.verdict(safe) == "MISSED"
    crash_only = runner.SimRun("z", "VoteOnce", (), "default", 1, 0.0, "CoreException", 0)
    assert crash_only.verdict(safe).startswith("MISSED")


def test_a_follower_high_watermark_above_its_log_end_is_caught_when_fetches_are_partial() -> None:
    """KRaft.tla CommittedNeverTruncated (Len(log) >= Committed): a follower that takes the leader's high watermark past
    its own log end (``follower-hw-ahead-of-log``) counts offsets it does not hold. Only a Fetch response that ends
    below the leader's high watermark shows it: with the core's 8 MB fetch max bytes every simulated response carries
    the whole tail, with the default run's 1 KB (``kraft-tck simulate --fetch-max-bytes``) a lagging follower catches
    up over several fetches."""
    m = registry.MUTANTS["follower-hw-ahead-of-log"]
    config = runner.sim_config(m, 0, runner.default_run())
    assert config.fetch_max_bytes == 1024
    v = simulate(config, core_class=m.core).violation
    assert v is not None and v.invariant == m.safety == "CommittedNeverTruncated", v
    assert "above its log end" in v.detail
    assert simulate(config).violation is None


def test_a_log_that_refuses_an_append_going_back_in_epoch_is_log_matching() -> None:
    """``fetch-wrong-last-epoch``: a follower names the current epoch as its LastFetchedEpoch, so the leader finds no
    divergence and sends records that do not extend the follower's divergent tail; the follower's log refuses the
    batch (its epoch is below the log's last one), which the simulator reports as LogMatching, not a core crash."""
    m = registry.MUTANTS["fetch-wrong-last-epoch"]
    v = simulate(SimConfig(seed=0), core_class=m.core).violation
    assert v is not None and v.invariant == "LogMatching" == m.safety, v
    assert "below the log's last epoch" in v.detail


def test_the_default_profile_kills_a_voter_as_its_grant_leaves_and_the_correct_one_still_holds_the_vote(
    tmp_path: Path,
) -> None:
    """``VoteCrash`` (default profile): the voter's next event after its granted VoteResponse is its Restart, and the
    correct core comes back in that epoch with that vote (or knowing the leader)."""
    import json

    from kraft_tck.traces.sim.faults import IsolateLeader, VoteCrash

    path = tmp_path / "seed-0.ndjson"
    result = simulate(SimConfig(seed=0), path)
    assert result.violation is None, str(result.violation)
    assert {type(f) for f in result.faults} >= {VoteCrash, IsolateLeader}
    events = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    killed = 0
    for i, e in enumerate(events):
        msg = e.get("msg") or {}
        if e["event"] != "Send" or (msg.get("api"), msg.get("kind")) != ("Vote", "response"):
            continue
        part = msg["body"]["Topics"][0]["Partitions"][0]
        if not part["VoteGranted"]:
            continue
        after = next((x for x in events[i + 1:] if x["node"] == e["node"] and x["event"] != "Send"), None)
        if after is None or after["event"] != "Restart":
            continue
        killed += 1
        state = after["state"]
        assert state["epoch"] == part["LeaderEpoch"]
        assert state["votedId"] == msg["to"] or state["leaderId"] >= 0, (e, after)
    assert killed >= 1
