"""TLC on the KRaft spec: the small model passes, broken variants are caught,
and the output parser reads TLC 2.15's text.

The broken variants are temporary copies of tla/KRaft.tla with one action
changed, so the checker is shown to bite on exactly the rule it guards.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import (
    KRAFT_ACTIONS,
    SMALL_CONFIG,
    SPEC_DIR,
    TlcError,
    TlcResult,
    action_name,
    find_jar,
    parse_output,
    run_tlc,
    tlc_unavailable_reason,
)

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


def _variant(tmp_path: Path, replacements: list[tuple[str, str]], config_changes: list[tuple[str, str]]) -> Path:
    """Copy tla/ into tmp_path with KRaft.tla and the small config edited."""
    for module in SPEC_DIR.glob("*.tla"):
        shutil.copy(module, tmp_path / module.name)
    spec = (tmp_path / "KRaft.tla").read_text()
    for old, new in replacements:
        assert spec.count(old) == 1, f"the spec no longer contains exactly one {old!r}"
        spec = spec.replace(old, new)
    (tmp_path / "KRaft.tla").write_text(spec)
    cfg = (SPEC_DIR / SMALL_CONFIG).read_text()
    for old, new in config_changes:
        assert old in cfg, f"{SMALL_CONFIG} has no {old!r}"
        cfg = cfg.replace(old, new)
    (tmp_path / "Variant.cfg").write_text(cfg)
    return tmp_path


# --------------------------------------------------------------------------- real TLC


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize(("observers", "max_msgs"), [
    (False, 3),
    (True, 2),
    pytest.param(True, 3, marks=pytest.mark.skipif(
        not os.environ.get("KRAFT_TCK_SLOW_TLC"), reason="2 minutes of TLC: make tlc-slow (KRAFT_TCK_SLOW_TLC=1)")),
], ids=["voters only", "with an observer, 2 messages in flight", "with an observer"])
def test_small_model_passes(tmp_path: Path, observers: bool, max_msgs: int) -> None:
    # With an observer: one that knows no leader fetches any voter; a refusal moves it to the voter's epoch,
    # and the leader's answer in that epoch makes it a Follower that appends the answer's records at once
    # (KRaft.tla HandleFetchResponse; Kafka's maybeHandleCommonResponse). At 3 messages in flight ~270k distinct
    # states, ~2 min (make tlc-slow); at 2, ~6,700 states, ~7 s (make test).
    if observers:
        changes = [("Observers = {}", "Observers = {o1}"), ("MaxMsgs = 3", f"MaxMsgs = {max_msgs}")]
        work = _variant(tmp_path, [], changes)
        result = run_tlc("MCKRaft.tla", work / "Variant.cfg", spec_dir=work, workers=2, timeout=300)
    else:
        result = run_tlc(config=SMALL_CONFIG, workers=2, timeout=300)
    assert result.errors == []
    assert result.ok, result.summary()
    assert result.violated is None
    assert result.distinct_states is not None and result.distinct_states > 1000
    assert result.states_generated is not None and result.states_generated >= result.distinct_states
    assert result.depth is not None and result.depth > 5


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_each_run_has_its_own_java_tmpdir() -> None:
    """TLC extracts the standard modules into java.io.tmpdir under fixed names and deletes them at exit, so
    runs sharing one directory race (seen in a CI rehearsal: two fan-out tasks, "Module-Table lookup failure"). A
    shared tmpdir TLC cannot write to stands in for the race: the run still parses, in its own."""
    result = run_tlc(config=SMALL_CONFIG, workers=1, timeout=300,
                     java_opts=("-XX:+UseParallelGC", "-Djava.io.tmpdir=/proc/kraft-tck-no-such-dir"))
    assert result.ok, result.output[-2000:]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_second_vote_in_an_epoch_violates_vote_once(tmp_path: Path) -> None:
    # KIP-595 "Vote Request Handling": a voter that already voted for another
    # candidate in this epoch must refuse.  The broken variant forgets that.
    work = _variant(
        tmp_path,
        [("/\\ vid \\in {Nil, m.from}", "/\\ TRUE")],
        [],
    )
    result = run_tlc("MCKRaft.tla", work / "Variant.cfg", spec_dir=work, workers=2, timeout=300)
    assert not result.ok
    assert result.violated in {"VoteOnce", "ElectionSafety"}
    assert result.violation_kind == "invariant"
    actions = [step.action for step in result.counterexample]
    assert actions[0] == "Init"
    assert set(actions[1:]) <= set(KRAFT_ACTIONS), actions
    assert "StartElection" in actions and "HandleVoteRequest" in actions
    # the last step is the second grant: it changed the voter's durable vote
    assert actions[-1] in {"HandleVoteRequest", "HandleVoteResponse", "BecomeLeader"}
    assert all(step.changed for step in result.counterexample[1:])
    assert "votedId" in result.counterexample[-1].state


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_truncating_a_follower_below_its_hw_violates_committed_never_truncated(tmp_path: Path) -> None:
    # KIP-595 "Fetch Response Handling" 2: truncate to the DivergingEpoch end
    # offset, never below the HW.  The broken variant truncates the whole log
    # instead (lowering its HW with it, past the guard), which drops records
    # the follower already knows are committed.
    work = _variant(
        tmp_path,
        [
            ("THEN LET keep == TruncationPoint(i, m)", "THEN LET keep == 0"),
            (
                "         IN /\\ keep >= highWatermark[i]\n"
                "            /\\ log' = [log EXCEPT ![i] = SubSeq(@, 1, keep)]\n"
                "            /\\ UNCHANGED <<highWatermark, fetchingSnapshot>>",
                "         IN /\\ log' = [log EXCEPT ![i] = SubSeq(@, 1, keep)]\n"
                "            /\\ highWatermark' = [highWatermark EXCEPT ![i] = Min(@, keep)]\n"
                "            /\\ UNCHANGED fetchingSnapshot",
            ),
            (
                "divergingEpoch |-> IF diverging THEN d.epoch ELSE Nil",
                "divergingEpoch |-> IF diverging \\/ m.fetchOffset = Len(log[i]) THEN d.epoch ELSE Nil",
            ),
        ],
        [("Values = {}", "Values = {x}"), ("MaxLogLen = 1", "MaxLogLen = 2"), ("MaxMsgs = 3", "MaxMsgs = 4")],
    )
    result = run_tlc("MCKRaft.tla", work / "Variant.cfg", spec_dir=work, workers=2, timeout=300)
    assert not result.ok
    assert result.violated == "CommittedNeverTruncated"
    assert result.violation_kind == "property"
    assert result.counterexample[-1].action == "HandleFetchResponse"
    assert "log" in result.counterexample[-1].changed


# Raft's Figure 8 in KRaft, as a start state: v1 led epoch 1 (its LeaderChange record, never replicated),
# v2 led epoch 2 (its own LeaderChange, also unreplicated: v3 voted for it with an empty log) and v1 is
# the candidate of epoch 3 with v3's vote (its log, last epoch 1, is more up to date than v3's empty one).
# Every part of it is reachable from Init in that order; starting here spares TLC the ~15 steps before
# it, which at MaxEpoch 4 it cannot afford.  Shallow bounds the search at the depth the scenario needs.
FIGURE8_MODULE = """\
---------------------------- MODULE MCKRaftFigure8 ----------------------------
EXTENDS MCKRaft
CONSTANTS V1, V2, V3
LC(e) == [epoch |-> e, value |-> LeaderChange]
Figure8Init ==
    /\\ role = (V1 :> Candidate @@ V2 :> Leader @@ V3 :> Voted)
    /\\ epoch = (V1 :> 3 @@ V2 :> 2 @@ V3 :> 3)
    /\\ votedId = (V1 :> V1 @@ V2 :> V2 @@ V3 :> V1)
    /\\ leaderId = (V1 :> Nil @@ V2 :> V2 @@ V3 :> Nil)
    /\\ log = (V1 :> <<LC(1)>> @@ V2 :> <<LC(2)>> @@ V3 :> <<>>)
    /\\ highWatermark = [i \\in Nodes |-> 0]
    /\\ clusterId = [i \\in Nodes |-> LocalCluster]
    /\\ votesGranted = (V1 :> {V1, V3} @@ V2 :> {V2, V3} @@ V3 :> {})
    /\\ endOffset = [i \\in Nodes |-> [j \\in Voters |-> 0]]
    /\\ msgs = <<>>
    /\\ restarts = 0
    /\\ hasFetched = [i \\in Nodes |-> FALSE]
    /\\ SnapshotInit
