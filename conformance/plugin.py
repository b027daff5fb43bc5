"""pytest plugin of the conformance harness: ``pytest conformance --target=host:port``.

Loaded as the ``pytest11`` entry point ``kraft_tck`` wherever kraft-tck is installed (so
``pytest --pyargs kraft_tck.conformance --target-cmd ...`` knows its options from any directory), and by
``conformance/conftest.py`` when that entry point is not loaded.

With no ``--target``/``--target-cmd``/``--target-image`` the harness formats a directory with the cluster
id and launches the embedded reference node (``python -m kraft_tck.reference.cli node``) on a free
loopback port with the short test timeouts of ``EMBEDDED_TIMEOUTS`` (election 300 ms, fetch 600 ms,
broker session 1500 ms).

With pytest-xdist's ``-n N`` / ``-n auto`` the cases of a run against targets the harness launches (the
embedded node, ``--target-cmd``) spread over N workers, each with a target of its own: its own ports (a
stripe of the port range per worker), data directory, traces (``<trace dir>/gwK``) and TLC validation,
which each worker runs when its last case is done (``pytest_sessionfinish``) and hands to the controller
with its verdicts (``workeroutput``). The controller merges them into one verdict table, one HTML report
and, through ``pytest_runtest_logreport``, one JUnit file with a TLC item per worker. An external ``--target
host:port`` is one node: such a run stays serial and says so in one line (``serial_reason``).

A run that cannot test anything stops before the first case with one line and its own exit code
(``EXIT_*`` below; conformance/README.md "Exit codes"); a run in which no case ran exits non-zero.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from kraft_tck.conformance.blackbox import BlackBoxValidation
from kraft_tck.conformance.catalog import CatalogError, select_cases
from kraft_tck.conformance.report import ReportPlugin, WorkerResults
from kraft_tck.conformance.scenario import ConformanceFailure
from kraft_tck.conformance.schedule import make_scheduler, save_durations
from kraft_tck.conformance.security import SecurityConfigError, TargetSecurity
from kraft_tck.conformance.session import DEFAULT_CLUSTER_ID, Session, TlcValidation
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    PROFILE_NAMES,
    REFERENCE_LAUNCHER,
    AddressTarget,
    CommandTarget,
    ContainerTarget,
    EmbeddedTarget,
    ProfileError,
    QuorumLayout,
    Target,
    TargetError,
    TargetProfile,
    TargetUnreachable,
    Timeouts,
    free_port,
    free_ports,
    load_profile,
    probe_kafka,
)
from kraft_tck.conformance.virtual import HarnessError
from kraft_tck.tla.progress import Progress

#: Exit codes of a run that stopped or judged itself beyond pytest's own 0-5 (conformance/README.md).
EXIT_TARGET_UNREACHABLE = 6  # nothing listens, no Kafka ApiVersions answer, or a launched target did not start
EXIT_CLUSTER_ID_UNKNOWN = 7  # no --cluster-id and the target sent none (or null) within the wait
EXIT_NOTHING_TESTED = 8  # no case ran: all skipped, none selected, or --target-image without Docker
EXIT_STRICT = 9  # --strict: a case was skipped or differs from Kafka (and no case failed)

_SESSION_KEY = pytest.StashKey["Session"]()
_GATE_KEY = pytest.StashKey["Gate"]()


@dataclass
class Gate:
    """What the run selected and what came of it: the exit status is judged from this at the end."""

    #: the harness is in play: conformance cases were collected, or a harness option was given
    active: bool = False
    collected: int = 0
    selected: int = 0
    ran: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)
    verdict: str = ""
    closed: bool = False


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kraft-tck", "KRaft conformance harness")
    g.addoption("--target", help="host:port of a running node under test (omit: embedded reference node)")
    g.addoption("--target-id", type=int, default=1, help="node.id of the target (default 1)")
    g.addoption(
        "--cluster-id",
        help="the target's cluster id (default: the harness formats targets it launches with a fixed id, and "
        "learns the id of a --target from the first request it sends a virtual voter)",
    )
    g.addoption("--harness-host", default="127.0.0.1", help="address the virtual voters listen on")
    g.addoption("--harness-ports", help="comma-separated ports of the virtual voters, one per voter")
    g.addoption("--quorum-size", type=int, default=3, choices=(3, 5), help="voters including the target")
    g.addoption("--target-election-timeout-ms", type=int, help="the target's controller.quorum.election.timeout.ms")
    g.addoption("--target-fetch-timeout-ms", type=int, help="the target's controller.quorum.fetch.timeout.ms")
    g.addoption(
        "--target-broker-session-timeout-ms",
        type=int,
        help="the target's broker.session.timeout.ms (KIP-631; default: what the harness configures, 1500, or "
        "the profile's for --target)",
    )
    g.addoption(
        "--target-cmd", help="command template to launch the target: {config} {data_dir} {trace_file} {cluster_id}"
    )
    g.addoption("--target-image", help="container image of the target (needs Docker; testcontainers)")
    g.addoption(
        "--target-command-config",
        metavar="FILE",
        help="client properties for a secured target, as Kafka's tools take them (security.protocol=SSL or "
        "SASL_SSL, ssl.truststore.location, ssl.keystore.location, sasl.mechanism, sasl.jaas.config, ...); the "
        "virtual voters serve TLS and SASL with the same identity",
    )
    g.addoption(
        "--target-profile",
        help=f"what the target supports: {' or '.join(PROFILE_NAMES)} (shipped) or a YAML file "
        "(default: reference for the embedded node, kafka for any other target)",
    )
    g.addoption(
        "--case",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run the cases whose id matches (fnmatch, e.g. 'KIP-595/Vote/*'); repeatable",
    )
    g.addoption(
        "--section",
        action="append",
        default=[],
        metavar="NAME",
        help="run the cases of a catalog section (e.g. Vote, Divergence); repeatable; adds to --case",
    )
    g.addoption(
        "--target-launcher",
        default="kraft_tck.reference.cli",
        help=("python module run with -m for the embedded target (tests use a fault-injecting launcher)"),
    )
    g.addoption("--trace-dir", help="write one harness trace per case here (spec/trace.schema.json)")
    g.addoption("--report", help="write an HTML report, results.json and per-case sequence diagrams here")
    g.addoption("--no-validate", action="store_true", help="do not schema-validate the written traces")
    g.addoption(
        "--tlc-life-frames",
        type=int,
        default=DEFAULT_LIFE_FRAMES,
        metavar="N",
        help="a target the harness can restart starts a new life (a restart on a wiped directory, between cases) "
        "once the current one has exchanged N frames, and TLC validates the finished life in the background "
        f"while later cases run (default {DEFAULT_LIFE_FRAMES}; 0: new lives only after a failed case)",
    )
    g.addoption(
        "--tlc-batch-rows",
        type=int,
        default=Session.MIN_BACKGROUND_ROWS,
        metavar="N",
        help="while cases run, a background TLC run waits until the finished lives hold N rows (node trace lines "
        "and session trace rows) and takes them all in one run: each run's start-up costs about 0.65 CPU s, as "
        f"much as a thousand rows (default {Session.MIN_BACKGROUND_ROWS}; 0: a run as soon as a life ends)",
    )
    g.addoption(
        "--case-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long one case may run before it errors (default 30); the time the harness spends relaunching "
        "the target (kill -9 and start again) is not counted: raise it for a target whose timeouts are long",
    )
    g.addoption(
        "--no-tlc",
        action="store_true",
        help="do not validate the target's own node trace with TLC after the catalog (faster; on by default "
        "for targets the harness launches with --trace-file: the embedded node, --target-cmd)",
    )


#: ``--tlc-life-frames``: about a third of today's catalog per life, so that in a serial run TLC has taken two
#: lives by the time the last case ends (black-box TLC costs about 20 ms a row on a loaded 2-CPU machine).
DEFAULT_LIFE_FRAMES = 600

#: Options that make a run a harness run even when it collects no case (a typo'd path, say).
_HARNESS_OPTIONS = ("--target", "--target-cmd", "--target-image", "--target-profile", "--cluster-id", "--report",
                    "--target-command-config")


def strict(config: pytest.Config) -> bool:
    """pytest's own ``--strict`` (pytest 9: the ``strict`` ini option; pytest 8: an alias of
    --strict-markers): the harness also fails the run on a skipped case or a difference from Kafka."""
    try:
        return bool(config.getini("strict"))
    except (ValueError, KeyError):
        return bool(getattr(config.option, "strict", False))


def xdist_worker(config: pytest.Config) -> str | None:
    """This process's pytest-xdist worker id (``gw0``, ``gw1``, ...); None in a serial run and in the
    controller of a parallel one."""
    info = getattr(config, "workerinput", None)
    return str(info["workerid"]) if isinstance(info, dict) and "workerid" in info else None


def xdist_controller(config: pytest.Config) -> bool:
    """Is this the controller of a pytest-xdist run (``-n N`` with N >= 1), which runs no case itself?"""
    dist, tx = getattr(config.option, "dist", "no"), getattr(config.option, "tx", None)
    return xdist_worker(config) is None and dist != "no" and bool(tx)


def serial_reason(config: pytest.Config) -> str | None:
    """Why this run's cases cannot spread over several targets (None: they can, one target per worker)."""
    opt = config.getoption
    if opt("--target-image") is not None:
        return "--target-image: one container on the host network"
    if opt("--target") is not None and opt("--target-cmd") is None:
        return "--target host:port is one running node"
    if opt("--harness-ports") is not None:
        return "--harness-ports names the ports of one set of virtual voters"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # before pytest-xdist's own pytest_configure (trylast), which starts the workers
    if xdist_controller(config) and (reason := serial_reason(config)) is not None:
        config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0
        sys.stderr.write(f"kraft-tck: the cases run serially, -n ignored: {reason}\n")
    if not config.pluginmanager.has_plugin("kraft-tck-report"):
        config.pluginmanager.register(ReportPlugin(config), "kraft-tck-report")
    # Each case records case_id and clause as junit properties; pytest writes them with any junit_family
    # and only warns that xunit2 (its default) has no place for them.
    config.addinivalue_line("filterwarnings", "ignore:record_property is incompatible:pytest.PytestWarning")
    gate = Gate(active=any(config.getoption(o) for o in _HARNESS_OPTIONS) or bool(_selection(config)))
    config.stash[_GATE_KEY] = gate
    if config.getoption("--case") or config.getoption("--section"):
        try:
            select_cases(config.getoption("--case"), config.getoption("--section"))
        except CatalogError as exc:
            raise pytest.UsageError(str(exc)) from None
    if config.getoption("--target-profile"):
        try:
            load_profile(str(config.getoption("--target-profile")))
        except ProfileError as exc:
            raise pytest.UsageError(str(exc)) from None


