"""Validate: run TLC on TraceKRaft.tla with a trace's TraceData and read its verdict (PASS, FAIL, NOT CHECKED).

``validate_traces`` validates several traces in one TLC run (a generated module, TraceBatch, whose initial
state picks the trace): TLC's start-up (JVM, parsing KRaft.tla, set-up) costs about as much as a trace of a
few hundred rows, and a conformance run has dozens of short traces.
"""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.tla.tlc import SPEC_DIR, TlcResult, run_tlc
from kraft_tck.tla.trace_render import trace_data
from kraft_tck.tla.trace_translate import NETWORK_EVENTS, Trace, TraceEvent, translate

#: Why a trace with no rows is not checked (black-box traces say why in ``not_checked_reason``).
NOT_CHECKED_REASON = (
    "nothing to check: the trace holds no protocol step of any node, only messages seen from outside "
    "(a black-box harness trace); validate the target's own node trace instead (--trace-file)"
)


@dataclass
class TraceVerdict:
    path: Path
    passed: bool
    events: int
    failed_event: TraceEvent | None = None
    state_before: str | None = None
    reason: str = ""
    tlc: TlcResult | None = field(default=None, repr=False)
    # False: no row could be checked (NOT CHECKED); then passed is False too, but it is no failure
    checked: bool = True

    @property
    def status(self) -> str:
        """PASS, FAIL or NOT CHECKED."""
        return "NOT CHECKED" if not self.checked else "PASS" if self.passed else "FAIL"


# VIEW: TLC fingerprints each state by TraceView, its logs by length and epoch cache (TraceKRaft.tla says
# why that loses nothing): a fingerprint of whole logs made validation quadratic in the trace's length.
TRACE_CFG = """\
INIT TraceInit
NEXT TraceNext
INVARIANT TraceSafety
VIEW TraceView
"""
# Black-box traces: stop at the first behaviour that matches every row. TLC runs the root module TraceRun
# (written beside TraceKRaft.tla, which it extends), whose TraceDoneExit ends the run there (TLCSet("exit")):
# the invariant TraceNotDone did too, but TLC then printed the whole witness, every state of it, which for
# a session trace of 1,400 rows was 9 MB of output, about a fifth of the validation's time with reading it.
TRACE_RUN = """\
---- MODULE TraceRun ----
EXTENDS TraceKRaft, TLC
TraceDoneExit == l <= Len(TraceLog) \\/ (PrintT(<<"TRACE-DONE", l - 1>>) /\\ TLCSet("exit", TRUE))
====
"""
BLACKBOX_CFG = "INVARIANT TraceDoneExit\n"
# For the prefix before a failed event: print the state it ends in.
STATE_CFG = """\
INIT TraceInit
NEXT TraceNext
INVARIANT TraceEndState
VIEW TraceView
"""
# The JVM options of a validation run: no JIT tiering pause for a run that lasts seconds, and the serial
# collector: a validation's heap is small, and the parallel one's GC threads (one per CPU) cost about 0.4 CPU s
# of system time a run, 7-15% of a conformance run's validation CPU on a 2-CPU machine
# (bench/bench_validate.py --lives, --java-opts for the side by side).
DEFAULT_JAVA_OPTS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_MATCHED = re.compile(r'^<<\s*"TRACE-(?:MATCHED|DONE)",\s*(\d+)\s*>>\s*$', re.M)
# PrintT output of TraceEndState; TLC wraps long values over several lines.
_STATE = re.compile(r'<<\s*"TRACE-STATE",\s*(.*?),\s*"TRACE-END"\s*>>', re.S)


def _run(
    trace: Trace, cfg: str, hidden_steps: int | None, events: Sequence[TraceEvent] | None, stop: int = 0, **tlc: Any
) -> TlcResult:
    with tempfile.TemporaryDirectory(prefix="kraft-trace-") as tmp:
        work = Path(tmp)
        shutil.copy(SPEC_DIR / "KRaft.tla", work / "KRaft.tla")
        shutil.copy(SPEC_DIR / "TraceKRaft.tla", work / "TraceKRaft.tla")
        (work / "TraceData.tla").write_text(trace_data(trace, hidden_steps, events, stop))
        (work / "TraceRun.tla").write_text(TRACE_RUN)
        (work / "TraceRun.cfg").write_text(cfg)
        return run_tlc("TraceRun.tla", "TraceRun.cfg", spec_dir=work, **tlc)