Shallow == TLCGet("level") <= 14
===============================================================================
"""
FIGURE8_CONFIG_CHANGES = [
    ("Voters = {v1, v2, v3}", "Voters = {v1, v2, v3}\n    V1 = v1\n    V2 = v2\n    V3 = v3"),
    ("MaxEpoch = 1", "MaxEpoch = 4"),
    ("MaxLogLen = 1", "MaxLogLen = 2"),
    ("SPECIFICATION MCSpec", "INIT Figure8Init\nNEXT MCNext"),
    ("CONSTRAINT StateBound", "CONSTRAINTS StateBound Shallow"),
    ("SYMMETRY Symmetry\n", ""),
]
# the leader's HW rule of KIP-595 "Fetch Request Handling" step 4, and the broken variant without it
HW_RULE = "IN IF n > highWatermark[i] /\\ log[i][n].epoch = epoch[i]"


def _figure8(tmp_path: Path, broken: bool) -> TlcResult:
    work = _variant(tmp_path, [(HW_RULE, "IN IF n > highWatermark[i]")] if broken else [], FIGURE8_CONFIG_CHANGES)
    (work / "MCKRaftFigure8.tla").write_text(FIGURE8_MODULE)
    return run_tlc("MCKRaftFigure8.tla", work / "Variant.cfg", spec_dir=work, workers=1, timeout=600)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_hw_on_an_old_epoch_entry_violates_leader_completeness(tmp_path: Path) -> None:
    # KIP-595 "Fetch Request Handling" step 4: the leader advances the HW only once an entry of its own
    # epoch is on a majority.  The broken variant also counts v1's epoch-1 record, once re-elected in
    # epoch 3 it has copied it to v3, and calls it committed; v2 (last epoch 2) still wins epoch 4 with
    # v3's vote and has another record at offset 0.
    result = _figure8(tmp_path, broken=True)
    assert result.violated == "LeaderCompleteness", result.summary()
    assert result.violation_kind == "invariant"
    steps = result.counterexample
    assert steps[0].action == "Init" and steps[-1].action in {"BecomeLeader", "BecomeLeaderAppending"}
    # the HW moved on the leader's record of epoch 1, while it leads epoch 3
    assert any(s.action == "HandleFetchRequest" and "highWatermark" in s.changed for s in steps), [
        s.action for s in steps
    ]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_figure8_start_state_is_safe_with_the_hw_rule(tmp_path: Path) -> None:
    # The same start state and bound with KRaft's HW rule: no invariant breaks, so the violation above
    # is the broken rule's, not the start state's.
    result = _figure8(tmp_path, broken=False)
    assert result.ok, result.summary()
    assert result.distinct_states is not None and result.distinct_states > 1000


@pytest.mark.tlc
@needs_tlc
def test_parse_error_is_reported(tmp_path: Path) -> None:
    work = _variant(tmp_path, [("Nil == -1", "Nil == -1 /\\ \\/")], [])
    result = run_tlc("MCKRaft.tla", work / "Variant.cfg", spec_dir=work, workers=1, timeout=120)
    assert not result.ok
    assert result.errors and any("parse" in e.lower() or "semantic" in e.lower() for e in result.errors)


def test_missing_config_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TlcError, match="config file not found"):
        run_tlc(config=tmp_path / "nope.cfg")


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(TlcError, match="java not found"):
        run_tlc(config=SMALL_CONFIG)


def test_bad_jar_env_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "missing.jar"))
    with pytest.raises(TlcError, match="TLA2TOOLS_JAR"):
        find_jar()


# --------------------------------------------------------------------------- parser on captured output

PROGRESS_LINE = (
    "Progress(15) at 2026-11-21 23:40:25: 2,640 states generated (2,640 s/min), "
    "827 distinct states found (827 ds/min), 279 states left on queue."
)
SUCCESS = f"""\
TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)
Running breadth-first search Model-Checking with fp 57 and seed 1 with 2 workers on 2 cores.
Starting... (2026-11-21 23:40:00)
Computing initial states...
Finished computing initial states: 1 distinct state generated at 2026-11-21 23:40:00.
{PROGRESS_LINE}
Model checking completed. No error has been found.
  Estimates of the probability that TLC did not check all reachable states
  because two distinct states had the same fingerprint:
  calculated (optimistic):  val = 2.6E-11
