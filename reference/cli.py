"""The one console script, ``kraft-tck``: every command of the kit hangs off this group.

Each area owns its commands (``<area>/cli.py`` exports ``COMMANDS``, announced through the
``kraft_tck.commands`` entry-point group); this module owns the reference node's commands and assembles
the group without importing the areas that stand on reference/. Heavy imports (pyspark, TLC) happen inside commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

import click
from kraft_tck.reference.config import ConfigError, NodeConfig, load_properties


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kraft-tck")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(verbose: int) -> None:
    """kraft-tck: KRaft conformance test kit and reference node."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _load_config(path: str) -> NodeConfig:
    try:
        return NodeConfig.from_properties(load_properties(path), source=path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


F = TypeVar("F", bound=Callable[..., Any])


def _event_loop_option(help_text: str) -> Callable[[F], F]:
    # The choices of workload.EVENT_LOOPS (not imported here: it loads the whole node).
    return click.option("--event-loop", type=click.Choice(["auto", "uvloop", "asyncio"]), default="auto",
                        show_default=True, help=help_text)


def _loop_factory(event_loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``workload.loop_factory``, its refusal (uvloop asked for but not installed) as a CLI error."""
    from kraft_tck.reference.workload import loop_factory

    try:
        return loop_factory(event_loop)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None


# ---------------------------------------------------------------------------------------------- format


@main.command("format")
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--cluster-id", help="Cluster id to write (22-character base64 UUID, like kafka-storage).")
@click.option("--random-cluster-id", is_flag=True, help="Generate a cluster id and print it.")
def format_cmd(config_path: str, cluster_id: str | None, random_cluster_id: bool) -> None:
    """Format a data directory with a cluster id (meta.properties), like kafka-storage format."""
    from kraft_tck.reference.storage import StorageError, format_dir, new_uuid

    cfg = _load_config(config_path)
    if random_cluster_id == (cluster_id is not None):
        raise click.UsageError("give exactly one of --cluster-id ID or --random-cluster-id")
    cid = cluster_id or new_uuid()
    try:
        format_dir(cfg.log_dir, cfg.node_id, cid)
    except StorageError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Formatted {cfg.log_dir} for node {cfg.node_id} with cluster id {cid}")


# ---------------------------------------------------------------------------------------------- node


@main.command("node")
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--trace-file", type=click.Path(dir_okay=False), help="Write this node's trace (NDJSON).")
@click.option("--throughput", type=int, default=0, help="Steady write workload on the leader, records/s.")
@click.option("--record-size", type=int, default=100, show_default=True, help="Workload record size, bytes.")
@click.option("--closed-loop", is_flag=True,
              help="Workload of one record at a time, each written once the last one committed "
                   "(instead of --throughput).")
@click.option("--no-fsync", is_flag=True, help="Skip fsync (benchmarks only: loses the durability guarantees).")
@_event_loop_option("auto: uvloop when installed, else asyncio.")
def node_cmd(config_path: str, trace_file: str | None, throughput: int, record_size: int, closed_loop: bool,
             no_fsync: bool, event_loop: str) -> None:
    """Run one reference KRaft node in the foreground until SIGTERM/SIGINT (SIGUSR1 restarts the workload's
    statistics)."""
    from kraft_tck.reference.workload import run_node

    if closed_loop and throughput:
        raise click.UsageError("--closed-loop and --throughput are two workloads: give one of them")
    cfg = _load_config(config_path)
    with asyncio.Runner(loop_factory=_loop_factory(event_loop)) as runner:
        runner.run(run_node(cfg, trace_file=trace_file, throughput=throughput, record_size=record_size,
                            fsync=not no_fsync, closed_loop=closed_loop))


# ---------------------------------------------------------------------------------------------- cluster


@main.command("cluster")
@click.option("--voters", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--dir", "base_dir", type=click.Path(file_okay=False), required=True)
@click.option("--base-port", type=click.IntRange(1024, 65000), default=19190, show_default=True)
@click.option("--trace", is_flag=True, help="Write node-i/trace-<incarnation>.ndjson for every node.")
@_event_loop_option("Every node's event loop (as kraft-tck node --event-loop).")
def cluster_cmd(voters: int, base_dir: str, base_port: int, trace: bool, event_loop: str) -> None:
    """Run a local N-process cluster in the foreground (Ctrl-C / SIGTERM stops it cleanly)."""
    from kraft_tck.reference.procs import LocalCluster
    from kraft_tck.reference.storage import StorageError

    _loop_factory(event_loop)  # refused here, by name, rather than by every node process
    cluster = LocalCluster(Path(base_dir).resolve(), voters=voters, base_port=base_port, trace=trace,
                           extra_args=["--event-loop", event_loop])
    try:
        cid = cluster.prepare()
    except StorageError as exc:
        raise click.ClickException(str(exc)) from exc
    cluster.start_all()
    click.echo(f"cluster {cid}: {voters} voters on 127.0.0.1:{base_port}..{base_port + voters - 1}, "
               f"data and logs in {cluster.base_dir}")
    click.echo(f"try: kraft-tck quorum --bootstrap-controller 127.0.0.1:{base_port} describe --status")
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stop["now"] and len(cluster.alive()) == voters:
        time.sleep(0.2)
    died = [i for i in range(1, voters + 1) if i not in cluster.alive()]
    cluster.stop_all()
    if died and not stop["now"]:
        raise click.ClickException(f"node(s) {died} exited unexpectedly; see {cluster.base_dir}/node-N/node.log")
    click.echo("cluster stopped")


@main.group("quorum")
@click.option("--bootstrap-controller", required=True,
              help="host:port of any controller (a comma-separated list is allowed; the first is asked "
                   "for --status/--replication, all are tried for --brokers).")
@click.option("--timeout-ms", type=int, default=5000, show_default=True)
@click.pass_context
def quorum_cmd(ctx: click.Context, bootstrap_controller: str, timeout_ms: int) -> None:
    """Ask a quorum about itself (like kafka-metadata-quorum)."""
    from kraft_tck.reference.broker_client import parse_endpoints

    try:
        endpoints = parse_endpoints(bootstrap_controller)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bootstrap-controller") from exc
    host, port = endpoints[0]
    ctx.obj = {"host": host, "port": port, "endpoints": endpoints, "timeout": timeout_ms / 1000}


@quorum_cmd.command("describe")
@click.option("--status", "mode", flag_value="status", default=True, help="Summary of the quorum.")
@click.option("--replication", "mode", flag_value="replication", help="Per-replica replication table.")
@click.option("--brokers", "mode", flag_value="brokers",
              help="Registered brokers with state and epoch, replayed from the leader's committed log.")
@click.pass_obj
def describe_cmd(obj: dict[str, Any], mode: str) -> None:
    """DescribeQuorum against any node that speaks it (KIP-595, KIP-836 fields)."""
    from kraft_tck.reference.quorum_client import (
        QuorumError,
        describe_quorum,
        render_replication,
        render_status,
    )

    if mode == "brokers":
        from kraft_tck.reference.broker_client import BrokerError, read_registry, render_brokers

        try:
            registry, qinfo = asyncio.run(read_registry(obj["endpoints"], obj["timeout"]))
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(render_brokers(registry, qinfo))
        return
    try:
        info = asyncio.run(describe_quorum(obj["host"], obj["port"], obj["timeout"]))
    except QuorumError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(render_status(info) if mode == "status" else render_replication(info, now_ms=int(time.time() * 1000)))


# ---------------------------------------------------------------------------------------------- other areas


def _register_area_commands() -> None:
    # The areas above reference/ (harness, TLA+, traces) announce their commands through the
    # "kraft_tck.commands" entry-point group (pyproject.toml): this root imports none of them, and the
    # package graph stays acyclic. An area that fails to import names itself instead of hiding the rest.
    for entry in sorted(entry_points(group="kraft_tck.commands"), key=lambda e: e.name):
        try:
            commands = entry.load()
        except ImportError as exc:
            raise click.ClickException(f"the {entry.name!r} commands ({entry.value}) cannot be loaded: {exc}") from exc
        for command in commands:
            main.add_command(command)


_register_area_commands()

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main(prog_name=os.environ.get("KRAFT_TCK_PROG", "kraft-tck"))
