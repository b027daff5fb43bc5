"""pytest plugin of the conformance harness: ``pytest conformance --target=host:port``.

With no ``--target``/``--target-cmd``/``--target-image`` the harness formats a directory with the cluster
id and launches the embedded reference node (``python -m kraft_tck.reference.cli node``) on a free
loopback port with the short test timeouts of ``EMBEDDED_TIMEOUTS`` (election 300 ms, fetch 600 ms,
broker session 1500 ms).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.conformance.report import ReportPlugin
from kraft_tck.conformance.scenario import ConformanceFailure
from kraft_tck.conformance.session import DEFAULT_CLUSTER_ID, Session
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    AddressTarget,
    CommandTarget,
    ContainerTarget,
    EmbeddedTarget,
    QuorumLayout,
    Target,
    Timeouts,
    free_port,
    free_ports,
)

_SESSION_KEY = pytest.StashKey[Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kraft-tck", "KRaft conformance harness")
    g.addoption("--target", help="host:port of a running node under test (omit: embedded reference node)")
    g.addoption("--target-id", type=int, default=1, help="node.id of the target (default 1)")
    g.addoption("--cluster-id", help="the target's cluster id (default: a fixed id the harness formats with)")
    g.addoption("--harness-host", default="127.0.0.1", help="address the virtual voters listen on")
    g.addoption("--harness-ports", help="comma-separated ports of the virtual voters, one per voter")
    g.addoption("--quorum-size", type=int, default=3, choices=(3, 5), help="voters including the target")
    g.addoption("--target-election-timeout-ms", type=int, help="the target's controller.quorum.election.timeout.ms")
    g.addoption("--target-fetch-timeout-ms", type=int, help="the target's controller.quorum.fetch.timeout.ms")
    g.addoption(
        "--target-broker-session-timeout-ms",
        type=int,
        help="the target's broker.session.timeout.ms (KIP-631; default: what the harness configures, 1500)",
    )
    g.addoption("--target-cmd", help="command template to launch the target: {config} {data_dir} {trace_file}")
    g.addoption("--target-image", help="container image of the target (needs Docker; testcontainers)")
    g.addoption(
        "--target-launcher",
        default="kraft_tck.reference.cli",
        help=("python module run with -m for the embedded target (tests use a fault-injecting launcher)"),
    )
    g.addoption("--trace-dir", help="write one harness trace per case here (spec/trace.schema.json)")
    g.addoption("--report", help="write an HTML report, results.json and per-case sequence diagrams here")
    g.addoption("--no-validate", action="store_true", help="do not schema-validate the written traces")
    g.addoption(
        "--no-tlc",
        action="store_true",
        help="do not validate the target's own node trace with TLC after the catalog (faster; on by default "
        "for targets the harness launches with --trace-file: the embedded node, --target-cmd)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("kraft-tck-report"):
        config.pluginmanager.register(ReportPlugin(config), "kraft-tck-report")


def _ports(raw: str | None, count: int, host: str) -> tuple[int, ...]:
    if raw is None:
        return free_ports(count, host)
    try:
        ports = tuple(int(p) for p in raw.split(",") if p.strip())
    except ValueError:
        raise pytest.UsageError(f"--harness-ports: expected comma-separated port numbers, got {raw!r}") from None
    if len(ports) != count:
        raise pytest.UsageError(f"--harness-ports: a quorum of {count + 1} needs {count} harness ports, got {raw!r}")
    return ports


def build_target(config: pytest.Config) -> tuple[Target, Timeouts]:
    opt = config.getoption
    n_virtual = int(opt("--quorum-size")) - 1
    host = str(opt("--harness-host"))
    address, cmd, image = opt("--target"), opt("--target-cmd"), opt("--target-image")
    if sum(x is not None for x in (cmd, image)) > 1:
        raise pytest.UsageError("--target-cmd and --target-image are alternatives; pass one")
    tp_host, tp_port = "127.0.0.1", 0
    if address:
        h, _, p = str(address).rpartition(":")
        if not h or not p.isdigit():
            raise pytest.UsageError(f"--target: expected host:port, got {address!r}")
        tp_host, tp_port = h, int(p)
    managed = cmd is not None or image is not None or address is None
    if managed and tp_port == 0:
        tp_port = free_port(tp_host)
    if not managed and opt("--harness-ports") is None:
        ports: tuple[int, ...] = tuple(19092 + i for i in range(n_virtual))
    else:
        ports = _ports(opt("--harness-ports"), n_virtual, host)
    layout = QuorumLayout(int(opt("--target-id")), tp_host, tp_port, host, ports)
    base = EMBEDDED_TIMEOUTS if managed else Timeouts(1000, 2000, 1000, 2000, 500, 9000)
    election = opt("--target-election-timeout-ms") or base.election_ms
    fetch = opt("--target-fetch-timeout-ms") or base.fetch_ms
    session = opt("--target-broker-session-timeout-ms") or base.broker_session_timeout_ms
    timeouts = Timeouts(
        election,
        fetch,
        base.election_backoff_max_ms,
        base.request_timeout_ms,
        min(base.fetch_max_wait_ms, fetch // 2),
        session,
    )
    cluster_id = opt("--cluster-id") or (DEFAULT_CLUSTER_ID if managed else None)
    target: Target
    if image is not None:
        target = ContainerTarget(layout, timeouts, cluster_id, image=str(image))
    elif cmd is not None:
        target = CommandTarget(layout, timeouts, cluster_id, template=str(cmd))
    elif address is not None:
        target = AddressTarget(layout, timeouts, cluster_id)
    else:
        target = EmbeddedTarget(layout, timeouts, cluster_id, launcher=str(opt("--target-launcher")))
    return target, timeouts


@pytest.fixture(scope="session")
def kraft_session(request: pytest.FixtureRequest) -> Iterator[Session]:
    config = request.config
    target, timeouts = build_target(config)
    if isinstance(target, ContainerTarget):
        reason = ContainerTarget.docker_unavailable_reason()
        if reason is not None:
            pytest.skip(reason)
    trace_dir = config.getoption("--trace-dir")
    report = config.getoption("--report")
    if trace_dir is None and report is not None:
        trace_dir = str(Path(report) / "traces")
    session = Session(
        target,
        timeouts,
        Path(trace_dir) if trace_dir else None,
        validate=not config.getoption("--no-validate"),
        tlc=not config.getoption("--no-tlc"),
    )
    config.stash[_SESSION_KEY] = session
    plugin = config.pluginmanager.get_plugin("kraft-tck-report")
    if isinstance(plugin, ReportPlugin):
        plugin.session = session
    try:
        session.start()
    except Exception:
        session.close()
        raise
    yield session
    session.close()


class TlcValidationFailed(Exception):
    """The target's node trace (or the session harness trace) is no behaviour of tla/KRaft.tla."""


