"""The harness tests a target whose controller listener speaks TLS (mutual TLS, ssl.client.auth=required):
``--target-command-config`` gives it Kafka's client properties, it talks TLS to the target and its
virtual voters serve TLS to the target with the same identity. A TLS target tested without them stops the
run with one line that names the option. Certificates: throw-away ones (reference/certs.py, openssl)."""

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


def _setup(tmp_path: Path) -> tuple[str, Path]:
    """(--target-cmd template, --target-command-config file)."""
    certs = tmp_path / "certs"
    make_ca(certs)
    node, harness = make_keystore(certs, "node-1"), make_keystore(certs, "harness")
    tls = tmp_path / "node-tls.properties"
    tls.write_text("".join(f"{k}={v}\n" for k, v in {
        "listener.security.protocol.map": "CONTROLLER:SSL", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": node, "ssl.truststore.type": "PEM", "ssl.truststore.location": certs / "ca.pem",
        "ssl.client.auth": "required", "ssl.endpoint.identification.algorithm": "https"}.items()))
    client = tmp_path / "harness.properties"
    client.write_text(f"security.protocol=SSL\nssl.truststore.location={certs / 'ca.pem'}\n"
                      f"ssl.keystore.location={harness}\n")
    cli = f"{sys.executable} -m kraft_tck.reference.cli"
    cmd = (f"sh -c 'grep -q ssl.keystore {{config}} || cat {tls} >> {{config}}; "
           f"test -z {{cluster_id}} || {cli} format --config {{config}} --cluster-id {{cluster_id}} "
           f"--ignore-formatted >/dev/null; exec {cli} node --config {{config}} --trace-file {{trace_file}}'")
    return cmd, client


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--no-tlc", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)


@pytest.mark.cluster
def test_the_harness_passes_cases_against_a_mutual_tls_target(tmp_path: Path) -> None:
    cmd, client = _setup(tmp_path)
    proc = _harness("--target-cmd", cmd, "--target-command-config", str(client),
                    "--case", "KIP-595/Vote/1", "--case", "KIP-595/Election/1", "--case", "KIP-595/Fetch*/1",
                    "--case", "KIP-511/ApiVersions/*")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert " passed" in out and "failed" not in out, out[-2000:]


@pytest.mark.cluster
def test_a_tls_target_without_the_command_config_stops_the_run_naming_it(tmp_path: Path) -> None:
    cmd, _ = _setup(tmp_path)
    proc = _harness("--target-cmd", cmd, "--case", "KIP-595/Vote/1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 6, out[-3000:]  # EXIT_TARGET_UNREACHABLE
    assert "--target-command-config" in out and "passed" not in out


def test_a_sasl_command_config_is_refused_in_one_line(tmp_path: Path) -> None:
    client = tmp_path / "sasl.properties"
    client.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    proc = _harness("--target", "127.0.0.1:9", "--target-command-config", str(client))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "SASL_SSL" in out and "not SASL yet" in out, out[-2000:]