62437 states generated, 15547 distinct states found, 0 states left on queue.
The depth of the complete state graph search is 37.
The average outdegree of the complete state graph is 1 (minimum is 0, the maximum 5 and the 95th percentile is 2).
Finished in 01min 27s at (2026-11-21 23:41:27)
"""

INVARIANT_VIOLATION = """\
TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)
Error: Invariant VoteOnce is violated.
Error: The behavior up to this point is:
State 1: <Initial predicate>
/\\ epoch = (v1 :> 0 @@ v2 :> 0)
/\\ votedId = (v1 :> -1 @@ v2 :> -1)
/\\ msgs = <<>>

State 2: <StartElection line 188, col 5 to line 199, col 66 of module KRaft>
/\\ epoch = (v1 :> 1 @@ v2 :> 0)
/\\ votedId = (v1 :> v1 @@ v2 :> -1)
/\\ msgs = ( [ type |-> "VoteRequest", epoch |-> 1,
  to |-> v2, from |-> v1 ] :> 1 )

State 3: <HandleVoteRequest line 205, col 5 to line 241, col 75 of module KRaft>
/\\ epoch = (v1 :> 1 @@ v2 :> 1)
/\\ votedId = (v1 :> v1 @@ v2 :> v1)
/\\ msgs = <<>>

