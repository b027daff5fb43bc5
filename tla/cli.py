"""kraft-tck commands of the formal half: `tlc` (model checking) and `validate-trace`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click
from kraft_tck.tla.progress import Progress
from kraft_tck.tla.tlc import DEFAULT_CONFIG, DEFAULT_SPEC, SPEC_DIR, TlcError, TlcResult, run_tlc
from rich.console import Console


def _print_result(console: Console, result: TlcResult) -> None:
    style = "green" if result.ok else "red"
    console.print(f"[{style}]{result.summary()}[/{style}]")
    if result.violated and result.counterexample:
        console.print(f"Counterexample ({len(result.counterexample)} states):")
        console.print(result.render_counterexample(), markup=False, highlight=False)
    for err in result.errors:
        console.print(f"[red]error:[/red] {err}", highlight=False)


@click.command("tlc")
@click.option(
    "--config",
    "config",
    default=DEFAULT_CONFIG,
    show_default=True,
    help="TLC config: a file name in tla/ (MCKRaft.cfg, MCKRaftSmall.cfg, MCKRaftSnapshot.cfg) or a path.",
)
@click.option("--spec", default=DEFAULT_SPEC, show_default=True, help="Root module in tla/ or a path.")
@click.option("--workers", default="2", show_default=True, help="TLC worker threads, or 'auto'.")
@click.option(
    "--java-opts",
    default="-XX:+UseParallelGC",
    show_default=True,
    help="Options for the JVM, e.g. '-Xmx4g -XX:+UseParallelGC'.",
)
@click.option("--check-deadlock", is_flag=True, help="Report deadlocks (off: a bounded model ends in them).")
@click.option("--timeout", type=float, default=None, help="Stop TLC after this many seconds.")
def tlc_command(
    config: str, spec: str, workers: str, java_opts: str, check_deadlock: bool, timeout: float | None
) -> None:
    """Model-check the KRaft TLA+ spec with TLC."""
    console = Console()
    # A path that exists (tla/MCKRaft.cfg from the checkout, as the README writes it) is taken as it is;
    # anything else names a config shipped in tla/.
    cfg = Path(config).resolve() if Path(config).exists() else SPEC_DIR / config
    spec = str(Path(spec).resolve()) if Path(spec).exists() else spec
    try:
        with Progress(f"TLC {cfg.name}", console=console) as progress:

            def on_line(line: str) -> None:
                if line.startswith(("Progress(", "Finished computing", "Starting", "Checking")):
                    progress.update(line)

            result = run_tlc(
                spec,
                cfg,
                workers=workers,
                java_opts=shlex.split(java_opts),
                check_deadlock=check_deadlock,
                timeout=timeout,
                on_line=on_line,
            )
    except TlcError as exc:
        raise click.ClickException(str(exc)) from exc
    _print_result(console, result)
    if not result.ok:
        raise SystemExit(1)


@click.command("validate-trace")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--hidden-steps",
    type=int,
    default=None,
    help="Unrecorded steps allowed between two events (default: 0 for node/simulator traces, 3 for harness traces).",
)
@click.option("--java-opts", default="-XX:+UseParallelGC", show_default=True, help="Options for the JVM.")
@click.option("--timeout", type=float, default=None, help="Stop TLC after this many seconds per trace.")
@click.option(
    "--merge",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="FILES are the node traces of one cluster (kraft-tck node --trace-file, every incarnation): "
    "merge them into this one trace and validate it.",
)
def validate_trace_command(
    files: tuple[Path, ...], hidden_steps: int | None, java_opts: str, timeout: float | None, merge: Path | None
) -> None:
    """Check that each NDJSON trace is a behaviour of tla/KRaft.tla (PASS/FAIL per trace).

    A black-box harness trace (messages only) is checked with the target's steps hidden when it starts
    from a fresh target; one that starts from a state it cannot see is NOT CHECKED, and the exit status
    is non-zero then as well.  A node's own trace (--trace-file) is validated with its peers as the
    environment.
    """
    from kraft_tck.tla.trace_merge import merge_node_traces
    from kraft_tck.tla.trace_translate import TraceFormatError, translate
    from kraft_tck.tla.trace_validate import TraceVerdict, validate_traces

    console = Console()
    failures = 0
    if merge is not None:
        try:
            files = (merge_node_traces(files, merge),)
        except TraceFormatError as exc:
            console.print(f"[red]FAIL[/red] {merge}: {exc}", highlight=False)
            raise SystemExit(1) from exc
    # a trace that cannot be read fails alone; the others are validated together (several in one TLC run)
    problems: dict[Path, str] = {}
    for path in files:
        try:
            translate(path)
        except TraceFormatError as exc:
            problems[path] = str(exc)
    readable = [path for path in files if path not in problems]
    verdicts: dict[Path, TraceVerdict] = {}
    if readable:
        try:
            with Progress(f"validating {readable[0] if len(readable) == 1 else f'{len(readable)} traces'}",
                          console=console):  # fmt: skip
                found = validate_traces(
                    readable, hidden_steps=hidden_steps, java_opts=shlex.split(java_opts), timeout=timeout
                )
            verdicts = dict(zip(readable, found, strict=True))
        except (TraceFormatError, TlcError) as exc:
            problems.update(dict.fromkeys(readable, str(exc)))
    for path in files:
        if path in problems:
            failures += 1
            console.print(f"[red]FAIL[/red] {path}: {problems[path]}", highlight=False)
            continue
        verdict = verdicts[path]
        if verdict.passed:
            console.print(f"[green]PASS[/green] {path} ({verdict.events} events)", highlight=False)
            continue
        if not verdict.checked:
            # no step to check is no pass: the exit status says the trace was not validated
            failures += 1
            console.print(f"[yellow]NOT CHECKED[/yellow] {path}: {verdict.reason}", highlight=False)
            continue
        failures += 1
        console.print(f"[red]FAIL[/red] {path}: {verdict.reason}", highlight=False)
        if verdict.failed_event is not None:
            ev = verdict.failed_event
            console.print(
                f"  first event no behaviour can produce: line {ev.line}, seq {ev.seq}, node {ev.node}, "
                f"{ev.event}{_in_case(path, ev.seq)}, reported state {ev.state}",
                highlight=False,
            )
        if verdict.state_before is not None:
            console.print(f"  spec state before it: {verdict.state_before}", markup=False, highlight=False)
    if failures:
        raise SystemExit(1)


def _in_case(path: Path, seq: int) -> str:
    """For a session harness trace (header ``cases``): the conformance case the event came in."""
    with path.open() as f:
        header = json.loads(f.readline())
    for case in header.get("cases") or []:
        if case["firstSeq"] <= seq <= case["lastSeq"]:
            return f" in case {case['id']}"
    return " between conformance cases" if header.get("cases") else ""


COMMANDS: list[click.Command] = [tlc_command, validate_trace_command]
