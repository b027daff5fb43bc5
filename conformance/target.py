"""Target adapters: how the harness reaches, launches, kills (-9) and restarts the node under test.

* ``AddressTarget`` — an already running node at host:port (``--target``). It cannot be restarted, so
  scenarios that need a restart (durable vote, bootstrap without a cluster id) are skipped, saying so.
* ``CommandTarget`` — ``--target-cmd``: a command-line template with ``{config}``, ``{data_dir}``,
  ``{trace_file}`` and ``{cluster_id}`` placeholders; the harness writes the properties, launches it,
  ``kill -9``s it and launches it again on the same data directory. Formatting the directory is the
  command's job (e.g. ``sh -c "kraft-tck format ... && exec kraft-tck node ..."``).
* ``EmbeddedTarget`` — no ``--target``: the reference node as a subprocess
  (``python -m kraft_tck.reference.cli node``), its directory formatted with the cluster id first.
* ``ContainerTarget`` — ``--target-image``: a container (testcontainers) on the host network with the
  properties mounted at ``/etc/kraft/server.properties`` and the data directory at ``/var/lib/kraft``.

Every adapter renders the same Kafka properties (``target_properties``), which ``kraft-tck profile``
prints for people who start their node by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import select
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from ssl import SSLContext
from typing import IO

import tenacity
from kraft_tck.conformance.security import Login, TargetSecurity, authenticate_stream


class TargetError(RuntimeError):
    """The target could not be launched or reached; the message says what to check."""


class RestartUnsupported(TargetError):
    """This adapter cannot restart its target (an address-only target)."""


class TargetUnreachable(TargetError):
    """Nothing answers at the target's address as a Kafka controller does (the message is one line)."""


# ---------------------------------------------------------------------------------------------- profiles

#: The capabilities a target profile can state (spec/target-profiles/*.yaml, ``capabilities:``).
CAPABILITIES: dict[str, str] = {
    "restart": "the harness can kill -9 the target and launch it again on the same directory",
    "unformatted-start": "the target starts without a cluster id and its first leader generates one "
    '(KIP-595 "Cluster Bootstrapping"); Kafka refuses to start unformatted',
    "broker-rpcs": "the target handles BrokerRegistration / BrokerHeartbeat (KIP-631)",
    "observer": "the harness can relaunch the target as an observer: process.roles=broker, its id not in "
    "controller.quorum.voters, the same listener (KIP-595 observers)",
    "snapshots": "the target writes snapshots of its committed log and cleans the log below them (KIP-630), sooner "
    "when launched with the profile's snapshot_properties",
    "dynamic-quorum": "the target runs a KIP-853 dynamic quorum: formatted with --initial-controllers "
    "(kafka-storage format), it finds the quorum through controller.quorum.bootstrap.servers and serves "
    "AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (api keys 80-82; Kafka 3.9+)",
}
#: The shipped profiles (``--target-profile NAME``); any other value is a YAML file path.
PROFILE_NAMES = ("kafka", "reference")


class ProfileError(ValueError):
    """A malformed target profile: the message names the file and the problem."""


@dataclass(frozen=True)
class TargetProfile:
    """What a target supports (capabilities) and the facts the harness needs about it: its timing
    factors and the timeouts it runs with when nobody configured them (assumed for ``--target``)."""

    name: str
    source: str
    description: str = ""
    capabilities: frozenset[str] = frozenset()
    facts: dict[str, float | int | str] = field(default_factory=dict)
    timeouts: Timeouts | None = None
    #: Kafka properties that make the target snapshot and clean its log soon (KIP-630), written into the
    #: properties of a target the harness launches for the snapshot cases (``snapshot_properties:``)
    snapshot_properties: dict[str, str] = field(default_factory=dict)

    def supports(self, capability: str) -> bool:
        if capability not in CAPABILITIES:
            raise ProfileError(f"unknown capability {capability!r}; known: {', '.join(CAPABILITIES)}")
        return capability in self.capabilities

    def fact(self, name: str, default: float) -> float:
        value = self.facts.get(name, default)
        return float(value)


def profiles_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("kraft_tck.spec").joinpath("target-profiles")))


def load_profile(name_or_path: str) -> TargetProfile:
    """A shipped profile by name (``kafka``, ``reference``) or a YAML file."""
    import yaml

    path = profiles_dir() / f"{name_or_path}.yaml" if name_or_path in PROFILE_NAMES else Path(name_or_path)
    if not path.is_file():
        raise ProfileError(
            f"--target-profile {name_or_path!r}: no such file; pass {' or '.join(PROFILE_NAMES)} or a YAML file"
        )
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: expected a mapping with name, capabilities, facts, timeouts")
    caps = doc.get("capabilities") or {}
    if not isinstance(caps, dict) or not all(isinstance(v, bool) for v in caps.values()):
        raise ProfileError(f"{path}: capabilities must map capability names to true/false, got {caps!r}")
    unknown = sorted(set(caps) - set(CAPABILITIES))
    if unknown:
        raise ProfileError(f"{path}: unknown capability {unknown[0]!r}; known: {', '.join(CAPABILITIES)}")
    facts = doc.get("facts") or {}
    if not isinstance(facts, dict):
        raise ProfileError(f"{path}: facts must be a mapping, got {facts!r}")
    raw_t = doc.get("timeouts")
    timeouts = None
    if raw_t is not None:
        names = set(Timeouts.__dataclass_fields__)
        if (
            not isinstance(raw_t, dict)
            or not set(raw_t) <= names
            or not all(isinstance(v, int) and v > 0 for v in raw_t.values())
        ):
            raise ProfileError(f"{path}: timeouts must map some of {sorted(names)} to positive integers (ms)")
        timeouts = Timeouts(**raw_t)
    snap = doc.get("snapshot_properties") or {}
    scalar = (str, int)
    if not isinstance(snap, dict) or not all(isinstance(v, scalar) and not isinstance(v, bool) for v in snap.values()):
        raise ProfileError(f"{path}: snapshot_properties must map Kafka property names to values, got {snap!r}")
    return TargetProfile(
        name=str(doc.get("name") or path.stem),
        source=str(path) if name_or_path not in PROFILE_NAMES else name_or_path,
        description=str(doc.get("description", "")),
        capabilities=frozenset(k for k, v in caps.items() if v),
        facts=dict(facts),
        timeouts=timeouts,
        snapshot_properties={str(k): str(v) for k, v in snap.items()},
    )