def _selection(config: pytest.Config) -> list[str]:
    return [*config.getoption("--case"), *config.getoption("--section")]


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


def target_profile(config: pytest.Config, managed_embedded: bool) -> TargetProfile:
    """``--target-profile``, or ``reference`` for the embedded node and ``kafka`` for any other target."""
    raw = config.getoption("--target-profile") or ("reference" if managed_embedded else "kafka")
    try:
        return load_profile(str(raw))
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None


def build_target(config: pytest.Config) -> tuple[Target, Timeouts]:
    opt = config.getoption
    n_virtual = int(opt("--quorum-size")) - 1
    host = str(opt("--harness-host"))
    address, cmd, image = opt("--target"), opt("--target-cmd"), opt("--target-image")
    if sum(x is not None for x in (cmd, image)) > 1:
        raise pytest.UsageError("--target-cmd and --target-image are alternatives; pass one")
    # --target with --target-cmd / --target-image: the address the launched target listens on
    tp_host, tp_port = "127.0.0.1", 0
    if address:
        h, _, p = str(address).rpartition(":")
        if not h or not p.isdigit():
            raise pytest.UsageError(f"--target: expected host:port, got {address!r}")
        tp_host, tp_port = h, int(p)
    managed = cmd is not None or image is not None or address is None
    profile = target_profile(config, managed_embedded=managed and cmd is None and image is None)
    if managed and tp_port == 0:
        tp_port = free_port(tp_host)
    if not managed and opt("--harness-ports") is None:
        ports: tuple[int, ...] = tuple(19092 + i for i in range(n_virtual))
    else:
        ports = _ports(opt("--harness-ports"), n_virtual, host)
    layout = QuorumLayout(int(opt("--target-id")), tp_host, tp_port, host, ports)
    # A target the harness launches runs with the properties it writes (short timeouts); a --target runs
    # with whatever it was given, the profile's defaults unless the --target-*-timeout-ms options say.
    base = EMBEDDED_TIMEOUTS if managed else (profile.timeouts or Timeouts(1000, 2000, 1000, 2000, 500, 9000))
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
    try:
        if image is not None:
            target = ContainerTarget(layout, timeouts, cluster_id, image=str(image))
        elif cmd is not None:
            target = CommandTarget(layout, timeouts, cluster_id, template=str(cmd))
        elif address is not None:
            target = AddressTarget(layout, timeouts, cluster_id)
        else:
            target = EmbeddedTarget(layout, timeouts, cluster_id, launcher=str(opt("--target-launcher")))
    except TargetError as exc:
        raise pytest.UsageError(str(exc)) from None
    target.profile = profile
    command_config = opt("--target-command-config")
    if command_config is not None:
        try:
            target.security = TargetSecurity.from_file(Path(command_config))
            target.ssl  # noqa: B018 - load the keys now: a wrong password is a usage error, not a failed case
            if target.security.tls:
                target.security.server_context()
        except SecurityConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    return target, timeouts


