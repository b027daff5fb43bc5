"""Node configuration: a Kafka-style ``.properties`` reader/writer and the typed :class:`NodeConfig`.

The keys are Kafka's own (``node.id``, ``listeners``, ``controller.quorum.*`` ...), so a controller's
``server.properties`` from a Kafka install loads unchanged; keys this node does not use are kept in
:attr:`NodeConfig.extra` with a single warning. Any setting that is missing or malformed raises
:class:`ConfigError` naming the key and the form it expects: start-up stops before anything listens.

The cluster id is deliberately not a config key: as in Kafka it lives in ``meta.properties``, written by
``kraft-tck format`` (see :mod:`kraft_tck.reference.storage`).
"""

from __future__ import annotations

import logging
import re
import ssl as _ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties
from kraft_tck.reference import security as _security

log = logging.getLogger("kraft_tck.reference.config")


class ConfigError(ValueError):
    """A missing or malformed setting. The message names the key (or file/line) and the expected form."""


# ------------------------------------------------------------------------------------------ .properties

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # only these end a line in a .properties file (not \v, \x1c...)


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text as ``java.util.Properties.load`` does (the ``javaproperties`` library):
    ``#``/``!`` comments, ``key=value``, ``key: value``, ``key value``, backslash continuations and the
    escapes ``\\t \\n \\r \\f \\uXXXX \\<char>``. Later keys win.

    Unlike Java, an empty key and a malformed ``\\u`` escape are refused: :class:`ConfigError` names
    ``source:line``."""
    props: dict[str, str] = {}
    lineno = 1  # where the element being read starts
    elements = javaproperties.parse(text)
    while True:
        try:
            element = next(elements, None)
        except javaproperties.InvalidUEscapeError as exc:
            raise ConfigError(f"{source}:{lineno}: malformed \\uXXXX escape {exc.escape!r}") from None
        if element is None:
            return props
        if isinstance(element, javaproperties.KeyValue):
            if not element.key:
                line = _LINE_BREAK.sub("", element.source)
                raise ConfigError(f"{source}:{lineno}: line {line!r} has a value but no key")
            props[element.key] = element.value
        lineno += len(_LINE_BREAK.findall(element.source))


def load_properties(path: str | Path) -> dict[str, str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc}") from None
    return parse_properties(text, source=str(p))


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif (is_key and c in "=: ") or (c == " " and i == 0) or (is_key and i == 0 and c in "#!"):
            # Keys end at these characters; a value's leading blank would otherwise be stripped.
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _render_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_render_value(v) for v in value)
    return str(value)


def render_properties(props: Mapping[str, object], header: str | None = None) -> str:
    """Render ``props`` in insertion order so that :func:`parse_properties` reads back the same strings.

    Values are converted with ``str`` (booleans as ``true``/``false``, lists/tuples comma-joined).
    ``header`` becomes leading ``#`` comment lines.
    """
    lines = [f"# {h}".rstrip() for h in header.splitlines()] if header else []
    lines += [f"{_escape(k, True)}={_escape(_render_value(v), False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ typed config


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A ``host:port`` pair; ``host`` may be ``""`` (all interfaces) for a listener."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    endpoint: Endpoint

    def __str__(self) -> str:
        return f"{self.name}://{self.endpoint}"


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    endpoint: Endpoint

    def __str__(self) -> str:
        return f"{self.node_id}@{self.endpoint}"


#: KIP-853's bootstrap controllers (Kafka's QuorumConfig.QUORUM_BOOTSTRAP_SERVERS_CONFIG): ``host:port,...``; a node
#: that knows no voter set (no controller.quorum.voters) asks them where the leader is.
BOOTSTRAP_SERVERS_KEY = "controller.quorum.bootstrap.servers"
_VOTERS_FORM = "id@host:port[,id@host:port...]"
_HOSTPORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:\[\]@,]*)):(?P<port>\d{1,5})$")
_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<hp>\S+)$")


def _parse_endpoint(text: str, allow_empty_host: bool) -> Endpoint | None:
    m = _HOSTPORT.match(text.strip())
    if not m:
        return None
    host = m.group("v6") if m.group("v6") is not None else m.group("host")
    port = int(m.group("port"))
    if port > 65535 or (not host and not allow_empty_host):
        return None
    return Endpoint(host, port)


def parse_voters(value: str, key: str = "controller.quorum.voters") -> tuple[Voter, ...]:
    """``1@host:9093,2@[::1]:9094`` → voters, in the order given. Ids must be distinct and ≥ 0."""
    voters: list[Voter] = []
    for part in value.split(","):
        node_id, sep, hostport = part.strip().partition("@")
        endpoint = _parse_endpoint(hostport, allow_empty_host=False) if sep else None
        if endpoint is None or not node_id.isdigit():
            raise ConfigError(f"{key}: expected {_VOTERS_FORM}, got {value!r}")
        if any(v.node_id == int(node_id) for v in voters):
            raise ConfigError(f"{key}: voter id {int(node_id)} appears twice in {value!r}")
        voters.append(Voter(int(node_id), endpoint))
    return tuple(voters)


def parse_listeners(value: str, key: str = "listeners") -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for part in value.split(","):
        m = _LISTENER.match(part.strip())
        endpoint = _parse_endpoint(m.group("hp"), allow_empty_host=True) if m else None
        if m is None or endpoint is None:
            raise ConfigError(f"{key}: expected NAME://host:port[,NAME://host:port...], got {value!r}")
        listeners.append(Listener(m.group("name").upper(), endpoint))
    return tuple(listeners)


def parse_bootstrap_servers(value: str, key: str = BOOTSTRAP_SERVERS_KEY) -> tuple[Endpoint, ...]:
    """``host:port[,host:port...]`` (an IPv6 host in brackets), as Kafka's ``QuorumConfig.parseBootstrapServers``
    reads ``controller.quorum.bootstrap.servers``: a list split at commas, each entry's host and port
    (``Utils.getHost``/``getPort``), Kafka's messages after the key. An empty value is an empty list."""
    text = value.strip()
    if not text:
        return ()
    servers: list[Endpoint] = []
    for entry in re.split(r"\s*,\s*", text):
        m = re.fullmatch(r".*?\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)", entry)  # Kafka's Utils.HOST_PORT_PATTERN
        if m is None or not m.group(1) or not re.fullmatch(r"[0-9a-zA-Z\-%._:]+", m.group(1)):
            raise ConfigError(f"{key}: Failed to parse host name from {entry} for the configuration {key}. "
                              f'Each entry should be in the form "{{host}}:{{port}}"')
        port = int(m.group(2))
        if port > 65535:
            raise ConfigError(f"{key}: port out of range: {port} in {entry} (expected host:port with a port of "
                              f"0-65535)")
        servers.append(Endpoint(m.group(1), port))
    return tuple(servers)


