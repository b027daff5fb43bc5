"""Detection power of the simulator and the offline checkers: LeaderCompleteness offline (tla/KRaft.tla),
observer replicas in the simulator, and a sender of another cluster.

The faulty cores are the test-only ones of tests/conformance/faulty_node.py (overrides of the core's named
rule methods) and ``GrantsEveryVote`` (no election restriction)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_tck.reference.core import KRaftCore
from kraft_tck.spec.errors import Errors
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.cli import COMMANDS
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.sim import SimConfig, simulate
from kraft_tck.traces.sim.cluster import CLUSTER_ID_ISOLATION, FOREIGN_CLUSTER_ID

FAULTY_NODE = Path(__file__).resolve().parent.parent / "conformance" / "faulty_node.py"


def _faulty() -> ModuleType:
    name = "_kraft_tck_faulty_node_for_sim"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAULTY_NODE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(t) for t in path.read_text().splitlines()[1:]]


class GrantsEveryVote(KRaftCore):
    """No election restriction: an Unattached voter grants any candidate, whatever its log (KIP-595 "Vote
    Request Handling": only a log at least as up to date as the voter's)."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        from kraft_tck.reference.roles import Unattached

        granted = super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)
        return isinstance(self.role, Unattached) or granted


# ------------------------------------------------------------------------ LeaderCompleteness, offline


def test_the_python_checker_finds_the_planted_leader_without_a_committed_batch(tmp_path: Path) -> None:
    """The Spark-free half of tests/traces/test_pipeline.py's plant: exactly one violation, where planted;
    clean synthetic runs stay clean."""
    synth.write_corpus(tmp_path, runs=2, events_per_run=1500, seed=100)
    expected = []
    for i in range(3):
        run = f"planted-{i}"
        events = synth.synth_run(run, 300 + i, 1500)
        seq, node, epoch = synth.plant_leader_without_committed_batch(events)
        synth.write_trace(tmp_path / f"{run}.ndjson", synth.header(run, 300 + i), events)
        expected.append(("LeaderCompleteness", run, node, epoch, seq))
    found = check_paths(trace_files(tmp_path))
    assert not found.quarantined
    assert [(v.invariant, v.run, v.node, v.epoch, v.seq) for v in found.violations] == expected
    assert all("committed batch(es); the first: offsets" in v.detail for v in found.violations)


def test_a_sim_trace_of_a_core_granting_every_vote_fails_leader_completeness_offline_too(tmp_path: Path) -> None:
    """The simulator stops at the election (online LeaderCompleteness) with the BecomeLeader line written;
    the Python checker, from the trace alone, reports the same election."""
    caught = 0
    for seed in range(1, 9):
        path = tmp_path / f"seed-{seed}.ndjson"
        result = simulate(SimConfig(seed=seed, duration_ms=60_000), path, core_class=GrantsEveryVote)
        v = result.violation
        if v is None or v.invariant != "LeaderCompleteness":
            continue
        caught += 1
        offline = [(x.invariant, x.node, x.epoch, x.seq) for x in check_paths([path]).violations]
        assert ("LeaderCompleteness", v.node, v.epoch, v.seq) in offline, (seed, v, offline)
        last = _events(path)[-1]
        assert (last["event"], last["node"], last["seq"]) == ("BecomeLeader", v.node, v.seq)
    assert caught >= 3, caught


# ------------------------------------------------------------------------ observers


def test_observers_fetch_from_the_leader_never_vote_and_break_nothing(tmp_path: Path) -> None:
    path = tmp_path / "obs.ndjson"
    result = simulate(SimConfig(seed=3, duration_ms=30_000, observers=2), path)
    result.raise_for_violation()
    header = json.loads(path.read_text().splitlines()[0])
    assert header["voters"] == [1, 2, 3] and header["config"]["observers"] == [4, 5]
    events = _events(path)
    for obs in (4, 5):
        mine = [e for e in events if e["node"] == obs and "state" in e]
        assert mine, f"observer {obs} never ran"
        # It follows the leader until the end, or until an election still open when the run ends (seed 3 has
        # one in its last two seconds: the observer is Unattached again, asking the voters in turn).
        followed = [e for e in mine if e["state"]["role"] == "Follower"]
        assert followed and followed[-1]["ts"] > 25_000 and followed[-1]["state"]["highWatermark"] > 0
        assert mine[-1]["state"]["role"] in ("Follower", "Unattached") and mine[-1]["state"]["highWatermark"] > 0
        assert not [e for e in mine if e["event"] in ("StartElection", "BecomeLeader", "BecomeCandidate")]
        assert not [e for e in mine if e["state"]["role"] in ("Candidate", "Leader")]
        # Never asked for a vote, never counted: no Vote response leaves an observer granted.
        assert not [e for e in events if e["event"] == "Send" and e["msg"]["from"] == obs
                    and e["msg"]["api"] == "Vote" and e["msg"]["kind"] == "request"]
        fetches = [e for e in events if e["event"] == "Send" and e["msg"]["from"] == obs and e["msg"]["api"] == "Fetch"]
        assert len(fetches) > 20
    offline = check_paths([path])
    assert not offline.quarantined and not offline.violations