@dataclass(frozen=True)
class Timeouts:
    """The target's protocol timeouts in milliseconds (Kafka names in ``target_properties``)."""

    election_ms: int = 300
    fetch_ms: int = 600
    election_backoff_max_ms: int = 100
    request_timeout_ms: int = 500
    fetch_max_wait_ms: int = 150
    #: KIP-631 broker.session.timeout.ms: short, so the session-expiry case waits ~1.5 s, not Kafka's 9 s.
    broker_session_timeout_ms: int = 1500


#: The embedded reference node's test timeouts: short enough for the whole catalog in well under a
#: minute, long enough that a loaded 2-core CI machine does not trip elections by accident.
EMBEDDED_TIMEOUTS = Timeouts()


@dataclass(frozen=True)
class QuorumLayout:
    """Who is who: the target's id and address, and the virtual voters' ids and ports."""

    target_id: int
    target_host: str
    target_port: int
    harness_host: str
    harness_ports: tuple[int, ...]

    @property
    def virtual_ids(self) -> list[int]:
        """Virtual voter ids: the ids right after the target's, one per harness port (1 → 2, 3)."""
        return [self.target_id + 1 + i for i in range(len(self.harness_ports))]

    def voters(self) -> dict[int, tuple[str, int]]:
        out = {self.target_id: (self.target_host, self.target_port)}
        out.update(
            {vid: (self.harness_host, port) for vid, port in zip(self.virtual_ids, self.harness_ports, strict=True)}
        )
        return dict(sorted(out.items()))


@dataclass(frozen=True)
class DynamicQuorum:
    """A KIP-853 dynamic quorum to format the target with: ``kafka-storage format --initial-controllers`` with
    these voters (id -> (host, port, directory id as Kafka's Uuid string)); the target then finds the quorum
    through ``controller.quorum.bootstrap.servers`` (every voter's endpoint), not controller.quorum.voters."""

    voters: tuple[tuple[int, str, int, str], ...]
    #: the target alone, formatted ``--standalone`` (Kafka's StorageTool: itself as the only voter, on its first
    #: controller listener, with a directory id of its own); a template's {initial_controllers} gets the same
    #: voter as ``id@host:port:dirId``, which formats the same quorum
    standalone: bool = False

    @property
    def initial_controllers(self) -> str:
        """Kafka's --initial-controllers value: ``id@host:port:directoryId,...`` (DynamicVoters.parse)."""
        return ",".join(f"{vid}@{host}:{port}:{dir_id}" for vid, host, port, dir_id in self.voters)

    def bootstrap_servers_except(self, node_id: int) -> str:
        """controller.quorum.bootstrap.servers: every voter's endpoint but ``node_id``'s (all when it is none)."""
        others = [(h, p) for vid, h, p, _d in self.voters if vid != node_id] or [(h, p) for _v, h, p, _d in self.voters]
        return ",".join(f"{host}:{port}" for host, port in others)


def target_properties(
    layout: QuorumLayout, timeouts: Timeouts, data_dir: str | Path, observer: bool = False,
    dynamic: DynamicQuorum | None = None,
) -> dict[str, str]:
    """The Kafka controller properties the target needs to join the harness's quorum (``observer``: as an
    observer, its id left out of controller.quorum.voters and process.roles=broker; ``dynamic``: a KIP-853
    dynamic quorum, controller.quorum.bootstrap.servers in place of controller.quorum.voters)."""
    voters = ",".join(
        f"{vid}@{host}:{port}" for vid, (host, port) in layout.voters().items()
        if not (observer and vid == layout.target_id)
    )
    quorum = (  # the bootstrap servers are the other voters (the harness's), as a joining controller is told
        {"controller.quorum.bootstrap.servers": dynamic.bootstrap_servers_except(layout.target_id)}
        if dynamic is not None else {"controller.quorum.voters": voters}
    )
    return {
        "node.id": str(layout.target_id),
        "process.roles": "broker" if observer else "controller",
        "listeners": f"CONTROLLER://{layout.target_host}:{layout.target_port}",
        "controller.listener.names": "CONTROLLER",
        **quorum,
        "log.dirs": str(data_dir),
        "controller.quorum.election.timeout.ms": str(timeouts.election_ms),
        "controller.quorum.fetch.timeout.ms": str(timeouts.fetch_ms),
        "controller.quorum.election.backoff.max.ms": str(timeouts.election_backoff_max_ms),
        "controller.quorum.request.timeout.ms": str(timeouts.request_timeout_ms),
        "controller.quorum.fetch.max.wait.ms": str(timeouts.fetch_max_wait_ms),
        "broker.session.timeout.ms": str(timeouts.broker_session_timeout_ms),
    }