# (key, attribute, default, minimum). Kafka's names and defaults (QuorumConfig, SocketServerConfigs),
# except controller.quorum.fetch.max.wait.ms: Kafka hard-codes the Fetch MaxWaitMs of KafkaRaftClient
# to 500 ms; here it is a setting with that default so tests can shorten the long-poll.
_INT_SETTINGS: tuple[tuple[str, str, int, int], ...] = (
    ("controller.quorum.election.timeout.ms", "election_timeout_ms", 1000, 1),
    ("controller.quorum.fetch.timeout.ms", "fetch_timeout_ms", 2000, 1),
    ("controller.quorum.election.backoff.max.ms", "election_backoff_max_ms", 1000, 0),
    ("controller.quorum.request.timeout.ms", "request_timeout_ms", 2000, 1),
    ("controller.quorum.retry.backoff.ms", "retry_backoff_ms", 20, 0),
    ("controller.quorum.append.linger.ms", "append_linger_ms", 25, 0),
    ("controller.quorum.fetch.max.wait.ms", "fetch_max_wait_ms", 500, 0),
    ("socket.request.max.bytes", "socket_request_max_bytes", 104857600, 1),
    # Kafka's SocketServerConfigs: a negative idle time keeps idle connections open (Selector); a
    # queued.max.request.bytes of 0 or less leaves request memory unbounded (SocketServer's MemoryPool.NONE).
    ("connections.max.idle.ms", "connections_max_idle_ms", 600000, -1),
    ("queued.max.request.bytes", "queued_max_request_bytes", -1, -1),
    ("broker.session.timeout.ms", "broker_session_timeout_ms", 9000, 1),
    # Kafka's KRaftConfigs: the brokers' heartbeat period, which the controller reads too (ControllerApis gives each
    # BrokerHeartbeat a deadline of half of it).
    ("broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", 2000, 1),
    # This node's own setting, not Kafka's (Kafka leaves old log data to the OS page cache): how many
    # bytes of the newest batches the core's log keeps in memory; older ones are read back from the
    # segment files when a follower lags (reference/log.py). Memory then stays bounded in long runs.
    ("reference.log.cache.bytes", "log_cache_bytes", 8 * 1024 * 1024, 0),
)
# (key, attribute, default, minimum, maximum): the metadata log's snapshot and retention settings, Kafka's names,
# types (LONG unless said) and defaults (KRaftConfigs / MetadataLogConfig, Kafka 4.0-SNAPSHOT Oct 2024):
# - metadata.log.max.record.bytes.between.snapshots: committed bytes read since the latest snapshot that make
#   a new one (SnapshotGenerator.publishLogDelta); default 20 MiB, at least 1.
# - metadata.log.max.snapshot.interval.ms: the longest wait before a snapshot while committed records are not
#   in the latest one; 0 turns time-based snapshots off; default 1 hour.
# - metadata.log.segment.bytes (INT): the largest segment file; default 1 GiB. Kafka's validator allows
#   12 (Records.LOG_OVERHEAD) and up, but KafkaMetadataLog then refuses anything below the internal,
#   testing-only metadata.log.segment.min.bytes (8 MiB). This node applies only the validator's floor, so
#   tests can roll segments of a few KiB; it does not read metadata.log.segment.min.bytes.
# - metadata.max.retention.bytes: the log's and the snapshots' size past which the oldest snapshot and the
#   segments below the next one go (KafkaMetadataLog.cleanSnapshotsRetentionSize); default 100 MiB; a
#   negative value: no size limit. Any long, as Kafka (no validator).
# - metadata.max.retention.ms: the age past which they go (cleanSnapshotsRetentionMs); default 7 days;
#   negative: no age limit. Any long.
# Both retention limits are soft: at least one snapshot is always kept and the log is only cleaned up to a
# snapshot (KafkaMetadataLog.cleanSnapshots).
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_METADATA_LOG_SETTINGS: tuple[tuple[str, str, int, int, int], ...] = (
    ("metadata.log.max.record.bytes.between.snapshots", "snapshot_max_new_record_bytes", 20 * 1024 * 1024, 1,
     _LONG_MAX),
    ("metadata.log.max.snapshot.interval.ms", "snapshot_max_interval_ms", 60 * 60 * 1000, 0, _LONG_MAX),
    ("metadata.log.segment.bytes", "log_segment_bytes", 1024 * 1024 * 1024, 12, 2**31 - 1),
    ("metadata.max.retention.bytes", "retention_max_bytes", 100 * 1024 * 1024, _LONG_MIN, _LONG_MAX),
    ("metadata.max.retention.ms", "retention_ms", 7 * 24 * 60 * 60 * 1000, _LONG_MIN, _LONG_MAX),
)
_ROLES = ("broker", "controller")
#: This node's own switch, not a Kafka key: ``true`` runs elections as Kafka 4.x (KIP-996 pre-vote, the
#: Prospective state, Vote v0-2 advertised); ``false`` as Kafka 3.9 (no pre-vote, Vote v0-1 only), for the
#: simulator's comparison and the mixed-version conformance cases.
PRE_VOTE_KEY = "reference.quorum.pre.vote"
PRE_VOTE_DEFAULT = False
# Keys read by from_properties besides the integer settings above.
_OTHER_KEYS = frozenset(
    {
        "node.id",
        "listeners",
        "controller.listener.names",
        "controller.quorum.voters",
        BOOTSTRAP_SERVERS_KEY,
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "process.roles",
        "listener.security.protocol.map",
        PRE_VOTE_KEY,
    }
)
#: The TLS settings this node honours (Kafka's names; each may also be given per listener as
#: ``listener.name.<listener>.<key>``, which wins, as in Kafka).
SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)
KNOWN_KEYS = (_OTHER_KEYS | {k for k, *_ in _INT_SETTINGS} | {k for k, *_ in _METADATA_LOG_SETTINGS} | set(SSL_KEYS)
              | _security.SECURITY_KEYS)
