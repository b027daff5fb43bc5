"""The connection-level attacks of the security issue, against a node configured as production would be: mutual
TLS and the StandardAuthorizer on the controller listener (the plaintext runs of the same attacks are in
test_limits.py; the spoofed Fetch and the vote churn in test_security.py).

* slowloris: 200 TCP connections that never finish a TLS handshake (half of them send one byte of a
  ClientHello) are all closed after connections.max.idle.ms (a handshake is bounded by it, as in Kafka's
  Selector), and the node serves on;
* 1,000 pipelined whole-log Fetches on one TLS connection that is never read, from a certificate of the
  cluster's own CA that has no ACL: each is refused (CLUSTER_AUTHORIZATION_FAILED, one at a time), the node
  does not grow and keeps its leadership.

Real node processes, real sockets, throw-away certificates (openssl, reference/certs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.certs import make_ca, make_keystore
from kraft_tck.reference.messages import FetchRequest
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.security import client_security
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.framing import read_frame

OPENSSL = shutil.which("openssl")
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(OPENSSL is None, reason="the openssl command makes the test certificates: install openssl"),
]
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    make_ca(d)
    for name in ("node-1", "ops", "intruder"):
        make_keystore(d, name)
    return d


def context(certs: Path, name: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.load_cert_chain(str(certs / f"{name}.keystore.pem"))
    return ctx


@pytest.fixture
def node(tmp_path: Path, certs: Path) -> Iterator[LocalCluster]:
    """One voter (it leads itself) with mutual TLS and authorization, writing 3 MB/s."""
    ops = client_security({"security.protocol": "SSL", "ssl.truststore.location": str(certs / "ca.pem"),
                           "ssl.keystore.location": str(certs / "ops.keystore.pem")})
    c = LocalCluster(tmp_path / "one", voters=1, base_port=free_base_port(1),
                     settings={"listener.security.protocol.map": "CONTROLLER:SSL", "ssl.keystore.type": "PEM",
                               "ssl.keystore.location": str(certs / "node-1.keystore.pem"),
                               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
                               "ssl.client.auth": "required", "authorizer.class.name": AUTHORIZER,
                               "reference.authorizer.acls": "ClusterAction:User:CN=node-1;Describe:User:CN=ops",
                               "connections.max.idle.ms": 500},
                     extra_args=["--throughput", "3000", "--record-size", "1000"], client_security=ops)
    c.prepare()
    c.start_all()
    yield c
    c.stop_all(signal.SIGKILL)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.cluster
def test_slowloris_connections_that_never_finish_the_tls_handshake_are_closed(node: LocalCluster) -> None:
    async def run() -> float:
        await node.wait_for_leader(30)
        t0 = time.monotonic()
        conns = [await asyncio.open_connection("127.0.0.1", node.port(1)) for _ in range(200)]
        first: float | None = None
        for _, w in conns[:100]:
            w.write(b"\x16")  # the first byte of a TLS record carrying a ClientHello, then nothing
        for reader, writer in conns:
            assert await asyncio.wait_for(reader.read(1), 20) == b""
            first = first or time.monotonic() - t0
            writer.close()
        closed_after = time.monotonic() - t0
        assert first is not None and first > 0.45, first  # not before the idle time
        info = await node.describe([1], 3.0)  # still serving, to an authorized client
        assert info is not None and info.leader_id == 1
        return closed_after

    closed_after = asyncio.run(run())
    print(f"200 half-open TLS connections closed after {closed_after:.1f} s")
    # connections.max.idle.ms=500 bounds a handshake as it bounds any idle connection (Kafka's Selector).
    assert closed_after < 4.0, closed_after


@pytest.mark.cluster
def test_pipelined_fetches_from_an_unauthorized_certificate_are_refused_and_cost_nothing(
        node: LocalCluster, certs: Path) -> None:
    async def run() -> tuple[int, int, list[int], int, int]:
        info = await node.wait_for_leader(30, min_hw=2000)
        epoch = info.leader_epoch
        pid = node.procs[1].pid
        before = _rss_kib(pid)
        req = FetchRequest(None, -1, epoch, 0, 0, max_wait_ms=0, max_bytes=0x7FFFFFFF)
        body = wire.request_to_body(req, 16)
        data = b"".join(codec.encode_request(wire.FETCH, 16, i, "attacker", body) for i in range(1000))
        reader, writer = await asyncio.open_connection("127.0.0.1", node.port(1), ssl=context(certs, "intruder"))
        # The API versions the node serves are not asked: Fetch v16 is what the attack of the issue sent.
        writer.write(data)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(writer.drain(), 5)
        peak = before
        for _ in range(15):  # never read while the node works through what it can
            await asyncio.sleep(0.2)
            peak = max(peak, _rss_kib(pid))
        errors = []
        for _ in range(5):  # then a few answers: each a refusal, not a log
            frame = await asyncio.wait_for(read_frame(reader), 5)
            assert frame is not None
            _, answer = codec.decode_response(wire.FETCH, 16, frame)
            errors.append(int(answer["ErrorCode"]) or int(answer["Responses"][0]["Partitions"][0]["ErrorCode"]))
        writer.close()
        after = await node.describe([1], 3.0)
        assert after is not None
        return before, peak, errors, after.leader_epoch, epoch

    before, peak, errors, epoch_after, epoch = asyncio.run(run())
    print(f"leader RSS before {before} KiB, peak {peak} KiB (+{(peak - before) // 1024} MiB)")
    assert set(errors) == {Errors.CLUSTER_AUTHORIZATION_FAILED}, errors
    assert peak - before < 16 * 1024, f"grew by {(peak - before) // 1024} MiB"
    assert epoch_after == epoch


def _forged_keystore(certs: Path, common_name: str) -> Path:
    """A certificate of the cluster's CA whose CN carries a line break (made with cryptography)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    path = certs / "forged.keystore.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()) + cert.public_bytes(serialization.Encoding.PEM))
    return path


@pytest.mark.cluster
def test_a_line_break_in_a_certificate_name_does_not_forge_a_log_line(node: LocalCluster, certs: Path) -> None:
    """The principal comes from the peer's certificate: a CN with a line break is logged escaped in the
    denial line, never as a line of its own."""
    keystore = _forged_keystore(certs, "evil\nWARNING kraft_tck.reference.node: node 1 resigned")

    async def run() -> int:
        await node.wait_for_leader(30)
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        ctx.load_cert_chain(str(keystore))
        reader, writer = await asyncio.open_connection("127.0.0.1", node.port(1), ssl=ctx)
        writer.write(codec.encode_request(wire.DESCRIBE_QUORUM, 1, 7, "forger", {"Topics": []}))
        await writer.drain()
        frame = await asyncio.wait_for(read_frame(reader), 5)
        writer.close()
        assert frame is not None
        return int(codec.decode_response(wire.DESCRIBE_QUORUM, 1, frame)[1]["ErrorCode"])

    assert asyncio.run(run()) == Errors.CLUSTER_AUTHORIZATION_FAILED
    time.sleep(0.3)
    text = (node.node_dir(1) / "node.log").read_text()
    assert "evil\\nWARNING" in text, text[-2000:]  # the principal, escaped, inside the denial line
    assert not any(line.startswith("WARNING kraft_tck.reference.node: node 1 resigned") for line in text.splitlines())
    # A TLS client closing its side is not worth a warning (asyncio's, when asked to keep a TLS transport open).
    assert "eof_received" not in text, text[-2000:]
