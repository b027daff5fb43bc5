"""Unit tests of the harness machinery: catalog, the virtual log, virtual voters over the wire,
failure rendering, the report and the profile command."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.catalog import IMPLEMENTATIONS, CatalogError, catalog, load_catalog
from kraft_tck.conformance.cli import profile_cmd
from kraft_tck.conformance.report import sequence_svg, tlc_line, write_report
from kraft_tck.conformance.scenario import ConformanceFailure
from kraft_tck.conformance.session import CaseResult, validate_node_trace
from kraft_tck.conformance.target import EMBEDDED_TIMEOUTS, AddressTarget, QuorumLayout, target_properties
from kraft_tck.conformance.virtual import FrameLog, HarnessError, Quorum, TargetAddress, VLog
from kraft_tck.reference.config import NodeConfig, parse_properties
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.trace import ACTIONS, MESSAGE_EVENTS

REPO = Path(__file__).resolve().parents[2]


def _import_catalog_modules() -> None:
    for path in sorted((REPO / "conformance").glob("test_*.py")):
        name = f"_kraft_tck_catalog_{path.stem}"
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def test_every_case_is_implemented_and_every_implementation_is_in_the_catalog() -> None:
    _import_catalog_modules()
    cases = set(catalog())
    implemented = set(IMPLEMENTATIONS)
    assert cases - implemented == set(), f"cases without an implementation: {sorted(cases - implemented)}"
    assert implemented - cases == set(), f"implementations not in spec/scenarios: {sorted(implemented - cases)}"


def test_case_modules_match_the_yaml() -> None:
    _import_catalog_modules()
    for cid, fn in IMPLEMENTATIONS.items():
        spec = catalog()[cid]
        assert Path(fn.__code__.co_filename).name == Path(spec.module).name, (cid, spec.module)


def test_steps_speak_the_vocabulary() -> None:
    words = (*ACTIONS, *MESSAGE_EVENTS, "elect the target")
    for cid, spec in catalog().items():
        assert any(any(w in step for w in words) for step in spec.steps), f"{cid}: no vocabulary name in its steps"


def test_catalog_errors_name_the_problem(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("section: S\nmodule: m.py\ncases:\n  - id: Vote-1\n    title: t\n")
    with pytest.raises(CatalogError, match=r"x.yaml: case 'Vote-1': id must look like"):
        load_catalog(tmp_path)
    (tmp_path / "x.yaml").write_text(
        "section: S\nmodule: m.py\ncases:\n  - id: KIP-595/Vote/1\n    title: t\n    clause: {kip: K}\n    steps: [a]\n"
    )
    with pytest.raises(CatalogError, match="clause needs kip and section"):
        load_catalog(tmp_path)


# ---------------------------------------------------------------------------------------------- VLog


def _log(*epochs: int) -> VLog:
    log = VLog()
    for e in epochs:
        log.append_values(e, [b"v"], commit=False)
    return log


def test_epoch_end_offset_follows_kafka() -> None:
    log = _log(1, 1, 3, 3, 5)  # offsets 0-1 epoch 1, 2-3 epoch 3, 4 epoch 5
    assert log.epoch_end_offset(1) == (1, 2)
    assert log.epoch_end_offset(2) == (1, 2)
    assert log.epoch_end_offset(3) == (3, 4)
    assert log.epoch_end_offset(7) == (5, 5)
    assert log.epoch_end_offset(0) == (0, 0)
    assert VLog().epoch_end_offset(4) == (0, 0)  # KafkaMetadataLog.endOffsetForEpoch of an empty log


def test_diverging_is_none_only_for_consistent_positions() -> None:
    log = _log(1, 1, 3, 3, 5)
    assert log.diverging(2, 1) is None
    assert log.diverging(5, 5) is None
    assert log.diverging(0, -1) is None
    assert log.diverging(0, 3) is None  # FetchOffset 0 agrees with every log (validateOffsetAndEpoch)
    assert VLog().last_epoch == 0  # an empty log: Kafka's sentinel, never -1
    assert log.diverging(3, 1) == (1, 2)  # past the end of epoch 1
    assert log.diverging(4, 2) == (1, 2)  # an epoch the log never had
    assert log.diverging(9, 5) == (5, 5)  # beyond the log end


def test_vlog_refuses_to_truncate_committed_records() -> None:
    log = _log(1, 1, 1)
    log.committed = 2
    log.truncate(2)
    assert log.end == 2
    with pytest.raises(HarnessError, match="below its committed offset 2"):
        log.truncate(1)


# ---------------------------------------------------------------------------------------------- over the wire


async def _two_quorums() -> tuple[Quorum, Quorum]:
    """Quorum ``leader_side`` whose virtual voter 5 plays the target for quorum ``client_side``."""
    leader_side = Quorum(TargetAddress(9, "127.0.0.1", 1), "cid", {5: 0}, "127.0.0.1")
    await leader_side.start()
    port = leader_side.voters[5].port
    client_side = Quorum(TargetAddress(5, "127.0.0.1", port), "cid", {2: 0, 3: 0}, "127.0.0.1")
    await client_side.start()
    return leader_side, client_side


def test_virtual_leader_serves_kip595_fetch_handling() -> None:
    async def run() -> None:
        leader_side, client_side = await _two_quorums()
        try:
            for e in (1, 1, 3):
                leader_side.log.append_values(e, [b"x"])
            leader_side.set_leader(5, 4)
            v2 = client_side.voters[2]
            client_side.log.append_values(1, [b"x", b"x", b"y"], commit=False)
            resp = await v2.fetch(4, 3, 1)
            part = B.partition(resp)
            assert B.diverging_of(part) == (1, 2) and not B.records_of(part)
            resp = await v2.fetch(3, 0, -1)
            assert B.partition(resp)["ErrorCode"] == Errors.FENCED_LEADER_EPOCH
            resp = await v2.fetch(5, 0, -1)
            assert B.partition(resp)["ErrorCode"] == Errors.UNKNOWN_LEADER_EPOCH
            resp = await v2.fetch(4, 0, -1, cluster_id="other")
            assert resp["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID
            client_side.log.truncate(2)
            resp = await v2.follow_once(4)
            assert client_side.log.end == 3 and client_side.log.last_epoch == 3
            kinds = [(f.src, f.dst, f.kind) for f in client_side.frames.frames if f.api == "Fetch"]
            assert kinds[:2] == [(2, 5, "request"), (5, 2, "response")]
            leader_side.set_leader(-1, -1)
            resp = await v2.fetch(4, 3, 3)
            assert B.partition(resp)["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER
        finally:
            await client_side.close()
            await leader_side.close()

    asyncio.run(run())


def test_virtual_voter_votes_once_per_epoch() -> None:
    async def run() -> None:
        leader_side, client_side = await _two_quorums()
        try:
            leader_side.voters[5].vote_policy = lambda _c, _e, _p: True
            a = await client_side.voters[2].vote(7, 1, 10)
            b = await client_side.voters[3].vote(7, 1, 10)
            again = await client_side.voters[2].vote(7, 1, 10)
            assert [B.partition(r)["VoteGranted"] for r in (a, b, again)] == [True, False, True]
        finally:
            await client_side.close()
            await leader_side.close()

    asyncio.run(run())


def test_frame_log_waits_for_a_matching_frame() -> None:
    async def run() -> None:
        log = FrameLog()
        asyncio.get_running_loop().call_later(0.05, lambda: log.add(1, 2, 52, "request", 1, 0, {}))
        fr = await log.wait_for(lambda f: f.api == "Vote", 1.0)
        assert fr is not None and fr.src == 1
        assert await log.wait_for(lambda f: f.api == "Fetch", 0.05) is None

    asyncio.run(run())


# ---------------------------------------------------------------------------------------------- verdicts


def _failure() -> ConformanceFailure:
    spec = catalog()["KIP-595/Divergence/1"]
    frames = FrameLog()
    frames.add(1, 3, 1, "request", 17, 4, B.fetch_request(17, "c", 1, 9, 10, 7))
    frames.add(3, 1, 1, "response", 17, 4, B.fetch_response(17, diverging=(7, 7), leader=(3, 9)))
    return ConformanceFailure(
        spec, "refetch from the divergence point", "Fetch(offset=7)", "Fetch(offset=10)", frames.frames, 1
    )


def test_failure_text_names_case_clause_expected_actual_and_frames() -> None:
    text = str(_failure())
    assert "KIP-595/Divergence/1" in text
    assert 'KIP-595 "Fetch Response Handling" step 2' in text
    assert "expected: Fetch(offset=7)" in text and "actual:   Fetch(offset=10)" in text
    assert "target -> v3" in text and "diverging=(7, 7)" in text


def test_report_groups_by_section_with_diagrams(tmp_path: Path) -> None:
    fail = _failure()
    bad = CaseResult(fail.case, "failed", 0.5, fail.what, fail.expected, fail.actual, str(fail), fail.frames)
    good = CaseResult(catalog()["KIP-595/Vote/1"], "passed", 0.1)
    index = write_report(tmp_path, [bad, good], "node 1 at 127.0.0.1:1", 0.0)
    html = index.read_text()
    assert "<h2>Divergence truncation</h2>" in html and "<h2>Vote</h2>" in html
    assert "<svg" in html and "Fetch(offset=7)" in html
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["summary"]["failed"] == 1 and results["summary"]["passed"] == 1
    assert "marker-end" in sequence_svg(fail.frames, 1)


def test_tlc_validation_is_not_available_for_a_black_box_target(tmp_path: Path) -> None:
    layout = QuorumLayout(1, "127.0.0.1", 9093, "127.0.0.1", (19092, 19093))
    address = AddressTarget(layout, EMBEDDED_TIMEOUTS, "c")
    result = validate_node_trace(address.trace_lives, tmp_path)
    assert result.status == "UNAVAILABLE"
    assert tlc_line(result) == "TLC validation: not available for a black-box target (no node trace)"
    # a launcher that never wrote its --trace-file is no better
    assert validate_node_trace([[tmp_path / "target-trace-0.ndjson"]], tmp_path).status == "UNAVAILABLE"
    index = write_report(tmp_path / "r", [], address.describe(), 0.0, result)
    assert "not available for a black-box target" in index.read_text()
    assert json.loads((tmp_path / "r" / "results.json").read_text())["tlcValidation"]["status"] == "UNAVAILABLE"


def test_profile_prints_properties_the_reference_node_accepts() -> None:
    out = CliRunner().invoke(profile_cmd, ["--target-id", "1", "--harness-ports", "19092,19093"])
    assert out.exit_code == 0, out.output
    props = parse_properties(out.output)
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093,2@127.0.0.1:19092,3@127.0.0.1:19093"
    cfg = NodeConfig.from_properties(props)
    assert cfg.node_id == 1 and cfg.election_timeout_ms == EMBEDDED_TIMEOUTS.election_ms
    bad = CliRunner().invoke(profile_cmd, ["--harness-ports", "19092"])
    assert bad.exit_code != 0 and "expected 2 ports" in bad.output


def test_five_voter_layout() -> None:
    layout = QuorumLayout(1, "127.0.0.1", 9093, "127.0.0.1", (1, 2, 3, 4))
    assert layout.virtual_ids == [2, 3, 4, 5]
    props: dict[str, Any] = target_properties(layout, EMBEDDED_TIMEOUTS, "/d")
    assert props["controller.quorum.voters"].count("@") == 5


def test_target_image_without_a_docker_daemon_stops_with_an_actionable_reason(tmp_path: Path) -> None:
    """--target-image uses testcontainers; with no daemon the run stops before any case with exit code 8
    (nothing tested, conformance/plugin.py) and one line saying what to do (start Docker, set DOCKER_HOST,
    or use --target-cmd / --target)."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/test_apiversions.py", "-q", "-rs", "-p", "no:cacheprovider",
         "--target-image", "example/kraft:latest"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 8, out[-3000:]
    assert "passed" not in out
    line = next(ln for ln in out.splitlines() if "kraft-tck: nothing tested" in ln)
    assert "Docker daemon" in line and "--target-cmd" in line


def test_a_case_past_its_time_budget_errors_saying_so(tmp_path: Path) -> None:
    """--case-timeout bounds a case's own time (a relaunch of the target is not counted); a case past it is
    cancelled and errors with a message naming the budget and the option, not a bare TimeoutError."""
    repo = Path(__file__).resolve().parents[2]
    report = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/test_checkquorum.py", "-q", "-p", "no:cacheprovider", "--no-tlc",
         "--case", "KIP-595/CheckQuorum/1", "--case-timeout", "0.3", "--report", str(report)],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    cases = {c["id"]: c for c in json.loads((report / "results.json").read_text())["cases"]}
    case = cases["KIP-595/CheckQuorum/1"]
    assert case["outcome"] == "error", proc.stdout[-3000:]
    assert case["message"].startswith("CaseTimeout: the case did not finish within its 0.3 s budget"), case["message"]
    assert "--case-timeout" in case["message"]
