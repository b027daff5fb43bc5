"""Every bad configuration stops ``kraft-tck node --config F`` with one line on stderr naming the key or
the resource at fault, a non-zero exit and no traceback; an unsupported key only gives one warning.

Each case is run as the operator would run it: a subprocess of the real command. The table covers each
required key missing or mistyped, each resource the node cannot use (a port in use, a host that does not
resolve or is not this machine's, a log directory that is a file, under a file or read-only), settings
that contradict each other, and security settings the node cannot honour (no silent downgrade to
plaintext: Kafka would refuse to serve or would serve them; this node stops)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kraft_tck.reference.procs import free_base_port
from kraft_tck.reference.storage import format_dir

pytestmark = pytest.mark.timeout(120)

NOBODY = 65534
SETPRIV = shutil.which("setpriv")


def node_command(config: Path) -> list[str]:
    script = Path(sys.executable).with_name("kraft-tck")
    if script.exists():
        return [str(script), "node", "--config", str(config)]
    return [sys.executable, "-m", "kraft_tck.reference.cli", "node", "--config", str(config)]


@dataclass
class Case:
    name: str
    names: str  # what the one line must name (the key or the resource)
    changes: dict[str, str | None] = field(default_factory=dict)  # None removes the key
    # Prepares the world (a port to occupy, a file in the way): gets the case's directory and the
    # properties, returns something to keep alive while the node runs.
    setup: Callable[[Path, dict[str, str]], object] | None = None
    as_nobody: bool = False  # root ignores permission bits: the read-only case runs as nobody


def _occupy_port(_d: Path, props: dict[str, str]) -> object:
    port = int(props["listeners"].rsplit(":", 1)[1])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def _log_dir_is_a_file(d: Path, props: dict[str, str]) -> object:
    (d / "afile").write_text("not a directory")
    props["log.dirs"] = str(d / "afile")
    return None


def _log_dir_under_a_file(d: Path, props: dict[str, str]) -> object:
    (d / "afile").write_text("not a directory")
    props["log.dirs"] = str(d / "afile" / "data")
    return None


def _log_dir_read_only(d: Path, props: dict[str, str]) -> object:
    ro = d / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    props["log.dirs"] = str(ro / "data")
    return None


def _formatted_for_another_node(d: Path, props: dict[str, str]) -> object:
    format_dir(Path(props["log.dirs"]), 2, "AAAAAAAAAAAAAAAAAAAAAA")
    return None


def _missing_keystore(d: Path, props: dict[str, str]) -> object:
    props["ssl.keystore.location"] = str(d / "no-such-keystore.pem")
    return None


def _garbage_keystore(d: Path, props: dict[str, str]) -> object:
    (d / "garbage.pem").write_text("-----BEGIN NOTHING-----\n")
    props["ssl.keystore.location"] = str(d / "garbage.pem")
    return None


SSL = {"listener.security.protocol.map": "CONTROLLER:SSL", "ssl.keystore.type": "PEM"}

CASES = [
    # each required key missing or mistyped
    Case("node.id missing", "node.id", {"node.id": None}),
    Case("node.id not a number", "node.id", {"node.id": "one"}),
    Case("node.id negative", "node.id", {"node.id": "-1"}),
    Case("listeners missing", "listeners", {"listeners": None}),
    Case("listeners without a port", "listeners", {"listeners": "CONTROLLER://127.0.0.1"}),
    Case("listeners port out of range", "listeners", {"listeners": "CONTROLLER://127.0.0.1:70000"}),
    Case("voters missing", "controller.quorum.voters", {"controller.quorum.voters": None}),
    Case("voters mistyped", "controller.quorum.voters", {"controller.quorum.voters": "1=127.0.0.1"}),
    Case("voters twice", "controller.quorum.voters", {"controller.quorum.voters": "1@h:1,1@h:2"}),
    Case("log.dirs missing", "log.dirs", {"log.dirs": None}),
    Case("process.roles unknown", "process.roles", {"process.roles": "wizard"}),
    Case("election timeout not a number", "controller.quorum.election.timeout.ms",
         {"controller.quorum.election.timeout.ms": "soon"}),
    Case("fetch timeout zero", "controller.quorum.fetch.timeout.ms", {"controller.quorum.fetch.timeout.ms": "0"}),
    Case("request timeout negative", "controller.quorum.request.timeout.ms",
         {"controller.quorum.request.timeout.ms": "-5"}),
    Case("retry backoff fractional", "controller.quorum.retry.backoff.ms",
         {"controller.quorum.retry.backoff.ms": "1.5"}),
    Case("socket.request.max.bytes zero", "socket.request.max.bytes", {"socket.request.max.bytes": "0"}),
    Case("connections.max.idle.ms mistyped", "connections.max.idle.ms", {"connections.max.idle.ms": "ten"}),
    Case("log cache negative", "reference.log.cache.bytes", {"reference.log.cache.bytes": "-1"}),
    # KIP-630 snapshot and retention settings (Kafka's KRaftConfigs validators)
    Case("snapshot bytes zero", "metadata.log.max.record.bytes.between.snapshots",
         {"metadata.log.max.record.bytes.between.snapshots": "0"}),
    Case("snapshot interval negative", "metadata.log.max.snapshot.interval.ms",
         {"metadata.log.max.snapshot.interval.ms": "-1"}),
    Case("segment bytes below a batch header", "metadata.log.segment.bytes", {"metadata.log.segment.bytes": "11"}),
    Case("segment bytes past an int", "metadata.log.segment.bytes", {"metadata.log.segment.bytes": "4294967296"}),
    Case("retention bytes mistyped", "metadata.max.retention.bytes", {"metadata.max.retention.bytes": "100MB"}),
    Case("retention ms fractional", "metadata.max.retention.ms", {"metadata.max.retention.ms": "1.5"}),
    Case("malformed escape in the file", "server.properties:", {"bad\\uZZZZ": "x"}),
    # contradictory settings
    Case("controller listener not a listener", "controller.listener.names", {"controller.listener.names": "OTHER"}),
    Case("controller not among the voters", "controller.quorum.voters", {"node.id": "5"}),
    Case("fetch max wait past the fetch timeout", "controller.quorum.fetch.max.wait.ms",
         {"controller.quorum.fetch.max.wait.ms": "3000"}),
    Case("queued bytes below the frame limit", "queued.max.request.bytes", {"queued.max.request.bytes": "1000"}),
    Case("two listeners on one port", "listeners", {"listeners": "CONTROLLER://127.0.0.1:{port},B://127.0.0.1:{port}"}),
    Case("log dir of another node", "meta.properties", setup=_formatted_for_another_node),
    # resources
    Case("port in use", "listeners", setup=_occupy_port),
    Case("unresolvable host", "listeners", {"listeners": "CONTROLLER://no-such-host.invalid:{port}"}),
    Case("address not of this machine", "listeners", {"listeners": "CONTROLLER://192.0.2.1:{port}"}),
    Case("log dir is a file", "log.dirs", setup=_log_dir_is_a_file),
    Case("log dir under a file", "log.dirs", setup=_log_dir_under_a_file),
    Case("log dir read-only", "log.dirs", setup=_log_dir_read_only, as_nobody=True),
    # security the node cannot honour: never served as plaintext
    Case("SSL without a keystore", "ssl.keystore.location", dict(SSL)),
    Case("SSL keystore missing", "ssl.keystore.location", dict(SSL), setup=_missing_keystore),
    Case("SSL keystore not PEM", "ssl.keystore.location", dict(SSL), setup=_garbage_keystore),
    Case("SSL with a JKS keystore", "ssl.keystore.type", {**SSL, "ssl.keystore.type": "JKS",
                                                          "ssl.keystore.location": "/x.jks"}),
    Case("SSL client auth mistyped", "ssl.client.auth", {**SSL, "ssl.keystore.location": "/k.pem",
                                                         "ssl.client.auth": "maybe"}),
    Case("SSL client auth without a truststore", "ssl.truststore.location",
         {**SSL, "ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"}),
    Case("keystore on a plaintext listener", "ssl.keystore.location", {"ssl.keystore.location": "/k.pem"}),
    Case("client auth on a plaintext listener", "ssl.client.auth", {"ssl.client.auth": "required"}),
    # SASL without mechanisms would be Kafka's default GSSAPI, which the node does not speak.
    Case("SASL_SSL listener without mechanisms", "sasl.enabled.mechanisms",
         {**SSL, "ssl.keystore.location": "/k.pem", "listeners": "SASL_SSL://127.0.0.1:{port}",
          "controller.listener.names": "SASL_SSL", "listener.security.protocol.map": "SASL_SSL:SASL_SSL"}),
    Case("SASL_PLAINTEXT by the map", "sasl.enabled.mechanisms",
         {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT"}),
    Case("SASL PLAIN without accounts", "listener.name.controller.plain.sasl.jaas.config",
         {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
          "sasl.mechanism.controller.protocol": "PLAIN", "listener.name.controller.plain.sasl.jaas.config":
          'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'}),
    Case("SCRAM without credentials", "reference.sasl.scram.credentials.file",
         {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
          "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
          "listener.name.controller.scram-sha-256.sasl.jaas.config":
          'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'}),
    Case("protocol map mistyped", "listener.security.protocol.map", {"listener.security.protocol.map": "CONTROLLER"}),
    Case("SASL mechanisms", "sasl.enabled.mechanisms", {"sasl.enabled.mechanisms": "PLAIN"}),
    Case("JAAS config", "listener.name.controller.plain.sasl.jaas.config",
         {"listener.name.controller.plain.sasl.jaas.config": "x required;"}),
    Case("authorizer not Kafka's StandardAuthorizer", "authorizer.class.name",
         {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}),
    Case("ACL operation mistyped", "reference.authorizer.acls",
         {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "reference.authorizer.acls": "ClusterActio:User:CN=node-1"}),
    Case("super users", "super.users", {"super.users": "User:admin"}),
    Case("TLS setting not honoured", "ssl.enabled.protocols", {**SSL, "ssl.enabled.protocols": "TLSv1.3"}),
]


def _render(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


@pytest.fixture
def workdir() -> Iterator[Path]:
    # World-readable, so that the read-only case can run as nobody.
    d = Path(tempfile.mkdtemp(prefix="kraft-tck-badcfg-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _base(d: Path, port: int) -> dict[str, str]:
    return {
        "process.roles": "controller",
        "node.id": "1",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "log.dirs": str(d / "data"),
    }


def run_node(config: Path, as_nobody: bool = False, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    prefix = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_nobody and SETPRIV else []
    return subprocess.run([*prefix, *node_command(config)], capture_output=True, text=True, timeout=timeout_s,
                          cwd="/", check=False)


def test_the_table_has_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_config_stops_the_node_with_one_line(case: Case, workdir: Path) -> None:
    if case.as_nobody and os.geteuid() == 0 and SETPRIV is None:
        pytest.skip("root ignores permission bits and setpriv (util-linux) is missing to run the node as nobody")
    port = free_base_port(1)
    props = _base(workdir, port)
    for key, value in case.changes.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value.replace("{port}", str(port))
    keep = case.setup(workdir, props) if case.setup else None
    config = workdir / "server.properties"
    config.write_text(_render(props))
    config.chmod(0o644)
    try:
        proc = run_node(config, as_nobody=case.as_nobody and os.geteuid() == 0)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: the node started (still running after 30 s)")
    finally:
        if isinstance(keep, socket.socket):
            keep.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0, f"{case.name}: exit 0, stderr {proc.stderr!r}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, f"{case.name}: {len(lines)} lines on stderr: {proc.stderr!r}"
    assert case.names in lines[0], f"{case.name}: {lines[0]!r} does not name {case.names!r}"


def test_unsupported_keys_give_one_warning_naming_them(workdir: Path) -> None:
    port = free_base_port(1)
    props = _base(workdir, port) | {"num.partitions": "3", "log.retention.hours": "1"}
    config = workdir / "server.properties"
    config.write_text(_render(props))
    proc = subprocess.Popen(node_command(config), stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        deadline = time.monotonic() + 20
        with socket.socket() as probe:
            while probe.connect_ex(("127.0.0.1", port)) != 0:
                assert proc.poll() is None, "the node exited"
                assert time.monotonic() < deadline, "the node did not start listening"
                time.sleep(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    warnings = [line for line in err.splitlines() if "does not use" in line]
    assert len(warnings) == 1, err
    assert "log.retention.hours, num.partitions" in warnings[0]
