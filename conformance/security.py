"""How the harness reaches a secured target: ``--target-command-config FILE``, a client properties file as
Kafka's own tools take (``kafka-metadata-quorum --command-config``), with Kafka's names:

    security.protocol=SSL
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/ca.pem
    ssl.keystore.type=PEM                     # for a target with ssl.client.auth=required
    ssl.keystore.location=/path/harness.keystore.pem
    ssl.key.password=...                      # if the keystore's key is encrypted
    ssl.endpoint.identification.algorithm=https   # Kafka's default; empty turns host-name checking off

The same identity serves the virtual voters' listeners, which the target connects to as a TLS client.

SASL (``security.protocol=SASL_SSL`` or ``SASL_PLAINTEXT``), with Kafka's client keys:

    sasl.mechanism=SCRAM-SHA-512              # or PLAIN, SCRAM-SHA-256
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
        username="harness" password="harness-secret" user_node-1="node-1-secret";

``username``/``password`` is the harness's login to the target (it must be allowed CLUSTER_ACTION there,
e.g. in ``super.users``, since the virtual voters send Vote, BeginQuorumEpoch and Fetch). The virtual
voters serve the same SASL to the target and accept that login and each ``user_<name>="password"`` option
(the target's own login: what its ``sasl.mechanism.controller.protocol`` JAAS entry says), with the
mechanism the target asks for.

Optional, for the security cases (conformance/test_security.py): an identity the target authenticates but
must not authorize, ``kraft-tck.unauthorized.sasl.jaas.config`` (a login with the same mechanism) or
``kraft-tck.unauthorized.ssl.keystore.location`` (+ ``kraft-tck.unauthorized.ssl.key.password``: a
certificate from a CA the target trusts, for a TLS target). Without one, the unauthorized-principal case is
skipped saying so.

``kraft-tck profile --security SSL|SASL_SSL --certs-dir DIR`` writes such a file (``DIR/harness.properties``)
with throw-away certificates made here with ``cryptography`` (:func:`throw_away_certs`), and prints the
target's matching properties (:func:`secured_profile`).

Written for the harness alone (it shares no code with the reference node it judges); SCRAM is ``scramp``.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.framing import read_frame

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
#: SaslHandshake v1 only (the exchange then goes through SaslAuthenticate), SaslAuthenticate v0-2.
SASL_RANGES: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
UNAUTHORIZED = "kraft-tck.unauthorized."


class SecurityConfigError(ValueError):
    """The command config cannot be honoured: the message names the key or file."""


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties as Kafka's tools write them: ``key=value`` / ``key: value``, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SecurityConfigError(f"--target-command-config: cannot read {path}: {exc.strerror or exc}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise SecurityConfigError(f"{path}: not a key=value line: {line!r}")
        props[line[:cut].strip()] = line[cut + 1 :].strip()
    return props


# ------------------------------------------------------------------------------------------------ SASL


@dataclass(frozen=True)
class Login:
    """A SASL login: mechanism, name, password."""

    mechanism: str
    username: str
    password: str = field(repr=False)


def parse_jaas(text: str, where: str) -> tuple[str, dict[str, str]]:
    """``Module required k="v" ...;`` -> (module, options)."""
    m = re.match(r"^\s*([\w.$]+)\s+(?:required|requisite|sufficient|optional)(.*?)\s*;\s*$", text, re.S)
    if m is None:
        raise SecurityConfigError(f"{where}: not a JAAS login module line ('Module required key=\"value\" ...;')")
    options: dict[str, str] = {}
    rest = m.group(2)
    for om in re.finditer(r'\s*([^\s=;"]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))', rest):
        options[om.group(1)] = re.sub(r"\\(.)", r"\1", om.group(2)) if om.group(2) is not None else om.group(3)
    return m.group(1), options


class SaslFailed(Exception):
    """A login the peer refused, or a server answer that does not check."""


async def authenticate(ask: Callable[[int, int, dict[str, Any]], Awaitable[dict[str, Any]]], login: Login,
                       peer: str) -> None:
    """SaslHandshake v1 then SaslAuthenticate until done, as Kafka's SaslClientAuthenticator; ``ask`` sends one
    request (api key, version, body) and returns the response body."""
    import scramp

    hs = await ask(SASL_HANDSHAKE, 1, {"Mechanism": login.mechanism})
    if hs["ErrorCode"] != Errors.NONE:
        raise SaslFailed(f"{peer} refused SASL mechanism {login.mechanism} (error {hs['ErrorCode']}); it offers "
                         f"{', '.join(hs.get('Mechanisms') or []) or 'none'}")
    scram = None
    if login.mechanism == "PLAIN":
        out: bytes | None = b"\x00" + login.username.encode() + b"\x00" + login.password.encode()
    else:
        scram = scramp.ScramClient([login.mechanism], login.username, login.password)
        out = scram.get_client_first().encode()
    step = 0
    while out is not None:
        resp = await ask(SASL_AUTHENTICATE, 1, {"AuthBytes": out})
        if resp["ErrorCode"] != Errors.NONE:
            raise SaslFailed(f"{peer} refused the SASL {login.mechanism} login as {login.username}: error "
                             f"{resp['ErrorCode']} ({resp.get('ErrorMessage')})")
        if scram is None:
            return
        try:
            if step == 0:
                scram.set_server_first(bytes(resp["AuthBytes"]).decode())
                out = scram.get_client_final().encode()
                step = 1
            else:
                scram.set_server_final(bytes(resp["AuthBytes"]).decode())
                out = None
        except (scramp.ScramException, UnicodeDecodeError, ValueError) as exc:
            raise SaslFailed(f"{peer}: the SCRAM answer does not check: {exc}") from None


async def authenticate_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: Login, peer: str,
                              timeout_s: float) -> None:
    """:func:`authenticate` on a raw connection (no transport in between): for cases that write raw bytes."""
    corr = 9000

    async def ask(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal corr
        corr += 1
        writer.write(codec.encode_request(api_key, version, corr, "kraft-tck", body))
        await writer.drain()
        payload = await asyncio.wait_for(read_frame(reader), timeout_s)
        if payload is None:
            raise SaslFailed(f"{peer} closed the connection during the SASL login")
        got, answer = codec.decode_response(api_key, version, payload)
        if got != corr:
            raise SaslFailed(f"{peer}: SASL answer with correlation id {got}, not {corr}")
        return answer

    await authenticate(ask, login, peer)


class SaslServerSession:
    """The virtual voters' side of one connection: PLAIN and SCRAM against the accounts of the command
    config, as Kafka's SaslServerAuthenticator (only ApiVersions and the two SASL apis until authenticated;
    a refused mechanism or login is answered, then the connection closes)."""

    def __init__(self, accounts: SaslAccounts) -> None:
        self.accounts = accounts
        self.mechanism: str | None = None
        self.user: str | None = None
        self.closing = False
        self._scram: Any = None
        self._scram_user = ""

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def handle(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        if api_key == SASL_HANDSHAKE:
            mech = str(body.get("Mechanism"))
            if self.mechanism is not None or mech not in MECHANISMS:
                self.closing = True
                error = Errors.ILLEGAL_SASL_STATE if self.mechanism else Errors.UNSUPPORTED_SASL_MECHANISM
                return {"ErrorCode": int(error), "Mechanisms": list(MECHANISMS)}
            self.mechanism = mech
            return {"ErrorCode": 0, "Mechanisms": list(MECHANISMS)}
        try:
            out = self._step(bytes(body.get("AuthBytes") or b""))
        except SaslFailed as exc:
            self.closing = True
            return {"ErrorCode": int(Errors.SASL_AUTHENTICATION_FAILED), "ErrorMessage": str(exc), "AuthBytes": b"",
                    "SessionLifetimeMs": 0}
        return {"ErrorCode": 0, "ErrorMessage": None, "AuthBytes": out, "SessionLifetimeMs": 0}

    def _step(self, data: bytes) -> bytes:
        import scramp

        if self.mechanism is None or self.user is not None:
            raise SaslFailed("SaslAuthenticate out of order")
        if self.mechanism == "PLAIN":
            parts = data.split(b"\x00")
            if len(parts) != 3:
                raise SaslFailed("Invalid SASL/PLAIN response")
            user, password = parts[1].decode(errors="replace"), parts[2].decode(errors="replace")
            expected = self.accounts.passwords.get(user)
            if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
                raise SaslFailed("Authentication failed: Invalid username or password")
            self.user = user
            return b""
        mech = self.mechanism
        try:
            if self._scram is None:
                def auth_fn(name: str) -> tuple[bytes, bytes, bytes, int]:
                    self._scram_user = name.replace("=2C", ",").replace("=3D", "=")
                    keys = self.accounts.scram_keys(mech, self._scram_user)
                    if keys is None:
                        raise SaslFailed(f"Authentication failed: unknown user for {mech}")
                    return keys

                self._scram = scramp.ScramMechanism(mech).make_server(auth_fn)
                self._scram.set_client_first(data.decode())
                return str(self._scram.get_server_first()).encode()
            self._scram.set_client_final(data.decode())
            final = str(self._scram.get_server_final()).encode()
            self.user = self._scram_user
            return final
        except SaslFailed:
            raise
        except Exception:
            raise SaslFailed(f"Authentication failed with SASL mechanism {mech}") from None


@dataclass
class SaslAccounts:
    """The logins the virtual voters accept: name -> password (SCRAM keys derived on first use)."""

    passwords: dict[str, str] = field(repr=False)
    _keys: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]] = field(default_factory=dict, repr=False)

    def scram_keys(self, mechanism: str, name: str) -> tuple[bytes, bytes, bytes, int] | None:
        import scramp

        if (mechanism, name) not in self._keys and name in self.passwords:
            self._keys[(mechanism, name)] = scramp.ScramMechanism(mechanism).make_auth_info(
                self.passwords[name], iteration_count=4096)
        return self._keys.get((mechanism, name))

    def session(self) -> SaslServerSession:
        return SaslServerSession(self)


def _login(props: dict[str, str], jaas_key: str, mechanism: str, where: Path) -> tuple[Login, dict[str, str]]:
    text = props.get(jaas_key)
    if not text:
        raise SecurityConfigError(f"{where}: {jaas_key} is missing (the SASL login: username= and password=)")
    module, options = parse_jaas(text, f"{where}: {jaas_key}")
    want = "PlainLoginModule" if mechanism == "PLAIN" else "ScramLoginModule"
    if not module.endswith(want):
        raise SecurityConfigError(f"{where}: {jaas_key}: {mechanism} needs a {want}, got {module}")
    if not options.get("username") or "password" not in options:
        raise SecurityConfigError(f"{where}: {jaas_key} needs username= and password=")
    users = {k[5:]: v for k, v in options.items() if k.startswith("user_") and len(k) > 5}
    return Login(mechanism, options["username"], options["password"]), users


# ------------------------------------------------------------------------------------------------ the target


@dataclass(frozen=True)
class TargetSecurity:
    protocol: str  # PLAINTEXT | SSL | SASL_SSL | SASL_PLAINTEXT
    truststore: Path | None = None
    keystore: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    #: The harness's SASL login (SASL_* protocols).
    login: Login | None = None
    #: The logins the virtual voters accept (the harness's own and the jaas config's user_<name> options).
    accounts: SaslAccounts | None = None
    #: An identity the target authenticates but must not authorize (for the security cases), if given.
    unauthorized_login: Login | None = None
    unauthorized_keystore: Path | None = None
    unauthorized_key_password: str | None = field(default=None, repr=False)
    keystore_type: str = "PEM"  # or PKCS12 (ssl.keystore.password opens it)
    keystore_password: str | None = field(default=None, repr=False)
    truststore_type: str = "PEM"
    truststore_password: str | None = field(default=None, repr=False)

    @classmethod
    def from_file(cls, path: Path) -> TargetSecurity:
        props = read_properties(path)
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"):
            raise SecurityConfigError(f"{path}: security.protocol={protocol}: expected PLAINTEXT, SSL, SASL_SSL or "
                                      "SASL_PLAINTEXT")
        login = accounts = unauthorized_login = None
        if protocol.startswith("SASL"):
            mech = props.get("sasl.mechanism", "GSSAPI").upper()
            if mech not in MECHANISMS:
                raise SecurityConfigError(f"{path}: sasl.mechanism={mech}: the harness speaks "
                                          f"{', '.join(MECHANISMS)}")
            login, users = _login(props, "sasl.jaas.config", mech, path)
            accounts = SaslAccounts({**users, login.username: login.password})
            if UNAUTHORIZED + "sasl.jaas.config" in props:
                unauthorized_login, _ = _login(props, UNAUTHORIZED + "sasl.jaas.config", mech, path)
        else:
            used = sorted(k for k in props if k.startswith(("sasl.", UNAUTHORIZED + "sasl.")))
            if used:
                raise SecurityConfigError(f"{path}: {', '.join(used)} given with security.protocol={protocol}")
        if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
            used = sorted(k for k in props if k.startswith(("ssl.", UNAUTHORIZED + "ssl.")))
            if used:
                raise SecurityConfigError(f"{path}: {', '.join(used)} given with security.protocol={protocol}")
            return cls(protocol, login=login, accounts=accounts, unauthorized_login=unauthorized_login)
        for kind in ("truststore", "keystore"):
            store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
            if store_type not in ("PEM", "PKCS12"):
                raise SecurityConfigError(f"{path}: ssl.{kind}.type={store_type}: the harness reads PEM and PKCS12 "
                                          "stores")
        truststore = props.get("ssl.truststore.location")
        if not truststore:
            raise SecurityConfigError(f"{path}: security.protocol={protocol} needs ssl.truststore.location (the CA "
                                      "that signed the target's certificate)")
        keystore = props.get("ssl.keystore.location") or None
        other = props.get(UNAUTHORIZED + "ssl.keystore.location") or None
        for key, where in (("ssl.truststore.location", truststore), ("ssl.keystore.location", keystore),
                           (UNAUTHORIZED + "ssl.keystore.location", other)):
            if where is not None and not Path(where).is_file():
                raise SecurityConfigError(f"{path}: {key}={where}: no such file")
        return cls(protocol, Path(truststore), Path(keystore) if keystore else None, props.get("ssl.key.password"),
                   props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https",
                   login=login, accounts=accounts, unauthorized_login=unauthorized_login,
                   unauthorized_keystore=Path(other) if other else None,
                   unauthorized_key_password=props.get(UNAUTHORIZED + "ssl.key.password"),
                   keystore_type=props.get("ssl.keystore.type", "PEM").upper(),
                   keystore_password=props.get("ssl.keystore.password"),
                   truststore_type=props.get("ssl.truststore.type", "PEM").upper(),
                   truststore_password=props.get("ssl.truststore.password"))

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    def unauthorized_context(self) -> ssl.SSLContext | None:
        """A client TLS context with the unauthorized identity's certificate (None when not given)."""
        if not self.tls or self.unauthorized_keystore is None:
            return None
        other = TargetSecurity(self.protocol, self.truststore, self.unauthorized_keystore,  # a PEM keystore
                               self.unauthorized_key_password, self.check_hostname,
                               truststore_type=self.truststore_type, truststore_password=self.truststore_password)
        return other.client_context()

    def _load_identity(self, ctx: ssl.SSLContext) -> None:
        assert self.truststore is not None
        if self.truststore_type == "PKCS12":
            ctx.load_verify_locations(cadata=_pkcs12_certificates(self.truststore, self.truststore_password))
        else:
            ctx.load_verify_locations(cafile=str(self.truststore))
        if self.keystore is not None:
            if self.keystore_type == "PKCS12":
                _load_pkcs12_keystore(ctx, self.keystore, self.keystore_password)
                return
            try:
                ctx.load_cert_chain(str(self.keystore), password=self.key_password)
            except (ssl.SSLError, OSError) as exc:
                raise SecurityConfigError(f"ssl.keystore.location={self.keystore}: cannot load the key and "
                                          f"certificate ({exc}); is ssl.key.password right?") from None

    def client_context(self) -> ssl.SSLContext | None:
        """For the harness's connections to the target; None in plaintext."""
        if not self.tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = self.check_hostname
        self._load_identity(ctx)
        return ctx

    def server_context(self) -> ssl.SSLContext | None:
        """For the virtual voters' listeners (the target connects to them); None in plaintext. A client
        certificate is verified when the target presents one (mutual TLS), not demanded."""
        if not self.tls:
            return None
        if self.keystore is None:
            raise SecurityConfigError(f"security.protocol={self.protocol}: the virtual voters serve TLS to the "
                                      "target, so "
                                      "the command config needs ssl.keystore.location (a certificate the "
                                      "target trusts)")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self._load_identity(ctx)
        return ctx


