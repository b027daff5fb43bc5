"""TLS on the controller listener, with Kafka's settings (``listener.security.protocol.map=CONTROLLER:SSL``,
``ssl.keystore.*``, ``ssl.truststore.*``, ``ssl.client.auth``, ``ssl.endpoint.identification.algorithm``):
served by the node and used for its own requests to the other voters.

Certificates are made at test time with the ``openssl`` command (``reference/certs.py``: a CA, and one
certificate per node for 127.0.0.1), and everything runs on real sockets between node processes."""

from __future__ import annotations

import asyncio
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.certs import make_ca, make_keystore, throw_away_certs
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.net import KafkaClient, RequestError
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.quorum_client import QuorumInfo, parse_response, request_body

OPENSSL = shutil.which("openssl")
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(OPENSSL is None, reason="the openssl command makes the test certificates: install openssl"),
]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    make_ca(d)
    for i in (1, 2, 3):
        make_keystore(d, f"node-{i}", password="node-secret" if i == 2 else None)
    make_keystore(d, "client")
    return d


def tls_settings(certs: Path, client_auth: str = "required") -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": client_auth,
        "ssl.endpoint.identification.algorithm": "https",
    }


@pytest.fixture
def tls_cluster(tmp_path: Path, certs: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3),
                     settings={**tls_settings(certs), "controller.quorum.election.timeout.ms": 500,
                               "controller.quorum.fetch.timeout.ms": 1000,
                               "controller.quorum.fetch.max.wait.ms": 200},
                     extra_args=["--throughput", "200", "--record-size", "100", "--event-loop", "auto"])
    c.prepare()
    for i in (1, 2, 3):  # each node its own certificate (node 2's key is encrypted: ssl.key.password)
        extra = f"ssl.keystore.location={certs / f'node-{i}.keystore.pem'}\n"
        if i == 2:
            extra += "ssl.key.password=node-secret\n"
        with open(c.config_path(i), "a", encoding="utf-8") as f:
            f.write(extra)
    yield c
    c.stop_all(signal.SIGKILL)


def client_context(certs: Path, with_cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if with_cert:
        ctx.load_cert_chain(str(certs / "client.keystore.pem"))
    return ctx


async def describe_tls(port: int, ctx: ssl.SSLContext | None, timeout_s: float = 3.0) -> QuorumInfo:
    client = KafkaClient("127.0.0.1", port, ssl=ctx)
    try:
        await client.connect(timeout_s=timeout_s)
        version = client.best_version(wire.DESCRIBE_QUORUM)
        body = await client.request(wire.DESCRIBE_QUORUM, version, request_body(), timeout_s)
        return parse_response(body, version)
    finally:
        await client.close()


async def wait_for_tls_leader(c: LocalCluster, ctx: ssl.SSLContext, timeout_s: float, min_hw: int = 0) -> QuorumInfo:
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        for i in c.alive():
            try:
                info = await describe_tls(c.port(i), ctx, 1.0)
            except Exception as exc:  # not the leader yet, or not up
                last = exc
                continue
            if info.leader_id >= 0 and info.high_watermark >= min_hw:
                return info
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no TLS leader within {timeout_s}s (last error: {last})")


def test_the_tls_settings_load_with_kafkas_names(certs: Path, tmp_path: Path) -> None:
    props = {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "1@127.0.0.1:9093",
             "log.dirs": str(tmp_path), **tls_settings(certs, "requested"),
             "listener.name.controller.ssl.keystore.location": str(certs / "node-1.keystore.pem")}
    cfg = NodeConfig.from_properties(props)
    assert cfg.security_protocol == "SSL" and cfg.ssl is not None
    assert cfg.ssl.keystore_location == certs / "node-1.keystore.pem"  # the per-listener key wins
    assert cfg.ssl.server_context().verify_mode == ssl.CERT_OPTIONAL
    assert cfg.ssl.client_context().check_hostname
    with_password = NodeConfig.from_properties({**props, "ssl.key.password": "secret"})
    assert "secret" not in repr(with_password)
    assert NodeConfig.from_properties(with_password.to_properties()) == with_password


@pytest.mark.cluster
def test_a_tls_cluster_forms_a_quorum_and_refuses_plaintext_and_certless_clients(
        tls_cluster: LocalCluster, certs: Path) -> None:
    tls_cluster.start_all()

    async def run() -> None:
        ctx = client_context(certs)
        # A leader elected and records committed: Vote, BeginQuorumEpoch and Fetch all went over mutual TLS.
        info = await wait_for_tls_leader(tls_cluster, ctx, 60, min_hw=50)
        assert {r.replica_id for r in info.voters} == {1, 2, 3}
        deadline = time.monotonic() + 20
        while any(r.log_end_offset < 50 for r in info.voters):  # every follower fetches over TLS
            assert time.monotonic() < deadline, info.voters
            await asyncio.sleep(0.2)
            info = await describe_tls(tls_cluster.port(info.leader_id), ctx)
        port = tls_cluster.port(info.leader_id)
        # A plaintext client is refused: its ApiVersions is not a TLS handshake.
        with pytest.raises(RequestError):
            await describe_tls(port, None)
        # A client without a certificate is refused under ssl.client.auth=required.
        with pytest.raises((RequestError, ssl.SSLError, ConnectionError)):
            await describe_tls(port, client_context(certs, with_cert=False))
        # A client that does not trust the node's CA refuses the node.
        with pytest.raises(RequestError):
            await describe_tls(port, ssl.create_default_context())
        # The quorum still serves a proper client.
        assert (await describe_tls(port, ctx)).leader_id == info.leader_id

    asyncio.run(run())
    text = "".join((tls_cluster.node_dir(i) / "node.log").read_text() for i in (1, 2, 3))
    assert "Traceback" not in text, text


def test_a_node_with_a_wrong_key_password_stops_with_one_line(tmp_path: Path, certs: Path) -> None:
    port = free_base_port(1)
    config = tmp_path / "server.properties"
    props = {"process.roles": "controller", "node.id": "1", "listeners": f"CONTROLLER://127.0.0.1:{port}",
             "controller.quorum.voters": f"1@127.0.0.1:{port}", "log.dirs": str(tmp_path / "data"),
             **tls_settings(certs), "ssl.keystore.location": str(certs / "node-2.keystore.pem"),
             "ssl.key.password": "wrong"}
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    import sys

    proc = subprocess.run([sys.executable, "-m", "kraft_tck.reference.cli", "node", "--config", str(config)],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ssl.keystore.location" in lines[0], proc.stderr


def test_kraft_tck_certs_makes_keystores_a_node_loads(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from kraft_tck.reference.cli import main

    out = CliRunner().invoke(main, ["certs", "--dir", str(tmp_path / "c"), "--nodes", "2"])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "c" / "ca.pem").exists() and (tmp_path / "c" / "client.keystore.pem").exists()
    props = dict(line.split("=", 1) for line in out.output.splitlines() if "=" in line and not line.startswith("#"))
    cfg = NodeConfig.from_properties({"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093",
                                      "controller.quorum.voters": "1@127.0.0.1:9093", "log.dirs": str(tmp_path),
                                      **props})
    assert cfg.security_protocol == "SSL" and cfg.ssl is not None
    cfg.ssl.server_context()  # the keystore loads: key and certificate belong together
    made = throw_away_certs(tmp_path / "d", ["a"])
    assert made.node_properties("a")["ssl.keystore.location"].endswith("a.keystore.pem")