def render_properties(props: Mapping[str, object], header: str | None = None) -> str:
    """Java ``.properties`` text (``java.util.Properties.load`` reads it back): one ``key=value`` line per
    entry in order, ``header`` as leading ``#`` comment lines. Backslashes and line breaks are escaped in
    keys and values; ``=``, ``:`` and blanks in keys; a value's leading blank (``load`` would strip it)."""
    breaks = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}

    def escape(text: str, key: bool) -> str:
        out = []
        for i, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch in breaks:
                out.append(breaks[ch])
            elif (key and ch in "=: ") or (i == 0 and (ch == " " or (key and ch in "#!"))):
                out.append("\\" + ch)
            else:
                out.append(ch)
        return "".join(out)

    def value(v: object) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, list | tuple):
            return ",".join(value(x) for x in v)
        return str(v)

    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    lines += [f"{escape(str(k), True)}={escape(value(v), False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def _ephemeral_floor() -> int:
    """Where the kernel starts handing out ports to outgoing connections (Linux ``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive ports free on ``host``, below the ephemeral range (a port found
    free inside it can be taken by any outgoing connection's local end before a listener binds it)."""
    top = _ephemeral_floor() - count
    low, high = (10000, top) if top > 11000 else (20000, 60000 - count)
    low, high = worker_stripe(low, high)
    for _ in range(200):
        base = random.randint(low, high)
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise TargetError(f"no {count} consecutive free ports on {host} between {low} and {high + count}")


def worker_stripe(low: int, high: int) -> tuple[int, int]:
    """The share of the port range ``low..high`` of this pytest-xdist worker (``-n N``: worker ``gwK`` of N
    takes the K-th of N equal stripes), so that two workers never pick the same free port for their targets
    and virtual voters between finding it free and binding it; the whole range outside xdist."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw") or not worker[2:].isdigit() or not count.isdigit() or int(count) < 2:
        return low, high
    k, n = int(worker[2:]), int(count)
    width = (high - low) // n
    return low + (k % n) * width, low + (k % n + 1) * width - 16  # a base leaves room for its ports


def free_port(host: str = "127.0.0.1") -> int:
    # Not port 0: the kernel would pick from the ephemeral range, where the target's own outgoing
    # connections can take the port before the virtual voter listens on it.
    return free_base_port(1, host)


def free_ports(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
    """``count`` distinct free ports on ``host``, outside the ephemeral range."""
    base = free_base_port(count, host)
    return tuple(range(base, base + count))


def wait_listening(
    host: str, port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None, log_path: Path | None = None
) -> None:
    """Poll until a TCP connect succeeds; fail early (with the process's output) if it exits."""

    def listening() -> bool:
        if proc is not None and proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path and log_path.exists() else ""
            raise TargetError(  # not retried: tenacity retries on a False answer only
                f"the target exited with status {proc.returncode} before listening on "
                f"{host}:{port}; its output:\n{tail}"
            )
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return True
        return False

    if not tenacity.Retrying(stop=tenacity.stop_after_delay(timeout_s), wait=tenacity.wait_fixed(0.02),
                             retry=tenacity.retry_if_result(lambda up: not up),
                             retry_error_callback=lambda _state: False)(listening):
        raise TargetError(f"nothing listens on {host}:{port} after {timeout_s:.0f} s; is the target up?")


#: Kafka's api key of Vote (KIP-595): a KRaft controller listener offers it, a broker listener does not.
VOTE_API_KEY = 52


def probe_kafka(host: str, port: int, timeout_s: float = 5.0,
                ssl_context: SSLContext | None = None) -> dict[int, tuple[int, int]]:
    """Ask ``host:port`` for its ApiVersions (v0: every Kafka version answers it, KIP-511) and return the
    api key ranges; ``TargetUnreachable`` (one line) when nothing listens, the answer is not Kafka's, or
    the listener does not offer Vote (a broker listener, say, rather than the controller listener)."""
    import struct

    from kraft_tck.spec import codec

    where = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        raise TargetUnreachable(
            f"nothing listens on {where} (connection refused): start the target, or fix --target "
            "(its controller listener, listeners=CONTROLLER://host:port)"
        ) from None
    except TimeoutError:
        raise TargetUnreachable(
            f"no TCP answer from {where} within {timeout_s:.0f} s: is the host right and the port open?"
        ) from None
    except OSError as exc:
        raise TargetUnreachable(f"cannot connect to {where}: {exc}; check --target") from None
    not_kafka = (
        f"{where} accepts connections but does not answer ApiVersions as Kafka does"
        " (is it the controller listener of a KRaft node?"
        + (")" if ssl_context is not None else " If it serves TLS, pass --target-command-config.)")
    )
    if ssl_context is not None:
        try:
            sock.settimeout(timeout_s)
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise TargetUnreachable(
                f"TLS handshake with {where} failed: {exc}; check --target-command-config (the truststore "
                "must hold the CA of the target's certificate, the keystore a certificate the target trusts)"
            ) from None
    try:
        with sock:
            sock.settimeout(timeout_s)
            sock.sendall(codec.encode_request(18, 0, 7331, "kraft-tck-probe", {}))
            head = _recv_exactly(sock, 4)
            (size,) = struct.unpack(">i", head)
            if not 4 <= size <= 1 << 20:
                raise TargetUnreachable(f"{not_kafka}: it answered a frame of {size} bytes")
            corr, body = codec.decode_response(18, 0, _recv_exactly(sock, size))
    except TargetUnreachable:
        raise
    except TimeoutError:
        raise TargetUnreachable(f"{not_kafka}: no answer within {timeout_s:.0f} s") from None
    except (OSError, EOFError) as exc:
        raise TargetUnreachable(f"{not_kafka}: {exc or type(exc).__name__}") from None
    except Exception as exc:  # a decode error: the bytes are not an ApiVersions response
        raise TargetUnreachable(f"{not_kafka}: undecodable answer ({type(exc).__name__})") from None
    if corr != 7331:
        raise TargetUnreachable(f"{not_kafka}: the answer carries correlation id {corr}, not ours (7331)")
    ranges = {int(k["ApiKey"]): (int(k["MinVersion"]), int(k["MaxVersion"])) for k in body.get("ApiKeys") or []}
    if VOTE_API_KEY not in ranges:
        raise TargetUnreachable(
            f"{where} answers ApiVersions but does not offer Vote (api key 52): it is not a KRaft controller "
            "listener (a broker listener?); point --target at the listener named in controller.listener.names"
        )
    return ranges


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the connection was closed without an answer")
        buf += chunk
    return buf


@dataclass
class Target:
    layout: QuorumLayout
    timeouts: Timeouts
    cluster_id: str | None
    can_restart: bool = False
    trace_files: list[Path] = field(default_factory=list)
    #: ``trace_files`` grouped by life: a new group starts at each launch on a fresh (wiped) directory,
    #: the launches in one group are restarts of one node with its durable state (kill -9)
    trace_lives: list[list[Path]] = field(default_factory=list)
    #: Called at each restart after the old process is dead and before the new one starts, with whether
    #: the directory was wiped (a new life of the target) or kept (kill -9: the same life goes on); the
    #: session marks its frame log there.
    on_restart: Callable[[bool], None] | None = None
    #: What the target supports (``--target-profile``); None: the shipped ``reference`` profile.
    profile: TargetProfile | None = None
    #: How to reach a secured target (``--target-command-config``); None: plaintext.
    security: TargetSecurity | None = None
    #: Launch it as an observer (``target_properties``): a case sets this around a relaunch, then clears it.
    observer: bool = False
    #: More properties for the next launches (e.g. the profile's snapshot_properties): a case sets them around
    #: a relaunch, then clears them.
    extra_properties: dict[str, str] = field(default_factory=dict)
    #: Lives (wiped launches, counted from 0) that TLC does not validate: the tla/ models describe a voter
    #: target, so a life run as an observer is judged by its case alone.
    unmodelled_lives: set[int] = field(default_factory=set)
    #: Lives the black-box TLC check skips (the node's own trace is still validated): a leader killed the
    #: instant its answer left it can have a heartbeat of its old epoch read by the harness only after the
    #: relaunch, which the black-box model has no step for yet (KIP-595/CrashWindow/3).
    blackbox_unmodelled_lives: set[int] = field(default_factory=set)
    #: Life -> index into the session log where traffic the black-box model has no steps for begins, in a life
    #: shared with other cases (a target the harness cannot relaunch): that life is checked up to there.
    blackbox_cut_at: dict[int, int] = field(default_factory=dict)
    #: KIP-853: format the next fresh launches as this dynamic quorum (None: a static controller.quorum.voters); a
    #: case sets it around a relaunch on a wiped directory, and the reconfiguration module clears it when done
    dynamic: DynamicQuorum | None = None
    #: the quorum the current life was formatted with (None: static) and whether no case has changed its voter set
    #: yet (a fresh launch sets both): cases that leave the set as it was share one life
    life_dynamic: DynamicQuorum | None = None
    life_clean: bool = True
    #: the case that ran last is done with the current life (``Scenario.retire_life``): no later case may run in it;
    #: the next wiped relaunch clears it (and the harness forgets the log it served that life)
    retired: bool = False
    _ssl: SSLContext | None = field(default=None, init=False, repr=False)

    def capability_missing(self, capability: str) -> str | None:
        """Why this target lacks ``capability`` (naming the profile and what to pass), or None."""
        profile = self.profile or load_profile("reference")
        if not profile.supports(capability):
            return (
                f"the target profile {profile.name!r} ({profile.source}) says the target does not support it; "
                f"if yours does, pass --target-profile FILE with '{capability}: true' under capabilities"
            )
        if capability in ("restart", "observer") and not self.can_restart:
            return (
                f"{self.describe()} was given by address, so the harness cannot kill -9 and relaunch it "
                f"(profile {profile.name!r}); pass --target-cmd or --target-image (or run without --target "
                "for the embedded reference node)"
            )
        return None

    def restarted(self, wiped: bool) -> None:
        if self.on_restart is not None:
            self.on_restart(wiped)

    @property
    def node_id(self) -> int:
        return self.layout.target_id

    @property
    def host(self) -> str:
        return self.layout.target_host

    @property
    def port(self) -> int:
        return self.layout.target_port

    @property
    def ssl(self) -> SSLContext | None:
        """The TLS context of every connection to the target (None: plaintext), made once."""
        if self._ssl is None and self.security is not None and self.security.tls:
            self._ssl = self.security.client_context()
        return self._ssl

    @property
    def sasl(self) -> Login | None:
        """The SASL login of every connection to the target (None: no SASL)."""
        return self.security.login if self.security is not None else None

    async def open_connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A raw connection to the target, over TLS when it is secured and logged in when it speaks SASL (for
        cases that send raw bytes)."""
        ctx = self.ssl
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=ctx,
                                                       server_hostname=self.host if ctx else None)
        if self.sasl is not None:
            await authenticate_stream(reader, writer, self.sasl, f"{self.host}:{self.port}", 10.0)
        return reader, writer

    def describe(self) -> str:
        secured = "SASL_SSL" if self.ssl and self.sasl else "TLS" if self.ssl else "SASL" if self.sasl else ""
        return f"node {self.node_id} at {self.host}:{self.port}" + (f" ({secured})" if secured else "")

    def start(self) -> None:
        wait_listening(self.host, self.port, 10)

    def stop(self) -> None:
        """Leave the target as it is (address-only targets belong to someone else)."""

    def kill(self) -> None:
        raise RestartUnsupported(
            f"{self.describe()} was given by address; pass --target-cmd or "
            "--target-image so the harness can kill -9 and restart it"
        )

    def restart(self, wipe: bool = False, formatted: bool = True) -> None:
        self.kill()

    def exited(self) -> bool:
        """Is the target's process known to have exited (a launched node that halted)? False when the harness
        cannot tell (a target given by address)."""
        return False

    def output_tail(self, chars: int = 2000) -> str:
        return ""

    def collect(self, into: Path | None) -> None:
        """Keep whatever the adapter produced (nothing for an address-only target)."""


class AddressTarget(Target):
    pass


@dataclass
class CommandTarget(Target):
    """Launches ``template`` (placeholders {config} {data_dir} {trace_file}) and owns the process."""

    template: str = ""
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kraft-tck-target-")))
    start_timeout_s: float = 20.0
    proc: subprocess.Popen[bytes] | None = None
    _out: IO[bytes] | None = None
    _launches: int = 0
    _fresh: bool = True  # the next launch starts on an empty or wiped directory

    def __post_init__(self) -> None:
        self.can_restart = True
        for name in ("{config}",):
            if name not in self.template:
                raise TargetError(
                    f"--target-cmd {self.template!r} has no {name} placeholder; the harness "
                    "writes the node's properties there"
                )

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.workdir / "target.out"

    def describe(self) -> str:
        return f"node {self.node_id} at {self.host}:{self.port} launched by {self.template.split()[0]!r}"

    def prepare(self, formatted: bool) -> None:
        """Hook for adapters that format the data directory before launching."""

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = target_properties(self.layout, self.timeouts, self.data_dir, self.observer, self.dynamic)
        props.update(self.extra_properties)
        self.config_path.write_text(render_properties(props, header="kraft-tck conformance target"), "utf-8")

    def start(self, formatted: bool = True) -> None:
        self.write_config()
        self.prepare(formatted)
        trace = self.workdir / f"target-trace-{self._launches}.ndjson"
        self._launches += 1
        self.trace_files.append(trace)
        if self._fresh or not self.trace_lives:
            self.trace_lives.append([])
            self.life_dynamic, self.life_clean = self.dynamic, True
        self.trace_lives[-1].append(trace)
        self._fresh = False
        cmd = self.template.format(
            config=shlex.quote(str(self.config_path)),
            data_dir=shlex.quote(str(self.data_dir)),
            trace_file=shlex.quote(str(trace)),
            cluster_id=shlex.quote(self.cluster_id or "") if formatted else "''",
            # KIP-853: kafka-storage format's --initial-controllers value; empty for a static quorum
            initial_controllers=shlex.quote(self.dynamic.initial_controllers if self.dynamic else ""),
        )
        self.proc = self._spawn(shlex.split(cmd))
        wait_listening(self.host, self.port, self.start_timeout_s, self.proc, self.log_path)

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        """Launch the target's command, its output appended to ``log_path``, in a process group of its own (so
        ``kill`` reaches every process it started)."""
        self._out = open(self.log_path, "ab")  # noqa: SIM115 - closed in kill()/stop()
        return subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def kill(self) -> None:
        """kill -9: no graceful resignation, no flush beyond what the node already made durable."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
        if self._out is not None:
            self._out.close()
            self._out = None

    def restart(self, wipe: bool = False, formatted: bool = True) -> None:
        self.kill()
        if wipe:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self._fresh = True
        self.restarted(wipe)
        if wipe:
            self.retired = False
        self.start(formatted=formatted)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
        self.kill()
        self._stopped()

    def _stopped(self) -> None:
        """Hook: the target is stopped for good (release what the adapter holds for later launches)."""

    def collect(self, into: Path | None) -> None:
        """Keep the node's output and traces (into ``into``/target/; ``trace_files`` then name the
        copies) and remove the work directory."""
        self._stopped()
        if into is not None:
            dest = into / "target"
            dest.mkdir(parents=True, exist_ok=True)
            if self.log_path.exists():
                shutil.copy2(self.log_path, dest / self.log_path.name)
            kept = {f: dest / f.name for f in self.trace_files if f.exists()}
            for f, copy in kept.items():
                shutil.copy2(f, copy)
            self.trace_files = [kept.get(f, f) for f in self.trace_files]
            self.trace_lives = [[kept.get(f, f) for f in life] for life in self.trace_lives]
        shutil.rmtree(self.workdir, ignore_errors=True)

    def output_tail(self, chars: int = 2000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


#: The program of a warm interpreter (``python -c``; see ``WarmInterpreters``): as a SCHED_BATCH task it imports the
#: modules named by its arguments (``module:function`` also calls the function, a cache the run would fill at its
#: start anyway), says ``ready`` on stdout, then waits for one JSON line on stdin: the file its output goes to, the
#: module to run as ``__main__`` and its argv. It is then the process ``python -m MODULE ARGS`` would be once past
#: its imports: nothing of the run happens, no file is opened, before that line arrives. When the run ends it says
#: ``exit N`` on the original stdout (its output flushed) before the interpreter's own shutdown, which takes a
#: while with that many modules loaded and which nobody needs to wait for.
WARM_PROGRAM = r"""
import importlib.util, json, os, sys, traceback, types
def _policy(p):
    try:
        os.sched_setscheduler(0, p, os.sched_param(0))
    except (AttributeError, OSError):
        pass
def _say(text):
    try:
        os.write(_status, text.encode())
    except OSError:
        pass  # nobody reads it any more
_status = os.dup(1)
_policy(getattr(os, "SCHED_BATCH", 0))
_code = {}
for _name in sys.argv[1:]:
    _mod, _, _fn = _name.partition(":")
    try:
        __import__(_mod)
        if _fn:
            getattr(sys.modules[_mod], _fn)()
        else:
            _spec = importlib.util.find_spec(_mod)
            _code[_mod] = (_spec, _spec.loader.get_code(_mod))
    except BaseException:
        pass  # the run itself meets the error again, with its traceback in the output
_say("ready\n")
_line = sys.stdin.readline()
if not _line:
    sys.exit(0)
_go = json.loads(_line)
_policy(getattr(os, "SCHED_OTHER", 0))
_fd = os.open(_go["out"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.dup2(_fd, 1)
os.dup2(_fd, 2)
os.close(_fd)
_fd = os.open(os.devnull, os.O_RDONLY)
os.dup2(_fd, 0)
os.close(_fd)
# what python -m MODULE does (runpy): MODULE's code run as a fresh __main__, argv[0] its file
_spec, _main_code = _code.get(_go["module"]) or (None, None)
if _main_code is None:
    _spec = importlib.util.find_spec(_go["module"])
    _main_code = _spec.loader.get_code(_go["module"])
_main = types.ModuleType("__main__")
_main.__dict__.update(__file__=_spec.origin, __cached__=None, __loader__=_spec.loader, __package__=_spec.parent,
                      __spec__=_spec, __builtins__=__builtins__)
sys.argv = [_spec.origin, *_go["argv"][1:]]
if sys.path and sys.path[0] == "":  # -c put the current directory first as ''; -m puts it as a full path
    sys.path[0] = os.getcwd()
sys.modules["__main__"] = _main
try:
    exec(_main_code, _main.__dict__)
    _rc = 0
except SystemExit as _exc:  # as the interpreter turns it into an exit status
    _rc = 0 if _exc.code is None else _exc.code
    if not isinstance(_rc, int):
        print(_rc, file=sys.stderr)
        _rc = 1
except BaseException:
    traceback.print_exc()
    _rc = 1
for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.flush()
    except (OSError, ValueError):
        pass
_say(f"exit {_rc}\n")
sys.exit(_rc)
"""


#: Environment variables that change while the harness runs and mean nothing to the node: pytest names the current
#: test (and its phase) in PYTEST_CURRENT_TEST, so a spare compared with it would be thrown away at every test.
VOLATILE_ENV = ("PYTEST_CURRENT_TEST",)


def _launch_env() -> dict[str, str]:
    """The environment a spare is started with and compared against (``os.environ`` without ``VOLATILE_ENV``)."""
    return {k: v for k, v in os.environ.items() if k not in VOLATILE_ENV}


class WarmInterpreters:
    """Python interpreters started ahead of the launches that will need them, so a (re)launch of the embedded node
    costs a hand-over (about 0.2 s) instead of an interpreter start, the node's imports and its start-up caches
    (about 1 s of CPU; 1-2 s of wall time on a loaded 2-core machine), for each launch and each ``kraft-tck format``.

    Each spare does its preparation as a SCHED_BATCH task (its fair share of the CPU, but it never preempts the node
    or the harness when they wake up on a timer or a frame), says ``ready`` and blocks on stdin; ``run`` hands one
    the module and argv to run, back under SCHED_OTHER (which any user may switch a batch task back to: SCHED_IDLE,
    used before, cannot be left without CAP_SYS_NICE, so an unprivileged user's node ran at idle priority; and on a
    busy machine idle spares never got ready), in a process group of its own (``kill -9`` reaches it as it reaches
    a cold launch): a ready one, else the oldest (it finishes its preparation first, no more work than a cold
    start does). A spare started under another environment (but for ``VOLATILE_ENV``) or directory than the
    harness's now is not used (the launch is cold, as before). ``close`` ends the spares. ``size``: a case that
    relaunches on a wiped directory as it ends, before a case that does so as it begins, takes four in a row (a
    format and a launch each)."""

    def __init__(self, preload: tuple[str, ...], size: int = 4) -> None:
        self.preload = preload
        self.size = size
        self._spares: list[_Spare] = []

    def fill(self) -> None:
        env, cwd = _launch_env(), os.getcwd()
        alive = []
        for spare in self._spares:
            if spare.proc.poll() is None:
                alive.append(spare)
            else:
                self._end(spare.proc)
        self._spares = alive
        while len(self._spares) < self.size:
            proc = subprocess.Popen(
                [sys.executable, "-c", WARM_PROGRAM, *self.preload], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
            )  # fmt: skip
            self._spares.append(_Spare(proc, env, cwd))

    def run(self, module: str, argv: list[str], out: Path, status: bool = False) -> subprocess.Popen[bytes] | None:
        """Run ``python -m module argv[1:]`` in a spare, its stdout and stderr appended to ``out``; None when there
        is none to use (the caller launches cold). Starts a replacement spare. ``status``: keep its stdout open for
        ``exit_status``."""
        env, cwd = _launch_env(), os.getcwd()
        for spare in list(self._spares):
            if spare.env != env or spare.cwd != cwd or spare.proc.poll() is not None:
                self._spares.remove(spare)
                self._end(spare.proc)
        chosen = next((sp for sp in self._spares if sp.is_ready()), self._spares[0] if self._spares else None)
        proc: subprocess.Popen[bytes] | None = None
        if chosen is not None:
            self._spares.remove(chosen)
            proc = chosen.proc
            with contextlib.suppress(AttributeError, OSError):  # ProcessLookupError included
                os.sched_setscheduler(proc.pid, os.SCHED_OTHER, os.sched_param(0))
            try:
                assert proc.stdin is not None and proc.stdout is not None
                if not status:
                    proc.stdout.close()
                proc.stdin.write((json.dumps({"out": str(out), "module": module, "argv": argv}) + "\n").encode())
                proc.stdin.close()
            except OSError:  # it died meanwhile
                self._end(proc)
                proc = None
        self.fill()
        return proc

    @staticmethod
    def exit_status(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
        """The exit status a spare run with ``status`` says once its run is done (before its interpreter has shut
        down); None if it says nothing within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        fd, said = proc.stdout.fileno(), b""
        try:
            while (left := deadline - time.monotonic()) > 0:
                if not select.select([fd], [], [], left)[0]:
                    break
                chunk = os.read(fd, 256)
                if not chunk:  # it died without saying
                    return proc.wait(max(0.0, deadline - time.monotonic()))
                said += chunk
                for line in said.split(b"\n")[:-1]:
                    if line.startswith(b"exit "):
                        return int(line.split()[1])
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        finally:
            proc.stdout.close()
        return None

    @staticmethod
    def _end(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        for spare in self._spares:
            self._end(spare.proc)
        self._spares = []


@dataclass
class _Spare:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    cwd: str
    ready: bool = False

    def is_ready(self) -> bool:
        """Has it said ``ready`` (without waiting)?"""
        if not self.ready and self.proc.stdout is not None:
            with contextlib.suppress(OSError, ValueError):
                fd = self.proc.stdout.fileno()
                if select.select([fd], [], [], 0)[0]:
                    self.ready = os.read(fd, 6) == b"ready\n"  # all it says before it is given a run
        return self.ready


#: The reference node's launcher module, and what its warm interpreters do ahead: import the CLI (with the commands
#: of the kit's other areas it loads), the node (``node``), the storage and bootstrap code (``format``), and fill
#: the two caches the node fills at its start before it listens: the generated frame codecs of the newest version
#: of each API (``codec.precompile``; the node makes those of the APIs it serves, a subset) and the compiled trace
#: schema its trace writer checks lines with. Both are pure functions of the kit's own files.
REFERENCE_LAUNCHER = "kraft_tck.reference.cli"
REFERENCE_PRELOAD = (REFERENCE_LAUNCHER, "kraft_tck.reference.workload", "kraft_tck.reference.storage",
                     "kraft_tck.reference.bootstrap", "kraft_tck.spec.codec:precompile",
                     "kraft_tck.spec.trace:_accepts")  # fmt: skip


@dataclass
class EmbeddedTarget(CommandTarget):
    """The reference node as a subprocess, its directory formatted with the session's cluster id.

    ``launcher`` is the Python module run with ``-m`` (or a ``.py`` script run directly, taking the same
    ``node --config ... --trace-file ...`` arguments); tests point it at a fault-injecting launcher. With the
    reference launcher, launches and formats run in warm interpreters (``WarmInterpreters``) when ``warm`` is on;
    any other launcher starts cold, as a command would.
    """

    launcher: str = REFERENCE_LAUNCHER
    warm: bool = True
    _warm: WarmInterpreters | None = field(default=None, init=False, repr=False)
    #: the directory was formatted with the cluster id (in this life): a relaunch on it after kill -9 skips the
    #: format command, which would find it formatted and change nothing (--ignore-formatted)
    _formatted_here: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.template:
            how = shlex.quote(self.launcher) if self.launcher.endswith(".py") else f"-m {self.launcher}"
            prefix = f"{shlex.quote(sys.executable)} {how}"
            self.template = f"{prefix} node --config {{config}} --trace-file {{trace_file}}"
        super().__post_init__()

    def describe(self) -> str:
        return f"embedded reference node {self.node_id} at {self.host}:{self.port} ({self.launcher})"

    def _warm_module(self, argv: list[str]) -> str | None:
        """The module ``argv`` runs with ``python -m`` when a warm interpreter may run it instead, else None."""
        if not self.warm or self.launcher != REFERENCE_LAUNCHER:
            return None
        if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2] == REFERENCE_LAUNCHER:
            return REFERENCE_LAUNCHER
        return None

    def _run_warm(self, argv: list[str], out: Path, status: bool = False) -> subprocess.Popen[bytes] | None:
        module = self._warm_module(argv)
        if module is None:
            return None
        if self._warm is None:  # the first launch is cold; the spares get ready meanwhile
            self._warm = WarmInterpreters(REFERENCE_PRELOAD)
            self._warm.fill()
            return None
        return self._warm.run(module, [module, *argv[3:]], out, status)

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = self._run_warm(argv, self.log_path)
        return proc if proc is not None else super()._spawn(argv)

    def _stopped(self) -> None:
        if self._warm is not None:
            self._warm.close()
            self._warm = None

    def prepare(self, formatted: bool) -> None:
        """``kraft-tck format`` on the data directory, as a user formats theirs (a process of its own: the harness
        does not call into the node it judges). An empty directory to be formatted with a command and properties
        formatted before in this session gets a copy of what that format wrote (kept under ``formatted/``), not a
        format process of its own: the same files but for the directory id, which the format draws at random (a
        dynamic quorum's is the harness's, given by --initial-controllers)."""
        if self._fresh:
            self._formatted_here = False
        if not formatted or self.cluster_id is None or self._formatted_here:
            return
        cmd = [sys.executable, "-m", REFERENCE_LAUNCHER, "format",
               "--config", str(self.config_path), "--cluster-id", self.cluster_id, "--ignore-formatted"]  # fmt: skip
        if self.dynamic is not None and self.dynamic.standalone:  # KIP-853: kafka-storage format --standalone
            cmd += ["--standalone"]
        elif self.dynamic is not None:  # KIP-853: a dynamic quorum, as kafka-storage format --initial-controllers
            cmd += ["--initial-controllers", self.dynamic.initial_controllers]
        empty = not any(self.data_dir.iterdir())
        key = hashlib.sha256("\0".join([*cmd[3:], self.config_path.read_text("utf-8")]).encode()).hexdigest()[:16]
        formatted_before = self.workdir / "formatted" / key
        if empty and formatted_before.is_dir():
            shutil.copytree(formatted_before, self.data_dir, dirs_exist_ok=True)
            self._formatted_here = True
            return
        self._format(cmd)
        if empty:
            shutil.copytree(self.data_dir, formatted_before)
        self._formatted_here = True

    def _format(self, cmd: list[str]) -> None:
        out = self.workdir / "format.out"
        out.unlink(missing_ok=True)
        # warm once the node was launched (the first launch starts the spares)
        proc = self._run_warm(cmd, out, status=True) if self._warm is not None else None
        if proc is not None:
            got = WarmInterpreters.exit_status(proc, 60)
            if got is None:
                WarmInterpreters._end(proc)
                raise TargetError(f"kraft-tck format --config {self.config_path} did not finish in 60 s")
            code = got
            text = out.read_text(errors="replace") if out.exists() else ""
        else:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            code, text = done.returncode, done.stderr or done.stdout
        if code != 0:
            raise TargetError(
                f"kraft-tck format --config {self.config_path} --cluster-id {self.cluster_id} failed "
                f"(exit {code}): {text.strip()[-1000:]}"
            )


@dataclass
class ContainerTarget(Target):
    """A container image started with testcontainers on the host network (loopback reaches the harness)."""

    image: str = ""
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kraft-tck-container-")))
    container: object | None = None

    def __post_init__(self) -> None:
        self.can_restart = True

    @staticmethod
    def docker_unavailable_reason() -> str | None:
        try:
            import docker

            docker.from_env(timeout=3).ping()
        except Exception as exc:
            return (
                f"--target-image needs a Docker daemon and none answered ({type(exc).__name__}: {exc}); "
                "start Docker or set DOCKER_HOST, or use --target-cmd / --target instead"
            )
        return None

    def start(self, formatted: bool = True) -> None:
        from testcontainers.core.container import DockerContainer

        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        props = target_properties(self.layout, self.timeouts, "/var/lib/kraft", self.observer, self.dynamic)
        props.update(self.extra_properties)
        (self.workdir / "server.properties").write_text(render_properties(props), "utf-8")
        c = DockerContainer(self.image)
        c.with_kwargs(network_mode="host")
        c.with_volume_mapping(str(self.workdir / "server.properties"), "/etc/kraft/server.properties", "ro")
        c.with_volume_mapping(str(data), "/var/lib/kraft", "rw")
        if self.cluster_id is not None and formatted:
            c.with_env("KRAFT_CLUSTER_ID", self.cluster_id)
            if self.dynamic is not None:  # KIP-853: the image formats with --initial-controllers "$KRAFT_INITIAL_..."
                c.with_env("KRAFT_INITIAL_CONTROLLERS", self.dynamic.initial_controllers)
        c.start()
        self.container = c
        wait_listening(self.host, self.port, 60)

    def kill(self) -> None:
        if self.container is not None:
            self.container.get_wrapped_container().kill()  # type: ignore[attr-defined]  # SIGKILL
            self.container.stop()  # type: ignore[attr-defined]
            self.container = None

    def restart(self, wipe: bool = False, formatted: bool = True) -> None:
        self.kill()
        if wipe:
            shutil.rmtree(self.workdir / "data", ignore_errors=True)
        self.restarted(wipe)
        if wipe:
            self.retired = False
        self.start(formatted)

    def stop(self) -> None:
        self.kill()