def cluster_id_wait_s(t: Timeouts, check_quorum_factor: float = 1.0) -> float:
    """How long to wait for the first request of a --target carrying its ClusterId. The slowest start is
    a node still leading from an earlier session: it resigns after ``check_quorum_factor`` x its fetch
    timeout (Kafka: 1.5, the profile's ``check_quorum_timeout_factor``) and tells the voters with
    EndQuorumEpoch; a follower that lost its leader waits out the fetch timeout. Then (Kafka randomises
    it) up to twice the election timeout and the election backoff pass before it sends Vote to every
    voter, and a request timeout may pass before it reconnects to a virtual voter that was not listening
    yet; plus the harness's usual slack (250 ms + half the larger timeout).
    Kafka's defaults: 3 + 2 + 1 + 2 + 1.25 = 9.25 s."""
    slack = 250 + max(t.election_ms, t.fetch_ms) // 2
    first = t.fetch_ms * max(1.0, check_quorum_factor)
    return (first + 2 * t.election_ms + t.election_backoff_max_ms + t.request_timeout_ms + slack) / 1000


def _stop(config: pytest.Config, message: str, code: int) -> None:
    """Close the session (kill what the harness launched) and end the run with one line."""
    session = config.stash.get(_SESSION_KEY, None)
    if session is not None:
        _close(config, session)
    pytest.exit(f"kraft-tck: {message}", returncode=code)


