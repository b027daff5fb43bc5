"""Validate: run TLC on TraceKRaft.tla with a trace's TraceData and read its verdict (PASS, FAIL, NOT CHECKED)."""

from __future__ import annotations

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
# The JVM options of a validation run: a throughput collector, and no JIT tiering pause for a run that
# lasts seconds.
DEFAULT_JAVA_OPTS = ("-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1")

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
    trace = translate(path)
    if not checkable(trace):
        return TraceVerdict(trace.path, False, 0, reason=not_checked_reason(trace), checked=False)
    tlc: dict[str, Any] = {"workers": workers, "java_opts": java_opts, "timeout": timeout}
    # black-box: hidden steps make a state space TLC would explore to its end after a full match
    cfg = TRACE_CFG + BLACKBOX_CFG if trace.target is not None else TRACE_CFG
    result = _run(trace, cfg, hidden_steps, None, **tlc)
    found = verdict(trace, result)
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