def validate_trace(
    path: str | Path,
    *,
    hidden_steps: int | None = None,
    workers: int = 1,
    java_opts: Sequence[str] = DEFAULT_JAVA_OPTS,
    timeout: float | None = None,
    state_before: bool = True,
) -> TraceVerdict:
    """Decide whether the trace at ``path`` is a behaviour of KRaft: PASS, FAIL, or NOT CHECKED when it
    has no row to check (``TraceVerdict.status``; TLC does not even start then).

    On a failed event, a second (shorter) TLC run over the events before it prints the spec state
    just before it, unless ``state_before`` is False.
    """
    return _validate(translate(path), hidden_steps, java_opts, timeout, state_before, workers)


def _validate(
    trace: Trace,
    hidden_steps: int | None,
    java_opts: Sequence[str],
    timeout: float | None,
    state_before: bool,
    workers: int = 1,
) -> TraceVerdict:
    if not checkable(trace):
        return TraceVerdict(trace.path, False, 0, reason=not_checked_reason(trace), checked=False)
    tlc: dict[str, Any] = {"workers": workers, "java_opts": java_opts, "timeout": timeout}
    # black-box: hidden steps make a state space TLC would explore to its end after a full match
    cfg = TRACE_CFG + BLACKBOX_CFG if trace.target is not None else TRACE_CFG
    result = _run(trace, cfg, hidden_steps, None, **tlc)
    found = verdict(trace, result)
    if not found.passed and trace.target is not None:
        # Black-box: under load the harness reads its connections in backlogs, and a request the target sent
        # before a later step of it can be read after that step's message on another connection.  Such a
        # trace passes once those requests are put back in the order they were sent; any other keeps its
        # verdict, with the failure where it was recorded (trace_translate._read_in_send_order).
        ordered = translate(trace.path, send_order=True)
        if ordered.events != trace.events:
            again = verdict(ordered, _run(ordered, cfg, hidden_steps, None, **tlc))
            if again.passed:
                again.reason += " (with requests read out of send order put back in it)"
                return again
    if not found.passed and found.failed_event is not None and found.state_before is None and state_before:
        reached = trace.events.index(found.failed_event)
        if reached == 0:
            found.state_before = "the initial state"
        else:
            # every row stays in the module (black-box hidden steps look ahead at what the harness receives)
            prefix = _run(trace, STATE_CFG, hidden_steps, None, reached, **tlc)
            states = _STATE.findall(prefix.output)
            if states:
                found.state_before = " ".join(states[0].split())
    return found


def checkable(trace: Trace) -> bool:
    """Does the trace have a step of a node to check (not only rows the network or environment take)?
    A black-box trace does when it starts from a fresh target and the target answered something."""
    if trace.target is not None:
        return not trace.not_fresh and any(ev.event == "EnvironmentReceive" for ev in trace.events)
    return any(ev.event not in NETWORK_EVENTS for ev in trace.events)


def not_checked_reason(trace: Trace) -> str:
    """Why ``trace`` is NOT CHECKED."""
    if trace.target is not None:
        return trace.not_fresh or "nothing to check: the target sent no message the model has"
    return NOT_CHECKED_REASON


