"""The one console script, ``kraft-tck``: every command of the kit hangs off this group.

Each area owns its commands (``<area>/cli.py`` exports ``COMMANDS``, announced through the
``kraft_tck.commands`` entry-point group); this module owns the reference node's commands and assembles
the group without importing the areas that stand on reference/. Heavy imports (pyspark, TLC) happen inside commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import IO, Any, ClassVar, TypeVar

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


# ---------------------------------------------------------------------------------------------- errors


class TerseError(click.ClickException):
    """One line on stderr, exit 1, no "Error: " prefix: the texts Kafka's tools print (TerseException)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.format_message(), err=True)


def environment_problem(exc: BaseException, what: str, fix: str) -> click.ClickException:
    """One line for an OSError met at the boundary (busy port, unresolvable host, unwritable directory):
    what is wrong and what to do, instead of a traceback."""
    if isinstance(exc, socket.gaierror):
        return click.ClickException(f"{what}: cannot resolve a host name ({exc.strerror}): {fix}")
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        found = re.search(r"\('([^']*)', (\d+)\)", str(exc))  # asyncio's and uvloop's texts name the address
        where = f" {found.group(1)}:{found.group(2)}" if found else ""
        return click.ClickException(f"{what}: the address{where} is already in use (another node or program "
                                    f"listens there): stop it, or {fix}")
    if isinstance(exc, OSError) and exc.errno == errno.EADDRNOTAVAIL:
        return click.ClickException(f"{what}: that address is not one of this host's ({exc.strerror}): {fix}")
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT,
                                                  errno.ENOTDIR, errno.ENOSPC):
        where = f" {exc.filename}" if exc.filename else ""
        return click.ClickException(f"{what}: cannot write{where} ({exc.strerror}): {fix}")
    return click.ClickException(f"{what}: {exc}")


# ---------------------------------------------------------------------------------------------- format


class _ExclusiveOption(click.Option):
    """One of argparse4j's mutually exclusive options (kafka-storage's --standalone, --no-initial-controllers and
    --initial-controllers): a second one given is refused with argparse4j's words."""

    GROUP: ClassVar[tuple[str, ...]] = ("standalone", "no_initial_controllers", "initial_controllers")
    SHOWN: ClassVar[dict[str, str]] = {"standalone": "--standalone/-s",
                                       "no_initial_controllers": "--no-initial-controllers/-N",
                                       "initial_controllers": "--initial-controllers/-I"}

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> tuple[Any, list[str]]:
        name = self.name or ""
        if opts.get(name) not in (None, False):
            others = [o for o in self.GROUP if o != name and opts.get(o) not in (None, False)]
            if others:
                first, second = sorted([name, others[0]], key=self.GROUP.index)
                raise TerseError(f"argument {self.SHOWN[second]}: not allowed with argument {self.SHOWN[first]}")
        return super().handle_parse_result(ctx, opts, args)


def _parse_features(features: tuple[str, ...]) -> dict[str, int]:
    """kafka-storage's --feature NAME=LEVEL (``StorageTool.parseNameAndLevel``, its messages); this node knows
    the feature kraft.version only (Kafka's Formatter: "Unsupported feature")."""
    from kraft_tck.reference.bootstrap import KRAFT_VERSION_FEATURE

    levels: dict[str, int] = {}
    for item in features:
        name, eq, level_text = item.partition("=")
        if not eq:
            raise TerseError(f"Can't parse feature=level string {item}: equals sign not found.")
        name, level_text = name.strip(), level_text.strip()
        if not re.fullmatch(r"[+-]?\d+", level_text) or not -(2**15) <= int(level_text) < 2**15:
            raise TerseError(f"Can't parse feature=level string {item}: unable to parse {level_text} as a short.")
        if name != KRAFT_VERSION_FEATURE:
            raise TerseError(f"Unsupported feature: {name}. Supported features are: {KRAFT_VERSION_FEATURE}")
        levels[name] = int(level_text)
    return levels


