"""``kraft-tck profile``: the Kafka properties a node needs to be tested by the conformance harness."""

from __future__ import annotations

import click
from kraft_tck.conformance.target import EMBEDDED_TIMEOUTS, QuorumLayout, Timeouts, target_properties
from kraft_tck.reference.config import render_properties


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
@click.option("--election-timeout-ms", type=int, default=EMBEDDED_TIMEOUTS.election_ms, show_default=True)
@click.option("--fetch-timeout-ms", type=int, default=EMBEDDED_TIMEOUTS.fetch_ms, show_default=True)
def profile_cmd(
    target_id: int,
    harness_ports: str,
    harness_host: str,
    target_host: str,
    target_port: int,
    data_dir: str,
    election_timeout_ms: int,
    fetch_timeout_ms: int,
) -> None:
    """Print the properties a KRaft controller needs to join the harness's quorum as voter TARGET_ID.

    The other voters are the harness's virtual voters (ids TARGET_ID+1, TARGET_ID+2, ...) on
    HARNESS_PORTS. Start your node with these settings, format its directory with the cluster id you
    pass as --cluster-id, then: pytest conformance --target HOST:PORT --harness-ports ... .
    """
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
    header = (
        f"kraft-tck conformance profile: node {target_id} with virtual voters {voters}\n"
        f"then run: pytest conformance --target {target_host}:{target_port} --target-id {target_id} "
        f"--harness-ports {harness_ports} --cluster-id <its cluster id> "
        f"--target-election-timeout-ms {election_timeout_ms} --target-fetch-timeout-ms {fetch_timeout_ms} "
        f"--target-broker-session-timeout-ms {timeouts.broker_session_timeout_ms}"
    )
    click.echo(render_properties(props, header=header), nl=False)


COMMANDS: list[click.Command] = [profile_cmd]
