"""Authentication and authorization on the controller listener, with Kafka's settings and wire exchange.

* **Principals**, as Kafka's ``DefaultKafkaPrincipalBuilder`` makes them: a SASL connection is
  ``User:<the authenticated name>``; a TLS connection whose peer showed a certificate is ``User:`` and the
  certificate's subject in RFC 2253 form (``User:CN=node-1``, ``User:CN=a,OU=b,O=c``: what Java's
  ``X500Principal.getName()`` prints, with ``ssl.principal.mapping.rules=DEFAULT``); anything else is
  ``User:ANONYMOUS``.
* **SASL** (``SASL_SSL`` or ``SASL_PLAINTEXT`` in ``listener.security.protocol.map``): PLAIN and
  SCRAM-SHA-256/512 over SaslHandshake v1 (api key 17) and SaslAuthenticate (api key 36), as Kafka's
  ``SaslServerAuthenticator`` / ``SaslClientAuthenticator`` run them. Settings: ``sasl.enabled.mechanisms``,
  ``sasl.mechanism.controller.protocol`` (what the node's own requests to the other voters use) and one
  JAAS entry per mechanism, ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (or ``sasl.jaas.config``):

      org.apache.kafka.common.security.plain.PlainLoginModule required
          username="node-1" password="n1-secret" user_node-1="n1-secret" user_node-2="n2-secret";
      org.apache.kafka.common.security.scram.ScramLoginModule required username="node-1" password="n1-secret";

  ``username``/``password`` are the node's own login (its requests to its peers); PLAIN's ``user_<name>``
  options are the accounts it accepts, as in Kafka. SCRAM accounts: Kafka keeps their salted credentials
  in the metadata log (``kafka-storage format --add-scram``, ``kafka-configs --alter --add-config``). This
  node reads them at start from two places: the UserScramCredentialRecords of ``bootstrap.checkpoint`` in
  its metadata log directory (``kraft-tck format --add-scram``, as ``kafka-storage format``; see
  reference/bootstrap.py), and the file named by its own key ``reference.sasl.scram.credentials.file``,
  one ``kafka-storage --add-scram`` argument a line, e.g. ``SCRAM-SHA-256=[name=node-1,password=n1-secret]``
  (``iterations=N`` optional, default 4096 as Kafka's; ``#`` comments), whose entries win over the
  bootstrap's for the same user and mechanism. SCRAM enabled with neither stops the node: it would accept
  nobody. The salted keys are derived with ``scramp`` (a maintained SCRAM library) at start; the exchange
  itself is scramp's too.
* **Authorization**: ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`` turns
  it on; ``super.users`` (``User:a;User:CN=b``) may do everything; the node's own key
  ``reference.authorizer.acls`` grants operations on the cluster resource (Kafka keeps ACLs in the metadata
  log, written by ``kafka-acls``): ``ClusterAction:User:CN=node-2;Describe:User:ops``, several operations
  as ``ClusterAction,Describe:User:x``; ``allow.everyone.if.no.acl.found=true`` lets anybody in while no ACL
  is given, as Kafka's. Operations per request are Kafka's ``ControllerApis``: Vote, BeginQuorumEpoch,
  EndQuorumEpoch, Fetch, FetchSnapshot, BrokerRegistration and BrokerHeartbeat need CLUSTER_ACTION,
  DescribeQuorum DESCRIBE, DescribeCluster ALTER (on a controller); a refused one is answered
  CLUSTER_AUTHORIZATION_FAILED and changes nothing.

Nothing here does cryptography by hand: TLS is Python's ``ssl``, SCRAM is ``scramp``, certificates are read
with ``cryptography``.
"""

from __future__ import annotations

import contextvars
import hmac
import logging
import re
import ssl as _ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference.bootstrap import (
    BootstrapError,
    ScramArgument,
    ScramCredential,
    metadata_dir_of,
    parse_scram_argument,
    read_bootstrap,
)
from kraft_tck.spec.errors import Errors

log = logging.getLogger("kraft_tck.reference.security")

