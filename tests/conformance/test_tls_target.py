"""The harness tests a secured target: ``--target-command-config`` gives it Kafka's client properties, it talks
TLS (and SASL) to the target and its virtual voters serve the same to the target.

* mutual TLS with the StandardAuthorizer (``super.users`` the harness's certificate): the core cases and the
  security cases pass, the unauthorized certificate (``kraft-tck.unauthorized.ssl.keystore.location``) has
  its Vote and Fetch refused;
* SASL_SSL with SCRAM-SHA-512 (and mutual TLS) and authorization: the same, the target logging in to the
  virtual voters with its own SCRAM login;
* a TLS target tested without the option stops the run with one line that names it.

Certificates: throw-away ones (reference/certs.py, openssl)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kraft_tck.reference.certs import make_ca, make_keystore

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates: "
                                "install openssl")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
CASES = ["--case", "KIP-595/Vote/1", "--case", "KIP-595/Election/1", "--case", "KIP-595/Fetch*/1",
         "--case", "KIP-511/ApiVersions/*", "--case", "PROTOCOL/Security/*", "--case", "PROTOCOL/Robustness/1"]


def _props(path: Path, props: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def _setup(tmp_path: Path, sasl: bool = False) -> tuple[str, Path]:
    """(--target-cmd template, --target-command-config file)."""
    certs = tmp_path / "certs"
    make_ca(certs)
    node, harness, intruder = (make_keystore(certs, n) for n in ("node-1", "harness", "intruder"))
    node_props: dict[str, object] = {
        "listener.security.protocol.map": f"CONTROLLER:{'SASL_SSL' if sasl else 'SSL'}", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": node, "ssl.truststore.type": "PEM", "ssl.truststore.location": certs / "ca.pem",
        "ssl.client.auth": "required", "ssl.endpoint.identification.algorithm": "https",
        "authorizer.class.name": AUTHORIZER}
    client: dict[str, object] = {"security.protocol": "SASL_SSL" if sasl else "SSL",
                                 "ssl.truststore.location": certs / "ca.pem", "ssl.keystore.location": harness}
    if sasl:
        scram = tmp_path / "scram.txt"  # kafka-storage --add-scram arguments, one a line
        scram.write_text("SCRAM-SHA-512=[name=harness,password=harness-secret]\n"
                         "SCRAM-SHA-512=[name=intruder,password=intruder-secret]\n", encoding="utf-8")
        node_props |= {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
            "listener.name.controller.scram-sha-512.sasl.jaas.config":
                f'{SCRAM} required username="node" password="node-secret";',
            "reference.sasl.scram.credentials.file": scram, "super.users": "User:harness"}
        client |= {"sasl.mechanism": "SCRAM-SHA-512",
                   "sasl.jaas.config": f'{SCRAM} required username="harness" password="harness-secret" '
                                       'user_node="node-secret";',
                   "kraft-tck.unauthorized.sasl.jaas.config":
                       f'{SCRAM} required username="intruder" password="intruder-secret";'}
    else:
        node_props["super.users"] = "User:CN=harness"  # Kafka's principal of the harness's certificate
        client["kraft-tck.unauthorized.ssl.keystore.location"] = intruder
    tls = _props(tmp_path / "node-security.properties", node_props)
    cli = f"{sys.executable} -m kraft_tck.reference.cli"
    cmd = (f"sh -c 'grep -q ssl.keystore {{config}} || cat {tls} >> {{config}}; "
           f"test -z {{cluster_id}} || {cli} format --config {{config}} --cluster-id {{cluster_id}} "
           f"--ignore-formatted >/dev/null; exec {cli} node --config {{config}} --trace-file {{trace_file}}'")
    return cmd, _props(tmp_path / "harness.properties", client)


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--no-tlc", "-rs", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=400)


@pytest.mark.cluster
@pytest.mark.parametrize("sasl", [False, True], ids=["mutual-TLS", "SASL_SSL-SCRAM"])
def test_the_harness_passes_cases_against_a_secured_target_with_authorization(tmp_path: Path, sasl: bool) -> None:
    cmd, client = _setup(tmp_path, sasl)
    proc = _harness("--target-cmd", cmd, "--target-command-config", str(client), *CASES)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert " passed" in out and "failed" not in out, out[-2000:]
    # Every security case ran except the one for the other kind of authentication (SASL without SASL).
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED") and "PROTOCOL/Security" in line]
    expected = [] if sasl else ["PROTOCOL/Security/2"]
    assert len(skipped) == len(expected) and all(e in s for e, s in zip(expected, skipped, strict=True)), skipped


@pytest.mark.cluster
def test_a_tls_target_without_the_command_config_stops_the_run_naming_it(tmp_path: Path) -> None:
    cmd, _ = _setup(tmp_path)
    proc = _harness("--target-cmd", cmd, "--case", "KIP-595/Vote/1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 6, out[-3000:]  # EXIT_TARGET_UNREACHABLE
    assert "--target-command-config" in out and "passed" not in out


def test_a_command_config_the_harness_cannot_honour_is_refused_in_one_line(tmp_path: Path) -> None:
    client = tmp_path / "sasl.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    proc = _harness("--target", "127.0.0.1:9", "--target-command-config", str(client))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "sasl.mechanism=GSSAPI" in out, out[-2000:]


def test_the_harness_reads_pkcs12_stores_and_its_sasl_server_and_client_agree(tmp_path: Path) -> None:
    """In process: a command config with PKCS12 stores and a PLAIN login; the harness's own client logs in to
    its own virtual-voter server over TLS, a wrong password is refused (SASL_AUTHENTICATION_FAILED)."""
    import asyncio

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from kraft_tck.conformance.security import Login, TargetSecurity
    from kraft_tck.conformance.transport import KafkaClient, KafkaServer, RequestError

    certs = tmp_path / "certs"
    make_ca(certs)
    pem = make_keystore(certs, "harness").read_bytes()
    key = serialization.load_pem_private_key(pem, None)
    cert = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE"):])
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    enc = serialization.BestAvailableEncryption(b"p12")
    (certs / "harness.p12").write_bytes(pkcs12.serialize_key_and_certificates(b"h", key, cert, [ca], enc))  # type: ignore[arg-type]
    (certs / "trust.p12").write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], enc))
    config = _props(tmp_path / "harness.properties", {
        "security.protocol": "SASL_SSL", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs / "harness.p12",
        "ssl.keystore.password": "p12", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": certs / "trust.p12",
        "ssl.truststore.password": "p12", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="harness" '
                            'password="h-secret" user_node="n-secret";'})
    sec = TargetSecurity.from_file(config)
    assert sec.tls and sec.sasl and sec.accounts is not None and sec.login is not None

    async def run() -> list[str]:
        server = KafkaServer(lambda req: {"ErrorCode": 0, "Topics": []}, {55: (0, 2)}, ssl=sec.server_context(),
                             sasl=sec.accounts)
        await server.start()
        out = []
        try:
            for login in (sec.login, Login("PLAIN", "node", "n-secret"), Login("PLAIN", "node", "wrong")):
                client = KafkaClient("localhost", server.port, ssl=sec.client_context(), sasl=login)
                try:
                    await client.connect(timeout_s=5)
                    out.append(f"ok {(await client.request(55, 1, {'Topics': []}, 5))['ErrorCode']}")
                except RequestError as exc:
                    out.append(str(exc))
                finally:
                    await client.close()
        finally:
            await server.close()
        return out

    out = asyncio.run(run())
    assert out[:2] == ["ok 0", "ok 0"], out
    assert "refused the SASL PLAIN login as node: error 58" in out[2], out


@pytest.mark.cluster
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_secured_profile_sets_up_a_target_the_harness_passes(tmp_path: Path, mechanism: str) -> None:
    """``kraft-tck profile --security SASL_SSL``, followed as its header says (a node started by hand): the
    throw-away certificates, the target's properties, the format command (SCRAM accounts with --add-scram),
    and the run with ``--target-command-config``; the security cases run (none skipped)."""
    import os
    import shlex
    import signal

    from kraft_tck.conformance.target import free_ports

    p1, p2, p3 = free_ports(3)
    cli = [sys.executable, "-m", "kraft_tck.reference.cli"]
    profile = subprocess.run(
        [*cli, "profile", "--harness-ports", f"{p2},{p3}", "--target-port", str(p1), "--data-dir",
         str(tmp_path / "data"), "--security", "SASL_SSL", "--sasl-mechanism", mechanism, "--certs-dir",
         str(tmp_path / "certs")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert profile.returncode == 0, profile.stderr
    config = tmp_path / "server.properties"
    config.write_text(profile.stdout)
    header = [line[2:] for line in profile.stdout.splitlines() if line.startswith("# ")]
    fmt = next(line for line in header if line.startswith("format: kraft-tck format"))
    run = next(line for line in header if line.startswith("then run: pytest conformance"))
    assert (" -S 'SCRAM-SHA-256=[name=harness," in fmt) == (mechanism != "PLAIN"), fmt
    args = shlex.split(fmt.removeprefix("format: kraft-tck format").replace("$(kraft-tck random-uuid)",
                                                                              "MkU3OEVBNTcwNTJENDM2Qg"))
    done = subprocess.run([*cli, "format", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    node_out = (tmp_path / "node.out").open("wb")
    node = subprocess.Popen([*cli, "node", "--config", str(config)], stdout=node_out, stderr=subprocess.STDOUT,
                            cwd=REPO, start_new_session=True)
    try:
        harness_args = shlex.split(run.removeprefix("then run: pytest conformance"))
        proc = _harness(*harness_args, *CASES)
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(10)
        node_out.close()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:] + (tmp_path / "node.out").read_text()[-2000:]
    assert " passed" in out and "failed" not in out, out[-2000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED") and "PROTOCOL/Security" in line]
    assert skipped == [], skipped


def test_profile_security_writes_certificates_and_a_command_config_both_sides_load(tmp_path: Path) -> None:
    """In process: the secured profile's target properties load as the reference node's configuration, its
    harness.properties as the harness's, the certificates verify each other (a TLS handshake on loopback, the
    harness's identity mutual), a second run keeps the certificates, and the options are checked."""
    import asyncio
    import ssl as _ssl

    from click.testing import CliRunner
    from kraft_tck.conformance.security import TargetSecurity
    from kraft_tck.reference.cli import main
    from kraft_tck.reference.config import NodeConfig

    certs = tmp_path / "certs"
    base = ["profile", "--harness-ports", "19092,19093", "--data-dir", str(tmp_path / "data")]
    out = CliRunner().invoke(main, [*base, "--security", "SSL", "--certs-dir", str(certs)])
    assert out.exit_code == 0, out.output
    props = dict(line.split("=", 1) for line in out.output.splitlines() if "=" in line and not line.startswith("#"))
    cfg = NodeConfig.from_properties(props)
    assert cfg.security_protocol == "SSL" and cfg.ssl is not None and cfg.authorizer is not None
    assert cfg.authorizer.authorize("User:CN=harness", "CLUSTER_ACTION")
    assert not cfg.authorizer.authorize("User:CN=intruder", "CLUSTER_ACTION")
    sec = TargetSecurity.from_file(certs / "harness.properties")
    assert sec.tls and not sec.sasl and sec.unauthorized_keystore == certs / "intruder.keystore.pem"
    server_ctx = cfg.ssl.server_context()
    seen: list[object] = []

    async def handshake(ctx: _ssl.SSLContext | None) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("ssl_object").getpeercert())
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
            await asyncio.sleep(0.1)
            writer.close()
        finally:
            server.close()

    asyncio.run(handshake(sec.client_context()))  # host name 127.0.0.1 checked against the target's SAN
    assert seen and seen[0] and ("commonName", "harness") in [t[0] for t in seen[0]["subject"]]  # type: ignore[index]
    before = (certs / "ca.pem").read_bytes(), (certs / "node-1.keystore.pem").read_bytes()
    out = CliRunner().invoke(main, [*base, "--security", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
                                    "--certs-dir", str(certs)])
    assert out.exit_code == 0, out.output
    assert ((certs / "ca.pem").read_bytes(), (certs / "node-1.keystore.pem").read_bytes()) == before
    sasl = TargetSecurity.from_file(certs / "harness.properties")
    assert sasl.sasl and sasl.login is not None and sasl.login.username == "harness"
    assert sasl.unauthorized_login is not None and sasl.unauthorized_login.username == "intruder"
    # The target's own login is one the virtual voters accept (user_node-1 in the harness's JAAS options).
    target_jaas = next(line for line in out.output.splitlines() if line.startswith("listener.name.controller."))
    assert sasl.accounts is not None and 'username="node-1"' in target_jaas
    # Kafka's variant: the same security, the format command with --add-scram.
    out = CliRunner().invoke(main, [*base, "--kafka", "--security", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
                                    "--certs-dir", str(certs)])
    assert out.exit_code == 0 and "--add-scram 'SCRAM-SHA-512=[name=harness," in out.output, out.output
    assert "listener.security.protocol.map=CONTROLLER:SASL_SSL" in out.output
    assert "listener.security.protocol.map=CONTROLLER:PLAINTEXT" not in out.output
    for args, words in (([*base, "--security", "SSL"], "--security SSL needs --certs-dir"),
                        ([*base, "--certs-dir", str(certs)], "--certs-dir goes with --security")):
        bad = CliRunner().invoke(main, args)
        assert bad.exit_code == 2 and words in bad.output, bad.output