def _close(config: pytest.Config, session: Session) -> None:
    gate = config.stash[_GATE_KEY]
    if not gate.closed:
        gate.closed = True
        session.close()


def _learn_cluster_id(config: pytest.Config, session: Session) -> None:
    """A --target without --cluster-id: it is a voter whose other voters are ours, so it sends them Vote
    (after its election timeout), Fetch or BeginQuorumEpoch, each carrying its ClusterId (KIP-595)."""
    target, frames = session.target, session.quorum.frames
    apis = ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch")
    profile = target.profile or load_profile("kafka")
    wait_s = cluster_id_wait_s(session.timeouts, profile.fact("check_quorum_timeout_factor", 1.0))
    t0 = time.monotonic()

    def carries(fr: Any) -> bool:
        return fr.src == target.node_id and fr.kind == "request" and fr.api in apis and "ClusterId" in fr.body

    fr = session.loop.run(frames.wait_for(carries, wait_s, 0), wait_s + 10)
    ports = ",".join(str(p) for p in target.layout.harness_ports)
    if fr is None:
        _stop(
            config,
            f"cluster id unknown: {target.describe()} sent the virtual voters (ports {ports}) no request carrying "
            f"its ClusterId within {wait_s:.1f} s; pass --cluster-id, or check its controller.quorum.voters names "
            "them (kraft-tck profile)",
            EXIT_CLUSTER_ID_UNKNOWN,
        )
    cid = fr.body.get("ClusterId")
    if not cid:
        _stop(
            config,
            f"cluster id unknown: {target.describe()} sent {fr.api} with ClusterId null; pass --cluster-id",
            EXIT_CLUSTER_ID_UNKNOWN,
        )
    target.cluster_id = session.quorum.cluster_id = str(cid)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(
            f"kraft-tck: cluster id {cid} learnt from the target's {fr.api} to v{fr.dst} "
            f"after {time.monotonic() - t0:.1f} s (pass --cluster-id to skip the wait)"
        )


