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
SASL is not supported yet: such a file stops the run with one line rather than testing in plaintext.
Written for the harness alone (it shares no code with the reference node it judges).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path


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


@dataclass(frozen=True)
class TargetSecurity:
    protocol: str  # PLAINTEXT | SSL
    truststore: Path | None = None
    keystore: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @classmethod
    def from_file(cls, path: Path) -> TargetSecurity:
        props = read_properties(path)
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol.startswith("SASL"):
            raise SecurityConfigError(
                f"{path}: security.protocol={protocol}: the harness speaks PLAINTEXT and SSL, not SASL yet")
        if protocol not in ("PLAINTEXT", "SSL"):
            raise SecurityConfigError(f"{path}: security.protocol={protocol}: expected PLAINTEXT or SSL")
        if protocol == "PLAINTEXT":
            used = sorted(k for k in props if k.startswith("ssl."))
            if used:
                raise SecurityConfigError(f"{path}: {', '.join(used)} given with security.protocol=PLAINTEXT")
            return cls("PLAINTEXT")
        for kind in ("truststore", "keystore"):
            store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
            if store_type != "PEM":
                raise SecurityConfigError(f"{path}: ssl.{kind}.type={store_type}: the harness reads PEM stores")
        truststore = props.get("ssl.truststore.location")
        if not truststore:
            raise SecurityConfigError(f"{path}: security.protocol=SSL needs ssl.truststore.location (the CA "
                                      "that signed the target's certificate)")
        keystore = props.get("ssl.keystore.location") or None
        for key, where in (("ssl.truststore.location", truststore), ("ssl.keystore.location", keystore)):
            if where is not None and not Path(where).is_file():
                raise SecurityConfigError(f"{path}: {key}={where}: no such file")
        return cls("SSL", Path(truststore), Path(keystore) if keystore else None, props.get("ssl.key.password"),
                   props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https")

    @property
    def tls(self) -> bool:
        return self.protocol == "SSL"

    def _load_identity(self, ctx: ssl.SSLContext) -> None:
        assert self.truststore is not None
        ctx.load_verify_locations(cafile=str(self.truststore))
        if self.keystore is not None:
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
            raise SecurityConfigError("security.protocol=SSL: the virtual voters serve TLS to the target, so "
                                      "the command config needs ssl.keystore.location (a certificate the "
                                      "target trusts)")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self._load_identity(ctx)
        return ctx