ANONYMOUS = "User:ANONYMOUS"
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: What the node advertises for the two SASL apis: SaslHandshake v1 only (v0 sends raw tokens after the
#: handshake, which Kafka keeps for clients older than 1.0), SaslAuthenticate v0-2.
SASL_API_VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


class SecurityConfigError(ValueError):
    """A security setting that cannot be honoured; the message names the key."""


# ============================================================================================ principals


def principal_from_certificate(der: bytes) -> str:
    """``User:`` and the certificate's subject as RFC 2253 (most specific attribute first), as Kafka's
    default principal builder names an mTLS peer."""
    from cryptography import x509

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()


def tls_principal(ssl_object: Any) -> str:
    """The principal of a TLS connection: from the peer's certificate, or ANONYMOUS without one."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    return principal_from_certificate(der) if der else ANONYMOUS


# ============================================================================================ JAAS


@dataclass(frozen=True)
class JaasEntry:
    """One ``sasl.jaas.config`` value: its login module and options."""

    module: str
    options: tuple[tuple[str, str], ...] = field(repr=False)

    def get(self, key: str) -> str | None:
        return dict(self.options).get(key)


_JAAS = re.compile(r"^\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)"
                   r"(?P<opts>.*?)\s*;\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[^\s=;"]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')


def parse_jaas(text: str, key: str) -> JaasEntry:
    """``Module flag k="v" k2=v2;`` (one login module, as Kafka's ``sasl.jaas.config`` takes)."""
    m = _JAAS.match(text)
    if m is None:
        raise SecurityConfigError(f"{key}: expected 'LoginModule required key=\"value\" ...;', got a value that "
                                  "does not parse as one JAAS login module")
    opts: list[tuple[str, str]] = []
    rest = m.group("opts")
    pos = 0
    while pos < len(rest) and rest[pos:].strip():
        om = _JAAS_OPTION.match(rest, pos)
        if om is None:
            raise SecurityConfigError(f"{key}: cannot read the JAAS options after {rest[:pos].strip()[-30:]!r}")
        value = om.group("quoted")
        value = re.sub(r"\\(.)", r"\1", value) if value is not None else om.group("bare")
        opts.append((om.group("key"), value))
        pos = om.end()
    return JaasEntry(m.group("module"), tuple(opts))


# ============================================================================================ SASL settings


def load_scram_file(path: Path, key: str) -> tuple[ScramArgument, ...]:
    """One ``--add-scram`` argument a line (``bootstrap.parse_scram_argument``: Kafka's ScramParser);
    blank lines and ``#`` comments skipped. Salted on first use."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SecurityConfigError(f"{key}: {path}: {exc.strerror or exc}") from None
    accounts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                accounts.append(parse_scram_argument(line))
            except BootstrapError as exc:
                raise SecurityConfigError(f"{key}: {path}:{lineno}: {exc}") from None
    return tuple(accounts)


@dataclass(frozen=True)
class SaslLogin:
    """How to authenticate a connection as a client: a mechanism, a name and a password."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def exchange(self) -> SaslClientExchange:
        return SaslClientExchange(self)


@dataclass(frozen=True)
class SaslSettings:
    """The controller listener's SASL: mechanisms served, accounts accepted, and the node's own login."""

    enabled: tuple[str, ...]
    login: SaslLogin | None  # sasl.mechanism.controller.protocol's JAAS username/password
    plain_users: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    #: The accounts of reference.sasl.scram.credentials.file, as read (salted on first use).
    scram_accounts: tuple[ScramArgument, ...] = field(default=(), repr=False)
    #: Salted credentials from bootstrap.checkpoint (UserScramCredentialRecord), of enabled mechanisms.
    scram_credentials: tuple[ScramCredential, ...] = field(default=(), repr=False)
    # Salted SCRAM keys, derived once per settings object (scramp) on first use.
    _scram_keys: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]] = field(
        default_factory=dict, compare=False, repr=False)

    def authenticator(self) -> SaslServerSession:
        return SaslServerSession(self)

    def scram_keys(self, mechanism: str, name: str) -> tuple[bytes, bytes, bytes, int] | None:
        if not self._scram_keys and (self.scram_accounts or self.scram_credentials):
            # The credentials file wins over the bootstrap for the same mechanism and user.
            for cred in (*self.scram_credentials, *(acc.credential() for acc in self.scram_accounts)):
                self._scram_keys[(cred.mechanism, cred.name)] = (cred.salt, cred.stored_key, cred.server_key,
                                                                 cred.iterations)
        return self._scram_keys.get((mechanism, name))