def open_session(config: pytest.Config) -> Session:
    """Build the target, start the virtual voters and the target, check it answers as a Kafka
    controller, learn its cluster id if need be. Any of these failing ends the run (``_stop``)."""
    existing = config.stash.get(_SESSION_KEY, None)
    if existing is not None:
        return existing
    target, timeouts = build_target(config)
    if isinstance(target, ContainerTarget):
        reason = ContainerTarget.docker_unavailable_reason()
        if reason is not None:
            _stop(config, f"nothing tested: {reason}", EXIT_NOTHING_TESTED)
    if isinstance(target, AddressTarget):
        try:
            probe_kafka(target.host, target.port, ssl_context=target.ssl)
        except TargetUnreachable as exc:
            _stop(config, f"target unreachable: {exc}", EXIT_TARGET_UNREACHABLE)
    trace_dir = config.getoption("--trace-dir")
    report = config.getoption("--report")
    if trace_dir is None and report is not None:
        trace_dir = str(Path(report) / "traces")
    worker = xdist_worker(config)
    if trace_dir is not None and worker is not None:
        trace_dir = str(Path(trace_dir) / worker)  # each worker's target writes its own traces
    try:
        session = Session(
            target,
            timeouts,
            Path(trace_dir) if trace_dir else None,
            validate=not config.getoption("--no-validate"),
            tlc=not config.getoption("--no-tlc"),
            life_frames=max(0, int(config.getoption("--tlc-life-frames"))),
            batch_rows=max(0, int(config.getoption("--tlc-batch-rows"))),
            case_timeout_s=float(config.getoption("--case-timeout")),
        )
    except HarnessError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SESSION_KEY] = session
    plugin = config.pluginmanager.get_plugin("kraft-tck-report")
    if isinstance(plugin, ReportPlugin):
        plugin.session = session
    try:
        session.start()
        if not isinstance(target, AddressTarget):
            probe_kafka(target.host, target.port, ssl_context=target.ssl)
    except TargetError as exc:
        first, _, rest = str(exc).partition("\n")
        tail = ("\n" + rest) if rest.strip() else ""
        _stop(config, f"target unreachable: {first}{tail}", EXIT_TARGET_UNREACHABLE)
    except BaseException:
        _close(config, session)
        raise
    if target.cluster_id is None:
        _learn_cluster_id(config, session)
    return session


@pytest.fixture(scope="session")
def kraft_session(request: pytest.FixtureRequest) -> Iterator[Session]:
    session = open_session(request.config)
    yield session
    if xdist_worker(request.config) is None:
        _close(request.config, session)
    # an xdist worker tears its session-scoped fixtures down before pytest_sessionfinish, where it still
    # validates its target's traces: _finish_worker closes the session after that


