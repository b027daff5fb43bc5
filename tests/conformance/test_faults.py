"""Proof that the catalog catches bugs: the reference node with one injected fault (tests/conformance/
faulty_node.py) fails exactly the matching cases, with the right clause; the correct node passes all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from kraft_tck.spec.trace import read_trace

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("faulty_node.py")
UNTRACED = Path(__file__).with_name("untraced_node.py")
KIP_LITERAL = Path(__file__).with_name("kip_literal_node.py")

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def run_catalog(
    tmp_path: Path,
    fault: str,
    *modules: str,
    tlc: bool = False,
    launcher: Path = LAUNCHER,
    extra: tuple[str, ...] = (),
    pre_vote: bool | None = None,
) -> tuple[dict[str, dict[str, object]], subprocess.CompletedProcess[str]]:
    """Run the catalog (or ``modules``) against the faulty node; TLC validation of its node trace only
    with ``tlc`` (it costs seconds per run and the catalog's own verdicts are what these tests judge).
    ``extra``: more harness options (``--quorum-size 5``)."""
    report = tmp_path / "report"
    args = [
        sys.executable,
        "-m",
        "pytest",
        *(modules or ("conformance",)),
        "-q",
        "-p",
        "no:cacheprovider",
        "--target-launcher",
        str(launcher),
        "--report",
        str(report),
        "--junitxml",
        str(tmp_path / "junit.xml"),
        *(() if tlc else ("--no-tlc",)),
        *extra,
    ]
    env = {**os.environ, "KRAFT_TCK_FAULT": fault}
    if pre_vote is not None:  # the node's reference.quorum.pre.vote (faulty_node.py reads it)
        env["KRAFT_TCK_PRE_VOTE"] = "true" if pre_vote else "false"
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    results = report / "results.json"
    assert results.exists(), f"no results.json; pytest said:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    cases = {c["id"]: c for c in json.loads(results.read_text())["cases"]}
    return cases, proc


FAULTS = [
    (
        "skip-truncation",
        "conformance/test_divergence.py",
        {"KIP-595/Divergence/1", "KIP-595/Divergence/2"},
        'KIP-595 "Fetch Response Handling"',
    ),
    (
        "truncate-below-hw",
        "conformance/test_divergence.py",
        {"KIP-595/Divergence/1", "KIP-595/Divergence/2", "KIP-595/Divergence/3"},
        'KIP-595 "Fetch Response Handling"',
    ),
    ("forget-vote", "conformance/test_vote.py", {"KIP-595/Vote/8"}, 'KIP-595 "Vote Request Handling"'),
    (
        "never-resign",
        "conformance/test_leaderprogress.py",
        {"KIP-595/LeaderProgress/1"},
        'KIP-595 "Leader Progress Timeout"',
    ),
    (
        # ClusterId/4 too: a node that accepts any id does not enforce the one it generated
        "ignore-cluster-id",
        "conformance/test_bootstrap.py",
        {"KIP-595/ClusterId/2", "KIP-595/ClusterId/4"},
        'KIP-595 "',
    ),
    (
        "observers-count",
        "conformance/test_highwatermark.py",
        {"KIP-595/HighWatermark/2"},
        'KIP-595 "Fetch Request Handling" step 4',
    ),
    (
        "never-fence-expired",
        "conformance/test_brokers.py",
        {"KIP-631/Brokers/2"},
        'KIP-631 "Register Flow" step heartbeats missed',
    ),
]


@pytest.mark.parametrize(("fault", "module", "expected", "clause"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_fails_the_matching_cases(
    tmp_path: Path, fault: str, module: str, expected: set[str], clause: str
) -> None:
    cases, proc = run_catalog(tmp_path, fault, module)
    failed = {cid for cid, c in cases.items() if c["outcome"] == "failed"}
    assert failed == expected, f"{fault}: failed {sorted(failed)}, expected {sorted(expected)}\n{proc.stdout[-4000:]}"
    for cid in expected:
        assert str(cases[cid]["clause"]).startswith(clause), cases[cid]["clause"]
        assert cid in proc.stdout and "expected:" in proc.stdout and "actual:" in proc.stdout
    assert proc.returncode == 1


#: The scenario classes a third-party target is judged by over the wire only (no node trace, no TLC): each
#: fault, the module run against it (and harness options), the cases it must fail and the clause the
#: failing check names (the "clause:" line of the failure, not only the case's own clause).
#: ``make faults`` (KRAFT_TCK_ALL_FAULTS=1) runs every fault node; ``make test`` a sample of each list below.
ALL_FAULTS = os.environ.get("KRAFT_TCK_ALL_FAULTS") == "1"


def sample(faults: list[Any], names: tuple[str, ...]) -> list[Any]:
    """``faults`` under make faults; only those named in ``names`` under make test."""
    return faults if ALL_FAULTS else [f for f in faults if f[0] in names]


SCENARIO_CLASS_FAULTS = [
    ("needs-unanimity", "conformance/test_majority.py", (), {"KIP-595/Majority/1"},
     'KIP-595 "Vote Response Handling" step 2'),
    ("refusal-counts", "conformance/test_majority.py", (), {"KIP-595/Majority/2"},
     'KIP-595 "Vote Response Handling" step 2'),
    ("no-epoch-bump", "conformance/test_retry.py", (), {"KIP-595/Retry/1", "KIP-595/Retry/2"},
     'KIP-595 "Leader Election"'),
    ("observers-keep-leader", "conformance/test_checkquorum.py", (),
     {"KIP-595/CheckQuorum/1", "KIP-595/CheckQuorum/2"}, 'KIP-595 "Leader Progress Timeout"'),
    ("check-quorum-never-reset", "conformance/test_checkquorum.py", (), {"KIP-595/CheckQuorum/1"},
     'KIP-595 "Leader Progress Timeout"'),
    # a minority of voters is told apart from a majority only in a 5-voter quorum (1 + 1 of 3 is a majority)
    ("any-fetch-keeps-leader", "conformance/test_checkquorum.py", ("--quorum-size", "5"),
     {"KIP-595/CheckQuorum/2"}, 'KIP-595 "Leader Progress Timeout"'),
    ("caught-up-is-last-fetch", "conformance/test_lagging.py", (), {"KIP-836/Lagging/1"},
     'KIP-836 "Proposed Changes" step LastCaughtUpTimestamp'),
    ("observers-unlisted", "conformance/test_observers.py", (), {"KIP-836/Observer/1"},
     'KIP-836 "Public Interfaces (ReplicaState)" step Observers'),
]  # fmt: skip


#: make test: one per scenario class (majority, epochs, check quorum, DescribeQuorum, observers)
SCENARIO_CLASS_SAMPLE = ("needs-unanimity", "no-epoch-bump", "check-quorum-never-reset", "caught-up-is-last-fetch",
                         "observers-unlisted")
_SCENARIO_CLASS_RUN = sample(SCENARIO_CLASS_FAULTS, SCENARIO_CLASS_SAMPLE)


@pytest.mark.parametrize(
    ("fault", "module", "extra", "expected", "clause"), _SCENARIO_CLASS_RUN, ids=[f[0] for f in _SCENARIO_CLASS_RUN]
)
def test_scenario_class_fault_fails_its_case_black_box(
    tmp_path: Path, fault: str, module: str, extra: tuple[str, ...], expected: set[str], clause: str
) -> None:
    cases, proc = run_catalog(tmp_path, fault, module, extra=extra)
    failed = {cid for cid, c in cases.items() if c["outcome"] == "failed"}
    assert failed == expected, f"{fault}: failed {sorted(failed)}, expected {sorted(expected)}\n{proc.stdout[-4000:]}"
    for cid in expected:
        message = str(cases[cid]["message"])
        assert f"clause:   {clause}" in message, message
    assert proc.returncode == 1


#: KIP-996 pre-vote faults (faulty_node.py), run with the node's pre-vote on: the pre-vote cases each must
#: fail, and exactly these.
PRE_VOTE_FAULTS = [
    # advertises Vote v2 but elects as Kafka 3.9 and reads a pre-vote as a real vote (which, in the leader's
    # own epoch, is INVALID_REQUEST: PreVote/5)
    ("no-pre-vote", {"KIP-996/PreVote/1", "KIP-996/PreVote/4", "KIP-996/PreVote/5", "KIP-996/PreVote/6"}),
    ("pre-vote-bumps-epoch", {"KIP-996/PreVote/1", "KIP-996/PreVote/2", "KIP-996/PreVote/5"}),
    ("follower-grants-pre-vote", {"KIP-996/PreVote/2"}),
    ("pre-vote-ignores-log", {"KIP-996/PreVote/3"}),
    # its pre-votes of epoch + 1 move every voter there: it never wins (PreVote/5 cannot even elect it)
    ("prospective-asks-next-epoch", {"KIP-996/PreVote/4", "KIP-996/PreVote/5"}),
    ("no-unsupported-fallback", {"KIP-996/PreVote/6"}),
]


#: make test: a node without pre-vote, a follower granting one, a pre-vote ignoring the log
_PRE_VOTE_RUN = sample(PRE_VOTE_FAULTS, ("no-pre-vote", "follower-grants-pre-vote", "pre-vote-ignores-log"))


@pytest.mark.parametrize(("fault", "expected"), _PRE_VOTE_RUN, ids=[f[0] for f in _PRE_VOTE_RUN])
def test_pre_vote_fault_fails_its_cases(tmp_path: Path, fault: str, expected: set[str]) -> None:
    cases, proc = run_catalog(tmp_path, fault, "conformance/test_prevote.py", pre_vote=True)
    failed = {cid for cid, c in cases.items() if c["outcome"] == "failed"}
    assert failed == expected, f"{fault}: failed {sorted(failed)}, expected {sorted(expected)}\n{proc.stdout[-4000:]}"
    assert any('clause:   KIP-996 "' in str(cases[cid]["message"]) for cid in expected), proc.stdout[-4000:]
    assert proc.returncode == 1


def test_pre_vote_cases_pass_against_the_correct_node_and_skip_without_vote_v2(tmp_path: Path) -> None:
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_prevote.py", pre_vote=True,
                              extra=("--quorum-size", "5"))
    assert {c["outcome"] for c in cases.values()} == {"passed"} and len(cases) == 6, proc.stdout[-4000:]
    cases, proc = run_catalog(tmp_path / "off", "none", "conformance/test_prevote.py", pre_vote=False)
    assert {c["outcome"] for c in cases.values()} == {"skipped"}, proc.stdout[-4000:]
    assert "advertises Vote 0-1" in proc.stdout or all("Vote 0-1" in str(c["message"]) for c in cases.values())


#: KIP-630 snapshot faults (faulty_node.py), each breaking one rule of conformance/test_snapshots.py: exactly these
#: cases fail, each naming the clause of the broken rule on its "clause:" line. A leader that never answers with
#: SnapshotId leaves Snapshot/5-8 no snapshot to fetch: they are skipped, saying so.
SNAPSHOT_FAULTS = [
    ("no-snapshot-id-below-log-start", {"KIP-630/Snapshot/2", "KIP-630/Snapshot/4"},
     'KIP-630 "Handling Fetch Request"'),
    ("snapshot-chunk-ignores-max-bytes", {"KIP-630/Snapshot/2", "KIP-630/Snapshot/5"},
     'KIP-630 "Fetch Snapshot Request Handling"'),
    ("snapshot-ignores-position", {"KIP-630/Snapshot/2", "KIP-630/Snapshot/5", "KIP-630/Snapshot/6"},
     'KIP-630 "Fetch Snapshot Request Handling"'),
    ("snapshot-any-id", {"KIP-630/Snapshot/7"}, 'KIP-630 "Fetch Snapshot Request Handling" step SNAPSHOT_NOT_FOUND'),
    ("snapshot-any-epoch", {"KIP-630/Snapshot/8"}, 'KIP-630 "Fetch Snapshot Request Handling"'),
    # downloads the whole snapshot, then drops it and fetches on from its old log end
    ("snapshot-not-installed", {"KIP-630/Snapshot/1", "KIP-630/Snapshot/2", "KIP-630/Snapshot/3"},
     'KIP-630 "Fetch Snapshot Response Handling"'),
    # comes back from its snapshot without the records it had appended after it
    ("restart-drops-log-after-snapshot", {"KIP-630/Snapshot/3"}, 'KIP-630 "Generating and Loading the Snapshot"'),
]  # fmt: skip


#: Each run above costs about a minute (every snapshot case relaunches the target twice). ``make test`` runs one
#: fault, the follower's install; ``make faults`` (KRAFT_TCK_ALL_FAULTS=1) runs all of them (the leader's SnapshotId
#: answer, FetchSnapshot serving, restart).
SNAPSHOT_FAULTS_SAMPLE = ("snapshot-not-installed",)
_SNAPSHOT_FAULTS_RUN = [f for f in SNAPSHOT_FAULTS
                        if os.environ.get("KRAFT_TCK_ALL_FAULTS") == "1" or f[0] in SNAPSHOT_FAULTS_SAMPLE]


@pytest.mark.parametrize(
    ("fault", "expected", "clause"), _SNAPSHOT_FAULTS_RUN, ids=[f[0] for f in _SNAPSHOT_FAULTS_RUN]
)
def test_snapshot_fault_fails_its_cases(tmp_path: Path, fault: str, expected: set[str], clause: str) -> None:
    cases, proc = run_catalog(tmp_path, fault, "conformance/test_snapshots.py")
    failed = {cid for cid, c in cases.items() if c["outcome"] == "failed"}
    assert failed == expected, f"{fault}: failed {sorted(failed)}, expected {sorted(expected)}\n{proc.stdout[-4000:]}"
    for cid in expected:
        message = str(cases[cid]["message"])
        assert f"clause:   {clause}" in message, message
    assert proc.returncode == 1


# make faults: the whole-catalog test below runs these cases on the correct node in make test
@pytest.mark.skipif(os.environ.get("KRAFT_TCK_ALL_FAULTS") != "1", reason="make faults (KRAFT_TCK_ALL_FAULTS=1)")
def test_snapshot_cases_pass_against_the_correct_node(tmp_path: Path) -> None:
    # The follower cases install the harness's own snapshot; the leader cases relaunch the node with the
    # reference profile's snapshot_properties, so it snapshots and cleans its log after a few KiB.
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_snapshots.py")
    assert {c["outcome"] for c in cases.values()} == {"passed"} and len(cases) == 8, proc.stdout[-4000:]
    assert not any(c["kafkaDifferences"] for c in cases.values()), {c: v["kafkaDifferences"] for c, v in cases.items()}
    assert proc.returncode == 0


# make faults (36 s): the skip path of a target that never snapshots
@pytest.mark.skipif(os.environ.get("KRAFT_TCK_ALL_FAULTS") != "1", reason="make faults (KRAFT_TCK_ALL_FAULTS=1)")
def test_a_target_that_takes_no_snapshot_is_skipped_naming_the_settings(tmp_path: Path) -> None:
    # A third-party target as the harness meets it: a profile that states the capability but gives no
    # snapshot_properties, so the node keeps Kafka's defaults (20 MiB between snapshots) and never snapshots in
    # the leader cases. They are skipped, saying which settings to lower; the follower cases still run.
    profile = tmp_path / "no-snapshot-settings.yaml"
    profile.write_text("name: defaults\ncapabilities: {restart: true, snapshots: true}\n")
    # one follower case (the others relaunch the target the same way) and every leader case
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_snapshots.py",
                              extra=("--target-profile", str(profile), "--case", "KIP-630/Snapshot/1",
                                     "--case", "KIP-630/Snapshot/[4-9]"))
    follower = {"KIP-630/Snapshot/1"}
    assert {cid for cid, c in cases.items() if c["outcome"] == "passed"} == follower, proc.stdout[-4000:]
    for cid, c in cases.items():
        if cid not in follower:
            message = str(c["message"])
            assert c["outcome"] == "skipped" and message.startswith("needs capability 'snapshots'"), (cid, message)
            assert "metadata.log.max.record.bytes.between.snapshots" in message, message
    assert proc.returncode == 0


#: KIP-853 dynamic-quorum faults (faulty_node.py), each breaking one rule of conformance/test_reconfig.py: the cases
#: it must fail (each naming the clause of the broken rule on its "clause:" line: a KIP-853 clause holding the text
#: given) and those it may also fail, by a
#: race its fault opens (e.g. with the committed voter set in force, the leader's removal commits when the first of
#: two voters fetches past it, and the second may or may not have fetched before the answer).
RECONFIG_FAULTS = [
    # answers AddRaftVoter / RemoveRaftVoter as soon as the VotersRecord is appended, not once it is committed
    ("ack-before-commit", {"KIP-853/AddVoter/1", "KIP-853/RemoveVoter/1", "KIP-853/HighWatermark/1",
                           "KIP-853/RemoveVoter/3", "KIP-853/OneChange/3", "KIP-853/Bootstrap/1"}, set(),
     'Request Handling" step answered once the new VotersRecord is committed'),
    ("no-catch-up-check", {"KIP-853/AddVoter/2", "KIP-853/Bootstrap/1"}, set(),
     'KIP-853 "AddRaftVoter Request Handling"'),
    # a second change while the first is pending or uncommitted, and before the leader's epoch committed an entry
    # (OneChange/2: the second change takes the pending add's place, which is never answered)
    ("two-changes-at-once", {"KIP-853/OneChange/1", "KIP-853/OneChange/2", "KIP-853/OneChange/3",
                             "KIP-853/AddVoter/4"}, set(), 'KIP-853 "'),
    # the voter set of the last committed VotersRecord in force, not the latest appended one
    ("voters-from-committed-only", {"KIP-853/HighWatermark/1", "KIP-853/FollowerView/1", "KIP-853/OneChange/1",
                                    "KIP-853/AddVoter/1", "KIP-853/OneChange/3", "KIP-853/Bootstrap/1"},
     {"KIP-853/RemoveVoter/3"}, 'KIP-853 "'),
    ("ignore-voter-key", {"KIP-853/VoterKey/1"}, set(), 'KIP-853 "Vote Request Handling"'),
    ("never-resign-after-removal", {"KIP-853/RemoveVoter/3"}, set(), 'KIP-853 "RemoveRaftVoter Request Handling"'),
    ("remove-ignores-dir-id", {"KIP-853/RemoveVoter/2"}, set(), 'KIP-853 "RemoveRaftVoter Request Handling"'),
    # a follower takes AddRaftVoter (answers NONE) instead of NOT_LEADER_OR_FOLLOWER
    ("any-role-changes", {"KIP-853/AddVoter/3"}, set(),
     'KIP-853 "AddRaftVoter Request Handling" step only the leader changes the voter set'),
    # truncating a VotersRecord leaves its voter set in force
    ("no-config-rollback", {"KIP-853/FollowerView/2"}, set(), 'KIP-853 "Voter Changes"'),
    # a follower voter whose entry differs from its listeners never sends UpdateRaftVoter
    ("never-updates", {"KIP-853/UpdateVoter/2"}, set(),
     'KIP-853 "UpdateRaftVoter Request Handling" step a voter whose entry differs'),
    # check quorum counts a removed voter's fetches
    ("removed-still-counts", {"KIP-853/CheckQuorum/1"}, set(), 'KIP-853 "Voter Changes" step check quorum'),
    # a timed-out AddRaftVoter is undone by a VotersRecord of the set before it
    ("timeout-rolls-back", {"KIP-853/OneChange/3"}, set(), 'KIP-853 "Voter Changes"'),
]  # fmt: skip

#: ``make test`` runs one (a change answered before it commits; the mutant sample adds a voter set not restored on
#: truncation); ``make faults`` (KRAFT_TCK_ALL_FAULTS=1) runs all of them.
RECONFIG_FAULTS_SAMPLE = ("ack-before-commit",)
_RECONFIG_FAULTS_RUN = [f for f in RECONFIG_FAULTS
                        if os.environ.get("KRAFT_TCK_ALL_FAULTS") == "1" or f[0] in RECONFIG_FAULTS_SAMPLE]


@pytest.mark.parametrize(
    ("fault", "expected", "maybe", "clause"), _RECONFIG_FAULTS_RUN, ids=[f[0] for f in _RECONFIG_FAULTS_RUN]
)
def test_reconfig_fault_fails_its_cases(
    tmp_path: Path, fault: str, expected: set[str], maybe: set[str], clause: str
) -> None:
    cases, proc = run_catalog(tmp_path, fault, "conformance/test_reconfig.py")
    failed = {cid for cid, c in cases.items() if c["outcome"] == "failed"}
    assert expected <= failed <= expected | maybe, (
        f"{fault}: failed {sorted(failed)}, expected {sorted(expected)} (and maybe {sorted(maybe)})\n"
        f"{proc.stdout[-4000:]}")
    for cid in expected:
        message = str(cases[cid]["message"])
        assert any(line.startswith("clause:   KIP-853 ") and clause in line for line in message.splitlines()), message
    assert not {cid for cid, c in cases.items() if c["outcome"] == "error"}, proc.stdout[-4000:]
    assert proc.returncode == 1


@pytest.mark.skipif(os.environ.get("KRAFT_TCK_ALL_FAULTS") != "1", reason="make faults (KRAFT_TCK_ALL_FAULTS=1)")
def test_a_target_checking_the_voter_key_before_following_differs_from_kafka(tmp_path: Path) -> None:
    # Kafka follows a BeginQuorumEpoch's leader before it checks the voter key (begin.follow-before-voter-key); a
    # target that refuses first breaks no KIP rule: VoterKey/2 passes, reporting the difference (exit 9 with --strict).
    cases, proc = run_catalog(tmp_path, "voter-key-before-transition", "conformance/test_reconfig.py",
                              extra=("--case", "KIP-853/VoterKey/*", "--strict"))
    case = cases["KIP-853/VoterKey/2"]
    assert case["outcome"] == "passed", case["message"]
    diffs = cast(list[dict[str, str]], case["kafkaDifferences"])
    assert {d["kafka"] for d in diffs} == {"begin.follow-before-voter-key"}, diffs
    assert cases["KIP-853/VoterKey/1"]["outcome"] == "passed" and proc.returncode == 9, proc.stdout[-4000:]


#: KIP-853 faults that take another choice than Kafka's where the KIP leaves room: the case passes, reporting the
#: difference under the spec/kafka-behaviour.yaml row, and ``--strict`` fails the run (exit 9).
RECONFIG_KAFKA_FAULTS = [
    # answers UpdateRaftVoter once its VotersRecord commits, not at once (UpdateVoterHandler)
    ("update-waits-commit", "KIP-853/UpdateVoter/1", {"updatevoter.answered-at-once"}),
    # DescribeQuorum v2 names the voters in Nodes without their listeners (RaftUtil.singletonDescribeQuorumResponse)
    ("no-node-endpoints", "KIP-853/Fields/1", {"describe.voter-nodes"}),
]


@pytest.mark.skipif(os.environ.get("KRAFT_TCK_ALL_FAULTS") != "1", reason="make faults (KRAFT_TCK_ALL_FAULTS=1)")
@pytest.mark.parametrize(("fault", "case_id", "rows"), RECONFIG_KAFKA_FAULTS, ids=[f[0] for f in RECONFIG_KAFKA_FAULTS])
def test_reconfig_kafka_fault_is_reported_as_a_difference(
    tmp_path: Path, fault: str, case_id: str, rows: set[str]
) -> None:
    cases, proc = run_catalog(tmp_path, fault, "conformance/test_reconfig.py", extra=("--case", case_id, "--strict"))
    case = cases[case_id]
    assert case["outcome"] == "passed", case["message"]
    diffs = cast(list[dict[str, str]], case["kafkaDifferences"])
    assert {d["kafka"] for d in diffs} == rows, diffs
    assert all(d["clause"].startswith("KIP-853 ") for d in diffs), diffs
    assert proc.returncode == 9, proc.stdout[-4000:]


# make faults: the whole-catalog test below runs these cases on the correct node in make test
@pytest.mark.skipif(os.environ.get("KRAFT_TCK_ALL_FAULTS") != "1", reason="make faults (KRAFT_TCK_ALL_FAULTS=1)")
def test_reconfig_cases_pass_against_the_correct_node(tmp_path: Path) -> None:
    # Every KIP-853 case on the reference node formatted with --initial-controllers: no failure, no difference from
    # Kafka; the module hands the static quorum back to the cases after it (a plain case runs after it here).
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_reconfig.py", "conformance/test_retry.py")
    bad = not_passed(cases)
    assert not bad, f"{bad}\n{proc.stdout[-4000:]}"
    reconfig = {cid for cid in cases if cid.startswith("KIP-853/")}
    assert len(reconfig) >= 20, sorted(cases)
    assert not any(cases[c]["kafkaDifferences"] for c in reconfig), {c: cases[c]["kafkaDifferences"] for c in reconfig}
    assert proc.returncode == 0


def test_a_static_quorum_target_skips_the_reconfig_cases_saying_what_to_do(tmp_path: Path) -> None:
    # A target without KIP-853 (its profile says so): every dynamic-quorum case is skipped naming the capability.
    profile = tmp_path / "static.yaml"
    profile.write_text("name: static\ncapabilities: {restart: true, dynamic-quorum: false}\n")
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_reconfig.py",
                              extra=("--target-profile", str(profile)))
    assert cases and all(c["outcome"] == "skipped" for c in cases.values()), proc.stdout[-4000:]
    assert all(str(c["message"]).startswith("needs capability 'dynamic-quorum'") for c in cases.values())


def test_successors_least_caught_up_first_differs_from_kafka(tmp_path: Path) -> None:
    # KIP-595 asks for PreferredSuccessors "sorted by preference"; most caught-up first is Kafka's order
    # (spec/kafka-behaviour.yaml end.successor-order), so the reversed list is a KAFKA-level difference:
    # reported on the case, and failing the run under --strict (exit 9).
    cases, proc = run_catalog(tmp_path, "successors-least-first", "conformance/test_successors.py", extra=("--strict",))
    case = cases["KIP-595/Successors/1"]
    assert case["outcome"] == "passed", case["message"]
    diffs = cast(list[dict[str, str]], case["kafkaDifferences"])
    assert {d["kafka"] for d in diffs} == {"end.successor-order"}, diffs
    assert any(d["clause"] == 'KIP-595 "EndQuorumEpoch" step PreferredSuccessors' for d in diffs), diffs
    assert proc.returncode == 9, proc.stdout[-4000:]


#: Skips a correct node gets for what this run does not give it (say so, never hide a failure): the
#: 5-voter cases at 3 voters, the pre-vote cases with pre-vote off, the security cases in plaintext.
CAPABILITY_SKIPS = ("needs --quorum-size 5", "needs --quorum-size 3", "the target advertises Vote 0-1",
                    "the target is tested in plaintext")


def not_passed(cases: dict[str, Any]) -> dict[str, str]:
    """The cases that neither passed nor were skipped for a capability this run does not give."""
    return {
        cid: c["message"] for cid, c in cases.items()
        if c["outcome"] != "passed" and not (c["outcome"] == "skipped" and c["message"].startswith(CAPABILITY_SKIPS))
    }  # fmt: skip




def test_scenario_class_cases_pass_against_the_correct_node_in_a_5_voter_quorum(tmp_path: Path) -> None:
    modules = (
        "conformance/test_majority.py",
        "conformance/test_retry.py",
        "conformance/test_checkquorum.py",
        "conformance/test_successors.py",
        "conformance/test_lagging.py",
        "conformance/test_observers.py",
    )
    cases, proc = run_catalog(tmp_path, "none", *modules, extra=("--quorum-size", "5"))
    bad = not_passed(cases)
    assert not bad and len(cases) == 11, f"{bad}\n{proc.stdout[-4000:]}"  # Successors/2, Observer/1 added
    assert not any(c["kafkaDifferences"] for c in cases.values()), {c: v["kafkaDifferences"] for c, v in cases.items()}
    assert proc.returncode == 0


def test_dynamic_quorum_cases_say_they_need_3_voters_in_a_5_voter_quorum(tmp_path: Path) -> None:
    # KIP-853 cases count majorities of a 3-voter set: at --quorum-size 5 they skip saying so (they failed before)
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_reconfig.py",
                              extra=("--quorum-size", "5", "--case", "KIP-853/AddVoter/1"))
    assert list(cases) == ["KIP-853/AddVoter/1"], proc.stdout[-2000:]
    case = cases["KIP-853/AddVoter/1"]
    assert case["outcome"] == "skipped" and case["message"].startswith("needs --quorum-size 3"), case["message"]


def test_correct_reference_node_passes_the_whole_catalog(tmp_path: Path) -> None:
    # as make conformance runs it: on one target per worker (-n 2 on this 2-CPU machine)
    cases, proc = run_catalog(tmp_path, "none", extra=("-n", "2"))
    bad = not_passed(cases)
    assert not bad, f"{bad}\n{proc.stdout[-4000:]}"
    assert not any(c["kafkaDifferences"] for c in cases.values()), {c: v["kafkaDifferences"] for c, v in cases.items()
                                                                    if v["kafkaDifferences"]}
    assert {cid for cid in cases if cid.startswith(("KIP-630/", "KIP-853/"))}, "snapshot and dynamic-quorum cases ran"
    assert proc.returncode == 0
    junit = (tmp_path / "junit.xml").read_text()
    assert 'name="case_id"' in junit and "KIP-595/Vote/1" in junit
    index = (tmp_path / "report" / "index.html").read_text()
    assert "<svg" in index and "Divergence truncation" in index
    assert "cases on 2 targets in parallel" in proc.stdout + proc.stderr
    traces = sorted((tmp_path / "report" / "traces").rglob("KIP-*.ndjson"))
    assert len(traces) >= 30
    for t in traces:
        tr = read_trace(t)
        assert tr.ok and tr.header["source"] == "harness", (t, tr.bad[:1])


#: The KAFKA-level checks the KIP-literal node (kip_literal_node.py) must be reported for, by case: each
#: names the spec/kafka-behaviour.yaml row of the choice it takes differently from Kafka.
KIP_LITERAL_DIFFERENCES = {
    "KIP-595/LeaderProgress/1": {"checkquorum.timeout-factor", "checkquorum.resign-not-elect"},
    "KIP-595/DescribeQuorum/1": {"describe.non-leader"},
    "KIP-595/Divergence/3": {"fetch.truncate-below-hw-fails"},
}


#: make test runs the variant launchers (KIP-literal, typed Fetch) against these modules; make faults
#: (KRAFT_TCK_ALL_FAULTS=1) against the whole catalog.
def whole_catalog_or(*modules: str) -> tuple[str, ...]:
    return () if ALL_FAULTS else modules


def test_a_target_taking_the_kip_texts_choices_passes_the_catalog(tmp_path: Path) -> None:
    # Every case must pass against any implementation the KIP allows, not only against Kafka's choices:
    # the KIP-literal node resigns after 1.0 x fetch.timeout and votes at once, names the leader in
    # DescribeQuorum's refusal, and fetches on (truncating nothing) when told to truncate below its high
    # watermark. Those are KAFKA-level differences: reported, never failed (without --strict). make test runs
    # the modules of those choices and of the rules next to them; make faults the whole catalog.
    modules = whole_catalog_or(
        "conformance/test_leaderprogress.py", "conformance/test_describequorum.py", "conformance/test_divergence.py",
        "conformance/test_checkquorum.py", "conformance/test_vote.py", "conformance/test_election.py",
    )  # fmt: skip
    cases, proc = run_catalog(tmp_path, "none", *modules, launcher=KIP_LITERAL)
    bad = {cid: c["message"] for cid, c in cases.items() if c["outcome"] not in ("passed", "skipped")}
    assert not bad, f"{bad}\n{proc.stdout[-4000:]}"
    assert proc.returncode == 0, proc.stdout[-4000:]
    for cid, rows in KIP_LITERAL_DIFFERENCES.items():
        assert cases[cid]["outcome"] == "passed", (cid, cases[cid]["message"])
        diffs = cast(list[dict[str, str]], cases[cid]["kafkaDifferences"])
        assert rows <= {d["kafka"] for d in diffs}, (cid, diffs)
        assert all(d["level"] == "KAFKA" for d in diffs), diffs
    assert "differs from Kafka [checkquorum.timeout-factor]" in proc.stdout, proc.stdout[-4000:]


def test_a_follower_that_halts_below_its_high_watermark_passes(tmp_path: Path) -> None:
    # Kafka's choice (fetch.truncate-below-hw-fails): the node halts instead of truncating committed
    # records. Divergence/3 sees it refuse connections, relaunches it on its directory and checks that it
    # still fetches from at or above its high watermark; nothing is reported as differing from Kafka, and
    # the cases after it run against the relaunched node.
    cases, proc = run_catalog(tmp_path, "halt-below-hw", "conformance/test_divergence.py")
    bad = not_passed(cases)
    assert not bad, f"{bad}\n{proc.stdout[-4000:]}"
    d3 = cases["KIP-595/Divergence/3"]
    assert d3["kafkaDifferences"] == [], d3["kafkaDifferences"]
    notes = [f["summary"] for f in cast(list[dict[str, str]], d3["frames"]) if f["kind"] == "note"]
    assert any("the target halted" in n for n in notes), notes
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_the_reference_node_takes_kafkas_choices(tmp_path: Path) -> None:
    # The reference node follows Kafka where the KIP leaves room: no KAFKA-level difference in the cases
    # whose choices the KIP-literal node takes differently (check quorum, DescribeQuorum's refusal).
    modules = ("conformance/test_leaderprogress.py", "conformance/test_describequorum.py")
    cases, proc = run_catalog(tmp_path, "none", *modules)
    assert all(c["outcome"] == "passed" for c in cases.values()), proc.stdout[-4000:]
    kip_rows = set().union(*KIP_LITERAL_DIFFERENCES.values())
    diffs = {
        cid: [d for d in cast(list[dict[str, str]], c["kafkaDifferences"]) if d["kafka"] in kip_rows]
        for cid, c in cases.items()
    }
    assert not any(diffs.values()), diffs


@pytest.mark.tlc
def test_the_node_on_its_typed_fetch_path_passes_the_catalog(tmp_path: Path) -> None:
    # Without --trace-file the node reads and writes Fetch through reference/typed_wire.py, not the dict
    # path the traced node above uses: the Fetch-heavy modules again (the Fetch error answers of FetchErrors, the
    # malformed frames of Robustness, divergence, the high watermark, snapshots; make faults: every case), and the
    # black-box TLC check of the harness's traces.
    modules = whole_catalog_or(
        "conformance/test_fetcherrors.py", "conformance/test_robustness.py", "conformance/test_divergence.py",
        "conformance/test_highwatermark.py", "conformance/test_snapshots.py",
    )  # fmt: skip
    cases, proc = run_catalog(tmp_path, "none", *modules, tlc=True, launcher=UNTRACED)
    bad = not_passed(cases)
    assert not bad and len(cases) >= (45 if ALL_FAULTS else 15), f"{bad}\n{proc.stdout[-4000:]}"
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "TLC black-box validation: PASS" in proc.stdout, proc.stdout[-4000:]
    assert "not available for a black-box target (no node trace)" in proc.stdout + proc.stderr


@pytest.mark.tlc
def test_tlc_validation_of_the_node_trace_fails_the_run_on_a_second_vote(tmp_path: Path) -> None:
    # forget-vote: the node keeps its vote in memory only, so after kill -9 (Vote/8) it comes back
    # without it and may grant another candidate of the same epoch. TLC, on by default, must see the
    # node trace leave KRaft (KIP-595 "Vote Request Handling": the vote is persisted before the
    # response) and fail the run, naming the first event no behaviour of KRaft can produce.
    cases, proc = run_catalog(tmp_path, "forget-vote", "conformance/test_vote.py", tlc=True)
    assert cases["KIP-595/Vote/8"]["outcome"] == "failed"
    assert proc.returncode == 1
    out = proc.stdout
    assert "TLC validation of the target's node trace: FAIL" in out, out[-4000:]
    assert "first unmatched event: seq" in out and "spec state before it:" in out, out[-4000:]
    tlc = json.loads((tmp_path / "report" / "results.json").read_text())["tlcValidation"]
    assert tlc["status"] == "FAIL"
    failed = [life for life in tlc["lives"] if life["status"] == "FAIL"]
    assert failed and failed[0]["failedEvent"]["event"] in ("Restart", "HandleVoteRequest"), failed
    assert failed[0]["failedEvent"]["node"] == 1 and "stateBefore" in failed[0]


@pytest.mark.tlc
def test_tlc_validation_of_the_correct_node_passes(tmp_path: Path) -> None:
    cases, proc = run_catalog(tmp_path, "none", "conformance/test_vote.py", tlc=True)
    assert all(c["outcome"] == "passed" for c in cases.values()), proc.stdout[-4000:]
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "TLC validation: PASS" in proc.stdout
    tlc = json.loads((tmp_path / "report" / "results.json").read_text())["tlcValidation"]
    assert tlc["status"] == "PASS" and tlc["events"] > 50