def _kraft_version(levels: dict[str, int], dynamic: bool, metadata_version: int) -> int:
    """Kafka's ``Formatter.effectiveKRaftFeatureLevel`` (with its messages) and the level checks of
    ``Features.validateVersion``: 1 with initial controllers, 0 without; a --feature kraft.version that
    contradicts them is refused."""
    from kraft_tck.reference.bootstrap import KRAFT_VERSION_1_MIN_METADATA_VERSION, KRAFT_VERSIONS

    level = levels.get("kraft.version")
    if level is None:
        return 1 if dynamic else 0
    if level == 0 and dynamic:
        raise TerseError(f"Cannot set kraft.version to {level} if KIP-853 configuration is present. "
                         "Try removing the --feature flag for kraft.version.")
    if level != 0 and not dynamic:
        raise TerseError(f"Cannot set kraft.version to {level} unless KIP-853 configuration is present. "
                         "Try removing the --feature flag for kraft.version.")
    if level not in KRAFT_VERSIONS:
        raise TerseError(f"No feature:kraft.version with feature level {level}")
    if level >= 1 and metadata_version < KRAFT_VERSION_1_MIN_METADATA_VERSION:
        raise TerseError(f"kraft.version could not be set to {level} because it depends on metadata.version "
                         f"level {KRAFT_VERSION_1_MIN_METADATA_VERSION}")
    return level


def _standalone_voter(cfg: NodeConfig, directory_id: str) -> str:
    """``StorageTool.createStandaloneDynamicVoters``: node.id@host:port:dirId of the first advertised controller
    listener (advertised.listeners over listeners; an empty host is localhost)."""
    if "controller" not in cfg.process_roles:
        raise TerseError("You can only use --standalone on a controller.")
    host, port = cfg.listener.endpoint.host, cfg.listener.endpoint.port
    advertised = cfg.extra.get("advertised.listeners", "")
    for item in filter(None, (x.strip() for x in advertised.split(","))):
        m = re.fullmatch(r"([^:/]+)://\[?([^\]]*?)\]?:(\d+)", item)
        if m and m.group(1).upper() == cfg.listener.name:
            host, port = m.group(2), int(m.group(3))
    host = host or "localhost"
    return f"{cfg.node_id}@{f'[{host}]' if ':' in host else host}:{port}:{directory_id}"


@main.command("format")
@click.option("-c", "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The node's configuration file (server.properties): node.id and log.dirs.")
@click.option("-t", "--cluster-id", help="The cluster id to write (22-character base64 UUID; see random-uuid).")
@click.option("--random-cluster-id", is_flag=True, help="Generate a cluster id (printed) instead of -t.")
@click.option("-g", "--ignore-formatted", is_flag=True,
              help="Skip a directory already formatted (for this cluster and node) rather than fail.")
@click.option("-S", "--add-scram", "add_scram", multiple=True, metavar="MECHANISM=[name=..,password=..]",
              help="A SCRAM credential for the bootstrap metadata, as kafka-storage's: "
                   "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (also iterations=, or salt= with "
                   "saltedpassword=, base64). Repeatable. The node accepts SCRAM logins from them.")
@click.option("-f", "--feature", "features", multiple=True, metavar="NAME=LEVEL",
              help="A feature level, as kafka-storage's (this node knows kraft.version: 0 static quorum, 1 "
                   "dynamic; the default follows the options below).")
@click.option("-s", "--standalone", is_flag=True, cls=_ExclusiveOption,
              help="KIP-853: initialize this controller as a single-node dynamic quorum (its first controller "
                   "listener, a new directory id).")
@click.option("-N", "--no-initial-controllers", is_flag=True, cls=_ExclusiveOption,
              help="KIP-853: initialize a controller without a dynamic quorum topology (it learns the voters from "
                   "the leader's log; add it with quorum add-controller).")
@click.option("-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRID,...", cls=_ExclusiveOption,
              help="KIP-853: the initial dynamic quorum, id@host:port:directoryId,... (IPv6 hosts in brackets); the "
                   "same value on every node.")
