"""The harness as a gate: set-up mistakes stop the run before any case with one line and their own exit
code (conformance/README.md "Exit codes"), a run that tested nothing is not green, and the cluster id of a
node started by hand is learnt from the node itself. Every run is a real ``pytest conformance`` process
against real sockets and real reference-node processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.conformance.catalog import CatalogError, catalog, select_cases
from kraft_tck.conformance.cli import profile_cmd
from kraft_tck.conformance.plugin import (
    EXIT_CLUSTER_ID_UNKNOWN,
    EXIT_NOTHING_TESTED,
    EXIT_STRICT,
    EXIT_TARGET_UNREACHABLE,
    cluster_id_wait_s,
)
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    AddressTarget,
    CommandTarget,
    ProfileError,
    QuorumLayout,
    free_ports,
    load_profile,
    wait_listening,
)
from kraft_tck.reference.config import parse_properties
from kraft_tck.spec import codec

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "kraft_tck.reference.cli"]
CLUSTER_ID = "H3gateClusterIdAAAAAAA"


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``pytest conformance ARGS`` in the checkout, as a user runs it (TLC off: these runs judge the gate)."""
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--no-tlc", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def gate_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if "kraft-tck:" in ln]


@contextlib.contextmanager
def reference_node(tmp_path: Path, port: int, voter_ports: tuple[int, ...], formatted: bool = True) -> Iterator[int]:
    """A reference node started by hand as a user would, listening on ``port``: ``kraft-tck profile``
    properties (voters: the node and ``voter_ports``), ``kraft-tck format``, ``kraft-tck node``."""
    props = subprocess.run(
        [*CLI, "profile", "--target-port", str(port), "--harness-ports", ",".join(map(str, voter_ports)),
         "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    config = tmp_path / "server.properties"
    config.write_text(props)
    if formatted:
        subprocess.run([*CLI, "format", "--config", str(config), "--cluster-id", CLUSTER_ID], check=True)
    out = open(tmp_path / "node.out", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*CLI, "node", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_listening("127.0.0.1", port, 20, proc, tmp_path / "node.out")
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        out.close()


def timeouts_args(ports: list[int] | tuple[int, ...]) -> list[str]:
    return [
        "--harness-ports", ",".join(map(str, ports)),
        "--target-election-timeout-ms", str(EMBEDDED_TIMEOUTS.election_ms),
        "--target-fetch-timeout-ms", str(EMBEDDED_TIMEOUTS.fetch_ms),
        "--target-broker-session-timeout-ms", str(EMBEDDED_TIMEOUTS.broker_session_timeout_ms),
    ]  # fmt: skip


# ------------------------------------------------------------------ unreachable or wrong targets


def test_unreachable_target_stops_before_any_case_with_one_line() -> None:
    port, *harness_ports = free_ports(3)  # nobody listens on port
    proc = harness("--target", f"127.0.0.1:{port}", "--harness-ports", ",".join(map(str, harness_ports)))
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_TARGET_UNREACHABLE, out[-3000:]
    (line,) = gate_lines(proc)
    assert f"nothing listens on 127.0.0.1:{port}" in line and "--target" in line
    assert "error" not in out.lower().replace("errors", "") and "passed" not in out
    assert len(out.splitlines()) < 15, out


class FakeListener:
    """A TCP listener that is not a KRaft controller: ``http`` answers like a web server; ``broker``
    answers ApiVersions as a Kafka broker listener does, without Vote (api key 52)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096)
                if self.mode == "http":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    continue
                (corr,) = struct.unpack(">i", data[8:12])
                body = {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 3}]}
                conn.sendall(codec.encode_response(18, 0, corr, body))

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("http", "does not answer ApiVersions as Kafka"),
        ("broker", "does not offer Vote (api key 52)"),
    ],
)
def test_listener_that_is_not_a_kraft_controller_stops_the_run(mode: str, expected: str) -> None:
    fake = FakeListener(mode)
    try:
        proc = harness("--target", f"127.0.0.1:{fake.port}", "--harness-ports", ",".join(map(str, free_ports(2))))
    finally:
        fake.close()
    assert proc.returncode == EXIT_TARGET_UNREACHABLE, (proc.stdout + proc.stderr)[-3000:]
    (line,) = gate_lines(proc)
    assert expected in line and f"127.0.0.1:{fake.port}" in line


def test_launched_target_that_exits_stops_the_run_with_its_output(tmp_path: Path) -> None:
    script = tmp_path / "broken-controller"
    script.write_text("#!/bin/sh\necho 'broken-controller: cannot read' \"$1\" >&2\nexit 3\n")
    script.chmod(0o755)
    proc = harness("--target-cmd", f"{script} {{config}}", "--case", "KIP-595/Vote/1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_TARGET_UNREACHABLE, out[-3000:]
    assert "exited with status 3" in out and "broken-controller: cannot read" in out
    assert "passed" not in out


# ------------------------------------------------------------------ the cluster id


@pytest.mark.cluster
def test_cluster_id_is_learnt_from_a_hand_started_node(tmp_path: Path) -> None:
    port, *ports = free_ports(3)
    report = tmp_path / "report"
    with reference_node(tmp_path, port, tuple(ports)):
        proc = harness(
            "--target", f"127.0.0.1:{port}", *timeouts_args(ports), "--case", "KIP-595/Vote/1", "--report", str(report)
        )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    (line,) = gate_lines(proc)
    assert f"cluster id {CLUSTER_ID} learnt from the target's" in line
    assert "1 passed" in out
    # the case ran with the learnt id: it is in its harness trace's header
    header = json.loads((report / "traces" / "KIP-595_Vote_1.ndjson").read_text().splitlines()[0])
    assert header["clusterId"] == CLUSTER_ID


@pytest.mark.cluster
def test_null_cluster_id_stops_the_run(tmp_path: Path) -> None:
    """An unformatted reference node votes with ClusterId null (it has none yet): the harness cannot
    learn an id from it and says to pass --cluster-id."""
    port, *ports = free_ports(3)
    with reference_node(tmp_path, port, tuple(ports), formatted=False):
        proc = harness("--target", f"127.0.0.1:{port}", *timeouts_args(ports), "--case", "KIP-595/Vote/1")
    assert proc.returncode == EXIT_CLUSTER_ID_UNKNOWN, (proc.stdout + proc.stderr)[-3000:]
    (line,) = gate_lines(proc)
    assert "ClusterId null" in line and "--cluster-id" in line


@pytest.mark.cluster
def test_no_request_reaching_the_harness_stops_the_run_after_a_bounded_wait(tmp_path: Path) -> None:
    """The node's controller.quorum.voters names other ports than the harness listens on: no request
    reaches a virtual voter, so after the wait the run stops naming --cluster-id and the ports."""
    port, a, b, *ports = free_ports(5)
    with reference_node(tmp_path, port, (a, b)):
        proc = harness("--target", f"127.0.0.1:{port}", *timeouts_args(ports), "--case", "KIP-595/Vote/1")
    assert proc.returncode == EXIT_CLUSTER_ID_UNKNOWN, (proc.stdout + proc.stderr)[-3000:]
    (line,) = gate_lines(proc)
    assert "--cluster-id" in line and ",".join(map(str, ports)) in line and "no request" in line


def test_cluster_id_wait_is_derived_from_the_target_timeouts() -> None:
    kafka = load_profile("kafka").timeouts
    assert kafka is not None
    # Kafka's defaults: 1.5 x fetch 2 s + 2 x election 1 s + backoff 1 s + request 2 s + slack 1.25 s
    assert cluster_id_wait_s(kafka, 1.5) == pytest.approx(9.25)
    assert cluster_id_wait_s(kafka) == pytest.approx(8.25)


# ------------------------------------------------------------------ nothing tested, --strict


def test_nothing_selected_exits_non_zero() -> None:
    proc = harness("-k", "no_such_case_anywhere")
    assert proc.returncode == EXIT_NOTHING_TESTED, (proc.stdout + proc.stderr)[-3000:]
    (line,) = gate_lines(proc)
    assert "nothing tested" in line and "none of the" in line


def test_unknown_case_pattern_or_section_is_a_usage_error() -> None:
    proc = harness("--case", "KIP-595/Vot/*")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--case 'KIP-595/Vot/*' matches no case" in proc.stderr
    proc = harness("--section", "Votes")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--section 'Votes' is not a section" in proc.stderr and "Divergence" in proc.stderr


@pytest.mark.cluster
def test_all_cases_skipped_exits_non_zero_saying_why(tmp_path: Path) -> None:
    """KIP-595/Vote/8 needs a restart: against a --target it is skipped, and a run of only it tested
    nothing. The reason names the capability, the profile and what to pass."""
    port, *ports = free_ports(3)
    with reference_node(tmp_path, port, tuple(ports)):
        proc = harness(
            "--target", f"127.0.0.1:{port}", "--cluster-id", CLUSTER_ID, *timeouts_args(ports),
            "--case", "KIP-595/Vote/8",
        )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_NOTHING_TESTED, out[-3000:]
    (line,) = gate_lines(proc)
    assert "nothing tested: all 1 selected case(s) were skipped" in line
    assert "needs capability 'restart'" in line and "profile 'kafka'" in line and "--target-cmd" in line


@pytest.mark.cluster
def test_strict_fails_a_run_with_a_skip(tmp_path: Path) -> None:
    port, *ports = free_ports(3)
    with reference_node(tmp_path, port, tuple(ports)):
        proc = harness(
            "--target", f"127.0.0.1:{port}", "--cluster-id", CLUSTER_ID, *timeouts_args(ports),
            "--case", "KIP-595/Vote/1", "--case", "KIP-595/Vote/8", "--strict",
        )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_STRICT, out[-3000:]
    assert "1 passed" in out  # Vote/1 passed: the skip of Vote/8 alone fails the run
    (line,) = gate_lines(proc)
    assert "--strict: 1 case(s) skipped" in line and "restart" in line


@pytest.mark.cluster
def test_strict_fails_on_a_difference_from_kafka_and_only_then(tmp_path: Path) -> None:
    """--strict turns a KAFKA-level difference (CaseResult.kafka_differences, "differs from Kafka") into
    exit code 9; the same run without it is green. The embedded node's Divergence section is judged both
    ways: whichever cases differ from Kafka in results.json are the ones the line names."""
    report = tmp_path / "report"
    strict = harness("--section", "Divergence", "--strict", "--report", str(report))
    cases = json.loads((report / "results.json").read_text())["cases"]
    assert all(c["outcome"] == "passed" for c in cases), strict.stdout[-3000:]
    differs = [c["id"] for c in cases if c.get("kafkaDifferences")]
    if differs:
        assert strict.returncode == EXIT_STRICT, strict.stdout[-3000:]
        (line,) = gate_lines(strict)
        assert f"{len(differs)} case(s) differ from Kafka ({', '.join(differs)})" in line
    else:
        assert strict.returncode == 0, strict.stdout[-3000:]
    lenient = harness("--section", "Divergence")
    assert lenient.returncode == 0, lenient.stdout[-3000:]
    assert not gate_lines(lenient)


# ------------------------------------------------------------------ selection


def test_case_patterns_and_sections_select_from_the_catalog() -> None:
    votes = select_cases(["KIP-595/Vote/*"], [])
    assert votes == {cid for cid in catalog() if cid.startswith("KIP-595/Vote/")} and len(votes) >= 8
    div = select_cases([], ["Divergence"])
    assert div == select_cases([], ["divergence TRUNCATION"]) == {c for c in catalog() if "/Divergence/" in c}
    assert select_cases(["KIP-595/Vote/1"], ["Divergence"]) == div | {"KIP-595/Vote/1"}
    with pytest.raises(CatalogError, match="'KIP-9/X/1'"):
        select_cases(["KIP-9/X/1"], [])


def test_section_selection_collects_exactly_that_section() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "--collect-only", "-q", "-p", "no:cacheprovider",
         "--section", "Divergence"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    tests = [ln for ln in proc.stdout.splitlines() if "::test_" in ln]
    expected = len(select_cases([], ["Divergence"]))
    assert len(tests) == expected and all("test_divergence.py" in t for t in tests)


# ------------------------------------------------------------------ profiles


def test_shipped_profiles_state_capabilities_and_facts() -> None:
    kafka, ref = load_profile("kafka"), load_profile("reference")
    assert kafka.supports("restart") and kafka.supports("broker-rpcs") and not kafka.supports("unformatted-start")
    assert kafka.fact("check_quorum_timeout_factor", 0) == 1.5  # LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR
    assert ref.supports("unformatted-start") and ref.supports("restart")
    from kraft_tck.reference import core

    assert ref.fact("check_quorum_timeout_factor", 0) == getattr(core, "CHECK_QUORUM_TIMEOUT_FACTOR", 1.0)
    with pytest.raises(ProfileError, match="unknown capability"):
        kafka.supports("time-travel")


def test_profile_file_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "mine.yaml"
    bad.write_text("name: mine\ncapabilities: {restart: true, time-travel: true}\n")
    with pytest.raises(ProfileError, match="'time-travel'"):
        load_profile(str(bad))
    good = tmp_path / "good.yaml"
    good.write_text("name: mine\ncapabilities: {restart: false}\ntimeouts: {election_ms: 500, fetch_ms: 900}\n")
    prof = load_profile(str(good))
    assert prof.name == "mine" and not prof.supports("restart") and prof.timeouts is not None
    assert prof.timeouts.fetch_ms == 900
    proc = harness("--target-profile", str(bad), "--collect-only")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR and "'time-travel'" in proc.stderr


def test_missing_capability_names_the_capability_profile_and_what_to_pass(tmp_path: Path) -> None:
    layout = QuorumLayout(1, "127.0.0.1", 9093, "127.0.0.1", (19092, 19093))
    addr = AddressTarget(layout, EMBEDDED_TIMEOUTS, None, profile=load_profile("kafka"))
    why = addr.capability_missing("restart")
    assert why is not None and "given by address" in why and "'kafka'" in why and "--target-cmd" in why
    cmd = CommandTarget(
        layout, EMBEDDED_TIMEOUTS, None, profile=load_profile("kafka"), template="x {config}", workdir=tmp_path
    )
    assert cmd.capability_missing("restart") is None
    why = cmd.capability_missing("unformatted-start")
    assert why is not None and "'kafka'" in why and "--target-profile" in why
    cmd.profile = load_profile("reference")
    assert cmd.capability_missing("unformatted-start") is None


def test_profile_kafka_prints_controller_properties_and_the_format_command() -> None:
    out = CliRunner().invoke(profile_cmd, ["--kafka", "--harness-ports", "19092,19093", "--target-port", "9093"])
    assert out.exit_code == 0, out.output
    props = parse_properties(out.output)
    assert props["process.roles"] == "controller" and props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093,2@127.0.0.1:19092,3@127.0.0.1:19093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT"
    assert "controller.quorum.fetch.max.wait.ms" not in props  # not a Kafka setting
    assert "bin/kafka-storage.sh format -t" in out.output and "-c server.properties" in out.output
    assert "--standalone" in out.output  # says why it is not used with a static quorum
