"""The parallel run's scheduler (conformance/schedule.py ``CaseScheduling``): own-life cases and a one-target module
each go to one worker whole, units go out longest first, and a collection without conformance cases is left to
xdist's load scheduling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.conformance import schedule
from kraft_tck.conformance.schedule import CaseScheduling, describe_item, plan_units

REPO = Path(__file__).resolve().parents[2]

SNAP_1 = "conformance/test_snapshots.py::test_follower_installs_snapshot_in_chunks"
SNAP_7 = "conformance/test_snapshots.py::test_fetch_snapshot_unknown_snapshot"
OBSERVER = "conformance/test_observers.py::test_target_as_observer_never_stands"
ADD_VOTER = "conformance/test_reconfig.py::test_add_voter"
REMOVE_VOTER = "conformance/test_reconfig.py::test_remove_voter"
VOTE_8 = "conformance/test_vote.py::test_vote_survives_restart"
VOTE_1 = "conformance/test_vote.py::test_grant_up_to_date_higher_epoch"
CRASH_1 = "conformance/test_crashwindow.py::test_acknowledged_records_durable"


def test_items_are_placed_by_their_case() -> None:
    assert describe_item(SNAP_7, REPO) == ("KIP-630/Snapshot/7", True, None)
    assert describe_item(ADD_VOTER, REPO) == ("KIP-853/AddVoter/1", False, "test_reconfig")
    assert describe_item(VOTE_8, REPO) == ("KIP-595/Vote/8", False, None)
    # not a conformance case: an ordinary item (another file of the same name is not the catalog's module)
    assert describe_item("tests/conformance/test_vote.py::test_vote_survives_restart", REPO)[0] is None
    assert describe_item("tests/conformance/test_gate.py::test_x", REPO) == (None, False, None)


def test_units_keep_own_life_cases_and_one_target_modules_together_longest_first() -> None:
    collection = [VOTE_1, SNAP_1, ADD_VOTER, VOTE_8, OBSERVER, REMOVE_VOTER, SNAP_7, CRASH_1]
    durations = {"KIP-630/Snapshot/1": 2.0, "KIP-630/Snapshot/7": 2.0, "KIP-595/Observer/1": 2.0,
                 "KIP-853/AddVoter/1": 1.0, "KIP-853/RemoveVoter/1": 1.0, "KIP-595/Vote/8": 3.0,
                 "KIP-595/Vote/1": 0.1, "KIP-595/CrashWindow/2": 2.5}  # fmt: skip
    units = plan_units(collection, durations, REPO)
    assert units is not None
    named = [[collection[k] for k in unit] for unit in units]
    assert named == [
        [SNAP_1, OBSERVER, SNAP_7],  # 6.0 s, in collection order
        [VOTE_8],  # 3.0
        [CRASH_1],  # 2.5
        [ADD_VOTER, REMOVE_VOTER],  # 2.0
        [VOTE_1],  # 0.1
    ]


def test_a_collection_without_cases_is_not_planned() -> None:
    assert plan_units(["tests/conformance/test_gate.py::test_x", "tests/test_a.py::test_b"], {}, REPO) is None


class FakeNode:
    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def test_whole_units_go_to_the_worker_that_runs_low(monkeypatch: pytest.MonkeyPatch, pytestconfig: Any) -> None:
    collection = [VOTE_1, SNAP_1, ADD_VOTER, VOTE_8, OBSERVER, REMOVE_VOTER, SNAP_7, CRASH_1]
    durations = {"KIP-630/Snapshot/1": 2.0, "KIP-630/Snapshot/7": 2.0, "KIP-595/Observer/1": 2.0,
                 "KIP-853/AddVoter/1": 1.0, "KIP-853/RemoveVoter/1": 1.0, "KIP-595/Vote/8": 3.0,
                 "KIP-595/Vote/1": 0.1, "KIP-595/CrashWindow/2": 2.5}  # fmt: skip
    monkeypatch.setattr(schedule, "load_durations", lambda: durations)

    class Config:
        rootpath = REPO

        def getoption(self, name: str) -> Any:
            return {"maxschedchunk": None, "tx": ["popen", "popen"], "numprocesses": 2, "dist": "load"}.get(name)

        def getvalue(self, name: str) -> Any:
            return self.getoption(name)

    import xdist.scheduler.load as load

    monkeypatch.setattr(load, "parse_tx_spec_config", lambda _c: ["popen", "popen"])
    sched = CaseScheduling(Config())
    a, b = FakeNode("gw0"), FakeNode("gw1")
    for node in (a, b):
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    by_index = {k: nid for k, nid in enumerate(collection)}
    # gw0: the own-life chain (3 cases, enough); gw1: Vote/8 alone is one case, so CrashWindow/1 too
    assert [[by_index[k] for k in chunk] for chunk in a.sent] == [[SNAP_1, OBSERVER, SNAP_7]]
    assert [[by_index[k] for k in chunk] for chunk in b.sent] == [[VOTE_8], [CRASH_1]]
    # gw1 finishes Vote/8: one case left, so it takes the next unit whole (both KIP-853 cases)
    sched.mark_test_complete(b, collection.index(VOTE_8))
    assert [by_index[k] for k in b.sent[-1]] == [ADD_VOTER, REMOVE_VOTER]
    # gw0 runs low: the last unit, and nothing is left, so it is told to shut down after it
    sched.mark_test_complete(a, collection.index(SNAP_1))
    sched.mark_test_complete(a, collection.index(OBSERVER))
    assert [by_index[k] for k in a.sent[-1]] == [VOTE_1]
    assert a.shutting_down
    assert not sched.pending


def test_own_life_cases_in_a_row_relaunch_once_each(tmp_path: Path) -> None:
    """Two snapshot cases (own-life: each starts on a wiped directory with properties of its own and retires that
    life) then a plain case: the target launches 4 times (the session's start, one per snapshot case, one plain
    relaunch before Vote/1), where relaunching at each case's end too took 5; every case passes, and the run's
    case times are kept for the scheduler."""
    report = tmp_path / "report"
    env = {**os.environ, "KRAFT_TCK_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/test_snapshots.py", "conformance/test_vote.py", "-q", "-n", "0",
         "-p", "no:cacheprovider", "--no-tlc", "--case", "KIP-630/Snapshot/7", "--case", "KIP-630/Snapshot/8",
         "--case", "KIP-595/Vote/1", "--report", str(report)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    cases = {c["id"]: c["outcome"] for c in json.loads((report / "results.json").read_text())["cases"]}
    assert cases == {"KIP-630/Snapshot/7": "passed", "KIP-630/Snapshot/8": "passed", "KIP-595/Vote/1": "passed"}
    launches = sorted((report / "traces" / "target").glob("target-trace-*.ndjson"))
    assert len(launches) == 4, [p.name for p in launches]
    kept = json.loads((tmp_path / "cache" / "conformance-durations.json").read_text())
    assert set(kept) == set(cases)
