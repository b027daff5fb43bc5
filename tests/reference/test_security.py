"""SASL (PLAIN, SCRAM-SHA-256/512), authorization and PKCS12 stores on the controller listener, and the loopback
attacks they stop, on real sockets with real certificates.

* In-process: a ``KafkaServer`` and ``KafkaClient`` pair runs each SASL mechanism over TLS and plaintext
  (SaslHandshake v1 + SaslAuthenticate, as Kafka's authenticators), and the failures Kafka answers
  (wrong password, unknown user, a mechanism not enabled, a request before authentication).
* Node processes (``LocalCluster``): a SASL_SSL quorum with mutual TLS and authorization commits, and
  ``kraft-tck quorum --command-config`` describes it; and two attacks against a quorum with mutual TLS and
  the StandardAuthorizer: a spoofed follower Fetch (an authenticated client that is not a voter, claiming
  a paused follower's ReplicaId at the leader's log end, and as an observer reading the log) and vote churn
  (Votes and BeginQuorumEpochs with rising epochs, EndQuorumEpochs in the leader's name). Each attack is
  also run against the same quorum without the authorizer, where it does its harm: the test would notice
  if the authorization stopped working.

Certificates: a throw-away CA and one certificate per name (``reference/certs.py``, the openssl command);
PKCS12 stores are made from them with ``cryptography``.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.certs import make_ca, make_keystore
from kraft_tck.reference.config import ConfigError, NodeConfig
from kraft_tck.reference.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, VoteRequest
from kraft_tck.reference.net import KafkaClient, KafkaServer, RequestError, ServerRequest
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.quorum_client import QuorumInfo
from kraft_tck.reference.security import (
    ClientSecurity,
    SaslLogin,
    client_security,
    parse_sasl,
)
from kraft_tck.spec.errors import Errors

OPENSSL = shutil.which("openssl")
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(OPENSSL is None, reason="the openssl command makes the test certificates: install openssl"),
]
REPO = Path(__file__).resolve().parents[2]
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
NAMES = ("node-1", "node-2", "node-3", "ops", "intruder")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    make_ca(d)
    for name in NAMES:
        make_keystore(d, name)
    return d


def mtls(certs: Path) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.client.auth": "required", "ssl.endpoint.identification.algorithm": "https"}


def client_tls(certs: Path, name: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if name is not None:
        ctx.load_cert_chain(str(certs / f"{name}.keystore.pem"))
    return ctx


def sasl_props(tmp: Path, mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", controller: str = "SCRAM-SHA-512",
               me: str = "node-1") -> dict[str, str]:
    scram = tmp / "scram-credentials.txt"
    scram.write_text("# kafka-storage format --add-scram arguments\n"
                     + "".join(f"SCRAM-SHA-{bits}=[name={n},password={n}-secret]\n"
                               for bits in (256, 512) for n in ("node-1", "node-2", "node-3", "ops")))
    plain_users = " ".join(f'user_{n}="{n}-secret"' for n in ("node-1", "node-2", "node-3", "ops", "intruder"))
    return {
        "sasl.enabled.mechanisms": mechanisms,
        "sasl.mechanism.controller.protocol": controller,
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN} required username="{me}" password="{me}-secret" {plain_users};',
        "listener.name.controller.scram-sha-256.sasl.jaas.config":
            f'{SCRAM} required username="{me}" password="{me}-secret";',
        "listener.name.controller.scram-sha-512.sasl.jaas.config":
            f'{SCRAM} required username="{me}" password="{me}-secret";',
        "reference.sasl.scram.credentials.file": str(scram),
    }


def base_props(tmp: Path) -> dict[str, str]:
    return {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "1@127.0.0.1:9093",
            "log.dirs": str(tmp / "log")}


# ------------------------------------------------------------------------------------------ configuration


def test_sasl_and_authorizer_settings_load_with_kafkas_names(tmp_path: Path, certs: Path) -> None:
    props = {**base_props(tmp_path), "listener.security.protocol.map": "CONTROLLER:SASL_SSL", **mtls(certs),
             "ssl.keystore.location": str(certs / "node-1.keystore.pem"), **sasl_props(tmp_path),
             "authorizer.class.name": AUTHORIZER, "super.users": "User:node-1;User:CN=node-2",
             "reference.authorizer.acls": "Describe:User:ops;ClusterAction,Describe:User:CN=ops,O=x"}
    cfg = NodeConfig.from_properties(props)
    assert cfg.security_protocol == "SASL_SSL" and cfg.ssl is not None and cfg.sasl is not None
    assert cfg.sasl.enabled == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert cfg.sasl.login == SaslLogin("SCRAM-SHA-512", "node-1", "node-1-secret")
    assert "secret" not in repr(cfg)  # passwords stay out of logs
    az = cfg.authorizer
    assert az is not None
    assert az.authorize("User:node-1", "CLUSTER_ACTION") and az.authorize("User:CN=node-2", "ALTER")
    assert az.authorize("User:ops", "DESCRIBE") and not az.authorize("User:ops", "CLUSTER_ACTION")
    assert az.authorize("User:CN=ops,O=x", "CLUSTER_ACTION")  # a DN with a comma: the principal is all after ':'
    assert not az.authorize("User:ANONYMOUS", "DESCRIBE")
    assert NodeConfig.from_properties(cfg.to_properties()) == cfg
    plaintext_sasl = NodeConfig.from_properties(
        {**base_props(tmp_path), "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
         **{k: v for k, v in sasl_props(tmp_path, "PLAIN", "PLAIN").items() if "scram" not in k}})
    assert plaintext_sasl.ssl is None and plaintext_sasl.sasl is not None


@pytest.mark.parametrize(("change", "key", "words"), [
    ({"sasl.enabled.mechanisms": None}, "sasl.enabled.mechanisms", "GSSAPI (Kafka's default"),
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "sasl.enabled.mechanisms", "OAUTHBEARER"),
    ({"sasl.mechanism.controller.protocol": None}, "sasl.mechanism.controller.protocol", "GSSAPI"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.mechanism.controller.protocol", "not in sasl.enabled.mechanisms"),
    ({"listener.name.controller.plain.sasl.jaas.config": None}, "listener.name.controller.plain.sasl.jaas.config",
     "missing"),
    ({"listener.name.controller.plain.sasl.jaas.config": f"{SCRAM} required username=a password=b;"},
     "listener.name.controller.plain.sasl.jaas.config", "needs org.apache.kafka.common.security.plain"),
    ({"listener.name.controller.plain.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'},
     "listener.name.controller.plain.sasl.jaas.config", "PLAIN would accept nobody"),
    ({"listener.name.controller.scram-sha-512.sasl.jaas.config": f"{SCRAM} required username=x"},
     "listener.name.controller.scram-sha-512.sasl.jaas.config", "JAAS login module"),
    ({"reference.sasl.scram.credentials.file": None}, "reference.sasl.scram.credentials.file", "missing"),
    ({"reference.sasl.scram.credentials.file": "/nonexistent/scram"}, "reference.sasl.scram.credentials.file",
     "No such file"),
    ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name",
     "StandardAuthorizer"),
    ({"authorizer.class.name": None, "super.users": "User:a"}, "super.users", "authorizer.class.name is not"),
    ({"super.users": "node-1"}, "super.users", "Type:name"),
    ({"reference.authorizer.acls": "Fly:User:x"}, "reference.authorizer.acls", "not a Kafka ACL operation"),
    ({"principal.builder.class": "com.example.Builder"}, "principal.builder.class", "not supported"),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "JKS"),
])
def test_a_security_setting_that_cannot_be_honoured_stops_the_node_naming_the_key(
        tmp_path: Path, certs: Path, change: dict[str, str | None], key: str, words: str) -> None:
    props: dict[str, str] = {**base_props(tmp_path), "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
                             **mtls(certs), "ssl.keystore.location": str(certs / "node-1.keystore.pem"),
                             **sasl_props(tmp_path), "authorizer.class.name": AUTHORIZER}
    for k, v in change.items():
        if v is None:
            props.pop(k, None)
        else:
            props[k] = v
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_properties(props)
    text = str(err.value)
    assert text.startswith(key) and words in text and "\n" not in text, text


def test_sasl_keys_on_a_listener_without_sasl_stop_the_node(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^sasl\.enabled\.mechanisms: set, but the controller listener "
                                          r"CONTROLLER is PLAINTEXT"):
        NodeConfig.from_properties({**base_props(tmp_path), "sasl.enabled.mechanisms": "PLAIN"})


def _pkcs12(certs: Path, name: str, password: str) -> tuple[Path, Path]:
    """(keystore, truststore) in PKCS12, made with cryptography from the PEM ones."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    pem = (certs / f"{name}.keystore.pem").read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    cert = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE"):])
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    enc = serialization.BestAvailableEncryption(password.encode())
    keystore = certs / f"{name}.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(name.encode(), key, cert, [ca], enc))  # type: ignore[arg-type]
    truststore = certs / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], enc))
    return keystore, truststore