def format_cmd(config_path: str, cluster_id: str | None, random_cluster_id: bool, ignore_formatted: bool,
               add_scram: tuple[str, ...], features: tuple[str, ...], standalone: bool, no_initial_controllers: bool,
               initial_controllers: str | None) -> None:
    """Format the node's data directory with a cluster id (meta.properties) and its bootstrap metadata
    (bootstrap.checkpoint: metadata.version and any --add-scram credentials), like kafka-storage format.
    With --standalone or --initial-controllers (KIP-853) also the bootstrap checkpoint
    __cluster_metadata-0/00000000000000000000-0000000000.checkpoint holding kraft.version 1 and the voters."""
    from kraft_tck.reference.bootstrap import (
        METADATA_VERSION_LEVEL,
        BootstrapError,
        parse_add_scram,
        parse_dynamic_voters,
        write_bootstrap,
        write_dynamic_quorum_snapshot,
    )
    from kraft_tck.reference.security import FORMATTING
    from kraft_tck.reference.storage import StorageError, format_dir, new_uuid, read_meta_file

    token = FORMATTING.set(True)  # the SCRAM credentials this command writes are not there yet
    try:
        cfg = _load_config(config_path)
    finally:
        FORMATTING.reset(token)
    if random_cluster_id == (cluster_id is not None):
        raise click.UsageError("give exactly one of -t/--cluster-id ID or --random-cluster-id")
    # StorageTool.runFormatCommand's order: --initial-controllers, --standalone, the KIP-853 safeguard, then
    # the Formatter (feature levels, bootstrap records).
    try:
        voters = None
        if initial_controllers is not None:
            voters = parse_dynamic_voters(initial_controllers)
        if standalone:
            voters = parse_dynamic_voters(_standalone_voter(cfg, new_uuid()))
    except BootstrapError as exc:
        raise TerseError(str(exc)) from exc
    if not no_initial_controllers and "controller" in cfg.process_roles and not cfg.voters and voters is None:
        raise TerseError("Because controller.quorum.voters is not set on this controller, you must specify one of "
                         "the following: --standalone, --initial-controllers, or --no-initial-controllers.")
    kraft_version = _kraft_version(_parse_features(features), voters is not None, METADATA_VERSION_LEVEL)
    try:  # Kafka's Formatter computes the bootstrap records before it writes anything
        credentials = [parse_add_scram(arg) for arg in add_scram]
    except BootstrapError as exc:
        raise TerseError(f"--add-scram: {exc}") from exc
    cid = cluster_id or new_uuid()
    data_dir = Path(cfg.log_dir)
    # Formatter.DirectoryType: the metadata directory of a node named in the initial controllers takes the
    # directory id given there; any other directory gets a random one.
    mine = next((v for v in voters or () if v.node_id == cfg.node_id), None)
    try:
        existing = read_meta_file(data_dir / "meta.properties")
        if existing is not None and not ignore_formatted:
            # Kafka's Formatter: formatted directories fail the command unless --ignore-formatted.
            raise TerseError(f"Log directory {data_dir} is already formatted. "
                             f"Use --ignore-formatted to ignore this directory and format the others.")
        if existing is None:
            # Kafka writes bootstrap.checkpoint (and, for a dynamic quorum, the bootstrap snapshot) before
            # meta.properties (the Copier's pre-write handler).
            data_dir.mkdir(parents=True, exist_ok=True)
            write_bootstrap(data_dir, credentials)
            if voters is not None:
                write_dynamic_quorum_snapshot(data_dir, voters, cfg.listener.name, kraft_version)
        format_dir(data_dir, cfg.node_id, cid, mine.directory_id if mine is not None else None)
    except StorageError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise environment_problem(exc, f"formatting {data_dir}",
                                  f"make log.dirs in {config_path} a directory you can write") from exc
    if existing is not None:
        click.echo("All of the log directories are already formatted.")
        return
    scram = f" and {len(credentials)} SCRAM credential(s)" if credentials else ""
    click.echo(f"Formatted {data_dir} for node {cfg.node_id} with cluster id {cid}{scram}")
    if voters is not None:
        kind = "voter" if mine is not None else "non-voter"
        click.echo(f"Formatted a dynamic quorum (kraft.version {kraft_version}) {kind} directory: initial "
                   f"controllers {','.join(str(v) for v in voters)}")


@main.command("random-uuid")
def random_uuid_cmd() -> None:
    """Print a random UUID, for format -t (kafka-storage random-uuid)."""
    from kraft_tck.reference.storage import new_uuid

    click.echo(new_uuid())