def _pkcs12_certificates(path: Path, password: str | None) -> str:
    """The certificates of a PKCS12 truststore, as PEM text (read with ``cryptography``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store = pkcs12.load_pkcs12(path.read_bytes(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise SecurityConfigError(f"ssl.truststore.location={path}: not a PKCS12 truststore that "
                                  f"ssl.truststore.password opens ({exc})") from None
    certs = ([store.cert] if store.cert else []) + list(store.additional_certs)
    if not certs:
        raise SecurityConfigError(f"ssl.truststore.location={path}: the PKCS12 truststore holds no certificate")
    return "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _load_pkcs12_keystore(ctx: ssl.SSLContext, path: Path, password: str | None) -> None:
    """A PKCS12 keystore's key and chain into ``ctx`` (ssl loads keys from files only: a private temporary
    file, the key encrypted with a one-time password, removed once loaded)."""
    import os
    import secrets
    import tempfile

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        key, cert, chain = pkcs12.load_key_and_certificates(path.read_bytes(), password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise SecurityConfigError(f"ssl.keystore.location={path}: not a PKCS12 keystore that ssl.keystore.password "
                                  f"opens ({exc})") from None
    if key is None or cert is None:
        raise SecurityConfigError(f"ssl.keystore.location={path}: the PKCS12 keystore holds no key with a certificate")
    once = secrets.token_hex(16).encode()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(once))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (cert, *chain))
    fd, tmp = tempfile.mkstemp(prefix="kraft-tck-harness-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(tmp, password=once)
    finally:
        os.unlink(tmp)


# ------------------------------------------------------------------------------------------------ kraft-tck profile

#: The names of the throw-away identities ``kraft-tck profile`` makes: the harness (its client and the virtual
#: voters' servers) and one the target authenticates but must not authorize (the security cases).
HARNESS_NAME, INTRUDER_NAME = "harness", "intruder"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _san(host: str) -> Any:
    import ipaddress

    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def throw_away_certs(directory: Path, names: list[str], hosts: list[str],
                     days: int = 7) -> tuple[Path, dict[str, Path]]:
    """A CA (``ca.pem``, its key ``ca.key`` beside it) and, per name, a PEM keystore ``<name>.keystore.pem``
    (an unencrypted PKCS8 key and a certificate ``CN=<name>`` for ``hosts``, signed by the CA), made with
    ``cryptography``. What is already in ``directory`` is kept (running the profile again keeps the trust a
    target was set up with). For tests and trying things out only: the keys are in clear, the CA's too."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, ca_key_pem = directory / "ca.pem", directory / "ca.key"
    now = datetime.datetime.now(datetime.UTC)

    def private(path: Path, key: Any) -> None:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)

    if ca_pem.is_file() and ca_key_pem.is_file():
        ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
        ca_key: Any = serialization.load_pem_private_key(ca_key_pem.read_bytes(), None)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kraft-tck throw-away CA")])
        ca_cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        private(ca_key_pem, ca_key)
        ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keystores: dict[str, Path] = {}
    for name in names:
        path = directory / f"{name}.keystore.pem"
        keystores[name] = path
        if path.is_file():
            continue
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(ca_cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=days))
                .add_extension(x509.SubjectAlternativeName([_san(h) for h in dict.fromkeys(hosts)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(ca_key, hashes.SHA256()))
        private(path, key)
        with path.open("ab") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
    return ca_pem, keystores


@dataclass(frozen=True)
class SecuredProfile:
    """What ``kraft-tck profile --security`` gives: the target's extra properties, the harness's
    ``--target-command-config`` file, and the SCRAM accounts the target must be formatted with."""

    target: dict[str, str]
    command_config: Path
    add_scram: tuple[str, ...] = field(default=(), repr=False)  # kafka-storage format --add-scram arguments


def secured_profile(protocol: str, mechanism: str, directory: Path, target_name: str,
                    hosts: list[str]) -> SecuredProfile:
    """Throw-away certificates in ``directory`` and the settings of a secured target and of the harness:
    mutual TLS (``ssl.client.auth=required``), the StandardAuthorizer with the harness as the only super
    user, and for SASL_SSL one login each for the target, the harness and an intruder (authenticated, never
    authorized). The harness's file is written to ``directory/harness.properties``."""
    import secrets

    if protocol not in ("SSL", "SASL_SSL"):
        raise SecurityConfigError(f"--security {protocol}: a secured profile is SSL or SASL_SSL")
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(f"--sasl-mechanism {mechanism}: the harness speaks {', '.join(MECHANISMS)}")
    ca, stores = throw_away_certs(directory, [target_name, HARNESS_NAME, INTRUDER_NAME],
                                  [*hosts, "127.0.0.1", "localhost"])
    target = {
        "listener.security.protocol.map": f"CONTROLLER:{protocol}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(stores[target_name]),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "ssl.client.auth": "required", "ssl.endpoint.identification.algorithm": "https",
        "authorizer.class.name": STANDARD_AUTHORIZER,
    }
    harness = {"security.protocol": protocol, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
               "ssl.keystore.type": "PEM", "ssl.keystore.location": str(stores[HARNESS_NAME]),
               "ssl.endpoint.identification.algorithm": "https"}
    add_scram: tuple[str, ...] = ()
    if protocol == "SSL":
        target["super.users"] = f"User:CN={HARNESS_NAME}"  # Kafka's principal of the harness's certificate
        harness[UNAUTHORIZED + "ssl.keystore.location"] = str(stores[INTRUDER_NAME])
    else:
        pw = {n: secrets.token_urlsafe(12) for n in (target_name, HARNESS_NAME, INTRUDER_NAME)}
        module = _JAAS_MODULES[mechanism]
        own = f'{module} required username="{target_name}" password="{pw[target_name]}"'
        if mechanism == "PLAIN":  # PLAIN's accounts are JAAS options, as Kafka's PlainLoginModule takes them
            own += f' user_{HARNESS_NAME}="{pw[HARNESS_NAME]}" user_{INTRUDER_NAME}="{pw[INTRUDER_NAME]}"'
        else:  # SCRAM's live in the metadata log: formatted in with --add-scram
            add_scram = tuple(f"{mechanism}=[name={n},password={pw[n]}]" for n in (HARNESS_NAME, INTRUDER_NAME))
        target |= {"super.users": f"User:{HARNESS_NAME}", "sasl.enabled.mechanisms": mechanism,
                   "sasl.mechanism.controller.protocol": mechanism,
                   f"listener.name.controller.{mechanism.lower()}.sasl.jaas.config": own + ";"}
        harness |= {"sasl.mechanism": mechanism,
                    "sasl.jaas.config": f'{module} required username="{HARNESS_NAME}" password="{pw[HARNESS_NAME]}" '
                                        f'user_{target_name}="{pw[target_name]}";',
                    UNAUTHORIZED + "sasl.jaas.config":
                        f'{module} required username="{INTRUDER_NAME}" password="{pw[INTRUDER_NAME]}";'}
    command_config = directory / "harness.properties"
    command_config.write_text("# kraft-tck throw-away harness identity: pass as --target-command-config\n"
                              + "".join(f"{k}={v}\n" for k, v in harness.items()), encoding="utf-8")
    command_config.chmod(0o600)
    return SecuredProfile(target, command_config, add_scram)