#: Security settings this node cannot honour yet: a config naming one stops the node (serving without
#: what it asks for would be a silent downgrade). ``ssl.*`` keys outside SSL_KEYS count too.
_UNSUPPORTED_SECURITY = re.compile(
    r"^(?:listener\.name\.[^.]+\.)?(?:sasl\..*|ssl\..*|[a-z0-9._-]*\.sasl\.jaas\.config)$"
    r"|^(?:security\.inter\.broker\.protocol|early\.start\.listeners)$"
)
#: SASL keys :func:`security.parse_sasl` reads, in their per-listener forms as well.
_SASL_READ = re.compile(r"^(?:listener\.name\.[^.]+\.)?"
                        r"(?:sasl\.enabled\.mechanisms|(?:[a-z0-9-]+\.)?sasl\.jaas\.config)$"
                        r"|^sasl\.mechanism\.controller\.protocol$")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_CLIENT_AUTH = ("required", "requested", "none")


def _int_setting(props: Mapping[str, str], key: str, default: int | None, minimum: int) -> int:
    raw = props.get(key)
    if raw is None:
        if default is None:
            raise ConfigError(f"{key}: missing (expected an integer ≥ {minimum})")
        return default
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d+", text) or int(text) < minimum or int(text) > 2**31 - 1:
        raise ConfigError(f"{key}: expected an integer between {minimum} and {2**31 - 1}, got {raw!r}")
    return int(text)