@main.command("certs")
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False),
              help="Write the CA (ca.pem) and the keystores here.")
@click.option("--nodes", type=int, default=3, show_default=True, help="Keystores node-1 .. node-N.")
@click.option("--client/--no-client", default=True, show_default=True,
              help="Also a keystore for a client (the harness, kraft-tck quorum) under mutual TLS.")
def certs_cmd(directory: str, nodes: int, client: bool) -> None:
    """Make throw-away TLS certificates (with openssl) for a local quorum, and print each node's settings.

    For trying TLS on the controller listener (listener.security.protocol.map=CONTROLLER:SSL), in tests and
    demos: the keys are unencrypted and the CA's key lies beside them. Never for production."""
    from kraft_tck.reference.certs import CertError, throw_away_certs

    names = [f"node-{i}" for i in range(1, nodes + 1)] + (["client"] if client else [])
    try:
        made = throw_away_certs(Path(directory), names)
    except CertError as exc:
        raise click.ClickException(str(exc)) from exc
    for i in range(1, nodes + 1):
        click.echo(f"# node {i}: add to its server.properties")
        for key, value in made.node_properties(f"node-{i}").items():
            click.echo(f"{key}={value}")
    if client:
        click.echo(f"# a client: truststore {made.truststore}, keystore {made.keystores['client']} (PEM)")


# ---------------------------------------------------------------------------------------------- node


@main.command("node")
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The node's configuration file (server.properties).")
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
    from kraft_tck.reference.storage import StorageError
    from kraft_tck.reference.workload import run_node

    if closed_loop and throughput:
        raise click.UsageError("--closed-loop and --throughput are two workloads: give one of them")
    cfg = _load_config(config_path)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(event_loop)) as runner:
            runner.run(run_node(cfg, trace_file=trace_file, throughput=throughput, record_size=record_size,
                                fsync=not no_fsync, closed_loop=closed_loop))
    except StorageError as exc:
        raise click.ClickException(f"node {cfg.node_id}: {exc}") from exc
    except OSError as exc:
        raise environment_problem(
            exc, f"node {cfg.node_id}",
            f"check listeners, controller.quorum.voters and log.dirs in {config_path}") from exc


# ---------------------------------------------------------------------------------------------- cluster


@main.group("cluster", invoke_without_command=True)
@click.option("--voters", type=click.IntRange(1, 9), default=3, show_default=True, help="Number of nodes.")
@click.option("--dir", "base_dir", type=click.Path(file_okay=False),
              help="The cluster's directory: node-<i>/ with server.properties, data/ and node.log. A directory "
                   "that already holds a cluster starts it again, with its settings.")
@click.option("--base-port", type=click.IntRange(1024, 65000), default=19190, show_default=True,
              help="Node i listens on base-port + i - 1.")