def _case_id(item: pytest.Item) -> str | None:
    fn = getattr(item, "function", None)
    cid = getattr(fn, "case_id", None)
    return cid if isinstance(cid, str) else None


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
        with self._progress("TLC validation of the target's node trace"):
            result = session.validate_node_trace()
        if result.status in ("OFF", "UNAVAILABLE"):
            pytest.skip(f"TLC validation: {result.message}")
        if result.status == "NOT CHECKED":
            pytest.skip(f"TLC validation: NOT CHECKED: {result.message}")
        if result.status != "PASS":
            raise TlcValidationFailed(f"TLC validation of the target's node trace: FAIL\n{result.message}")

    @contextlib.contextmanager
    def _progress(self, label: str) -> Iterator[None]:
        """A line every few seconds while TLC works (it takes tens of seconds and pytest shows nothing
        meanwhile), written past pytest's output capture to the terminal or CI log."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            yield
            return

        def write(line: str) -> None:
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                reporter.write_line(line)

        with Progress(label, write=write):
            yield

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
        with self._progress("TLC black-box validation of the session harness traces"):
            result = session.validate_session_traces()
        if result.status == "OFF":
            pytest.skip(f"TLC black-box validation: {result.message}")
        if result.status == "NOT CHECKED":
            pytest.skip(f"TLC black-box validation: NOT CHECKED: {result.message}")
        if result.status != "PASS":
            raise TlcValidationFailed(f"TLC black-box validation of the session harness trace: FAIL\n{result.message}")


def pytest_itemcollected(item: pytest.Item) -> None:
    # before -k/-m deselection: a run whose cases were all deselected is a harness run that tested nothing
    if _case_id(item) is not None:
        gate = item.config.stash[_GATE_KEY]
        gate.collected += 1
        gate.active = True


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    gate = config.stash[_GATE_KEY]
    cases = [item for item in items if _case_id(item) is not None]
    if _selection(config):
        chosen = select_cases(config.getoption("--case"), config.getoption("--section"))
        drop = [item for item in cases if _case_id(item) not in chosen]
        if drop:
            config.hook.pytest_deselected(items=drop)
            dropped = set(map(id, drop))
            items[:] = [item for item in items if id(item) not in dropped]
    gate.selected = sum(1 for item in items if _case_id(item) is not None)
    # after -k/-m deselection: only a run that has conformance cases left gets the validation item; an
    # xdist worker validates its own target's traces after its last case instead (_finish_worker): the
    # controller would hand an item at the end to one worker only
    if xdist_worker(config) is None and any("kraft_session" in getattr(item, "fixturenames", ()) for item in items):
        items.append(TlcValidationItem.from_parent(session, name="TLC validation of the target's node trace"))
        items.append(
            BlackBoxValidationItem.from_parent(session, name="TLC black-box validation of the session harness trace")
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Before the first case: start the target and check it can be tested at all (``open_session``), so
    a wrong address or a missing cluster id is one line and an exit code, not an error per case."""
    config = session.config
    if config.option.collectonly or session.testsfailed or not config.stash[_GATE_KEY].selected:
        return
    if any("kraft_session" in getattr(item, "fixturenames", ()) for item in session.items):
        open_session(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    # A conformance failure is a verdict, not a crash: show its text, not a Python traceback.
    if call.excinfo is not None and call.excinfo.errisinstance(ConformanceFailure) and report.failed:
        report.longrepr = str(call.excinfo.value)
    cid = _case_id(item)
    gate = item.config.stash.get(_GATE_KEY, None)
    if cid is not None and gate is not None:
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            gate.skipped[cid] = str(reason).removeprefix("Skipped: ")
        elif report.when == "call" or report.failed:
            gate.ran.add(cid)
    return report


def _verdict(config: pytest.Config, exitstatus: int) -> tuple[int, str] | None:
    """The gate's own exit status, when pytest's would let a run that tested nothing (or, with
    --strict, skipped a case or differs from Kafka) pass."""
    gate = config.stash.get(_GATE_KEY, None)
    passing = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if gate is None or not gate.active or config.option.collectonly or exitstatus not in passing:
        return None
    if not gate.ran:
        if gate.collected == 0:
            why = "no conformance case was collected (pytest conformance, or pytest --pyargs kraft_tck.conformance)"
        elif gate.selected == 0:
            why = f"none of the {gate.collected} collected cases was selected (--case/--section/-k/-m)"
        else:
            first = next(iter(gate.skipped.items()), None)
            why = f"all {gate.selected} selected case(s) were skipped" + (f"; first: {first[1]}" if first else "")
        return EXIT_NOTHING_TESTED, f"kraft-tck: nothing tested: {why}"
    if strict(config):
        problems: list[str] = []
        if gate.skipped:
            reason = next(iter(gate.skipped.values()))
            problems.append(f"{len(gate.skipped)} case(s) skipped (first: {reason})")
        plugin = config.pluginmanager.get_plugin("kraft-tck-report")
        results = plugin.results() if isinstance(plugin, ReportPlugin) else []
        differs = [r.case.id for r in results if getattr(r, "kafka_differences", None)]
        if differs:
            problems.append(f"{len(differs)} case(s) differ from Kafka ({', '.join(differs)})")
        if problems:
            return EXIT_STRICT, f"kraft-tck: --strict: {'; '.join(problems)}"
    return None


#: The key of the harness's share of a worker's ``workeroutput``.
WORKER_OUTPUT = "kraft_tck"


def _finish_worker(config: pytest.Config) -> None:
    """In an xdist worker after its last case: TLC on its target's traces (node trace and session harness
    traces at once), then its verdicts, TLC results and gate counts to the controller (``workeroutput``)."""
    gate = config.stash[_GATE_KEY]
    out: dict[str, Any] = {
        "worker": xdist_worker(config),
        "gate": {"active": gate.active, "collected": gate.collected, "selected": gate.selected,
                 "ran": sorted(gate.ran), "skipped": gate.skipped},
    }  # fmt: skip
    session = config.stash.get(_SESSION_KEY, None)
    if session is not None:
        try:
            node, blackbox = session.validate_all()
        except Exception as exc:  # a verdict for the controller, not a lost worker
            why = f"TLC validation could not run: {type(exc).__name__}: {exc}"
            node, blackbox = TlcValidation("FAIL", why), BlackBoxValidation("FAIL", why)
        out["results"] = [r.to_json() for r in session.results.values()]
        out["target"] = session.target.describe()
        out["targetId"] = session.target.node_id
        out["tlc"] = node.to_json()
        out["blackbox"] = blackbox.to_json()
        _close(config, session)
    config.workeroutput[WORKER_OUTPUT] = out  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The controller of an xdist run: a worker is done. Its TLC validations become test reports (the
    terminal, the exit status and --junitxml count them as items), its verdicts join the report's."""
    config: pytest.Config = node.config
    out = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if not out:
        return
    gate = config.stash[_GATE_KEY]
    g = out["gate"]
    gate.active = gate.active or g["active"]
    gate.collected, gate.selected = max(gate.collected, g["collected"]), max(gate.selected, g["selected"])
    gate.ran.update(g["ran"])
    gate.skipped.update(g["skipped"])
    plugin = config.pluginmanager.get_plugin("kraft-tck-report")
    if "results" not in out or not isinstance(plugin, ReportPlugin):
        return
    worker = WorkerResults.from_json(out)
    plugin.add_worker(worker)
    for name, status, message in worker.validation_items():
        _log_item(config, f"{name} [{worker.worker}]", status, message)


def _log_item(config: pytest.Config, name: str, status: str, message: str) -> None:
    """A test report for an item the controller did not run itself (a worker's TLC validation)."""
    outcome: Literal["passed", "failed", "skipped"] = (
        "passed" if status == "PASS" else "failed" if status == "FAIL" else "skipped"
    )
    longrepr: Any = None
    if outcome == "failed":
        longrepr = message
    elif outcome == "skipped":
        longrepr = (str(Path(__file__)), 0, f"Skipped: {message}")
    for when in ("setup", "call", "teardown"):
        report = pytest.TestReport(
            nodeid=name, location=(str(Path(__file__).name), 0, name), keywords={name: 1},
            outcome=outcome if when == "call" else "passed", longrepr=longrepr if when == "call" else None,
            when=when, sections=[], duration=0.0,
        )  # fmt: skip
        if when == "setup" and outcome == "skipped":
            report.outcome, report.longrepr = "skipped", longrepr
            config.hook.pytest_runtest_logreport(report=report)
            break
        config.hook.pytest_runtest_logreport(report=report)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if xdist_worker(config) is not None:
        _finish_worker(config)
        return  # the controller judges the run from every worker's share
    verdict = _verdict(config, int(exitstatus))
    if verdict is not None:
        session.exitstatus, config.stash[_GATE_KEY].verdict = verdict
    plugin = config.pluginmanager.get_plugin("kraft-tck-report")
    if isinstance(plugin, ReportPlugin) and _case_times_kept(config):
        # what the next parallel run's scheduler expects of each case (a failed case's time says little)
        save_durations({r.case.id: r.duration_s for r in plugin.results() if r.outcome in ("passed", "skipped")})


def _case_times_kept(config: pytest.Config) -> bool:
    """Are this run's case times worth keeping for the scheduler: the embedded reference node, no fault launcher?"""
    return not any(config.getoption(o) for o in ("--target", "--target-cmd", "--target-image")) and (
        config.getoption("--target-launcher") == REFERENCE_LAUNCHER
    )


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n N``: the catalog's cases longest first, in units that share a target (conformance/schedule.py)."""
    return make_scheduler(config, log)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE_KEY, None)
    if gate is not None and gate.verdict:
        terminalreporter.write_line(gate.verdict, red=True, bold=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is not None:
        _close(config, session)