def test_observers_off_keeps_the_trace_as_it_was(tmp_path: Path) -> None:
    a = tmp_path / "a.ndjson"
    b = tmp_path / "b.ndjson"
    simulate(SimConfig(seed=5, duration_ms=10_000), a)
    simulate(SimConfig(seed=5, duration_ms=10_000, observers=0, foreign_rate=0.0), b)
    assert a.read_bytes() == b.read_bytes()
    assert "observers" not in json.loads(a.read_text().splitlines()[0])["config"]


def test_a_leader_that_counts_observers_toward_the_high_watermark_is_caught() -> None:
    """``ObserversCount`` (KIP-595 "Fetch Request Handling" 4: only voters commit) with two observers: a leader
    cut off from the other voters but still fetched from by the observers (faults never hit them) commits
    alone; the voters' next leader lacks those entries. Without observers the same core is correct."""
    faulty = _faulty().ObserversCount
    caught = []
    for seed in range(5):
        cfg = SimConfig(seed=seed, duration_ms=60_000, observers=2)
        simulate(cfg).raise_for_violation()  # the correct core, same seed: clean
        v = simulate(cfg, core_class=faulty).violation
        if v is not None:
            caught.append(v.invariant)
        assert simulate(SimConfig(seed=seed, duration_ms=60_000), core_class=faulty).violation is None
    assert len(caught) >= 3 and set(caught) <= {"LeaderCompleteness", "CommittedNeverTruncated"}, caught


# ------------------------------------------------------------------------ a sender of another cluster


def test_requests_of_another_cluster_are_refused_and_change_nothing(tmp_path: Path) -> None:
    cfg = SimConfig(seed=2, duration_ms=30_000, foreign_rate=2.0)
    path = tmp_path / "foreign.ndjson"
    result = simulate(cfg, path)
    result.raise_for_violation()
    assert result.foreign_requests > 20
    events = _events(path)
    me = cfg.foreign_id
    received = [e for e in events if e["event"] == "Receive" and e["msg"]["from"] == me]
    assert len(received) == result.foreign_requests
    assert all(e["msg"]["body"]["ClusterId"] == FOREIGN_CLUSTER_ID and e.get("note") == "another cluster"
               for e in received)
    # FetchSnapshot too: the default profile takes snapshots (KIP-630, Kafka's handleFetchSnapshotRequest)
    assert {e["msg"]["api"] for e in received} == {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch",
                                                   "FetchSnapshot"}
    answers = [e for e in events if e["event"] == "Send" and e["msg"]["to"] == me]
    assert len(answers) == len(received)
    assert {e["msg"]["body"]["ErrorCode"] for e in answers} == {int(Errors.INCONSISTENT_CLUSTER_ID)}
    header = json.loads(path.read_text().splitlines()[0])
    assert header["config"]["foreign.node"] == me and me not in header["voters"]
    offline = check_paths([path])
    assert not offline.quarantined and not offline.violations


def test_a_core_that_ignores_the_cluster_id_is_caught() -> None:
    faulty = _faulty().IgnoreClusterId
    for seed in range(4):
        cfg = SimConfig(seed=seed, duration_ms=30_000, foreign_rate=1.0)
        v = simulate(cfg, core_class=faulty).violation
        assert v is not None and v.invariant == CLUSTER_ID_ISOLATION, (seed, v)
        assert "INCONSISTENT_CLUSTER_ID" in v.detail
        assert simulate(SimConfig(seed=seed, duration_ms=30_000), core_class=faulty).violation is None


def test_cli_simulate_takes_observers_and_the_foreign_rate(tmp_path: Path) -> None:
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    out = tmp_path / "out"
    args = ["--seeds", "1", "--duration", "5s", "--out", str(out), "--observers", "1", "--foreign-rate", "2"]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "seed-0.ndjson").read_text().splitlines()[0])["config"]
    assert config["observers"] == [4] and config["foreign.rate"] == 2.0 and config["foreign.node"] == 5
    bad = CliRunner().invoke(command, ["--out", str(out), "--observers", "-1"])
    assert bad.exit_code != 0


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="observers"):
        SimConfig(seed=0, observers=-1)
    with pytest.raises(ValueError, match="foreign_rate"):
        SimConfig(seed=0, foreign_rate=-0.5)
