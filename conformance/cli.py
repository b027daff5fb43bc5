"""``kraft-tck profile``: the Kafka properties a node needs to be tested by the conformance harness
(``--kafka``: for an Apache Kafka controller, with the ``kafka-storage format`` command; ``--security``: a
secured controller listener, with throw-away certificates and the harness's ``--target-command-config``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from kraft_tck.conformance.security import SecuredProfile, SecurityConfigError, secured_profile
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    QuorumLayout,
    Timeouts,
    render_properties,
    target_properties,
)


def _ports(value: str) -> tuple[int, ...]:
    try:
        ports = tuple(int(p) for p in value.split(",") if p.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated port numbers, got {value!r}") from None
    if len(ports) not in (2, 4) or any(not 0 < p < 65536 for p in ports):
        raise click.BadParameter(f"expected 2 ports (3 voters) or 4 ports (5 voters), got {value!r}")
    return ports


@click.command("profile")
@click.option("--target-id", type=int, default=1, show_default=True, help="node.id of the node under test")
@click.option("--harness-ports", required=True, help="ports of the virtual voters, e.g. 19092,19093")
@click.option("--harness-host", default="127.0.0.1", show_default=True, help="where the virtual voters listen")
@click.option("--target-host", default="127.0.0.1", show_default=True, help="the target's controller listener host")
@click.option("--target-port", type=int, default=9093, show_default=True, help="the target's controller port")
@click.option("--data-dir", default="/var/lib/kraft/target", show_default=True, help="the target's log.dirs")
@click.option("--election-timeout-ms", type=int, default=EMBEDDED_TIMEOUTS.election_ms, show_default=True,
              help="controller.quorum.election.timeout.ms for the target (the harness scales its waits to it).")
@click.option("--fetch-timeout-ms", type=int, default=EMBEDDED_TIMEOUTS.fetch_ms, show_default=True,
              help="controller.quorum.fetch.timeout.ms for the target (the harness scales its waits to it).")
@click.option(
    "--kafka",
    is_flag=True,
    help="print server.properties for an Apache Kafka (3.9 / 4.0) controller under test, and how to format it",
)
@click.option("--security", type=click.Choice(["PLAINTEXT", "SSL", "SASL_SSL"], case_sensitive=False),
              default="PLAINTEXT", show_default=True,
              help="the target's controller listener: SSL is mutual TLS, SASL_SSL adds a SASL login; both with "
                   "Kafka's StandardAuthorizer, the harness the only super user")
@click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                                                    case_sensitive=False),
              default="PLAIN", show_default=True,
              help="with --security SASL_SSL (SCRAM accounts are formatted in with --add-scram)")
@click.option("--certs-dir", type=click.Path(file_okay=False),
              help="with --security: make throw-away certificates (CA, target, harness, intruder; never for "
                   "production) here, kept if already there, and write harness.properties, the harness's "
                   "--target-command-config")
def profile_cmd(
    target_id: int,
    harness_ports: str,
    harness_host: str,
    target_host: str,
    target_port: int,
    data_dir: str,
    election_timeout_ms: int,
    fetch_timeout_ms: int,
    kafka: bool,
    security: str,
    sasl_mechanism: str,
    certs_dir: str | None,
) -> None:
    """Print the properties a KRaft controller needs to join the harness's quorum as voter TARGET_ID.

    The other voters are the harness's virtual voters (ids TARGET_ID+1, TARGET_ID+2, ...) on
    HARNESS_PORTS. Start your node with these settings (its directory formatted with a cluster id), then:
    pytest conformance --target HOST:PORT --harness-ports ... (the harness learns the cluster id from the
    node's first request, or takes --cluster-id).

    With --security SSL or SASL_SSL (and --certs-dir DIR) the profile secures the controller listener as a
    production one: mutual TLS, SASL, authorization; the header says how to format the node (SCRAM
    accounts with --add-scram) and the run takes --target-command-config DIR/harness.properties.
    """
    security = security.upper()
    sasl_mechanism = sasl_mechanism.upper()
    secured: SecuredProfile | None = None
    if security == "PLAINTEXT":
        if certs_dir is not None:
            raise click.BadParameter("--certs-dir goes with --security SSL or SASL_SSL", param_hint="--certs-dir")
    else:
        if certs_dir is None:
            raise click.BadParameter(f"--security {security} needs --certs-dir DIR (where the throw-away "
                                     "certificates and the harness's command config go)", param_hint="--certs-dir")
        try:
            secured = secured_profile(security, sasl_mechanism, Path(certs_dir).resolve(), f"node-{target_id}",
                                      [target_host, harness_host])
        except (SecurityConfigError, OSError) as exc:
            raise click.ClickException(f"--certs-dir {certs_dir}: {exc}") from exc
    ports = _ports(harness_ports)
    if fetch_timeout_ms <= election_timeout_ms // 2:
        raise click.BadParameter("the fetch timeout should exceed half the election timeout (Kafka: 2000 vs 1000)")
    layout = QuorumLayout(target_id, target_host, target_port, harness_host, ports)
    defaults = EMBEDDED_TIMEOUTS
    timeouts = Timeouts(
        election_timeout_ms,
        fetch_timeout_ms,
        defaults.election_backoff_max_ms,
        defaults.request_timeout_ms,
        min(defaults.fetch_max_wait_ms, fetch_timeout_ms // 2),
    )
    props = target_properties(layout, timeouts, data_dir)
    voters = ", ".join(f"{vid}@{harness_host}:{p}" for vid, p in zip(layout.virtual_ids, ports, strict=True))
    run = (
        f"pytest conformance --target {target_host}:{target_port} --target-id {target_id} "
        f"--harness-ports {harness_ports} "
        f"--target-election-timeout-ms {election_timeout_ms} --target-fetch-timeout-ms {fetch_timeout_ms} "
        f"--target-broker-session-timeout-ms {timeouts.broker_session_timeout_ms}"
    )
    if secured is not None:
        run += f" --target-command-config {secured.command_config}"
    if kafka:
        kprops = kafka_properties(props)
        header = _kafka_header(target_id, voters, run, secured)
        if secured is not None:
            kprops |= secured.target
            header += "\n" + _security_note(secured, security, sasl_mechanism)
        click.echo(render_properties(kprops, header=header), nl=False)
        return
    header = (
        f"kraft-tck conformance profile: node {target_id} with virtual voters {voters}\n"
        f"then run: {run}\n"
        "(the cluster id is learnt from the node's first request, or pass --cluster-id; the target profile is "
        "kafka unless --target-profile says otherwise: reference for this kit's node, or your YAML file)"
    )
    if secured is not None:
        props |= secured.target
        scram = " ".join(f"-S {shlex.quote(a)}" for a in secured.add_scram)
        header += (f"\nformat: kraft-tck format --config server.properties --cluster-id $(kraft-tck random-uuid)"
                   f"{' ' + scram if scram else ''}\n" + _security_note(secured, security, sasl_mechanism))
    click.echo(render_properties(props, header=header), nl=False)


def _security_note(secured: SecuredProfile, security: str, mechanism: str) -> str:
    how = "mutual TLS" + (f" and SASL {mechanism}" if security == "SASL_SSL" else "")
    return (f"security: {security} ({how}; the StandardAuthorizer makes the harness the only super user, so an "
            f"unauthorized principal's Vote and Fetch are refused); throw-away certificates (never for production) "
            f"and the harness's identity: {secured.command_config}")


#: Properties of the harness's profile that are no Kafka setting (Kafka hard-codes its Fetch MaxWaitMs).
_NOT_KAFKA = ("controller.quorum.fetch.max.wait.ms",)


def kafka_properties(props: dict[str, str]) -> dict[str, str]:
    """The harness's properties as an Apache Kafka controller takes them: its own settings only, and the
    controller listener mapped to PLAINTEXT (Kafka's listener.security.protocol.map has no CONTROLLER)."""
    out = {k: v for k, v in props.items() if k not in _NOT_KAFKA}
    out["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
    return out


def _kafka_header(target_id: int, voters: str, run: str, secured: SecuredProfile | None = None) -> str:
    scram = "".join(f" --add-scram {shlex.quote(a)}" for a in (secured.add_scram if secured else ()))
    return "\n".join(
        [
            f"kraft-tck conformance profile for an Apache Kafka controller: node {target_id}, virtual voters {voters}",
            "1. save this file as server.properties",
            "2. format its log.dirs (Kafka 3.9 and 4.0):",
            f"     bin/kafka-storage.sh format -t $(bin/kafka-storage.sh random-uuid) -c server.properties{scram}",
            "   A static controller.quorum.voters quorum (kraft.version 0) takes none of --standalone and",
            "   --initial-controllers: those format a KIP-853 dynamic quorum (kraft.version 1). Kafka 4.0's",
            "   --no-initial-controllers is accepted and changes nothing here.",
            "3. start it: bin/kafka-server-start.sh server.properties",
            f"4. run: {run}",
            "   (the harness learns the cluster id from the node's first request; the profile is kafka by default)",
        ]
    )


COMMANDS: list[click.Command] = [profile_cmd]
