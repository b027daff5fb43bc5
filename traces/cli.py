"""Commands of the traces area (``COMMANDS`` is collected by the ``kraft-tck`` root group)."""

from __future__ import annotations

import importlib.util
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

# Six lines of our own, not a library: pytimeparse (kept) has no "ms" and reads a bare number as nothing,
# and pytimeparse2 / humanfriendly.parse_timespan, which do, have had no release since 2023 / 2021.
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, None: 1000}


def parse_duration_ms(text: str) -> int:
    """'60s', '1500ms', '2m' → milliseconds; a bare number means seconds."""
    m = _DURATION.match(text)
    if m is None or int(m.group(1)) <= 0:
        raise click.BadParameter(f"{text!r}: expected a positive duration like 60s, 1500ms or 2m")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


#: KIP-853: the SimResult counts of voter changes the summary adds up.
CHANGE_COUNTS = ("changes_requested", "changes_committed", "changes_timed_out", "changes_refused", "leader_removals",
                 "change_splits", "removal_splits")


@click.command("simulate")
@click.option(
    "--seeds", type=click.IntRange(min=1), default=100, show_default=True, help="How many seeds to run."
)
@click.option("--first-seed", type=int, default=0, show_default=True, help="Seeds run from here upwards.")
@click.option(
    "--nodes", type=click.IntRange(min=1, max=9), default=3, show_default=True, help="Voters per cluster."
)
@click.option("--duration", default="60s", show_default=True, help="Virtual time per seed (60s, 1500ms, 2m).")
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="One trace per seed here."
)
@click.option(
    "--faults",
    type=click.Choice(["none", "default", "heavy", "reconnect", "snapshots", "reconfig"]),
    default="default",
    show_default=True,
    help="Fault profile: network behaviour, clock skew and how often crashes/partitions happen "
    "(reconnect: only voters cut off and reconnected; snapshots: KIP-630 snapshots and log cleaning under "
    "crashes while writing a snapshot and voters cut off long enough to need the leader's snapshot; reconfig: KIP-853 "
    "kraft.version 1 with joiners, AddRaftVoter/RemoveRaftVoter of joiners, followers and the leader itself, under "
    "crashes of the joiner or the leader and partitions during a change).",
)
@click.option(
    "--joiners",
    type=click.IntRange(min=0),
    default=None,
    help="KIP-853: replicas (ids after the observers') that start as observers and may be added as voters; any "
    "makes the cluster kraft.version 1 [default: the fault profile's: 2 for reconfig, else 0].",
)
@click.option(
    "--snapshot-bytes",
    type=click.IntRange(min=0),
    default=None,
    help="KIP-630: every node snapshots once this many committed bytes were applied since its latest snapshot "
    "(Kafka's metadata.log.max.record.bytes.between.snapshots) and cleans its log; 0 turns snapshots off "
    "[default: the fault profile's].",
)
@click.option("--pre-vote", is_flag=True, help="Pre-vote (KIP-996, Kafka 4.x elections) in every node.")
@click.option(
    "--compare-pre-vote",
    is_flag=True,
    help="Run every seed twice, pre-vote off and on (traces in OUT/pre-vote-off, OUT/pre-vote-on), and "
    "count leader changes and epoch bumps side by side.",
)
@click.option(
    "--write-rate",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Client writes per virtual second on the leader.",
)
@click.option(
    "--brokers",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Simulated brokers registering with the active controller (KIP-631); 0 turns them off.",
)
@click.option(
    "--observers",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Observer replicas (ids after the voters') that fetch from the leader and never vote or count "
    "toward the high watermark; faults never hit them (so a leader cut off from the voters still has one). "
    "0 turns them off.",
)
@click.option(
    "--fetch-max-bytes",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="The most one Fetch answer carries (whole batches, at least one; Kafka's fetch max bytes, 8 MB, scaled to "
    "the simulated logs of a few KB): a lagging voter catches up over several answers, so a follower's high "
    "watermark can run ahead of what it holds and a new leader can replicate older-epoch entries without its own "
    "(Raft's Figure 8). 0: the core's default (every answer carries the whole tail).",
)
@click.option(
    "--foreign-rate",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Requests per virtual second (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch) from a node of "
    "another cluster, with its own cluster id, to the voters; each must be refused with "
    "INCONSISTENT_CLUSTER_ID and change nothing (checked as ClusterIdIsolation). 0 turns it off.",
)
def simulate_cmd(
    seeds: int, first_seed: int, nodes: int, duration: str, out_dir: str, faults: str, write_rate: float,
    brokers: int, observers: int, foreign_rate: float, pre_vote: bool, compare_pre_vote: bool,
    snapshot_bytes: int | None, joiners: int | None, fetch_max_bytes: int,
) -> None:
    """Run seeded cluster simulations; each seed writes OUT/seed-N.ndjson and stops at its first
    invariant violation. Exit code 1 when any seed found one (the summary names how to reproduce it)."""
    from kraft_tck.traces.sim import SimConfig, simulate
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    duration_ms = parse_duration_ms(duration)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if compare_pre_vote:
        _compare_pre_vote(SimConfig(seed=first_seed, nodes=nodes, duration_ms=duration_ms, profile=faults,
                                    write_rate=write_rate, brokers=brokers, observers=observers,
                                    foreign_rate=foreign_rate), range(first_seed, first_seed + seeds), out)
        return
    console = Console(stderr=True)
    violations: dict[str, list[int]] = defaultdict(list)
    events = 0
    snap = dict.fromkeys(("snapshots", "installs", "joiner_installs", "cleanings", "downloads_aborted",
                          "snapshot_crashes", "torn_writes"), 0)
    changes = dict.fromkeys((*CHANGE_COUNTS, "seeds whose voter set changed"), 0)
    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]simulate"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
    ) as progress:
        task = progress.add_task("seeds", total=seeds, status="")
        for seed in range(first_seed, first_seed + seeds):
            config = SimConfig(
                seed=seed, nodes=nodes, duration_ms=duration_ms, profile=faults, write_rate=write_rate,
                brokers=brokers, observers=observers, foreign_rate=foreign_rate, pre_vote=pre_vote,
                snapshot_bytes=snapshot_bytes, joiners=joiners, fetch_max_bytes=fetch_max_bytes or None,
            )
            result = simulate(config, out / f"seed-{seed}.ndjson")
            events += result.events
            for k in snap:
                snap[k] += getattr(result, k)
            for k in CHANGE_COUNTS:
                changes[k] += getattr(result, k)
            if result.final_voters != result.initial_voters:
                changes["seeds whose voter set changed"] += 1
            if result.violation is not None:
                violations[result.violation.invariant].append(seed)
                progress.console.print(f"[red]seed {seed}:[/red] {result.violation}")
            elapsed = time.perf_counter() - started
            progress.update(task, advance=1, status=f"{events / elapsed:,.0f} events/s")
    elapsed = time.perf_counter() - started
    table = Table(title="simulation summary")
    table.add_column("item")
    table.add_column("value", justify="right")
    table.add_row("seeds run", f"{seeds} ({first_seed}..{first_seed + seeds - 1})")
    table.add_row("events", f"{events:,}")
    table.add_row("wall time", f"{elapsed:.1f} s")
    table.add_row("events/s", f"{events / elapsed:,.0f}" if elapsed > 0 else "-")
    if any(snap.values()):  # KIP-630
        table.add_row("snapshots taken", f"{snap['snapshots']:,}")
        table.add_row("snapshots installed from a leader", f"{snap['installs']:,}")
        if snap["joiner_installs"]:  # KIP-853: each with the voter set of its header
            table.add_row("  of which by joiners", f"{snap['joiner_installs']:,}")
        table.add_row("log cleanings", f"{snap['cleanings']:,}")
        table.add_row("downloads given up (leader change, not found)", f"{snap['downloads_aborted']:,}")
        table.add_row("crashes while writing a snapshot (torn)",
                      f"{snap['snapshot_crashes']:,} ({snap['torn_writes']:,})")
    if changes["changes_requested"]:  # KIP-853
        for k, v in changes.items():
            table.add_row(k.replace("changes_", "voter changes ").replace("_", " "), f"{v:,}")
    table.add_row("seeds with a violation", str(sum(len(v) for v in violations.values())))
    for name, bad in sorted(violations.items()):
        shown = ", ".join(str(s) for s in bad[:10]) + (" ..." if len(bad) > 10 else "")
        table.add_row(f"  {name}", f"{len(bad)} (seeds {shown})")
    Console().print(table)
    if violations:
        seed = min(s for bad in violations.values() for s in bad)
        extra = (f" --observers {observers}" if observers else "") + (
            f" --foreign-rate {foreign_rate:g}" if foreign_rate else "") + (" --pre-vote" if pre_vote else "") + (
            f" --snapshot-bytes {snapshot_bytes}" if snapshot_bytes is not None else "") + (
            f" --joiners {joiners}" if joiners is not None else "")
        click.echo(
            f"reproduce: kraft-tck simulate --seeds 1 --first-seed {seed} --nodes {nodes} "
            f"--duration {duration} --faults {faults} --write-rate {write_rate:g} --brokers {brokers}{extra}"
            f" --out {out_dir}"
        )
        raise SystemExit(1)