def verdict(trace: Trace, result: TlcResult) -> TraceVerdict:
    """Read TLC's answer on TraceKRaft for ``trace``."""
    n = len(trace.events)
    if not checkable(trace):
        return TraceVerdict(trace.path, False, n, reason=not_checked_reason(trace), checked=False, tlc=result)
    reached = max((int(m.group(1)) for m in _MATCHED.finditer(result.output)), default=0)
    if result.violated and result.violated != "TraceNotDone":
        failed = _failed_at(trace, result)
        return TraceVerdict(
            trace.path, False, n, failed, reason=f"{result.violated} is violated along the trace", tlc=result
        )
    if result.errors:
        return TraceVerdict(trace.path, False, n, reason="TLC error: " + "; ".join(result.errors), tlc=result)
    if reached >= n or result.violated == "TraceNotDone":
        return TraceVerdict(trace.path, True, n, reason="every event matched", tlc=result)
    if not result.ok:
        return TraceVerdict(trace.path, False, n, reason="TLC did not finish", tlc=result)
    failed = trace.events[reached]
    return TraceVerdict(
        trace.path,
        False,
        n,
        failed,
        reason=f"no behaviour of KRaft produces event seq {failed.seq} ({failed.event} by node {failed.node})",
        tlc=result,
    )


def _failed_at(trace: Trace, result: TlcResult) -> TraceEvent | None:
    """The event whose step broke an invariant: the last one matched (l - 1)."""
    if not result.counterexample:
        return None
    try:
        matched = int(result.counterexample[-1].state.get("l", "0")) - 1
    except ValueError:
        return None
    return trace.events[matched - 1] if 1 <= matched <= len(trace.events) else None


# --------------------------------------------------------------------------- several traces in one TLC run

#: Registers of TLCSet/TLCGet the batch module uses: BATCH_REGISTER + k holds how far trace k got (TraceKRaft
#: itself uses register 1).
BATCH_REGISTER = 100
#: At most this many traces in one TLC run (a trace no batch fully matched is validated again alone).
MAX_BATCH = 24
_BATCH_MATCHED = re.compile(r'^<<\s*"BATCH-MATCHED",\s*(\d+),\s*(\d+)\s*>>\s*$', re.M)


#: A definition of TraceData without parameters (``Name ==`` at the start of a line) and trace_render's record
#: constructors and shared rows' parts (``V1 ==``), which TraceKRaft.tla never names (the rows are written with them).
_DEFINITION = re.compile(r"^([A-Za-z]\w*) ==", re.M)
_CONSTRUCTOR = re.compile(r"Row|St|NoState|NoMsg|Rec|VRec|Fill|M\d+|V\d+")


class BatchUnavailable(RuntimeError):
    """TraceKRaft.tla is not in the shape a batch module needs (then each trace runs alone)."""


def _variables(source: str) -> list[str]:
    """The variables TraceKRaft.tla declares (every VARIABLE(S) statement, comments left out)."""
    names: list[str] = []
    for block in re.finditer(r"^VARIABLES?\b(.*?)(?=^\S)", source, re.S | re.M):
        body = re.sub(r"\\\*[^\n]*|\(\*.*?\*\)", "", block.group(1), flags=re.S)
        names += [v.strip() for v in body.split(",") if v.strip()]
    if not names or not all(re.fullmatch(r"[A-Za-z_]\w*", v) for v in names):
        raise BatchUnavailable(f"cannot read the VARIABLES of TraceKRaft.tla: {names}")
    return names