1000 states generated, 400 distinct states found, 12 states left on queue.
The depth of the complete state graph search is 3.
Finished in 02s at (2026-11-21 23:41:27)
"""

ACTION_PROPERTY = """\
Error: Action property EpochMonotonic is violated.
Error: The behavior up to this point is:
State 1: <Initial predicate>
/\\ epoch = (v1 :> 0)

State 2: <Restart line 1, col 1 to line 1, col 5 of module Gone>
/\\ epoch = (v1 :> 0)

5 states generated, 2 distinct states found, 0 states left on queue.
Finished in 04s at (2026-11-21 23:41:27)
"""

PARSE_ERROR = """\
TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)
Parsing file /tmp/tlcw/KRaft.tla
***Parse Error***

  Precedence conflict between ops \\lor in block line 318, col 27 to line 318, col 28 of module KRaft and \\land.

Residual stack trace follows:
ExtendableExpr starting at line 318, column 39.

Fatal errors while parsing TLA+ spec in file MCKRaft
Starting... (2026-11-21 23:36:17)
Error: Parsing or semantic analysis failed.
Finished in 01s at (2026-11-21 23:36:17)
"""

SEMANTIC_ERROR = """\
Semantic errors:

*** Errors: 1

line 12, col 8 to line 12, col 14 of module KRaft

