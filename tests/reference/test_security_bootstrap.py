"""``kraft-tck format --add-scram`` as ``kafka-storage format --add-scram``: the arguments read as Kafka's
``ScramParser`` reads them, ``bootstrap.checkpoint`` written in Kafka's snapshot format (header batch,
metadata records, footer batch: ``BootstrapDirectory`` / ``BatchFileWriter``), and a node that accepts SCRAM
logins from those credentials, with no ``reference.sasl.scram.credentials.file``: real node processes over
mutual TLS, SCRAM between the voters, from ``kraft-tck quorum --command-config`` (``describe --status``
and ``describe --brokers``, authorized and not) and from a broker (``BrokerClient``) that registers."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import scramp
from click.testing import CliRunner
from kraft_tck.reference.bootstrap import (
    BOOTSTRAP_FILE,
    METADATA_VERSION_LEVEL,
    BootstrapError,
    ScramCredential,
    parse_add_scram,
    read_bootstrap,
    write_bootstrap,
)
from kraft_tck.reference.broker_client import BrokerClient
from kraft_tck.reference.certs import make_ca, make_keystore
from kraft_tck.reference.cli import main
from kraft_tck.reference.config import ConfigError, NodeConfig
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.registry import BrokerState
from kraft_tck.reference.security import client_security
from kraft_tck.spec import codec
from kraft_tck.spec.records import ControlType, decode_batches, decode_control, encode_batches

OPENSSL = shutil.which("openssl")
REPO = Path(__file__).resolve().parents[2]
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
pytestmark = pytest.mark.timeout(240)


# ------------------------------------------------------------------------------------------ the arguments


@pytest.mark.parametrize(("argument", "message"), [
    # Kafka's ScramParser messages (ScramParserTest), word for word.
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-256"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM-SHA-512"),
    ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ("SCRAM-SHA-256=[name=a,salt=!!,password=b]", "Failed to decode given salt: !!"),
])
def test_add_scram_arguments_are_refused_with_kafkas_words(argument: str, message: str) -> None:
    with pytest.raises(BootstrapError) as err:
        parse_add_scram(argument)
    assert str(err.value) == message


def test_a_credential_holds_rfc5802_keys_never_the_password() -> None:
    salt = b"0123456789abcdef"
    cred = parse_add_scram(f'SCRAM-SHA-512=[name="alice",password="alice-secret",iterations=8192,'
                           f'salt={base64.b64encode(salt).decode()}]')
    assert (cred.mechanism, cred.name, cred.salt, cred.iterations) == ("SCRAM-SHA-512", "alice", salt, 8192)
    # The same keys scramp's server derives for that password and salt (what a login is checked against).
    _, stored, server, _ = scramp.ScramMechanism("SCRAM-SHA-512").make_auth_info("alice-secret", 8192, salt)
    assert (cred.stored_key, cred.server_key) == (stored, server)
    # saltedpassword= (PBKDF2 of the password, given in base64) gives the same credential.
    salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", salt, 8192)
    again = parse_add_scram(f"SCRAM-SHA-512=[name=alice,salt={base64.b64encode(salt).decode()},"
                            f"saltedpassword={base64.b64encode(salted).decode()},iterations=8192]")
    assert again == cred
    assert "secret" not in repr(cred) and cred.stored_key.hex() not in repr(cred)
    # Without salt=, a random salt each time (Kafka's ScramFormatter.secureRandomBytes).
    assert parse_add_scram("SCRAM-SHA-256=[name=a,password=b]").salt != parse_add_scram(
        "SCRAM-SHA-256=[name=a,password=b]").salt


def test_the_user_scram_credential_record_bytes() -> None:
    # Hand-written from UserScramCredentialRecord.json (flexible v0): frame version 1, api key 11, version 0,
    # compact string Name, int8 Mechanism, compact bytes Salt/StoredKey/ServerKey, int32 Iterations, no tags.
    value = codec.encode_metadata_record("UserScramCredentialRecord", 0, {
        "Name": "al", "Mechanism": 2, "Salt": b"\x01\x02", "StoredKey": b"\xaa", "ServerKey": b"\xbb",
        "Iterations": 4096})
    assert value.hex() == "010b00" + "03616c" + "02" + "030102" + "02aa" + "02bb" + "00001000" + "00"
    assert codec.decode_metadata_record(value)[0] == "UserScramCredentialRecord"


# ------------------------------------------------------------------------------------------ the file


def config_file(tmp: Path, props: dict[str, str], name: str = "server.properties") -> Path:
    path = tmp / name
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def plain_node(tmp: Path) -> dict[str, str]:
    return {"process.roles": "controller", "node.id": "1", "listeners": "CONTROLLER://127.0.0.1:19093",
            "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:19093",
            "log.dirs": str(tmp / "data")}


def test_format_writes_bootstrap_checkpoint_as_a_kafka_snapshot(tmp_path: Path) -> None:
    cfg = config_file(tmp_path, plain_node(tmp_path))
    out = CliRunner().invoke(main, ["format", "-t", CLUSTER, "-c", str(cfg),
                                    "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                                    "-S", "SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=5000]"])
    assert out.exit_code == 0, out.output
    assert "2 SCRAM credential(s)" in out.output
    data = (tmp_path / "data" / BOOTSTRAP_FILE).read_bytes()
    assert b"alice-secret" not in data and b"bob-secret" not in data
    batches = decode_batches(data)  # every batch's CRC checked
    assert [(b.base_offset, b.partition_leader_epoch, b.is_control, len(b.records)) for b in batches] == [
        (0, 0, True, 1), (1, 0, False, 3), (4, 0, True, 1)]
    assert decode_control(batches[0].records[0]) == (ControlType.SNAPSHOT_HEADER,
                                                     {"Version": 0, "LastContainedLogTimestamp": 0})
    assert decode_control(batches[2].records[0]) == (ControlType.SNAPSHOT_FOOTER, {"Version": 0})
    records = [codec.decode_metadata_record(r.value or b"") for r in batches[1].records]
    assert records[0] == ("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION_LEVEL})
    assert [(n, body["Name"], body["Mechanism"], body["Iterations"]) for n, _, body in records[1:]] == [
        ("UserScramCredentialRecord", "alice", 1, 4096), ("UserScramCredentialRecord", "bob", 2, 5000)]
    boot = read_bootstrap(tmp_path / "data")
    assert boot is not None and [c.name for c in boot.credentials] == ["alice", "bob"]
    # A second format (-g) leaves the file alone; a format without --add-scram writes metadata.version only.
    assert CliRunner().invoke(main, ["format", "-t", CLUSTER, "-c", str(cfg), "-g"]).exit_code == 0
    assert (tmp_path / "data" / BOOTSTRAP_FILE).read_bytes() == data
    other = tmp_path / "other"
    other.mkdir()
    cfg2 = config_file(other, plain_node(other))
    assert CliRunner().invoke(main, ["format", "-t", CLUSTER, "-c", str(cfg2)]).exit_code == 0
    boot2 = read_bootstrap(other / "data")
    assert boot2 is not None and boot2.credentials == () and boot2.records == (("FeatureLevelRecord", 0),)


def test_a_bad_add_scram_argument_formats_nothing_and_says_so_in_one_line(tmp_path: Path) -> None:
    cfg = config_file(tmp_path, plain_node(tmp_path))
    out = CliRunner().invoke(main, ["format", "-t", CLUSTER, "-c", str(cfg), "--add-scram",
                                    "SCRAM-SHA-1=[name=a,password=b]"])
    assert out.exit_code == 1
    assert out.output.strip() == "--add-scram: The add-scram mechanism SCRAM-SHA-1 is not supported."
    assert not (tmp_path / "data" / "meta.properties").exists() and not (tmp_path / "data" / BOOTSTRAP_FILE).exists()


def scram_node(tmp: Path, certs: Path) -> dict[str, str]:
    return {**plain_node(tmp), "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "node-1.keystore.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
            "ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
            "listener.name.controller.scram-sha-256.sasl.jaas.config":
                f'{SCRAM} required username="node-1" password="node-1-secret";'}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if OPENSSL is None:
        pytest.skip("the openssl command makes the test certificates: install openssl")
    d = tmp_path_factory.mktemp("certs")
    make_ca(d)
    for name in ("node-1", "node-2", "node-3", "alice"):
        make_keystore(d, name)
    return d


def test_a_scram_node_reads_its_credentials_from_the_bootstrap_and_the_file_still_works(
        tmp_path: Path, certs: Path) -> None:
    props = scram_node(tmp_path, certs)
    with pytest.raises(ConfigError) as err:  # SCRAM with no credential anywhere: it would accept nobody
        NodeConfig.from_properties(props)
    assert str(err.value).startswith("reference.sasl.scram.credentials.file: missing, and ")
    assert "bootstrap.checkpoint holds no SCRAM credential" in str(err.value)
    # format reads the same configuration without that complaint: it writes the credentials.
    out = CliRunner().invoke(main, ["format", "-t", CLUSTER, "-c", str(config_file(tmp_path, props)),
                                    "-S", "SCRAM-SHA-256=[name=node-1,password=node-1-secret]",
                                    "-S", "SCRAM-SHA-512=[name=alice,password=alice-secret]"])
    assert out.exit_code == 0, out.output
    cfg = NodeConfig.from_properties(props)
    assert cfg.sasl is not None
    # Only the enabled mechanism's credentials are used (SCRAM-SHA-512 is not enabled here).
    assert [(c.mechanism, c.name) for c in cfg.sasl.scram_credentials] == [("SCRAM-SHA-256", "node-1")]
    keys = cfg.sasl.scram_keys("SCRAM-SHA-256", "node-1")
    boot = read_bootstrap(tmp_path / "data")
    assert boot is not None and keys == (boot.credentials[0].salt, boot.credentials[0].stored_key,
                                         boot.credentials[0].server_key, 4096)
    # The credentials file keeps working, beside the bootstrap; its entry wins for the same user.
    creds = tmp_path / "scram.txt"
    creds.write_text("SCRAM-SHA-256=[name=node-1,password=changed]\nSCRAM-SHA-256=[name=ops,password=o]\n")
    both = NodeConfig.from_properties({**props, "reference.sasl.scram.credentials.file": str(creds)})
    assert both.sasl is not None
    salt, stored, _, it = both.sasl.scram_keys("SCRAM-SHA-256", "node-1") or (b"", b"", b"", 0)
    assert stored == scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("changed", it, salt)[1]
    assert both.sasl.scram_keys("SCRAM-SHA-256", "ops") is not None
    # The file's lines are read as the --add-scram arguments they are: a bad one is named with its line.
    creds.write_text("# accounts\nSCRAM-SHA-256=[name=ops,password=o]\nSCRAM-SHA-1=[name=x,password=y]\n")
    with pytest.raises(ConfigError) as bad:
        NodeConfig.from_properties({**props, "reference.sasl.scram.credentials.file": str(creds)})
    assert str(bad.value) == (f"reference.sasl.scram.credentials.file: {creds}:3: The add-scram mechanism "
                              "SCRAM-SHA-1 is not supported.")


@pytest.mark.parametrize("damage", ["truncated", "no footer", "flipped byte"])
def test_a_damaged_bootstrap_stops_a_scram_node_naming_the_file(tmp_path: Path, certs: Path, damage: str) -> None:
    (tmp_path / "data").mkdir()
    path = write_bootstrap(tmp_path / "data", [parse_add_scram("SCRAM-SHA-256=[name=node-1,password=p]")])
    data = path.read_bytes()
    batches = decode_batches(data)
    if damage == "truncated":
        path.write_bytes(data[:-7])
    elif damage == "no footer":
        path.write_bytes(encode_batches(batches[:2]))
    else:
        path.write_bytes(data[:80] + bytes([data[80] ^ 0xFF]) + data[81:])
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_properties(scram_node(tmp_path, certs))
    text = str(err.value)
    assert text.startswith(str(path)) and "\n" not in text, text


def test_credentials_are_never_repr_d() -> None:
    cred = ScramCredential("SCRAM-SHA-256", "x", b"salt", b"stored", b"server", 4096)
    assert "stored" not in repr(cred) and "salt=" not in repr(cred)


# ------------------------------------------------------------------------------------------ node processes


def props_file(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


@pytest.fixture
def bootstrap_cluster(tmp_path: Path, certs: Path) -> Iterator[LocalCluster]:
    """Three voters over SASL_SSL + mutual TLS, SCRAM-SHA-256 between them, credentials only from
    ``kraft-tck format --add-scram``; the StandardAuthorizer lets the voters do everything and alice
    describe."""
    admin = {"security.protocol": "SASL_SSL", "ssl.truststore.location": str(certs / "ca.pem"),
             "ssl.keystore.location": str(certs / "alice.keystore.pem"), "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": f'{SCRAM} required username="node-1" password="node-1-secret";'}
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3),
                     settings={"controller.quorum.election.timeout.ms": 500,
                               "controller.quorum.fetch.timeout.ms": 1000,
                               "controller.quorum.fetch.max.wait.ms": 200,
                               "listener.security.protocol.map": "CONTROLLER:SASL_SSL", "ssl.keystore.type": "PEM",
                               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
                               "ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                               "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
                               "authorizer.class.name": AUTHORIZER,
                               "super.users": "User:node-1;User:node-2;User:node-3",
                               "reference.authorizer.acls": "Describe:User:alice"},
                     extra_args=["--throughput", "100", "--record-size", "100"], client_security=client_security(admin))
    c.prepare()
    scram_args = [a for n in ("node-1", "node-2", "node-3", "alice")
                  for a in ("-S", f"SCRAM-SHA-256=[name={n},password={n}-secret]")]
    for i in (1, 2, 3):
        with open(c.config_path(i), "a", encoding="utf-8") as f:
            f.write(f"ssl.keystore.location={certs / f'node-{i}.keystore.pem'}\n"
                    f'listener.name.controller.scram-sha-256.sasl.jaas.config={SCRAM} required '
                    f'username="node-{i}" password="node-{i}-secret";\n')
        (c.data_dir(i) / "meta.properties").unlink()  # formatted again, as kafka-storage would, with SCRAM
        out = CliRunner().invoke(main, ["format", "-t", c.cluster_id or "", "-c", str(c.config_path(i)), *scram_args])
        assert out.exit_code == 0, out.output
    yield c
    c.stop_all(signal.SIGKILL)


@pytest.mark.cluster
def test_a_quorum_formatted_with_add_scram_authenticates_by_scram_and_is_described(
        bootstrap_cluster: LocalCluster, tmp_path: Path, certs: Path) -> None:
    c = bootstrap_cluster
    c.start_all()
    info = asyncio.run(c.wait_for_leader(60, min_hw=20))  # Vote, BeginQuorumEpoch, Fetch: SCRAM between voters
    assert {r.replica_id for r in info.voters} == {1, 2, 3}
    cli = [sys.executable, "-m", "kraft_tck.reference.cli", "quorum", "--bootstrap-controller",
           ",".join(f"127.0.0.1:{c.port(i)}" for i in (1, 2, 3))]
    tls = {"ssl.truststore.location": str(certs / "ca.pem"), "ssl.keystore.location": str(certs / "alice.keystore.pem")}

    def login(name: str, password: str) -> Path:
        return props_file(tmp_path / f"{name}-{password}.properties", {
            **tls, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": f'{SCRAM} required username="{name}" password="{password}";'})

    def quorum(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, "--command-config", str(config), "describe", *args], capture_output=True,
                              text=True, timeout=60, cwd=REPO)

    done = quorum(login("alice", "alice-secret"), "--status")  # alice: a SCRAM account from the bootstrap only
    assert done.returncode == 0, done.stderr
    assert f"LeaderId:               {info.leader_id}" in done.stdout
    wrong = quorum(login("alice", "guess"), "--status")
    assert wrong.returncode == 1 and len(wrong.stderr.splitlines()) == 1, wrong.stderr
    assert "SASL_AUTHENTICATION_FAILED" in wrong.stderr
    # describe --brokers reads the log with Fetch, which needs CLUSTER_ACTION: alice (DESCRIBE) is refused in
    # one line; a super user reads it (no broker registered: the header alone).
    refused = quorum(login("alice", "alice-secret"), "--brokers")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    # A broker (BrokerClient) registers and heartbeats over the same SASL_SSL, logged in as a super user.
    broker_login = client_security({
        **tls, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM} required username="node-3" password="node-3-secret";'})

    async def run_broker() -> BrokerState | None:
        b = BrokerClient(101, c.cluster_id or "", [("127.0.0.1", c.port(i)) for i in (1, 2, 3)],
                         security=broker_login, heartbeat_interval_ms=100)
        await b.start()
        try:
            await b.wait_until(lambda: b.state_in_log() == BrokerState.ONLINE, 30)
            return b.state_in_log()
        finally:
            await b.stop()

    assert asyncio.run(run_broker()) == BrokerState.ONLINE
    brokers = quorum(login("node-2", "node-2-secret"), "--brokers")
    assert brokers.returncode == 0, brokers.stderr
    rows = [line.split() for line in brokers.stdout.splitlines()]
    assert rows[0] == ["BrokerId", "State", "BrokerEpoch", "IncarnationId", "Rack", "Listeners"]
    assert [r[:2] for r in rows[1:]] == [["101", "Online"]], brokers.stdout
    # Without --command-config, the TLS listener refuses the plaintext tool in one line.
    bare = subprocess.run([*cli, "--timeout-ms", "3000", "describe", "--brokers"], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert bare.returncode == 1 and len(bare.stderr.splitlines()) == 1, bare.stderr