def batch_modules(traces: Sequence[Trace], hidden_steps: int | None = None) -> dict[str, str]:
    """The modules of one TLC run over all ``traces`` (file name -> text), black-box and node traces alike.

    Trace k gets TraceData<k> (its rows, trace_render's module renamed). TraceKRaft.tla is there once,
    unchanged, but its TraceData is a module of CONSTANTS only (the names trace_render defines), and
    TraceBatch declares TraceKRaft's variables and ``batchTrace`` and instantiates it once per trace with
    those constants set to TraceData<k>'s definitions (``T<k> == INSTANCE TraceKRaft WITH TraceLog <-
    D<k>!TraceLog, ...``): SANY parses TraceKRaft once, not once per trace (a copy per trace cost about
    0.1 CPU s each). A behaviour of TraceBatch is a behaviour of one T<k>: its initial state picks k, every
    step is a TraceNext of that instance, and TraceSafety and TraceView are that instance's (the view adds
    k), so TLC explores each trace's states as a run of it alone would. ``Seen(k)`` prints how far trace k
    got.

    Black-box traces: TraceRun ends its run at the first behaviour that matches every row. Here a black-box
    trace k takes no further step once one of its behaviours has matched every row, and a batch of black-box
    traces only ends once every trace has. Node traces: the whole state space, as alone; so a batch that holds
    any ends when TLC has explored it (its black-box traces still stop at their first full match: one TLC
    start-up for both kinds of a conformance run's lives).
    """
    blackbox = [t.target is not None for t in traces]
    source = (SPEC_DIR / "TraceKRaft.tla").read_text()
    header = re.compile(r"^-+\s*MODULE\s+TraceKRaft\s*-+\s*$", re.M)
    extends = re.compile(r"^(EXTENDS\s+)TraceData\b", re.M)
    if len(header.findall(source)) != 1 or len(extends.findall(source)) != 1:
        raise BatchUnavailable("TraceKRaft.tla must have one MODULE line and EXTENDS TraceData first")
    names = _variables(source)
    modules: dict[str, str] = {"TraceKRaft.tla": source}
    inits, nexts, safety, views, done, instanced = [], [], [], [], [], []
    constants: list[str] = []
    for k, trace in enumerate(traces, start=1):
        data = trace_data(trace, hidden_steps)
        if not data.startswith("---- MODULE TraceData ----\n"):
            raise BatchUnavailable("trace_data no longer starts with its MODULE line")
        modules[f"TraceData{k}.tla"] = data.replace("MODULE TraceData ", f"MODULE TraceData{k} ", 1)
        defined = [n for n in _DEFINITION.findall(data) if not _CONSTRUCTOR.fullmatch(n)]
        if constants and defined != constants:
            raise BatchUnavailable("trace_data defined other names for another trace")
        constants = defined
        subst = ", ".join(f"{n} <- D{k}!{n}" for n in constants)
        instanced.append(f"D{k} == INSTANCE TraceData{k}\nT{k} == INSTANCE TraceKRaft WITH {subst}")
        reg = BATCH_REGISTER + k
        inits.append(f"    \\/ batchTrace = {k} /\\ T{k}!TraceInit /\\ TLCSet({reg}, 1)")
        # black-box: no step once a behaviour of trace k matched every row (TLCGet(reg) is then past its end)
        guard = f"TLCGet({reg}) <= Len(D{k}!TraceLog) /\\ " if blackbox[k - 1] else ""
        nexts.append(f"    \\/ batchTrace = {k} /\\ {guard}T{k}!TraceNext /\\ UNCHANGED batchTrace /\\ Seen({k})")
        safety.append(f"    /\\ batchTrace = {k} => T{k}!TraceSafety")
        views.append(f"batchTrace = {k} -> T{k}!TraceView")
        done.append(f"TLCGet({reg}) > Len(D{k}!TraceLog)")
    # TraceKRaft's TraceData in a batch: the names trace_render defines, as constants each instance sets
    modules["TraceData.tla"] = (
        "---- MODULE TraceData ----\n\\* Generated by kraft_tck.tla.trace_validate for TraceBatch; do not edit.\n"
        f"EXTENDS Integers, Sequences, TLC\nCONSTANTS {', '.join(constants)}\n====\n"
    )
    nl, conj = "\n", " /\\ "
    instances = nl.join(instanced)
    modules["TraceBatch.tla"] = f"""---- MODULE TraceBatch ----
\\* Generated by kraft_tck.tla.trace_validate: {len(traces)} traces in one TLC run; do not edit.
EXTENDS Integers, Sequences, TLC
VARIABLES {", ".join(names)}, batchTrace
{instances}
\\* the furthest row of trace k matched: one line per row, as TraceKRaft's Record
Seen(k) == IF l' > TLCGet({BATCH_REGISTER} + k)
           THEN TLCSet({BATCH_REGISTER} + k, l') /\\ PrintT(<<"BATCH-MATCHED", k, l' - 1>>)
           ELSE TRUE
BatchInit ==
{nl.join(inits)}
BatchNext ==
{nl.join(nexts)}
BatchSafety ==
{nl.join(safety)}
BatchView == <<batchTrace, CASE {" [] ".join(views)}>>
BatchDoneExit == IF {conj.join(done)} THEN PrintT("BATCH-DONE") /\\ TLCSet("exit", TRUE) ELSE TRUE
====
"""
    cfg = "INIT BatchInit\nNEXT BatchNext\nINVARIANT BatchSafety\nVIEW BatchView\n"
    modules["TraceBatch.cfg"] = cfg + ("INVARIANT BatchDoneExit\n" if all(blackbox) else "")
    return modules