def _ranged_setting(props: Mapping[str, str], key: str, default: int, minimum: int, maximum: int) -> int:
    """An integer setting within ``[minimum, maximum]`` (Kafka's LONG and INT ranges), else its default."""
    raw = props.get(key)
    if raw is None:
        return default
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d+", text) or not minimum <= int(text) <= maximum:
        raise ConfigError(f"{key}: expected an integer between {minimum} and {maximum}, got {raw!r}")
    return int(text)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """The settings the reference node reads; field names are the keys in snake_case without prefix."""

    node_id: int
    listener: Listener
    voters: tuple[Voter, ...]
    log_dir: Path
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25
    fetch_max_wait_ms: int = 500
    socket_request_max_bytes: int = 104857600
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    log_cache_bytes: int = 8 * 1024 * 1024
    #: reference.quorum.pre.vote (this node's own key): KIP-996 pre-vote as Kafka 4.x, or Kafka 3.9's elections.
    pre_vote: bool = PRE_VOTE_DEFAULT
    #: controller.quorum.bootstrap.servers (KIP-853), in the order given; () when not set. ``voters`` is () when
    #: controller.quorum.voters is not set (a dynamic quorum: the voter set comes from the bootstrap checkpoint
    #: written by ``format --standalone/--initial-controllers``, or from the log).
    bootstrap_servers: tuple[Endpoint, ...] = ()
    #: metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms (0: off),
    #: metadata.log.segment.bytes, metadata.max.retention.bytes (< 0: none), metadata.max.retention.ms (< 0: none).
    snapshot_max_new_record_bytes: int = 20 * 1024 * 1024
    snapshot_max_interval_ms: int = 60 * 60 * 1000
    log_segment_bytes: int = 1024 * 1024 * 1024
    retention_max_bytes: int = 100 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    connections_max_idle_ms: int = 600000
    queued_max_request_bytes: int = -1
    process_roles: tuple[str, ...] = ()
    #: The controller listener's security protocol (listener.security.protocol.map): PLAINTEXT or SSL.
    security_protocol: str = "PLAINTEXT"
    #: The TLS settings when security_protocol is SSL or SASL_SSL.
    ssl: SslSettings | None = None
    #: The SASL settings when security_protocol is SASL_SSL or SASL_PLAINTEXT (reference/security.py).
    sasl: _security.SaslSettings | None = None
    #: authorizer.class.name and its ACLs; None: every request is authorized (Kafka without an authorizer).
    authorizer: _security.AuthorizerSettings | None = None
    # Keys this node does not interpret (Kafka configs carry many), kept verbatim.
    # (Not in repr: the SASL keys kept here carry JAAS passwords.)
    extra: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_ids

    def voter(self, node_id: int) -> Voter:
        for v in self.voters:
            if v.node_id == node_id:
                return v
        raise KeyError(f"node {node_id} is not in controller.quorum.voters")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], source: str = "config") -> NodeConfig:
        node_id = _int_setting(props, "node.id", None, 0)

        if "listeners" not in props:
            raise ConfigError(
                "listeners: missing (expected NAME://host:port, e.g. CONTROLLER://127.0.0.1:9093)"
            )
        listeners = parse_listeners(props["listeners"])
        listener = listeners[0]
        # Kafka picks the controller's listener by controller.listener.names; without it, the first.
        wanted = [
            n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()
        ]
        if wanted:
            chosen = [lst for lst in listeners if lst.name == wanted[0]]
            if not chosen:
                raise ConfigError(
                    f"controller.listener.names: {wanted[0]!r} is not one of the listeners "
                    f"{', '.join(lst.name for lst in listeners)}"
                )
            listener = chosen[0]

        bootstrap_servers = parse_bootstrap_servers(props.get(BOOTSTRAP_SERVERS_KEY, ""))
        if props.get("controller.quorum.voters", "").strip():
            voters = parse_voters(props["controller.quorum.voters"])
        elif bootstrap_servers:
            voters = ()  # KIP-853: a dynamic quorum, found through the bootstrap servers
        else:
            # Kafka's KafkaConfig.validateQuorumVotersAndQuorumBootstrapServerForKRaft, its words after ours.
            raise ConfigError(
                f"controller.quorum.voters: missing (expected {_VOTERS_FORM}), and so is {BOOTSTRAP_SERVERS_KEY} "
                f"(host:port[,...]): either {BOOTSTRAP_SERVERS_KEY} must contain the set of bootstrap controllers "
                "or controller.quorum.voters must contain a parseable set of controllers"
            )

        # Kafka's order: metadata.log.dir, else the first of log.dirs, else log.dir.
        for key in ("metadata.log.dir", "log.dirs", "log.dir"):
            raw_dir = props.get(key, "").split(",")[0].strip()
            if raw_dir:
                log_dir = Path(raw_dir)
                break
        else:
            raise ConfigError("log.dirs: missing (expected a directory path, e.g. /var/lib/kraft/node-1)")

        roles = tuple(r.strip().lower() for r in props.get("process.roles", "").split(",") if r.strip())
        if any(r not in _ROLES for r in roles) or len(set(roles)) != len(roles):
            raise ConfigError(
                f"process.roles: expected a subset of broker,controller, got {props['process.roles']!r}"
            )
        if "controller" in roles and voters and node_id not in {v.node_id for v in voters}:
            raise ConfigError(
                f"controller.quorum.voters: node.id {node_id} has process.roles=controller but is not "
                f"among the voters {props['controller.quorum.voters']!r}"
            )

        ints = {attr: _int_setting(props, key, default, lo) for key, attr, default, lo in _INT_SETTINGS}
        ints.update({attr: _ranged_setting(props, key, default, lo, hi)
                     for key, attr, default, lo, hi in _METADATA_LOG_SETTINGS})
        raw_pre_vote = props.get(PRE_VOTE_KEY)
        pre_vote = PRE_VOTE_DEFAULT
        if raw_pre_vote is not None:
            if raw_pre_vote.strip().lower() not in ("true", "false"):
                raise ConfigError(f"{PRE_VOTE_KEY}: expected true or false, got {raw_pre_vote!r}")
            pre_vote = raw_pre_vote.strip().lower() == "true"
        if ints["fetch_max_wait_ms"] >= ints["fetch_timeout_ms"]:
            # A long-poll that outlasts the fetch timeout would make every idle follower start elections.
            raise ConfigError(
                f"controller.quorum.fetch.max.wait.ms: expected less than controller.quorum.fetch.timeout.ms "
                f"({ints['fetch_timeout_ms']}), got {ints['fetch_max_wait_ms']}"
            )
        if ints["fetch_max_wait_ms"] >= ints["request_timeout_ms"]:
            # A parked Fetch is answered after up to MaxWaitMs: every idle long-poll would time out first.
            raise ConfigError(
                f"controller.quorum.fetch.max.wait.ms: expected less than controller.quorum.request.timeout.ms "
                f"({ints['request_timeout_ms']}), got {ints['fetch_max_wait_ms']}"
            )

        if ints["queued_max_request_bytes"] > 0 and ints["queued_max_request_bytes"] < ints["socket_request_max_bytes"]:
            # Kafka's KafkaConfig.validateValues: one request of the largest size must fit in the pool.
            raise ConfigError(
                f"queued.max.request.bytes: expected 0 or less (unbounded) or at least socket.request.max.bytes "
                f"({ints['socket_request_max_bytes']}), got {ints['queued_max_request_bytes']}"
            )
        if len({lst.name for lst in listeners}) != len(listeners):
            raise ConfigError(f"listeners: each listener must have a different name, got {props['listeners']!r}")
        if len({lst.endpoint.port for lst in listeners}) != len(listeners):
            raise ConfigError(f"listeners: each listener must have a different port, got {props['listeners']!r}")

        protocol = _security_protocol(props, listener, listeners, wanted)
        ssl = _ssl_settings(props, listener, protocol)
        try:
            sasl = _security.parse_sasl(props, listener.name, protocol)
            authorizer = _security.parse_authorizer(props)
        except _security.SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None

        # Kept verbatim (to_properties writes them back) but read here, so not warned about.
        kept = {k for k in props if k.startswith("listener.name.") or k == "listener.security.protocol.map"
                or k in _security.SECURITY_KEYS or _SASL_READ.match(k)}
        extra = {k: v for k, v in props.items() if k not in KNOWN_KEYS and k not in kept}
        if extra:
            log.warning(
                "%s: keeping %d key(s) this node does not use: %s",
                source,
                len(extra),
                ", ".join(sorted(extra)),
            )
        return cls(
            node_id=node_id,
            listener=listener,
            voters=voters,
            log_dir=log_dir,
            process_roles=roles,
            security_protocol=protocol,
            ssl=ssl,
            sasl=sasl,
            authorizer=authorizer,
            pre_vote=pre_vote,
            bootstrap_servers=bootstrap_servers,
            extra={k: v for k, v in props.items() if k in extra or k in kept},
            **ints,
        )

    @classmethod
    def load(cls, path: str | Path) -> NodeConfig:
        return cls.from_properties(load_properties(path), source=str(path))

    def to_properties(self) -> dict[str, str]:
        """The settings as Kafka keys (for :func:`render_properties`); ``from_properties`` reads them back."""
        props: dict[str, str] = {"node.id": str(self.node_id)}
        if self.process_roles:
            props["process.roles"] = ",".join(self.process_roles)
        props["listeners"] = str(self.listener)
        props["controller.listener.names"] = self.listener.name
        if self.voters:
            props["controller.quorum.voters"] = ",".join(str(v) for v in self.voters)
        if self.bootstrap_servers:
            props[BOOTSTRAP_SERVERS_KEY] = ",".join(str(e) for e in self.bootstrap_servers)
        props["log.dirs"] = str(self.log_dir)
        for key, attr, _default, _lo in _INT_SETTINGS:
            props[key] = str(getattr(self, attr))
        for key, attr, *_ in _METADATA_LOG_SETTINGS:
            props[key] = str(getattr(self, attr))
        props[PRE_VOTE_KEY] = "true" if self.pre_vote else "false"
        if self.security_protocol != "PLAINTEXT" and "listener.security.protocol.map" not in self.extra:
            props["listener.security.protocol.map"] = f"{self.listener.name}:{self.security_protocol}"
        if self.ssl is not None:
            props.update(self.ssl.to_properties())
        props.update(self.extra)
        return props


