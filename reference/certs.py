"""Throw-away certificates for trying TLS on a local quorum: a CA, and one PEM keystore per node (its key
and a certificate for 127.0.0.1/localhost signed by the CA, in one file, as Kafka's PEM keystores take
them). Made with the ``openssl`` command, so nothing here does cryptography by hand; for tests, benchmarks
and ``kraft-tck certs``, never for production.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: Elliptic-curve keys: quick to make, and what a modern Kafka deployment would use too.
_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]


class CertError(RuntimeError):
    """The certificates could not be made (no openssl, or openssl refused): the message says which."""


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise CertError("the openssl command is needed to make certificates: install openssl")
    done = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CertError(f"openssl {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def make_ca(directory: Path, days: int = 7) -> Path:
    """``ca.pem`` (the truststore) and ``ca.key`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_KEY, "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days),
             "-subj", "/CN=kraft-tck throw-away CA", cwd=directory)
    return directory / "ca.pem"


def make_keystore(directory: Path, name: str, password: str | None = None, days: int = 7,
                  hosts: Iterable[str] = ("IP:127.0.0.1", "DNS:localhost")) -> Path:
    """``<name>.keystore.pem``: a key (encrypted with ``password`` if given: ``ssl.key.password``) and its
    certificate (CN=name, the given subject alternative names) signed by the CA of ``make_ca``."""
    (directory / f"{name}.ext").write_text(f"subjectAltName={','.join(hosts)}\n", encoding="utf-8")
    _openssl("req", *_KEY, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
             cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", str(days), "-extfile", f"{name}.ext", cwd=directory)
    key = directory / f"{name}.key"
    if password is not None:
        _openssl("pkey", "-in", f"{name}.key", "-out", f"{name}.enc.key", "-aes256", "-passout",
                 f"pass:{password}", cwd=directory)
        key = directory / f"{name}.enc.key"
    keystore = directory / f"{name}.keystore.pem"
    keystore.write_text(key.read_text(encoding="utf-8") + (directory / f"{name}.crt").read_text(encoding="utf-8"),
                        encoding="utf-8")
    return keystore


@dataclass(frozen=True)
class ThrowAwayCerts:
    truststore: Path
    keystores: Mapping[str, Path]

    def node_properties(self, name: str, client_auth: str = "required") -> dict[str, str]:
        """What ``name``'s server.properties needs for TLS on its controller listener (Kafka's names)."""
        return {
            "listener.security.protocol.map": "CONTROLLER:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystores[name]),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            "ssl.client.auth": client_auth,
            "ssl.endpoint.identification.algorithm": "https",
        }


def throw_away_certs(directory: Path, names: Iterable[str]) -> ThrowAwayCerts:
    """A CA and a keystore per name, all in ``directory``."""
    ca = make_ca(directory)
    return ThrowAwayCerts(ca, {name: make_keystore(directory, name) for name in names})