def test_pkcs12_keystore_and_truststore_serve_mutual_tls(tmp_path: Path, certs: Path) -> None:
    keystore, truststore = _pkcs12(certs, "node-1", "p12-secret")
    props = {**base_props(tmp_path), "listener.security.protocol.map": "CONTROLLER:SSL",
             "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
             "ssl.keystore.password": "p12-secret", "ssl.truststore.type": "PKCS12",
             "ssl.truststore.location": str(truststore), "ssl.truststore.password": "p12-secret",
             "ssl.client.auth": "required"}
    cfg = NodeConfig.from_properties(props)
    assert cfg.ssl is not None
    seen: list[str] = []

    def handler(req: ServerRequest) -> dict[str, Any]:
        seen.append(req.principal)
        return wire.error_response_body(req.api_key, req.api_version, Errors.NONE)

    async def run() -> None:
        assert cfg.ssl is not None
        server = KafkaServer(handler, {55: (0, 2)}, ssl=cfg.ssl.server_context())
        await server.start()
        try:
            # The node's own client context (PKCS12 keystore as its identity) against the PKCS12 server.
            client = KafkaClient("127.0.0.1", server.port, ssl=cfg.ssl.client_context())
            await client.connect()
            await client.request(55, 1, {"Topics": []}, 3)
            await client.close()
            with pytest.raises(RequestError):  # no client certificate: ssl.client.auth=required
                bare = KafkaClient("127.0.0.1", server.port, ssl=client_tls(certs, None))
                await bare.connect()
                await bare.request(55, 1, {"Topics": []}, 3)
        finally:
            await server.close()

    asyncio.run(run())
    assert seen == ["User:CN=node-1"]  # Kafka's default principal from the certificate's subject
    wrong = NodeConfig.from_properties({**props, "ssl.keystore.password": "wrong"}).ssl
    assert wrong is not None
    with pytest.raises(ConfigError, match=r"^ssl\.keystore\.location: .*node-1\.p12: not a PKCS12 keystore that "
                                          r"ssl\.keystore\.password opens"):
        wrong.server_context()