#: True while ``kraft-tck format`` reads the node's configuration: the SCRAM credentials it is about to
#: write into bootstrap.checkpoint are not there yet, so SCRAM without credentials is not refused then.
FORMATTING: contextvars.ContextVar[bool] = contextvars.ContextVar("FORMATTING", default=False)


#: Keys read by :func:`parse_sasl` and :func:`parse_authorizer` (listener-prefixed forms count as well).
SECURITY_KEYS = frozenset({
    "sasl.enabled.mechanisms", "sasl.mechanism.controller.protocol", "sasl.jaas.config",
    "reference.sasl.scram.credentials.file", "authorizer.class.name", "super.users",
    "allow.everyone.if.no.acl.found", "reference.authorizer.acls", "principal.builder.class",
    "ssl.principal.mapping.rules",
})


def _listener_get(props: Mapping[str, str], listener: str, key: str) -> str | None:
    value = props.get(f"listener.name.{listener.lower()}.{key}", props.get(key))
    return value.strip() if value is not None and value.strip() else None


def parse_sasl(props: Mapping[str, str], listener: str, protocol: str) -> SaslSettings | None:
    """The SASL settings of a SASL_SSL / SASL_PLAINTEXT controller listener (None for the others, where a
    SASL setting is refused: it would be silently ignored)."""
    if not protocol.startswith("SASL"):
        given = sorted(k for k in props if re.match(r"^(?:listener\.name\.[^.]+\.)?(?:[a-z0-9-]+\.)?sasl\.", k)
                       and not k.startswith("sasl.kerberos.") and k != "sasl.mechanism.inter.broker.protocol")
        if given:
            raise SecurityConfigError(
                f"{given[0]}: set, but the controller listener {listener} is {protocol} "
                "(listener.security.protocol.map): it would serve without SASL; map it to SASL_SSL or remove it")
        return None
    raw = _listener_get(props, listener, "sasl.enabled.mechanisms")
    enabled = tuple(m.strip().upper() for m in (raw or "GSSAPI").split(",") if m.strip())
    for mech in enabled:
        if mech not in MECHANISMS:
            why = " (Kafka's default when sasl.enabled.mechanisms is not set)" if raw is None else ""
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms: {mech}{why} is not supported by this node; use "
                f"{', '.join(MECHANISMS)}")
    controller_mech = (props.get("sasl.mechanism.controller.protocol") or "GSSAPI").strip().upper()
    if controller_mech not in MECHANISMS:
        raise SecurityConfigError(
            f"sasl.mechanism.controller.protocol: {controller_mech}"
            + (" (Kafka's default)" if "sasl.mechanism.controller.protocol" not in props else "")
            + f" is not supported by this node; use one of {', '.join(MECHANISMS)}")
    if controller_mech not in enabled:
        raise SecurityConfigError(
            f"sasl.mechanism.controller.protocol: {controller_mech} is not in sasl.enabled.mechanisms "
            f"({','.join(enabled)}): the other voters would refuse this node's requests")
    plain_users: list[tuple[str, str]] = []
    login: SaslLogin | None = None
    for mech in dict.fromkeys((*enabled, controller_mech)):
        key = f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config"
        text = props.get(key) or props.get("sasl.jaas.config")
        if not text or not text.strip():
            raise SecurityConfigError(f"{key}: missing (each enabled SASL mechanism needs its JAAS login module)")
        entry = parse_jaas(text, key)
        module = PLAIN_MODULE if mech == "PLAIN" else SCRAM_MODULE
        if entry.module != module:
            raise SecurityConfigError(f"{key}: {mech} needs {module}, got {entry.module}")
        if mech == "PLAIN":
            plain_users = [(k[5:], v) for k, v in entry.options if k.startswith("user_") and len(k) > 5]
        if mech == controller_mech:
            username, password = entry.get("username"), entry.get("password")
            if not username or password is None:
                raise SecurityConfigError(f"{key}: needs username= and password= (the node's own login for "
                                          f"its requests to the other voters, sasl.mechanism.controller.protocol)")
            login = SaslLogin(mech, username, password)
    scram: tuple[ScramArgument, ...] = ()
    from_bootstrap: tuple[ScramCredential, ...] = ()
    path = props.get("reference.sasl.scram.credentials.file", "").strip()
    if any(m.startswith("SCRAM") for m in enabled):
        metadata_dir = metadata_dir_of(dict(props))
        try:
            boot = read_bootstrap(metadata_dir) if metadata_dir is not None else None
        except BootstrapError as exc:
            raise SecurityConfigError(f"{exc} (read for the SCRAM credentials kraft-tck format --add-scram "
                                      "writes)") from None
        if boot is not None:
            from_bootstrap = tuple(c for c in boot.credentials if c.mechanism in enabled)
        if not path and not from_bootstrap and not FORMATTING.get():
            where = f"{metadata_dir}/bootstrap.checkpoint" if metadata_dir is not None else "bootstrap.checkpoint"
            raise SecurityConfigError(
                "reference.sasl.scram.credentials.file: missing, and " + where + " holds no SCRAM credential "
                "(SCRAM is enabled: format with kraft-tck format --add-scram 'SCRAM-SHA-256=[name=...,password="
                "...]', or name a file of such arguments, one a line)")
        if path:
            scram = load_scram_file(Path(path), "reference.sasl.scram.credentials.file")
        unused = [a for a in scram if a.mechanism not in enabled]
        if unused:
            raise SecurityConfigError(f"reference.sasl.scram.credentials.file: {unused[0].mechanism} credential for "
                                      f"{unused[0].name}, but that mechanism is not in sasl.enabled.mechanisms")
    elif path:
        raise SecurityConfigError("reference.sasl.scram.credentials.file: set, but no SCRAM mechanism is in "
                                  "sasl.enabled.mechanisms")
    if "PLAIN" in enabled and not plain_users:
        raise SecurityConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config: no "
                                  "user_<name>=\"password\" option: PLAIN would accept nobody")
    return SaslSettings(enabled, login, tuple(plain_users), scram, from_bootstrap)