class TlcValidationItem(pytest.Item):
    """The last item of a run: TLC validates the node trace the target wrote while the catalog ran
    (tla/TraceKRaft.tla in environment mode, the virtual voters being the environment). A FAIL fails
    the run and names the first event no behaviour of KRaft can produce and the spec state before it."""

    def runtest(self) -> None:
        session = self.config.stash.get(_SESSION_KEY, None)
        if session is None:
            pytest.skip("no conformance case ran, so there is no node trace to validate")
        result = session.validate_node_trace()
        if result.status in ("OFF", "UNAVAILABLE"):
            pytest.skip(f"TLC validation: {result.message}")
        if result.status == "NOT CHECKED":
            pytest.skip(f"TLC validation: NOT CHECKED: {result.message}")
        if result.status != "PASS":
            raise TlcValidationFailed(f"TLC validation of the target's node trace: FAIL\n{result.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if excinfo.errisinstance(TlcValidationFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(__file__), 0, self.name


class BlackBoxValidationItem(TlcValidationItem):
    """After the node trace: TLC in black-box mode on the session harness trace of each life of the target
    (every frame of every case and between cases, from the target's fresh start; the target's steps are
    hidden).  For any target, the embedded node and ``--target host:port`` alike.  A FAIL fails the run and
    names the case whose event no behaviour of KRaft can produce, the event and the spec state before it."""

    def runtest(self) -> None:
        session = self.config.stash.get(_SESSION_KEY, None)
        if session is None:
            pytest.skip("no conformance case ran, so there is no harness trace to validate")
        result = session.validate_session_traces()
        if result.status == "OFF":
            pytest.skip(f"TLC black-box validation: {result.message}")
        if result.status == "NOT CHECKED":
            pytest.skip(f"TLC black-box validation: NOT CHECKED: {result.message}")
        if result.status != "PASS":
            raise TlcValidationFailed(f"TLC black-box validation of the session harness trace: FAIL\n{result.message}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # after -k/-m deselection: only a run that has conformance cases left gets the validation item
    if any("kraft_session" in getattr(item, "fixturenames", ()) for item in items):
        items.append(TlcValidationItem.from_parent(session, name="TLC validation of the target's node trace"))
        items.append(
            BlackBoxValidationItem.from_parent(session, name="TLC black-box validation of the session harness trace")
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    # A conformance failure is a verdict, not a crash: show its text, not a Python traceback.
    if call.excinfo is not None and call.excinfo.errisinstance(ConformanceFailure) and report.failed:
        report.longrepr = str(call.excinfo.value)
    return report