@click.option("--trace", is_flag=True, help="Write node-i/trace-<incarnation>.ndjson for every node.")
@_event_loop_option("Every node's event loop (as kraft-tck node --event-loop).")
@click.pass_context
def cluster_cmd(ctx: click.Context, voters: int, base_dir: str | None, base_port: int, trace: bool,
                event_loop: str) -> None:
    """Run a local N-process cluster in the foreground (Ctrl-C / SIGTERM stops it cleanly).

    A node that dies is reported in one line and the others keep running; `kraft-tck cluster restart
    --node N --dir DIR` (from another terminal) restarts it."""
    if ctx.invoked_subcommand is not None:
        return
    if base_dir is None:
        raise click.UsageError("Missing option '--dir'.")
    from kraft_tck.reference.procs import (
        ClusterDirError,
        LocalCluster,
        Supervisor,
        node_process_alive,
        pid_alive,
        port_in_use,
        read_state,
    )
    from kraft_tck.reference.storage import StorageError

    _loop_factory(event_loop)  # refused here, by name, rather than by every node process
    root = Path(base_dir).resolve()
    try:
        saved = read_state(root)
    except ClusterDirError as exc:
        raise click.ClickException(str(exc)) from exc
    if saved is not None:
        # A stopped cluster starts again from its directory, with the settings it was made with.
        if saved.get("pid") and pid_alive(int(saved["pid"])) and int(saved["pid"]) != os.getpid():
            raise click.ClickException(f"a kraft-tck cluster (pid {saved['pid']}) already runs in {root}: "
                                       f"stop it first, or use another --dir")
        left = sorted(int(pid) for pid in (saved.get("nodes") or {}).values() if node_process_alive(int(pid), root))
        if left:
            raise click.ClickException(f"node processes of an earlier run in {root} still run (pids "
                                       f"{', '.join(map(str, left))}): stop them (kill {' '.join(map(str, left))}) "
                                       f"and start again")
        for name, value in (("voters", voters), ("base_port", base_port)):
            given = ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
            if given and value != saved.get(name):
                raise click.ClickException(
                    f"{root} holds a cluster made with --{name.replace('_', '-')} {saved.get(name)}: "
                    f"leave the option out to start it again, or use another --dir")
        voters, base_port = int(saved["voters"]), int(saved["base_port"])
        trace = trace or bool(saved.get("trace"))
    busy = [(i, base_port + i - 1) for i in range(1, voters + 1) if port_in_use("127.0.0.1", base_port + i - 1)]
    if busy:
        node, port = busy[0]
        fix = ("stop what listens there (this cluster's ports are fixed: another --base-port needs a new --dir)"
               if saved else "stop what listens there or choose another --base-port")
        raise click.ClickException(f"port {port} (node {node}) on 127.0.0.1 is in use: {fix}")
    cluster = LocalCluster(root, voters=voters, base_port=base_port, trace=trace,
                           extra_args=["--event-loop", event_loop])
    try:
        cid = cluster.prepare()
    except StorageError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise environment_problem(exc, f"preparing {root}", "choose a --dir you can write") from exc
    supervisor = Supervisor(cluster)
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    cluster.start_all()
    supervisor.clear_requests()
    supervisor.save()
    again = "started again" if saved is not None else "started"
    click.echo(f"cluster {cid}: {voters} voters on 127.0.0.1:{base_port}..{base_port + voters - 1}, "
               f"data and logs in {cluster.base_dir} ({again})")
    click.echo(f"try: kraft-tck quorum --bootstrap-controller 127.0.0.1:{base_port} describe --status")
    click.echo(f"a node that dies is reported here, the others keep running; (re)start one from another "
               f"terminal: kraft-tck cluster restart --node N --dir {cluster.base_dir}")
    try:
        while not stop["now"]:
            for node_id, code in supervisor.exited():
                if stop["now"]:
                    break  # Ctrl-C reaches the nodes too (one process group): stopping, not dying
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                click.echo(f"node {node_id} exited ({how}), the other nodes keep running; its log: "
                           f"{cluster.node_dir(node_id) / 'node.log'}; restart it: kraft-tck cluster restart "
                           f"--node {node_id} --dir {cluster.base_dir}", err=True)
            for node_id in supervisor.restart_requests():
                click.echo(f"node {node_id} restarted (pid {cluster.procs[node_id].pid})")
            time.sleep(0.1)
    finally:
        cluster.stop_all()
        supervisor.save(running=False)
    click.echo("cluster stopped")


@cluster_cmd.command("restart")
@click.option("--node", "node_id", type=int, required=True, help="The node to restart (1..voters).")
@click.option("--dir", "base_dir", type=click.Path(file_okay=False), required=True,
              help="The directory of the running kraft-tck cluster.")
@click.option("--timeout-ms", type=int, default=20000, show_default=True,
              help="How long to wait for the running cluster command to act.")
def cluster_restart_cmd(node_id: int, base_dir: str, timeout_ms: int) -> None:
    """Restart one node of the kraft-tck cluster running in DIR (stopped with SIGTERM first if it runs)."""
    from kraft_tck.reference.procs import ClusterDirError, request_restart

    try:
        pid = request_restart(Path(base_dir).resolve(), node_id, timeout_ms / 1000)
    except ClusterDirError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"node {node_id} restarted (pid {pid})")


# ---------------------------------------------------------------------------------------------- quorum