# ============================================================================================ SASL exchange


class SaslError(Exception):
    """The exchange failed; the message is what the peer is told (never a password)."""


class SaslServerSession:
    """One connection's SASL state on the server, as Kafka's ``SaslServerAuthenticator``: ApiVersions and
    one SaslHandshake v1, then SaslAuthenticate until the mechanism completes. ``handle`` returns the
    answer and whether the connection closes after it (an unsupported mechanism, a failed login)."""

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        self.mechanism: str | None = None
        self.principal: str | None = None  # set once authenticated
        self._scram: Any = None
        self._scram_step = 0
        self._scram_user = ""

    def handle(self, api_key: int, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if api_key == SASL_HANDSHAKE:
            return self._handshake(str(body.get("Mechanism") or ""))
        return self._authenticate(bytes(body.get("AuthBytes") or b""))

    def _handshake(self, mechanism: str) -> tuple[dict[str, Any], bool]:
        enabled = list(self.settings.enabled)
        if self.principal is not None or self.mechanism is not None:
            # KafkaApis.handleSaslHandshakeRequest: a handshake after authentication is out of order.
            return {"ErrorCode": int(Errors.ILLEGAL_SASL_STATE), "Mechanisms": enabled}, self.principal is None
        if mechanism not in self.settings.enabled:
            return {"ErrorCode": int(Errors.UNSUPPORTED_SASL_MECHANISM), "Mechanisms": enabled}, True
        self.mechanism = mechanism
        return {"ErrorCode": int(Errors.NONE), "Mechanisms": enabled}, False

    @staticmethod
    def _failed(message: str, error: Errors = Errors.SASL_AUTHENTICATION_FAILED) -> tuple[dict[str, Any], bool]:
        return {"ErrorCode": int(error), "ErrorMessage": message, "AuthBytes": b"", "SessionLifetimeMs": 0}, True

    def _authenticate(self, data: bytes) -> tuple[dict[str, Any], bool]:
        if self.principal is not None:
            return self._failed("SaslAuthenticate request received after successful authentication",
                                Errors.ILLEGAL_SASL_STATE)
        if self.mechanism is None:
            return self._failed("SaslAuthenticate before SaslHandshake", Errors.ILLEGAL_SASL_STATE)
        try:
            out = self._plain(data) if self.mechanism == "PLAIN" else self._scram_message(data)
        except SaslError as exc:
            return self._failed(str(exc))
        return {"ErrorCode": int(Errors.NONE), "ErrorMessage": None, "AuthBytes": out, "SessionLifetimeMs": 0}, False

    def _plain(self, data: bytes) -> bytes:
        # RFC 4616: [authzid] NUL authcid NUL passwd (Kafka's PlainSaslServer.evaluateResponse).
        parts = data.split(b"\x00")
        if len(parts) != 3:
            raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslError("Authentication failed: username not specified")
        if authzid and authzid != username:
            raise SaslError("Authentication failed: Client requested an authorization id that is different "
                            "from username")
        expected = dict(self.settings.plain_users).get(username)
        # Compared in constant time; an unknown user costs the same comparison.
        if not hmac.compare_digest((expected or "\x00unknown").encode(), password.encode()) or expected is None:
            raise SaslError("Authentication failed: Invalid username or password")
        self.principal = f"User:{username}"
        return b""

    def _scram_message(self, data: bytes) -> bytes:
        import scramp

        mechanism = self.mechanism
        assert mechanism is not None
        try:
            if self._scram_step == 0:
                self._scram_step = 1

                def auth_fn(username: str) -> tuple[bytes, bytes, bytes, int]:
                    # RFC 5802 saslname: ',' and '=' arrive as '=2C' and '=3D' (Kafka's ScramFormatter.username).
                    username = username.replace("=2C", ",").replace("=3D", "=")
                    self._scram_user = username
                    keys = self.settings.scram_keys(mechanism, username)
                    if keys is None:
                        raise SaslError(f"Authentication failed during authentication due to invalid credentials "
                                        f"with SASL mechanism {mechanism}")
                    return keys

                self._scram = scramp.ScramMechanism(mechanism).make_server(auth_fn)
                self._scram.set_client_first(data.decode("utf-8"))
                return str(self._scram.get_server_first()).encode("utf-8")
            if self._scram_step == 1:
                self._scram_step = 2
                self._scram.set_client_final(data.decode("utf-8"))
                final = str(self._scram.get_server_final()).encode("utf-8")
                self.principal = f"User:{self._scram_user}"
                return final
        except (scramp.ScramException, UnicodeDecodeError, ValueError, AttributeError, TypeError):
            raise SaslError(f"Authentication failed during authentication due to invalid credentials with SASL "
                            f"mechanism {mechanism}") from None
        raise SaslError("SCRAM exchange already complete")


class SaslClientExchange:
    """The client's side of one exchange: ``first()`` is the first SaslAuthenticate payload; ``respond``
    takes the server's bytes and gives the next payload, or None when done (SCRAM: the server's signature
    checked; PLAIN: done after one round). SaslError when the server's answer does not check."""

    def __init__(self, login: SaslLogin) -> None:
        self.login = login
        self._scram: Any = None
        self._step = 0

    def first(self) -> bytes:
        if self.login.mechanism == "PLAIN":
            return b"\x00" + self.login.username.encode() + b"\x00" + self.login.password.encode()
        import scramp

        self._scram = scramp.ScramClient([self.login.mechanism], self.login.username, self.login.password)
        return str(self._scram.get_client_first()).encode("utf-8")

    def respond(self, server: bytes) -> bytes | None:
        if self.login.mechanism == "PLAIN":
            return None
        import scramp

        try:
            if self._step == 0:
                self._step = 1
                self._scram.set_server_first(server.decode("utf-8"))
                return str(self._scram.get_client_final()).encode("utf-8")
            self._scram.set_server_final(server.decode("utf-8"))
            return None
        except (scramp.ScramException, UnicodeDecodeError, ValueError) as exc:
            raise SaslError(f"the server's SCRAM answer does not check: {exc}") from None


# ============================================================================================ authorization

#: Kafka's AclOperation names (kafka-acls spells them ClusterAction, Describe, ...).
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS")
#: Operations that imply DESCRIBE (Kafka's StandardAuthorizerData: READ, WRITE, DELETE, ALTER imply DESCRIBE).
_IMPLY_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER"})
#: What each RPC the node serves needs on the cluster resource (Kafka's ControllerApis).
REQUIRED_OPERATION: dict[int, str] = {
    52: "CLUSTER_ACTION",  # Vote
    53: "CLUSTER_ACTION",  # BeginQuorumEpoch
    54: "CLUSTER_ACTION",  # EndQuorumEpoch
    1: "CLUSTER_ACTION",  # Fetch
    59: "CLUSTER_ACTION",  # FetchSnapshot
    62: "CLUSTER_ACTION",  # BrokerRegistration
    63: "CLUSTER_ACTION",  # BrokerHeartbeat
    55: "DESCRIBE",  # DescribeQuorum
    60: "ALTER",  # DescribeCluster: on a controller ALTER, not DESCRIBE (ControllerApis.handleDescribeCluster)
    80: "ALTER",  # AddRaftVoter (KIP-853; ControllerApis.handleAddRaftVoter)
    81: "ALTER",  # RemoveRaftVoter (ControllerApis.handleRemoveRaftVoter)
    82: "CLUSTER_ACTION",  # UpdateRaftVoter: a voter reports itself (ControllerApis.handleUpdateRaftVoter)
}


def _operation(name: str, key: str) -> str:
    norm = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name.strip()).upper().replace("-", "_")
    if norm not in OPERATIONS:
        raise SecurityConfigError(f"{key}: {name.strip()!r} is not a Kafka ACL operation "
                                  f"(e.g. ClusterAction, Describe, All)")
    return norm