@dataclass(frozen=True, slots=True)
class SslSettings:
    """The controller listener's TLS settings, by Kafka's names (``ssl.*``). Passwords stay out of repr."""

    keystore_type: str = "PEM"
    keystore_location: Path | None = None
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    truststore_type: str = "PEM"
    truststore_location: Path | None = None
    truststore_password: str | None = field(default=None, repr=False)
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {
            "ssl.keystore.type": self.keystore_type,
            "ssl.truststore.type": self.truststore_type,
            "ssl.client.auth": self.client_auth,
            "ssl.endpoint.identification.algorithm": self.endpoint_identification_algorithm,
        }
        for key, value in (("ssl.keystore.location", self.keystore_location),
                           ("ssl.keystore.password", self.keystore_password),
                           ("ssl.key.password", self.key_password),
                           ("ssl.truststore.location", self.truststore_location),
                           ("ssl.truststore.password", self.truststore_password)):
            if value is not None:
                out[key] = str(value)
        return out

    def _load(self, ctx: _ssl.SSLContext, need_keystore: bool) -> None:
        try:
            if self.keystore_location is not None:
                _security.load_keystore(ctx, self.keystore_location, self.keystore_type, self.keystore_password,
                                        self.key_password)
            elif need_keystore:
                raise ConfigError("ssl.keystore.location: missing (a TLS listener needs its certificate and key)")
            if self.truststore_location is not None:
                _security.load_truststore(ctx, self.truststore_location, self.truststore_type,
                                          self.truststore_password)
            elif not need_keystore:
                ctx.load_default_certs()  # a client without a truststore trusts the system's CAs, as Java does
        except _security.SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None

    def server_context(self) -> _ssl.SSLContext:
        """The listener's context: its certificate, and the peer certificates ssl.client.auth asks for."""
        ctx = _ssl.SSLContext(_ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols: TLSv1.2,TLSv1.3
        self._load(ctx, need_keystore=True)
        ctx.verify_mode = {"required": _ssl.CERT_REQUIRED, "requested": _ssl.CERT_OPTIONAL,
                           "none": _ssl.CERT_NONE}[self.client_auth]
        return ctx

    def client_context(self) -> _ssl.SSLContext:
        """The context of the node's requests to its peers: their certificates checked against the
        truststore (and their host name, with ssl.endpoint.identification.algorithm=https), ours offered."""
        ctx = _ssl.SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = _ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = self.endpoint_identification_algorithm.lower() == "https"
        ctx.verify_mode = _ssl.CERT_REQUIRED
        self._load(ctx, need_keystore=False)
        return ctx


def _security_protocol(props: Mapping[str, str], listener: Listener, listeners: tuple[Listener, ...],
                       controller_names: list[str]) -> str:
    """The controller listener's protocol, as Kafka's ``KafkaConfig.effectiveListenerSecurityProtocolMap``
    decides it: the map given, else the protocol names map to themselves and, when no listener is named
    after SSL or SASL, the controller listeners are PLAINTEXT. All four are served (SASL: reference/security.py)."""
    raw = props.get("listener.security.protocol.map")
    if raw is not None:
        mapping: dict[str, str] = {}
        for part in raw.split(","):
            name, sep, proto = part.strip().partition(":")
            if not sep or not name.strip() or proto.strip().upper() not in _PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map: expected NAME:PROTOCOL[,...] with PROTOCOL one of "
                    f"{', '.join(_PROTOCOLS)}, got {raw!r}"
                )
            mapping[name.strip().upper()] = proto.strip().upper()
    else:
        mapping = {p: p for p in _PROTOCOLS}
        names = {lst.name for lst in listeners} | set(controller_names)
        if not names & {"SSL", "SASL_SSL", "SASL_PLAINTEXT"}:
            mapping.update({n: "PLAINTEXT" for n in controller_names or [listener.name]})
    protocol = mapping.get(listener.name)
    if protocol is None:
        raise ConfigError(
            f"listener.security.protocol.map: no security protocol for the controller listener {listener.name}"
        )
    return protocol