@dataclass
class _QuorumOptions:
    bootstrap_controller: str | None
    bootstrap_server: str | None
    command_config: str | None
    timeout_ms: int

    def connection(self) -> tuple[list[tuple[str, int]], float]:
        """The endpoints and the timeout, checked as kafka-metadata-quorum checks them (argparse4j's
        mutually exclusive, required group; then the --command-config file)."""
        from kraft_tck.reference.broker_client import parse_endpoints

        if self.bootstrap_controller is not None and self.bootstrap_server is not None:
            raise TerseError("argument --bootstrap-controller: not allowed with argument --bootstrap-server")
        option, text = (("--bootstrap-controller", self.bootstrap_controller) if self.bootstrap_controller is not None
                        else ("--bootstrap-server", self.bootstrap_server))
        if text is None:
            raise TerseError("one of the arguments --bootstrap-server --bootstrap-controller is required")
        timeout_ms = self.timeout_ms
        if self.command_config is not None:
            props = _command_config(self.command_config)
            from kraft_tck.reference.quorum_client import CLIENT_SECURITY
            from kraft_tck.reference.security import SecurityConfigError, client_security

            try:  # security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config: every connection of the command
                CLIENT_SECURITY.set(client_security(props, self.command_config))
            except SecurityConfigError as exc:
                raise click.ClickException(str(exc)) from exc
            for key in ("default.api.timeout.ms", "request.timeout.ms"):
                if key in props and props[key].strip().isdigit():
                    timeout_ms = int(props[key])
                    break
        try:
            return parse_endpoints(text), timeout_ms / 1000
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=option) from exc


def _command_config(path: str) -> dict[str, str]:
    """--command-config: Kafka's message for a missing file; the properties otherwise."""
    if not Path(path).exists():
        raise TerseError(f"Properties file {path} does not exists!")  # sic: Kafka's text
    try:
        props = load_properties(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    return props


@main.group("quorum")
@click.option("--bootstrap-controller", metavar="HOST:PORT[,...]",
              help="A comma-separated list of host:port pairs of controllers; the leader is found from any "
                   "of them. One of --bootstrap-controller and --bootstrap-server is required.")
@click.option("--bootstrap-server", metavar="HOST:PORT[,...]",
              help="A comma-separated list of host:port pairs of brokers (which answer DescribeQuorum for "
                   "the controllers); the same requests as --bootstrap-controller.")
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="Property file of client settings (request.timeout.ms, default.api.timeout.ms, and Kafka's "
                   "security.protocol, ssl.* with PEM or PKCS12 stores, sasl.mechanism PLAIN/SCRAM-SHA-256/512, "
                   "sasl.jaas.config).")
@click.option("--timeout-ms", type=int, default=5000, show_default=True, help="Request timeout.")
@click.pass_context
def quorum_cmd(ctx: click.Context, bootstrap_controller: str | None, bootstrap_server: str | None,
               command_config: str | None, timeout_ms: int) -> None:
    """Describe a quorum, add or remove a controller (KIP-853), like kafka-metadata-quorum."""
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:
        # What goes wrong is said in one line (QuorumError); the connection's own warnings only with -v.
        logging.getLogger("kraft_tck.reference.net").setLevel(logging.ERROR)
    # Checked by the subcommand, so that `quorum describe --help` needs no connection options.
    ctx.obj = _QuorumOptions(bootstrap_controller, bootstrap_server, command_config, timeout_ms)