def _principal(text: str, key: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise SecurityConfigError(f"{key}: expected a principal as Type:name (e.g. User:CN=node-1), "
                                  f"got {text.strip()!r}")
    return f"{kind}:{name}"


@dataclass(frozen=True)
class AuthorizerSettings:
    """Kafka's StandardAuthorizer on the cluster resource: super users, allow ACLs, and the no-ACL rule."""

    super_users: frozenset[str] = frozenset()
    acls: tuple[tuple[str, frozenset[str]], ...] = ()  # (principal, operations) allowed
    allow_everyone_if_no_acl_found: bool = False

    def authorize(self, principal: str, operation: str) -> bool:
        if principal in self.super_users:
            return True
        if not self.acls:
            return self.allow_everyone_if_no_acl_found
        for who, ops in self.acls:
            if who in (principal, "User:*") and (
                    operation in ops or "ALL" in ops or (operation == "DESCRIBE" and ops & _IMPLY_DESCRIBE)):
                return True
        return False


def parse_authorizer(props: Mapping[str, str]) -> AuthorizerSettings | None:
    """None without ``authorizer.class.name`` (Kafka then authorizes every request); the ACL keys without
    an authorizer are refused: they would be silently ignored."""
    name = (props.get("authorizer.class.name") or "").strip()
    builder = (props.get("principal.builder.class") or DEFAULT_PRINCIPAL_BUILDER).strip()
    if builder != DEFAULT_PRINCIPAL_BUILDER:
        raise SecurityConfigError(f"principal.builder.class: {builder} is not supported by this node; it builds "
                                  f"principals as {DEFAULT_PRINCIPAL_BUILDER} does")
    rules = (props.get("ssl.principal.mapping.rules") or "DEFAULT").strip()
    if rules != "DEFAULT":
        raise SecurityConfigError("ssl.principal.mapping.rules: only DEFAULT (the certificate's full subject) is "
                                  "supported by this node")
    if not name:
        given = [k for k in ("super.users", "reference.authorizer.acls", "allow.everyone.if.no.acl.found")
                 if k in props]
        if given:
            raise SecurityConfigError(f"{given[0]}: set, but authorizer.class.name is not: nothing would be "
                                      f"authorized (set authorizer.class.name={STANDARD_AUTHORIZER})")
        return None
    if name != STANDARD_AUTHORIZER:
        raise SecurityConfigError(f"authorizer.class.name: {name} is not supported by this node; "
                                  f"use {STANDARD_AUTHORIZER}")
    supers = frozenset(_principal(p, "super.users") for p in (props.get("super.users") or "").split(";") if p.strip())
    acls: list[tuple[str, frozenset[str]]] = []
    for entry in (props.get("reference.authorizer.acls") or "").split(";"):
        if not entry.strip():
            continue
        ops, sep, who = entry.partition(":")
        if not sep:
            raise SecurityConfigError(f"reference.authorizer.acls: expected OPERATION[,OPERATION]:Type:name, got "
                                      f"{entry.strip()!r}")
        acls.append((_principal(who, "reference.authorizer.acls"),
                     frozenset(_operation(o, "reference.authorizer.acls") for o in ops.split(","))))
    raw_allow = (props.get("allow.everyone.if.no.acl.found") or "false").strip().lower()
    if raw_allow not in ("true", "false"):
        raise SecurityConfigError(f"allow.everyone.if.no.acl.found: expected true or false, got {raw_allow!r}")
    if not supers and not acls and raw_allow != "true":
        log.warning("authorizer.class.name is set but super.users, reference.authorizer.acls and "
                    "allow.everyone.if.no.acl.found give nobody any operation: every Vote, Fetch and "
                    "DescribeQuorum will be refused (CLUSTER_AUTHORIZATION_FAILED)")
    return AuthorizerSettings(supers, tuple(acls), raw_allow == "true")


# ============================================================================================ client settings


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security (Kafka's client properties: ``security.protocol``, ``ssl.*``, ``sasl.mechanism``,
    ``sasl.jaas.config``), for ``kraft-tck quorum --command-config`` and the cluster's own describe."""

    protocol: str = "PLAINTEXT"
    ssl_context: _ssl.SSLContext | None = None
    sasl: SaslLogin | None = None


def client_security(props: Mapping[str, str], source: str = "--command-config") -> ClientSecurity:
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise SecurityConfigError(f"{source}: security.protocol={protocol} is not a security protocol Kafka knows")
    ctx: _ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        ctx = client_ssl_context(props, source)
    login: SaslLogin | None = None
    if protocol.startswith("SASL"):
        mech = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
        if mech not in MECHANISMS:
            raise SecurityConfigError(f"{source}: sasl.mechanism={mech} is not supported; use {', '.join(MECHANISMS)}")
        text = props.get("sasl.jaas.config")
        if not text:
            raise SecurityConfigError(f"{source}: sasl.jaas.config is missing (the login for {mech})")
        entry = parse_jaas(text, f"{source}: sasl.jaas.config")
        if not entry.get("username") or entry.get("password") is None:
            raise SecurityConfigError(f"{source}: sasl.jaas.config needs username= and password=")
        login = SaslLogin(mech, str(entry.get("username")), str(entry.get("password")))
    # As Kafka's clients, ssl.* and sasl.* keys are unused (not refused) when the protocol does not need them:
    # a controller's server.properties given as --command-config carries them for its listener.
    return ClientSecurity(protocol, ctx, login)


def client_ssl_context(props: Mapping[str, str], source: str) -> _ssl.SSLContext:
    """A client TLS context from Kafka's ``ssl.*`` client keys (PEM or PKCS12 stores)."""
    ctx = _ssl.SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = _ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = (props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() == "https")
    trust = (props.get("ssl.truststore.location") or "").strip()
    if trust:
        load_truststore(ctx, Path(trust), (props.get("ssl.truststore.type") or "PEM").strip().upper(),
                        props.get("ssl.truststore.password"), f"{source}: ssl.truststore.location")
    else:
        ctx.load_default_certs()
    keystore = (props.get("ssl.keystore.location") or "").strip()
    if keystore:
        load_keystore(ctx, Path(keystore), (props.get("ssl.keystore.type") or "PEM").strip().upper(),
                      props.get("ssl.keystore.password"), props.get("ssl.key.password"),
                      f"{source}: ssl.keystore.location")
    return ctx


# ============================================================================================ key stores


def _read(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SecurityConfigError(f"{key}: {path}: no such file") from None
    except OSError as exc:
        raise SecurityConfigError(f"{key}: {path}: {exc.strerror or exc}") from None


def load_keystore(ctx: _ssl.SSLContext, path: Path, kind: str, store_password: str | None,
                  key_password: str | None, key: str = "ssl.keystore.location") -> None:
    """Load a keystore into ``ctx``: PEM (key and chain in one file, ``ssl.key.password`` for an encrypted
    key) or PKCS12 (``ssl.keystore.password``; read with ``cryptography``)."""
    if kind == "PEM":
        _read(path, key)
        try:
            ctx.load_cert_chain(str(path), password=key_password or store_password)
        except (OSError, _ssl.SSLError) as exc:
            raise SecurityConfigError(f"{key}: {path}: not a PEM private key and certificate chain readable with "
                                      f"ssl.key.password ({exc})") from None
        return
    if kind != "PKCS12":
        raise SecurityConfigError(f"{key.rsplit(':', 1)[0]}: ssl.keystore.type={kind} is not supported; "
                                  "use PEM or PKCS12")
    import os
    import secrets
    import tempfile

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = _read(path, key)
    try:
        priv, cert, chain = pkcs12.load_key_and_certificates(
            data, store_password.encode() if store_password else None)
    except ValueError as exc:
        raise SecurityConfigError(f"{key}: {path}: not a PKCS12 keystore that ssl.keystore.password opens "
                                  f"({exc})") from None
    if priv is None or cert is None:
        raise SecurityConfigError(f"{key}: {path}: the PKCS12 keystore holds no private key with its certificate")
    # ssl loads keys from files only: the key goes to a private temporary file encrypted with a one-time
    # password (never in clear on disk), and the file is removed once loaded.
    once = secrets.token_hex(16).encode()
    pem = priv.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(once))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (cert, *(chain or ())))
    fd, tmp = tempfile.mkstemp(prefix="kraft-tck-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(tmp, password=once)
    except (OSError, _ssl.SSLError) as exc:
        raise SecurityConfigError(f"{key}: {path}: the PKCS12 key and certificate do not load ({exc})") from None
    finally:
        os.unlink(tmp)


def load_truststore(ctx: _ssl.SSLContext, path: Path, kind: str, password: str | None,
                    key: str = "ssl.truststore.location") -> None:
    """Trust the certificates of a PEM file or a PKCS12 truststore (``ssl.truststore.password``)."""
    if kind == "PEM":
        _read(path, key)
        try:
            ctx.load_verify_locations(cafile=str(path))
        except (OSError, _ssl.SSLError) as exc:
            raise SecurityConfigError(f"{key}: {path}: not PEM certificates ({exc})") from None
        return
    if kind != "PKCS12":
        raise SecurityConfigError(f"{key.rsplit(':', 1)[0]}: ssl.truststore.type={kind} is not supported; "
                                  "use PEM or PKCS12")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = _read(path, key)
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise SecurityConfigError(f"{key}: {path}: not a PKCS12 truststore that ssl.truststore.password opens "
                                  f"({exc})") from None
    certs = [c.certificate for c in ([store.cert] if store.cert else []) + list(store.additional_certs)]
    if not certs:
        raise SecurityConfigError(f"{key}: {path}: the PKCS12 truststore holds no certificate")
    ctx.load_verify_locations(cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