def _ssl_settings(props: Mapping[str, str], listener: Listener, protocol: str) -> SslSettings | None:
    """The TLS settings for an SSL listener; a config that asks for security this node does not honour
    (SASL, authorization, ssl.* keys it does not read, TLS settings on a PLAINTEXT listener) stops it."""
    prefix = f"listener.name.{listener.name.lower()}."
    unsupported = sorted(k for k in props if _UNSUPPORTED_SECURITY.match(k)
                         and k not in SSL_KEYS and k.removeprefix(prefix) not in SSL_KEYS
                         and k not in _security.SECURITY_KEYS and not _SASL_READ.match(k))
    if unsupported:
        raise ConfigError(
            f"{unsupported[0]}: not supported by this node yet"
            + (f" (nor {', '.join(unsupported[1:])})" if len(unsupported) > 1 else "")
            + "; it would run without the security this asks for, so it does not start"
        )

    def get(key: str) -> str | None:
        value = props.get(prefix + key, props.get(key))
        if value is None or (not value.strip() and key != "ssl.endpoint.identification.algorithm"):
            return None
        return value.strip()

    given = [k for k in SSL_KEYS if get(k) is not None and k != "ssl.endpoint.identification.algorithm"]
    if protocol not in ("SSL", "SASL_SSL"):
        if given:
            raise ConfigError(
                f"{given[0]}: set, but the controller listener {listener.name} is {protocol} "
                f"(listener.security.protocol.map): it would serve without TLS; map it to SSL or SASL_SSL, or remove "
                f"the ssl.* keys"
            )
        return None
    settings: dict[str, object] = {}
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if key == "ssl.truststore.type" and get("ssl.truststore.location") is None:
            settings["truststore_type"] = (get(key) or "PEM").upper()  # no truststore: the type is unused
            continue
        kind = (get(key) or "JKS").upper()  # Kafka's default store type is JKS
        if kind not in ("PEM", "PKCS12"):
            what = {"JKS": "a Java KeyStore" + (", Kafka's default" if get(key) is None else "")}.get(kind, "unknown")
            raise ConfigError(f"{key}: {kind} ({what}) is not supported by this node; use PEM or PKCS12")
        settings[key.split(".")[1] + "_type"] = kind
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth: expected one of {', '.join(_CLIENT_AUTH)}, got {get('ssl.client.auth')!r}")
    algorithm = get("ssl.endpoint.identification.algorithm")
    algorithm = "https" if algorithm is None else algorithm
    if algorithm.lower() not in ("https", ""):
        raise ConfigError(f"ssl.endpoint.identification.algorithm: expected https or empty, got {algorithm!r}")
    keystore = get("ssl.keystore.location")
    truststore = get("ssl.truststore.location")
    if keystore is None:
        raise ConfigError(f"ssl.keystore.location: missing (the controller listener {listener.name} is {protocol})")
    if client_auth != "none" and truststore is None:
        raise ConfigError(
            f"ssl.truststore.location: missing (ssl.client.auth={client_auth} needs the certificates to trust)"
        )
    return SslSettings(
        keystore_type=str(settings["keystore_type"]),
        keystore_location=Path(keystore),
        keystore_password=get("ssl.keystore.password"),
        key_password=get("ssl.key.password"),
        truststore_type=str(settings["truststore_type"]),
        truststore_location=Path(truststore) if truststore else None,
        truststore_password=get("ssl.truststore.password"),
        client_auth=client_auth,
        endpoint_identification_algorithm=algorithm,
    )
