"""Pre-vote (KIP-996) in the simulator: voters cut off and reconnected (the ``reconnect`` fault profile), the
same seeds with pre-vote off and on, and the pipeline report's side-by-side rows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from kraft_tck.spec.trace import read_trace, validate_file
from kraft_tck.traces.cli import COMMANDS
from kraft_tck.traces.pipeline.report import pre_vote_rows
from kraft_tck.traces.sim import PROFILES, Partition, SimConfig, random_schedule, simulate
from kraft_tck.traces.sim.compare import compare_pre_vote
from kraft_tck.traces.sim.faults import ISOLATION_MS


def _vote_messages(path: Path) -> list[dict[str, Any]]:
    return [e["msg"] for e in read_trace(path).events if e.get("msg", {}).get("api") == "Vote"]


def test_the_reconnect_profile_cuts_one_voter_off_at_a_time() -> None:
    faults = random_schedule(random.Random(7), [1, 2, 3], 120_000, PROFILES["reconnect"])
    assert len(faults) >= 4
    for f in faults:
        assert isinstance(f, Partition)
        (rest,) = f.groups  # the voter in no group is cut off from everyone
        assert len(rest) == 2 and set(rest) < {1, 2, 3}
        assert ISOLATION_MS[0] <= f.duration_ms < ISOLATION_MS[1]
    # no other profile draws such isolations (their schedules keep their random stream)
    for name in ("none", "default", "heavy"):
        assert PROFILES[name].isolations_per_min == 0


def test_without_pre_vote_a_trace_has_vote_v1_and_no_pre_vote(tmp_path: Path) -> None:
    # pre-vote off: two reference nodes negotiate Vote v1 (they advertise 0-1), nothing in the header
    path = tmp_path / "off.ndjson"
    simulate(SimConfig(seed=3, duration_ms=20_000, profile="reconnect", brokers=0), path).raise_for_violation()
    trace = read_trace(path)
    assert trace.header["implementation"].endswith("/0.1.0")
    assert "reference.quorum.pre.vote" not in trace.header["config"]
    votes = _vote_messages(path)
    assert votes and {m["version"] for m in votes} == {1}
    assert not any("PreVote" in json.dumps(m) for m in votes)
    assert not {"BecomeProspective", "AbandonProspective"} & {e["event"] for e in trace.events}


def test_with_pre_vote_a_reconnecting_voter_asks_for_pre_votes(tmp_path: Path) -> None:
    path = tmp_path / "on.ndjson"
    result = simulate(SimConfig(seed=3, duration_ms=20_000, profile="reconnect", brokers=0, pre_vote=True), path)
    result.raise_for_violation()
    assert validate_file(path) == []
    trace = read_trace(path)
    assert trace.header["implementation"].endswith("+pre-vote")
    assert trace.header["run"] == "seed-3+pre-vote"  # the same seed without pre-vote is another run
    assert trace.header["config"]["reference.quorum.pre.vote"] is True
    kinds = [e["event"] for e in trace.events]
    assert "BecomeProspective" in kinds and "AbandonProspective" in kinds
    votes = _vote_messages(path)
    assert {m["version"] for m in votes} == {2}
    pre = [m for m in votes if m["kind"] == "request" and m["body"]["Topics"][0]["Partitions"][0]["PreVote"]]
    assert pre, "no pre-vote request"
    # a pre-vote asks in the prospective's own epoch: no pre-vote request carries an epoch a leader never had
    assert all(m["body"]["Topics"][0]["Partitions"][0]["CandidateEpoch"] <= result.max_epoch for m in pre)


def test_the_same_seeds_change_leaders_less_often_with_pre_vote() -> None:
    # KIP-996 "Motivation": without pre-vote a voter cut off for longer than its timeouts comes back with a
    # higher epoch and forces an election; with it, only the leader's own isolation (check quorum) does.
    base = SimConfig(seed=0, duration_ms=20_000, profile="reconnect", brokers=0)
    result = compare_pre_vote(base, range(40))
    assert result.violations(False) == [] and result.violations(True) == []
    off = result.total(False, lambda r: r.leader_changes)
    on = result.total(True, lambda r: r.leader_changes)
    assert on < off, (on, off)
    bumps_off = result.total(False, lambda r: r.max_epoch)
    bumps_on = result.total(True, lambda r: r.max_epoch)
    assert bumps_on < bumps_off / 2, (bumps_on, bumps_off)
    # the same schedules both ways
    assert all(p.off.faults == p.on.faults for p in result.pairs)
    rows = {r[0]: r[1:] for r in result.rows()}
    assert rows["seeds"] == ("40", "40")
    assert rows["leader changes (leaders after the first)"] == (f"{off:,}", f"{on:,}")


def test_cli_compare_pre_vote_prints_both_columns_and_writes_both_traces(tmp_path: Path) -> None:
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    out = tmp_path / "out"
    result = CliRunner().invoke(command, ["--seeds", "2", "--first-seed", "5", "--duration", "10s", "--faults",
                                          "reconnect", "--brokers", "0", "--compare-pre-vote", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "pre-vote off" in result.output and "pre-vote on" in result.output
    assert "leader changes" in result.output
    for sub in ("pre-vote-off", "pre-vote-on"):
        assert sorted(p.name for p in (out / sub).iterdir()) == ["seed-5.ndjson", "seed-6.ndjson"]
    assert read_trace(out / "pre-vote-on" / "seed-5.ndjson").header["config"]["reference.quorum.pre.vote"]


def test_cli_pre_vote_flag_runs_pre_vote(tmp_path: Path) -> None:
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    out = tmp_path / "out"
    result = CliRunner().invoke(command, ["--seeds", "1", "--duration", "10s", "--faults", "reconnect",
                                          "--brokers", "0", "--pre-vote", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "BecomeProspective" in (out / "seed-0.ndjson").read_text()


def _metric(source: str, impl: str, metric: str, n: int, mean: float, top: float) -> dict[str, Any]:
    return {"metric": metric, "source": source, "implementation": impl, "n": n, "min": 0.0, "p50": mean,
            "p95": top, "p99": top, "max": top, "mean": mean}


def test_report_rows_put_pre_vote_runs_beside_the_others() -> None:
    impl = "kraft-tck-reference/0.1.0"
    summary = [
        _metric("simulator", impl, "leader changes per run", 10, 2.5, 5),
        _metric("simulator", impl + "+pre-vote", "leader changes per run", 10, 1.5, 3),
        _metric("simulator", impl, "largest epoch per run", 10, 9.0, 16),
        _metric("simulator", impl + "+pre-vote", "largest epoch per run", 10, 2.0, 4),
        _metric("simulator", impl, "commit latency (ms)", 99, 3.0, 9),
        _metric("node", "other/1.0", "leader changes per run", 3, 1.0, 1),  # no pre-vote runs: no row
    ]
    rows = pre_vote_rows(summary)
    assert rows == [
        ["simulator", impl, "largest epoch per run", "10 / 10", 9.0, 2.0, 16, 4],
        ["simulator", impl, "leader changes per run", "10 / 10", 2.5, 1.5, 5, 3],
    ]
    assert pre_vote_rows(summary[:1] + summary[2:]) == [["simulator", impl, "largest epoch per run", "10 / 10",
                                                          9.0, 2.0, 16, 4]]