def _compare_pre_vote(base: Any, seeds: range, out: Path) -> None:
    """``simulate --compare-pre-vote``: the table of leader changes with and without pre-vote."""
    from kraft_tck.traces.sim.compare import compare_pre_vote
    from rich.console import Console
    from rich.table import Table

    started = time.perf_counter()
    result = compare_pre_vote(base, seeds, out)
    table = Table(title=f"pre-vote off / on, same seeds ({base.profile} faults, {base.duration_ms} ms each)")
    table.add_column("item")
    table.add_column("pre-vote off", justify="right")
    table.add_column("pre-vote on", justify="right")
    for row in result.rows():
        table.add_row(*row)
    table.add_row("wall time", f"{time.perf_counter() - started:.1f} s", "")
    Console().print(table)
    bad = result.violations(False) + result.violations(True)
    for seed, what in bad[:10]:
        click.echo(f"seed {seed}: {what}")
    if bad:
        raise SystemExit(1)


COMMANDS: list[click.Command] = [simulate_cmd]


def require_extras(command: str, modules: dict[str, str]) -> None:
    """Fail ``command`` with the pip line to run when a module of an optional extra is not installed
    (``modules``: module -> the kraft-tck extra that brings it). Spark and matplotlib are not dependencies
    of a plain ``pip install kraft-tck``; nothing imports them until a command that needs them runs."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        extras = ",".join(sorted({modules[m] for m in missing}))
        raise click.ClickException(
            f"{command} needs {', '.join(missing)}, which this installation lacks: pip install 'kraft-tck[{extras}]'"
        )


@click.command("pipeline")
@click.option("--input", "input_dir", required=True, type=click.Path(), help="Directory of NDJSON traces.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Where the Parquet tables and the report (Markdown, HTML, PNG plots) go.")
@click.option("--master", default=None, help="Spark master URL (default local[*]; e.g. spark://host:7077).")
@click.option("--no-tlc", is_flag=True, help="Skip the per-trace validation fan-out.")
def pipeline_cmd(input_dir: str, out_dir: str, master: str | None, no_tlc: bool) -> None:
    """Check and summarise traces with Spark. Exit 0 clean, 1 violations, 2 bad input (or quarantined lines)."""
    require_extras("kraft-tck pipeline", {"pyspark": "pipeline", "pyarrow": "pipeline", "matplotlib": "plots"})
    from kraft_tck.traces.pipeline.files import BadInput, list_trace_files
    from kraft_tck.traces.pipeline.run import EXIT_BAD_INPUT, run_pipeline
    from kraft_tck.traces.pipeline.session import build_session

    try:
        list_trace_files(input_dir)  # nothing to read: say so before paying for a Spark session
    except BadInput as exc:
        click.echo(f"bad input: {exc}", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from exc
    spark = build_session(master)
    try:
        result = run_pipeline(spark, input_dir, out_dir, validator=not no_tlc, echo=click.echo)
    finally:
        spark.stop()
    if result.report is not None:
        click.echo(f"report: {result.report}")
    raise SystemExit(result.exit_code)


COMMANDS.append(pipeline_cmd)