# ------------------------------------------------------------------------------------------ SASL, in process


@pytest.mark.parametrize("tls", [True, False], ids=["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_mechanisms_authenticate_and_refuse_as_kafka_does(tmp_path: Path, certs: Path, tls: bool) -> None:
    settings = parse_sasl(sasl_props(tmp_path), "CONTROLLER", "SASL_SSL" if tls else "SASL_PLAINTEXT")
    assert settings is not None
    seen: list[str] = []

    def handler(req: ServerRequest) -> dict[str, Any]:
        seen.append(req.principal)
        return wire.error_response_body(req.api_key, req.api_version, Errors.NONE)

    server_ctx = None
    if tls:
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(certs / "node-1.keystore.pem"))

    async def attempt(server: KafkaServer, login: SaslLogin | None) -> str:
        client = KafkaClient("127.0.0.1", server.port, ssl=client_tls(certs, None) if tls else None, sasl=login)
        try:
            await client.connect(timeout_s=3)
            body = await client.request(55, 1, {"Topics": []}, 3)
            return f"ok {body['ErrorCode']}"
        except RequestError as exc:
            return f"refused: {exc}"
        finally:
            await client.close()

    async def run() -> list[str]:
        server = KafkaServer(handler, {55: (0, 2)}, ssl=server_ctx, sasl=settings, one_in_flight=True)
        await server.start()
        try:
            return [await attempt(server, login) for login in (
                SaslLogin("PLAIN", "ops", "ops-secret"),
                SaslLogin("SCRAM-SHA-256", "node-2", "node-2-secret"),
                SaslLogin("SCRAM-SHA-512", "node-3", "node-3-secret"),
                SaslLogin("PLAIN", "ops", "wrong"),
                SaslLogin("SCRAM-SHA-256", "node-2", "wrong"),
                SaslLogin("SCRAM-SHA-512", "nobody", "x"),
                SaslLogin("GSSAPI", "x", "y"),
                None,  # no login at all: DescribeQuorum before authentication
            )]
        finally:
            await server.close()

    out = asyncio.run(run())
    assert out[:3] == ["ok 0"] * 3, out
    assert "SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid username or password" in out[3]
    assert "SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials " \
           "with SASL mechanism SCRAM-SHA-256" in out[4]
    assert "SASL_AUTHENTICATION_FAILED" in out[5]
    assert "GSSAPI refused (UNSUPPORTED_SASL_MECHANISM); it has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in out[6]
    assert out[7].startswith("refused") and "connection closed" in out[7]
    assert seen == ["User:ops", "User:node-2", "User:node-3"]  # only authenticated requests reach the handler


# ------------------------------------------------------------------------------------------ node processes


def _cluster(tmp: Path, certs: Path, settings: dict[str, Any], per_node: dict[int, dict[str, str]],
             security: ClientSecurity, throughput: int = 200) -> LocalCluster:
    c = LocalCluster(tmp / "cluster", voters=3, base_port=free_base_port(3),
                     settings={"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
                               "controller.quorum.fetch.max.wait.ms": 200, **settings},
                     extra_args=["--throughput", str(throughput), "--record-size", "100"], client_security=security)
    c.prepare()
    for i, extra in per_node.items():
        with open(c.config_path(i), "a", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in extra.items())
    return c


def _props_file(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


@pytest.fixture
def sasl_cluster(tmp_path: Path, certs: Path) -> Iterator[tuple[LocalCluster, Path]]:
    ops = {"security.protocol": "SASL_SSL", "ssl.truststore.location": str(certs / "ca.pem"),
           "ssl.keystore.location": str(certs / "ops.keystore.pem"), "sasl.mechanism": "PLAIN",
           "sasl.jaas.config": f'{PLAIN} required username="ops" password="ops-secret";'}
    per_node = {}
    for i in (1, 2, 3):
        me = f"node-{i}"
        per_node[i] = {"ssl.keystore.location": str(certs / f"{me}.keystore.pem"),
                       **{k: v for k, v in sasl_props(tmp_path, me=me).items() if "jaas" in k}}
    c = _cluster(tmp_path, certs, {"listener.security.protocol.map": "CONTROLLER:SASL_SSL", **mtls(certs),
                                   **sasl_props(tmp_path), "authorizer.class.name": AUTHORIZER,
                                   "super.users": "User:node-1;User:node-2;User:node-3",
                                   "reference.authorizer.acls": "Describe:User:ops"},
                 per_node, client_security(ops))
    yield c, _props_file(tmp_path / "ops.properties", ops)
    c.stop_all(signal.SIGKILL)


@pytest.mark.cluster
def test_a_sasl_ssl_quorum_with_authorization_commits_and_is_described(
        sasl_cluster: tuple[LocalCluster, Path], tmp_path: Path, certs: Path) -> None:
    c, ops_file = sasl_cluster
    c.start_all()

    async def run() -> QuorumInfo:
        # Vote, BeginQuorumEpoch and Fetch between the nodes: SCRAM-SHA-512 over mutual TLS, authorized as
        # super users; DescribeQuorum by `ops` (PLAIN), which has DESCRIBE only.
        info = await c.wait_for_leader(60, min_hw=50)
        deadline = time.monotonic() + 20
        while any(r.log_end_offset < 50 for r in info.voters):
            assert time.monotonic() < deadline, info.voters
            await asyncio.sleep(0.2)
            info = await c.describe() or info
        return info

    info = asyncio.run(run())
    assert {r.replica_id for r in info.voters} == {1, 2, 3}
    port = c.port(info.leader_id)
    cli = [sys.executable, "-m", "kraft_tck.reference.cli", "quorum", "--bootstrap-controller", f"127.0.0.1:{port}"]
    done = subprocess.run([*cli, "--command-config", str(ops_file), "describe", "--replication"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                                   "LastCaughtUpTimestamp", "Status"]
    assert len(done.stdout.splitlines()) == 4
    # Authenticated but not authorized: `intruder` has a PLAIN account and no ACL.
    intruder = _props_file(tmp_path / "intruder.properties", {
        **{k: v for k, v in client_props(certs, "intruder").items()}, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="intruder" password="intruder-secret";'})
    done = subprocess.run([*cli, "--command-config", str(intruder), "describe", "--status"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr, done.stderr
    # A wrong password: the login fails, in one line.
    wrong = _props_file(tmp_path / "wrong.properties", {
        **client_props(certs, "ops"), "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM} required username="ops" password="guess";'})
    done = subprocess.run([*cli, "--command-config", str(wrong), "describe", "--status"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "SASL_AUTHENTICATION_FAILED" in done.stderr
    log = (c.node_dir(info.leader_id) / "node.log").read_text()
    assert "principal User:intruder" in log and "denied DESCRIBE" in log


def client_props(certs: Path, name: str) -> dict[str, str]:
    return {"ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.keystore.location": str(certs / f"{name}.keystore.pem")}


# ------------------------------------------------------------------------------------------ attacks


@pytest.fixture(params=[True, False], ids=["authorized", "no-authorizer"])
def mtls_cluster(request: pytest.FixtureRequest, tmp_path: Path, certs: Path) -> Iterator[tuple[LocalCluster, bool]]:
    """Mutual TLS on every connection; with the StandardAuthorizer giving CLUSTER_ACTION to the voters'
    certificates only (and DESCRIBE to `ops`), or without an authorizer (the control run)."""
    protect: bool = request.param
    authz = {"authorizer.class.name": AUTHORIZER,
             "reference.authorizer.acls": "ClusterAction:User:CN=node-1;ClusterAction:User:CN=node-2;"
                                          "ClusterAction:User:CN=node-3;Describe:User:CN=ops"} if protect else {}
    ops = client_security({"security.protocol": "SSL", **client_props(certs, "ops")})
    # A fetch timeout long enough that a leader whose followers are paused keeps leading through an attack
    # (check quorum would otherwise make it resign after 1.5 fetch timeouts, KafkaRaftClient.pollLeader).
    c = _cluster(tmp_path, certs, {"listener.security.protocol.map": "CONTROLLER:SSL", **mtls(certs), **authz,
                                   "controller.quorum.fetch.timeout.ms": 10000},
                 {i: {"ssl.keystore.location": str(certs / f"node-{i}.keystore.pem")} for i in (1, 2, 3)}, ops)
    yield c, protect
    for proc in c.procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
    c.stop_all(signal.SIGKILL)


async def _intruder(c: LocalCluster, certs: Path, node: int) -> KafkaClient:
    """A client with a certificate from the cluster's own CA (so TLS lets it in) that is not a voter."""
    client = KafkaClient("127.0.0.1", c.port(node), client_id="intruder", ssl=client_tls(certs, "intruder"))
    await client.connect(timeout_s=3)
    return client


async def _refused_without_a_certificate(c: LocalCluster, certs: Path, node: int) -> None:
    for ctx in (None, client_tls(certs, None)):  # plaintext; TLS without a client certificate
        client = KafkaClient("127.0.0.1", c.port(node), ssl=ctx)
        with pytest.raises(RequestError):
            await client.connect(timeout_s=3)
            await client.request(wire.DESCRIBE_QUORUM, 1, {"Topics": []}, 3)
        await client.close()


@pytest.mark.cluster
def test_a_spoofed_follower_fetch_does_not_move_the_high_watermark(
        mtls_cluster: tuple[LocalCluster, bool], certs: Path) -> None:
    c, protect = mtls_cluster
    c.start_all()

    async def run() -> tuple[int, int, int, list[int]]:
        info = await c.wait_for_leader(60, min_hw=20)
        leader = info.leader_id
        followers = [i for i in (1, 2, 3) if i != leader]
        await _refused_without_a_certificate(c, certs, leader)
        for f in followers:  # the real followers stop fetching; writes go on at the leader
            c.procs[f].send_signal(signal.SIGSTOP)
        await asyncio.sleep(0.5)
        before = await c.describe([leader])
        assert before is not None
        attacker = await _intruder(c, certs, leader)
        errors: list[int] = []
        version = attacker.best_version(wire.FETCH)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            now = await c.describe([leader])
            assert now is not None
            leo = max(r.log_end_offset for r in now.voters if r.replica_id == leader)
            for f in (*followers, -1):  # each paused follower's ReplicaId at the leader's log end; an observer
                req = FetchRequest(cluster_id=c.cluster_id, replica_id=f, current_leader_epoch=now.leader_epoch,
                                   fetch_offset=leo, last_fetched_epoch=now.leader_epoch, max_wait_ms=0)
                body = await attacker.request(wire.FETCH, version, wire.request_to_body(req, version), 3)
                errors.append(body["ErrorCode"])
            await asyncio.sleep(0.05)
        await attacker.close()
        after = await c.describe([leader])
        assert after is not None
        leo_after = max(r.log_end_offset for r in after.voters if r.replica_id == leader)
        return before.high_watermark, after.high_watermark, leo_after, errors

    hw_before, hw_after, leo_after, errors = asyncio.run(run())
    if protect:
        assert set(errors) == {Errors.CLUSTER_AUTHORIZATION_FAILED}, errors
        assert hw_after == hw_before < leo_after, (hw_before, hw_after, leo_after)  # writes came, none committed
    else:  # the control: without authorization the spoof commits entries that are on the leader only
        assert Errors.CLUSTER_AUTHORIZATION_FAILED not in errors
        assert hw_after > hw_before, (hw_before, hw_after)


@pytest.mark.cluster
def test_vote_churn_from_a_non_voter_changes_no_epoch(mtls_cluster: tuple[LocalCluster, bool], certs: Path) -> None:
    c, protect = mtls_cluster
    c.start_all()

    async def ask(client: KafkaClient, api_key: int, request: Any) -> int:
        v = client.best_version(api_key)
        try:
            return int((await client.request(api_key, v, wire.request_to_body(request, v), 3))["ErrorCode"])
        except RequestError:
            return -1  # the node closed the connection (or is gone)

    async def run() -> tuple[QuorumInfo, QuorumInfo | None, list[int]]:
        before = await c.wait_for_leader(60, min_hw=10)
        for node in (1, 2, 3):
            await _refused_without_a_certificate(c, certs, node)
        errors: list[int] = []
        for k in range(1, 6):  # Votes with rising epochs, and a BeginQuorumEpoch naming another leader
            for node in (1, 2, 3):
                if node not in c.alive():
                    continue
                try:
                    attacker = await _intruder(c, certs, node)
                except RequestError:
                    continue
                candidate = next(i for i in (1, 2, 3) if i not in (node, before.leader_id))
                vote = VoteRequest(cluster_id=c.cluster_id, candidate_epoch=before.leader_epoch + k,
                                   candidate_id=candidate, last_offset_epoch=before.leader_epoch + k,
                                   last_offset=10**9, voter_id=node)
                errors.append(await ask(attacker, wire.VOTE, vote))
                # Each node told of a different leader for the same epoch.
                begin = BeginQuorumEpochRequest(cluster_id=c.cluster_id, leader_id=candidate,
                                                leader_epoch=before.leader_epoch + 10 + k, voter_id=node)
                errors.append(await ask(attacker, wire.BEGIN_QUORUM_EPOCH, begin))
                if node != before.leader_id:  # a follower told, in the leader's name, that it resigned
                    end = EndQuorumEpochRequest(cluster_id=c.cluster_id, leader_id=before.leader_id,
                                                leader_epoch=before.leader_epoch, preferred_successors=(node,))
                    errors.append(await ask(attacker, wire.END_QUORUM_EPOCH, end))
                await attacker.close()
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # what an accepted Vote would cause (a new epoch, an election) shows by now
        try:
            after: QuorumInfo | None = await c.wait_for_leader(30 if protect else 5)
        except TimeoutError:
            after = None
        return before, after, errors

    before, after, errors = asyncio.run(run())
    if protect:
        assert set(errors) == {Errors.CLUSTER_AUTHORIZATION_FAILED}, errors
        assert after is not None and (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
        assert len(c.alive()) == 3
    else:  # the control: the same requests, unauthorized, bump the epochs (and, told of different leaders for
        # one epoch, the nodes halt on their ElectionSafety check)
        assert Errors.CLUSTER_AUTHORIZATION_FAILED not in errors
        assert after is None or after.leader_epoch > before.leader_epoch or len(c.alive()) < 3