class _AbbreviatingCommand(click.Command):
    """Takes an unambiguous prefix of a long option, as argparse4j (Kafka's tools) does: ``describe --re
    --hu`` is ``describe --replication --human-readable`` (MetadataQuorumCommandTest.testHumanReadableOutput)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        longs = [o for p in self.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
        expanded = []
        for arg in args:
            if arg.startswith("--") and len(arg) > 2 and "=" not in arg and arg not in longs:
                matches = [o for o in longs if o.startswith(arg)]
                if len(matches) == 1:
                    arg = matches[0]
            expanded.append(arg)
        return super().parse_args(ctx, expanded)


@quorum_cmd.command("describe", cls=_AbbreviatingCommand)
@click.option("--status", is_flag=True, help="A short summary of the quorum status.")
@click.option("--replication", is_flag=True, help="Detailed information about the status of replication.")
@click.option("--human-readable", is_flag=True,
              help="With --replication: timestamps as how long ago ('123 ms ago').")
@click.option("--brokers", is_flag=True,
              help="(kraft-tck) Registered brokers with state and epoch, replayed from the leader's committed log.")
@click.pass_obj
def describe_cmd(obj: _QuorumOptions, status: bool, replication: bool, human_readable: bool,
                 brokers: bool) -> None:
    """Describe the metadata quorum (DescribeQuorum, KIP-595 and KIP-836), as kafka-metadata-quorum does.

    Exactly one of --status and --replication (or --brokers)."""
    from kraft_tck.reference.quorum_client import (
        BROKER_ENDPOINTS,
        CONTROLLER_ENDPOINTS,
        QuorumError,
        describe_sync,
        render_replication,
        render_status,
    )

    endpoints, timeout_s = obj.connection()
    if brokers:
        if status or replication or human_readable:
            raise TerseError("--brokers is a describe of its own: give it without --status, --replication "
                             "or --human-readable")
        from kraft_tck.reference.broker_client import BrokerError, read_registry, render_brokers

        try:
            registry, qinfo = asyncio.run(read_registry(endpoints, timeout_s))
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(render_brokers(registry, qinfo))
        return
    # MetadataQuorumCommand.execute, in its order and with its words.
    if status and replication:
        raise TerseError("Only one of --status or --replication should be specified with describe sub-command")
    if status and human_readable:
        raise TerseError("The option --human-readable is only supported along with --replication")
    if not status and not replication:
        raise TerseError("One of --status or --replication must be specified with describe sub-command")
    try:
        # Kafka's admin client asks DescribeCluster for the kind of node it was bootstrapped with (KIP-919).
        kind = BROKER_ENDPOINTS if obj.bootstrap_server is not None else CONTROLLER_ENDPOINTS
        info = describe_sync(endpoints, timeout_s, with_cluster_id=status, endpoint_type=kind)
        if status:
            click.echo(render_status(info))
            if info.cluster_id is None:
                # Kafka's tool reads it with DescribeCluster (KIP-919); the reference node answers it for
                # controllers. A node that does not serve api key 60, or refuses the kind asked for, leaves
                # Java's "null" and this note.
                asked = "brokers" if kind == BROKER_ENDPOINTS else "controllers"
                click.echo(f"kraft-tck quorum: ClusterId unknown: the leader gave none to DescribeCluster (api key "
                           f"60) for {asked}; its meta.properties has it", err=True)
        else:
            click.echo(render_replication(info, human_readable, now_ms=int(time.time() * 1000)))
    except QuorumError as exc:
        raise click.ClickException(str(exc)) from exc


# KIP-853's voter changes, with kafka-metadata-quorum's options, checks, printouts and --dry-run: AddRaftVoter /
# RemoveRaftVoter (api keys 80, 81) sent to the leader once (quorum_client.change_voters). A static quorum's leader
# (controller.quorum.voters, kraft.version 0) does not serve them: the command says so in one line.


def _voter_change(obj: _QuorumOptions, send: Callable[[list[tuple[str, int]], float], object]) -> None:
    from kraft_tck.reference.quorum_client import QuorumError

    endpoints, timeout_s = obj.connection()
    try:
        send(endpoints, timeout_s)
    except QuorumError as exc:
        raise click.ClickException(str(exc)) from exc


def _controller_endpoints(props: dict[str, str]) -> list[tuple[str, str, int]]:
    """``MetadataQuorumCommand.getControllerAdvertisedListeners``: each controller listener's endpoint,
    advertised.listeners over listeners."""
    found: dict[str, tuple[str, str, int]] = {}
    for key in ("listeners", "advertised.listeners"):
        for item in filter(None, (x.strip() for x in props.get(key, "").split(","))):
            m = re.fullmatch(r"([^:/]+)://\[?([^\]]*?)\]?:(\d+)", item)
            if m:
                found[m.group(1).upper()] = (m.group(1).upper(), m.group(2) or "localhost", int(m.group(3)))
    if "controller.listener.names" not in props:
        raise TerseError("controller.listener.names was not found. Is this a valid controller configuration file?")
    out = []
    for name in props["controller.listener.names"].split(","):
        name = name.strip().upper()
        if name not in found:
            raise TerseError(f"Cannot find information about controller listener name: {name}")
        out.append(found[name])
    return out


@quorum_cmd.command("add-controller")
@click.option("--dry-run", is_flag=True, help="Print what would be done, but do not do it.")
@click.pass_obj
def add_controller_cmd(obj: _QuorumOptions, dry_run: bool) -> None:
    """Add a controller to the quorum (KIP-853), the one whose configuration --command-config names."""
    from kraft_tck.reference.storage import StorageError, read_meta_file

    obj.connection()
    if obj.command_config is None:
        raise TerseError("You must supply the configuration file of the controller you are adding when using "
                         "add-controller.")
    props = _command_config(obj.command_config)
    if "node.id" not in props:
        raise TerseError("node.id not found in configuration file. Is this a valid controller configuration file?")
    try:
        node_id = int(props["node.id"])
    except ValueError as exc:
        raise TerseError(f"node.id={props['node.id']} is not a number") from exc
    if node_id < 0:
        raise TerseError("node.id was negative in configuration file. Is this a valid controller configuration file?")
    if "controller" not in props.get("process.roles", ""):
        raise TerseError("process.roles did not contain 'controller' in configuration file. Is this a valid "
                         "controller configuration file?")
    metadata_dir = props.get("metadata.log.dir") or (props.get("log.dirs", "").strip().split(",")[0] or None)
    if metadata_dir is None:
        raise TerseError("Neither metadata.log.dir nor log.dirs were found. Is this a valid controller "
                         "configuration file?")
    try:
        meta = read_meta_file(Path(metadata_dir) / "meta.properties")
    except StorageError as exc:
        raise click.ClickException(str(exc)) from exc
    if meta is None:
        raise TerseError(f"Unable to read meta.properties from {metadata_dir}")
    if not meta.directory_id:
        raise TerseError(f"No directory id found in {metadata_dir}")
    listeners = _controller_endpoints(props)
    endpoints = ", ".join(f"{n}://{f'[{h}]' if ':' in h else h}:{p}" for n, h, p in listeners)
    directory_id = meta.directory_id
    if not dry_run:
        from kraft_tck.reference.quorum_client import add_raft_voter_sync

        _voter_change(obj, lambda eps, t: add_raft_voter_sync(eps, t, node_id, directory_id, listeners))
    click.echo(f"{'DRY RUN of adding' if dry_run else 'Added'} controller {node_id} with directory id "
               f"{directory_id} and endpoints: {endpoints}")


@quorum_cmd.command("remove-controller")
@click.option("-i", "--controller-id", type=int, required=True, help="The id of the controller to remove.")
@click.option("-d", "--controller-directory-id", required=True, help="The directory id of the controller to remove.")
@click.option("--dry-run", is_flag=True, help="Print what would be done, but do not do it.")
@click.pass_obj
def remove_controller_cmd(obj: _QuorumOptions, controller_id: int, controller_directory_id: str,
                          dry_run: bool) -> None:
    """Remove a controller from the quorum (KIP-853)."""
    from kraft_tck.reference.quorum_client import kafka_uuid_value

    obj.connection()
    if controller_id < 0:
        raise TerseError(f"Invalid negative --controller-id: {controller_id}")
    try:
        kafka_uuid_value(controller_directory_id)  # Kafka's Uuid.fromString
    except ValueError as exc:
        raise TerseError(f"Failed to parse --controller-directory-id: {exc}") from exc
    if not dry_run:
        from kraft_tck.reference.quorum_client import remove_raft_voter_sync

        _voter_change(obj, lambda eps, t: remove_raft_voter_sync(eps, t, controller_id, controller_directory_id))
    # Kafka's printf puts "DRY RUN of removing " / "Removed " before " KRaft controller": two spaces, kept.
    done = "DRY RUN of removing" if dry_run else "Removed"
    click.echo(f"{done}  KRaft controller {controller_id} with directory id {controller_directory_id}")


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
