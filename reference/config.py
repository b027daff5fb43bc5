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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("kraft_tck.reference.config")


class ConfigError(ValueError):
    """A missing or malformed setting. The message names the key (or file/line) and the expected form."""


# ------------------------------------------------------------------------------------------ .properties

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines (an odd number of trailing backslashes), as java.util.Properties does.

    Returns (first physical line number, logical line) pairs, comments and blank lines dropped.
    """
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    # Only \n, \r and \r\n end a line in a .properties file (str.splitlines also splits on \v, \x1c...).
    for lineno, raw in enumerate(_LINE_BREAK.split(text), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = lineno
            pending = ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:  # a continuation on the very last line: Java keeps what it has
        out.append((start, pending))
    return out


def _unescape(s: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{where}: malformed \\uXXXX escape {s[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped ``=``, ``:`` or whitespace (Java's rule)."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text: ``#``/``!`` comments, ``key=value``, ``key: value``, ``key value``,
    backslash continuations and the escapes ``\\t \\n \\r \\f \\uXXXX \\<char>``. Later keys win."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        where = f"{source}:{lineno}"
        raw_key, raw_value = _split_key(line)
        key = _unescape(raw_key, where)
        if not key:
            raise ConfigError(f"{where}: line {line!r} has a value but no key")
        props[key] = _unescape(raw_value, where)
    return props


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
    ("broker.session.timeout.ms", "broker_session_timeout_ms", 9000, 1),
    # This node's own setting, not Kafka's (Kafka leaves old log data to the OS page cache): how many
    # bytes of the newest batches the core's log keeps in memory; older ones are read back from the
    # segment files when a follower lags (reference/log.py). Memory then stays bounded in long runs.
    ("reference.log.cache.bytes", "log_cache_bytes", 8 * 1024 * 1024, 0),
)
_ROLES = ("broker", "controller")
# Keys read by from_properties besides the integer settings above.
_OTHER_KEYS = frozenset(
    {
        "node.id",
        "listeners",
        "controller.listener.names",
        "controller.quorum.voters",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "process.roles",
    }
)
KNOWN_KEYS = _OTHER_KEYS | {k for k, *_ in _INT_SETTINGS}


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
    log_cache_bytes: int = 8 * 1024 * 1024
    process_roles: tuple[str, ...] = ()
    # Keys this node does not interpret (Kafka configs carry many), kept verbatim.
    extra: Mapping[str, str] = field(default_factory=dict)

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

        if not props.get("controller.quorum.voters", "").strip():
            raise ConfigError(f"controller.quorum.voters: missing (expected {_VOTERS_FORM})")
        voters = parse_voters(props["controller.quorum.voters"])

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
        if "controller" in roles and node_id not in {v.node_id for v in voters}:
            raise ConfigError(
                f"controller.quorum.voters: node.id {node_id} has process.roles=controller but is not "
                f"among the voters {props['controller.quorum.voters']!r}"
            )

        ints = {attr: _int_setting(props, key, default, lo) for key, attr, default, lo in _INT_SETTINGS}
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

        extra = {k: v for k, v in props.items() if k not in KNOWN_KEYS}
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
            extra=extra,
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
        props["controller.quorum.voters"] = ",".join(str(v) for v in self.voters)
        props["log.dirs"] = str(self.log_dir)
        for key, attr, _default, _lo in _INT_SETTINGS:
            props[key] = str(getattr(self, attr))
        props.update(self.extra)
        return props