Unknown operator: `Missing'.


Starting... (2026-11-21 23:36:17)
Error: Parsing or semantic analysis failed.
"""

EVAL_ERROR = """\
Error: The error occurred when TLC was evaluating the nested
expressions at the following positions:
0. Line 10, column 5 to line 10, column 20 in KRaft
Error: TLC threw an unexpected exception.
This was probably caused by an error in the spec or model.
The exception was a tlc2.tool.EvalException
: Attempted to apply function to an argument not in its domain.
"""


def test_parse_success() -> None:
    r = parse_output(SUCCESS)
    assert r.ok and r.violated is None and r.errors == []
    assert (r.states_generated, r.distinct_states, r.depth) == (62437, 15547, 37)
    assert r.seconds == 87.0


def test_parse_invariant_violation_and_steps() -> None:
    r = parse_output(INVARIANT_VIOLATION)
    assert not r.ok
    assert (r.violated, r.violation_kind) == ("VoteOnce", "invariant")
    assert r.distinct_states == 400 and r.depth == 3
    assert [s.action for s in r.counterexample] == ["Init", "StartElection", "HandleVoteRequest"]
    second = r.counterexample[1]
    assert set(second.changed) == {"epoch", "votedId", "msgs"}
    # the wrapped message value is joined onto one line
    assert second.changed["msgs"].endswith("from |-> v1 ] :> 1 )")
    third = r.counterexample[2]
    assert set(third.changed) == {"epoch", "votedId", "msgs"}
    assert third.changed["votedId"] == "(v1 :> v1 @@ v2 :> v1)"
    assert "HandleVoteRequest" in third.render()


def test_parse_action_property() -> None:
    r = parse_output(ACTION_PROPERTY)
    assert (r.violated, r.violation_kind) == ("EpochMonotonic", "property")
    assert r.counterexample[1].action == "Restart"
    assert r.counterexample[1].changed == {}
    assert r.seconds == 4.0


def test_parse_parse_error() -> None:
    r = parse_output(PARSE_ERROR)
    assert not r.ok and r.violated is None
    assert len(r.errors) == 1
    assert r.errors[0].startswith("parse error: Precedence conflict")


def test_parse_semantic_error() -> None:
    r = parse_output(SEMANTIC_ERROR)
    assert not r.ok
    assert any("Unknown operator" in e for e in r.errors)


def test_parse_evaluation_error() -> None:
    r = parse_output(EVAL_ERROR)
    assert not r.ok
    assert any("not in its domain" in e for e in r.errors)


def test_action_name_from_source_span(tmp_path: Path) -> None:
    (tmp_path / "MC.tla").write_text(
        "---- MODULE MC ----\nMCNext ==\n    \\/ \\E i \\in Nodes : Len(log[i]) < 3 /\\ ClientAppend(i, v)\n====\n"
    )
    header = "<MCNext line 3, col 8 to line 3, col 61 of module MC>"
    assert action_name(header, tmp_path) == "ClientAppend"
    assert action_name(header, None) == "MCNext"
    assert action_name("<Initial predicate>") == "Init"


def test_tlc_command_reports_a_missing_config() -> None:
    from click.testing import CliRunner
    from kraft_tck.tla.cli import tlc_command

    result = CliRunner().invoke(tlc_command, ["--config", "NoSuchModel.cfg"])
    assert result.exit_code == 1
    assert "config file not found" in result.output and "NoSuchModel.cfg" in result.output


@needs_tlc
def test_timeout_stops_tlc_at_the_deadline() -> None:
    """The full bounded model takes minutes; with a 5 s timeout TLC is killed at the deadline, not at its
    next progress line (about a minute apart), and the result says why."""
    result = run_tlc(workers=1, timeout=5)
    assert not result.ok
    assert any("timeout" in e for e in result.errors), result.errors
    assert result.seconds < 20, result.seconds