def run_batch(traces: Sequence[Trace], hidden_steps: int | None = None, **tlc: Any) -> tuple[TlcResult, list[int]]:
    """One TLC run over ``traces`` (``batch_modules``): its result and how many rows of each it matched."""
    with tempfile.TemporaryDirectory(prefix="kraft-trace-batch-") as tmp:
        work = Path(tmp)
        shutil.copy(SPEC_DIR / "KRaft.tla", work / "KRaft.tla")
        for name, text in batch_modules(traces, hidden_steps).items():
            (work / name).write_text(text)
        # the TLCSet/TLCGet registers are one worker's: one worker
        result = run_tlc("TraceBatch.tla", "TraceBatch.cfg", spec_dir=work, **{**tlc, "workers": 1})
    reached = [0] * len(traces)
    for m in _BATCH_MATCHED.finditer(result.output):
        k, n = int(m.group(1)), int(m.group(2))
        if 1 <= k <= len(traces):
            reached[k - 1] = max(reached[k - 1], n)
    return result, reached


def validate_traces(
    paths: Sequence[str | Path],
    *,
    hidden_steps: int | None = None,
    java_opts: Sequence[str] = DEFAULT_JAVA_OPTS,
    timeout: float | None = None,
    state_before: bool = True,
    processes: int = 1,
    max_batch: int = MAX_BATCH,
) -> list[TraceVerdict]:
    """``validate_trace`` of every path, in as few TLC runs as possible (at most ``processes`` at once, at most
    ``max_batch`` traces in one run; black-box and node traces together, each TLC run costing a start-up of
    about 0.65 CPU s).

    A trace every row of which a batch matched passes, as it would alone; any other trace (a row no
    behaviour matched, an invariant violated, a TLC error or a timeout anywhere in the batch) is
    validated again alone, so that its verdict, failed event and state before it are exactly
    ``validate_trace``'s.
    """
    translated = [translate(p) for p in paths]
    verdicts: list[TraceVerdict | None] = [None] * len(translated)
    members: list[int] = []
    for i, trace in enumerate(translated):
        if not checkable(trace):
            verdicts[i] = TraceVerdict(trace.path, False, 0, reason=not_checked_reason(trace), checked=False)
        else:
            members.append(i)
    # largest first into the lightest of the fewest batches that respect max_batch and processes
    count = max(min(processes, len(members)), -(-len(members) // max(1, max_batch)))
    bins: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for i in sorted(members, key=lambda i: -len(translated[i].events)):
        b = min((b for b in range(count) if len(bins[b]) < max_batch), key=lambda b: loads[b])
        bins[b].append(i)
        loads[b] += len(translated[i].events)
    batches = [b for b in bins if b]

    def run(batch: list[int]) -> None:
        alone: list[int] = batch
        if len(batch) > 1:
            try:
                per = None if timeout is None else timeout * len(batch)
                result, reached = run_batch(
                    [translated[i] for i in batch], hidden_steps, java_opts=java_opts, timeout=per
                )
            except BatchUnavailable:
                result, reached = None, []
            if result is not None and result.ok and not result.violated and not result.errors:
                alone = []
                for i, got in zip(batch, reached, strict=True):
                    n = len(translated[i].events)
                    if got >= n:
                        verdicts[i] = TraceVerdict(translated[i].path, True, n, reason="every event matched",
                                                   tlc=result)  # fmt: skip
                    else:
                        alone.append(i)
        for i in alone:
            verdicts[i] = _validate(translated[i], hidden_steps, java_opts, timeout, state_before)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(processes, len(batches) or 1))) as pool:
        list(pool.map(run, batches))
    return [v for v in verdicts if v is not None]
