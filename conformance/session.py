"""The conformance session: one target, one set of virtual voters, one event loop for the whole run.

The virtual voters must outlive single test cases (the target keeps its connections to them and its
reconnect backoff would otherwise slow every hand-over), so they live on an asyncio loop in a
background thread; each pytest case submits its scenario coroutine there and waits for the verdict.

TLC validates each life of the target (node trace and session harness trace) in a background thread once
the life ends, while later cases run: at a wiped restart (``heal``), or once a life has exchanged
``life_frames`` frames, at the next case boundary (a wiped restart the session makes for that reason: TLC's
time per row grows with what a behaviour accumulates, so several short lives validate faster than one long
one). The last life is validated when the catalog is done (``validate_all``). The thread takes every life that
ended since it last looked, both kinds, and validates them in one TLC run (``validate_lives``), so TLC's start-up
(about 0.65 CPU s, as much as validating a thousand rows) is paid per batch, not per life and kind, and a
validator that fell behind catches up in one run; while cases run it leaves fewer than ``batch_rows`` (default
``MIN_BACKGROUND_ROWS``) waiting rows for a later run. The thread only waits: the work runs in a validation
process at a lower priority (conformance/validator.py), so that it neither holds this process's interpreter lock
nor takes the CPU from the harness's loop and the target while cases judge their timers; the last run, all the
catalog then waits for, in one at the scheduler's defaults.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kraft_tck.conformance.blackbox import (
    BlackBoxValidation,
    SessionTrace,
    blackbox_result,
    harness_event,
    merge_blackbox,
    validate_session_traces,
    write_harness_trace,
    write_session_traces,
)
from kraft_tck.conformance.cases import OWN_LIFE
from kraft_tck.conformance.catalog import CaseSpec, catalog
from kraft_tck.conformance.scenario import CaseSkipped, ConformanceFailure, Scenario
from kraft_tck.conformance.target import AddressTarget, Target, Timeouts
from kraft_tck.conformance.validator import ValidationProcess
from kraft_tck.conformance.virtual import Frame, Quorum, TargetAddress, VLog
from kraft_tck.spec.trace import read_trace

if TYPE_CHECKING:
    from kraft_tck.tla.trace_validate import TraceVerdict

T = TypeVar("T")
ScenarioFn = Callable[[Scenario], Awaitable[None]]

#: A fixed, Kafka-shaped (22-character base64) cluster id for targets the harness formats itself.
DEFAULT_CLUSTER_ID = (
    base64.urlsafe_b64encode(uuid.UUID("6b726166-742d-7463-6b2d-636f6e666f72").bytes).rstrip(b"=").decode()
)


def _lines(path: Path) -> int:
    """Lines of a trace file (its rows, and its header): what a validation of it is about to cost."""
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 16), b""))
    except OSError:
        return 0


def process_nice(pid: int) -> int | None:
    """The nice value of process ``pid`` (None where it cannot be read)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        return None


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of process ``pid`` and of its children it has waited for (Linux ``/proc/PID/stat``: utime,
    stime, cutime, cstime); None where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3, utime field 14
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@dataclass
class CaseResult:
    """What the report shows for one case."""

    case: CaseSpec
    outcome: str = "passed"  # passed | failed | skipped | error
    duration_s: float = 0.0
    what: str = ""
    expected: str = ""
    actual: str = ""
    message: str = ""
    frames: list[Frame] = field(default_factory=list)
    trace: str | None = None
    wait_s: float = 0.0  # time spent waiting on the target's protocol timers (benchmark)
    relaunch_s: float = 0.0  # time spent relaunching (and formatting) the target (benchmark)
    #: TLC's verdict on this case's share of the session harness trace (black-box validation)
    tlc: str = ""
    #: KAFKA-level misses: where the target took another choice the KIP allows than Apache Kafka's
    #: (each: level, check, expected, actual, kafka = the spec/kafka-behaviour.yaml row, clause, met)
    kafka_differences: list[dict[str, Any]] = field(default_factory=list)
    #: INFO-level checks, met or not (same keys)
    observations: list[dict[str, Any]] = field(default_factory=list)
    #: the longest the harness's own event loop came late while the case ran, relaunches of the target aside
    #: (``LoopThread.reset_lag``)
    loop_lag_s: float = 0.0
    #: wall-clock (epoch s) span of the case on its worker, from the heal or relaunch before it to its trace on
    #: disk, and the xdist worker that ran it: where a run's time outside the cases goes (bench_conformance)
    started_at: float = 0.0
    ended_at: float = 0.0
    worker: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case.id, "title": self.case.title, "section": self.case.section,
            "clause": str(self.case.clause), "seed": self.case.clause.seed, "outcome": self.outcome,
            "durationS": round(self.duration_s, 3),
            "waitS": round(self.wait_s, 3), "relaunchS": round(self.relaunch_s, 3), "check": self.what,
            "expected": self.expected, "actual": self.actual, "message": self.message, "trace": self.trace,
            "tlc": self.tlc,
            "kafkaDifferences": self.kafka_differences, "observations": self.observations,
            "loopLagMs": round(self.loop_lag_s * 1000, 1), "startedAt": round(self.started_at, 3),
            "endedAt": round(self.ended_at, 3), "worker": self.worker, "frames": [frame_json(f) for f in self.frames],
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        """A case's result as ``to_json`` wrote it (an xdist worker's, for the controller's report); its
        frames carry what the report shows of them (``ShownFrame``), not their bodies."""
        return cls(
            catalog()[data["id"]], data["outcome"], data["durationS"], data["check"], data["expected"],
            data["actual"], data["message"], [ShownFrame.from_json(f) for f in data["frames"]], data["trace"],
            data["waitS"], data.get("relaunchS", 0.0), data["tlc"], list(data["kafkaDifferences"]),
            list(data["observations"]), data.get("loopLagMs", 0.0) / 1000, data.get("startedAt", 0.0),
            data.get("endedAt", 0.0), data.get("worker", ""),
        )  # fmt: skip


@dataclass
class ShownFrame(Frame):
    """A frame as the report shows it (``frame_json``): its summary in place of its body."""

    shown: str = ""

    def summary(self) -> str:
        return self.shown

    @classmethod
    def from_json(cls, f: dict[str, Any]) -> ShownFrame:
        return cls(
            f["seq"], f["tsMs"], 0, f["src"], f["dst"], f["api"], -1 if f["kind"] == "note" else 0, f["kind"],
            f["version"], -1, {}, shown=f["summary"],
        )  # fmt: skip


def frame_json(f: Frame) -> dict[str, Any]:
    return {
        "seq": f.seq,
        "tsMs": round(f.ts_ms, 1),
        "src": f.src,
        "dst": f.dst,
        "api": f.api,
        "kind": f.kind,
        "version": f.version,
        "summary": f.summary(),
    }


class LoopThread:
    #: how often the lag watcher wakes (``stalls``)
    WATCH_S = 0.02
    #: a lag this long is a stall worth keeping
    STALL_MIN_S = 0.02

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kraft-tck-harness", daemon=True)
        self._thread.start()
        #: since ``reset_lag``, each time the loop came late to a timer: (the loop's time it woke, seconds late). A
        #: harness that stalls reads the target's messages late, and a case with a timing rule then misjudges it.
        self.stalls: list[tuple[float, float]] = []
        self._watcher = asyncio.run_coroutine_threadsafe(self._watch(), self.loop)

    async def _watch(self) -> None:
        while True:
            due = self.loop.time() + self.WATCH_S
            await asyncio.sleep(self.WATCH_S)
            now = self.loop.time()
            if now - due >= self.STALL_MIN_S:
                self.stalls.append((now, now - due))

    def reset_lag(self, outside: Sequence[tuple[float, float]] = ()) -> float:
        """The longest lag since the last reset, but for stalls that overlap one of the loop-time windows
        ``outside`` (a relaunch of the target: nothing to read then), and start over."""
        stalls, self.stalls = self.stalls, []
        counted = [lag for woke, lag in stalls if not any(woke - lag < end and woke > start for start, end in outside)]
        return max(counted, default=0.0)

    def run(self, coro: Awaitable[T], timeout_s: float | None = None) -> T:
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return fut.result(timeout_s)

    async def _unwatch(self) -> None:
        self._watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, concurrent.futures.CancelledError):
            await asyncio.wrap_future(self._watcher)

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # a loop that no longer runs has nothing to cancel
            self.run(self._unwatch(), 5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class CaseTimeout(Exception):
    """A case ran past its time budget (``--case-timeout``, relaunches of the target not counted)."""


#: What the report says when the target leaves no trace of its own steps.
NO_NODE_TRACE = "not available for a black-box target (no node trace)"


@dataclass
class TlcValidation:
    """TLC's verdict on the target's own node trace (tla/TraceKRaft.tla, environment mode: the virtual
    voters are the environment), one verdict per life of the target (a wiped directory starts a new
    one; kill -9 restarts stay in it)."""

    status: str  # PASS | FAIL | NOT CHECKED | OFF | UNAVAILABLE
    message: str = ""
    seconds: float = 0.0
    events: int = 0
    lives: list[dict[str, Any]] = field(default_factory=list)
    #: how validation kept up (``Session.validate_all``): ``tlcRuns`` (batches, node and session traces),
    #: ``tailS`` (from the catalog's end to the last verdict), ``runs`` (each batch: ``lives`` of each kind, rows,
    #: its start and end in seconds since the session started, ``cpuS``, ``nice``, ``final``: taken once the
    #: catalog was done)
    schedule: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "seconds": round(self.seconds, 2),
            "events": self.events,
            "lives": self.lives,
            "schedule": self.schedule,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TlcValidation:
        return cls(data["status"], data["message"], data["seconds"], data["events"], list(data["lives"]),
                   dict(data.get("schedule") or {}))  # fmt: skip


def merge_tlc(parts: list[TlcValidation]) -> TlcValidation:
    """One verdict from the verdicts on several lives (or several workers' targets): FAIL if any failed,
    NOT CHECKED / UNAVAILABLE / OFF only if all are, PASS otherwise; ``seconds`` is TLC's time, summed."""
    if not parts:
        return TlcValidation("UNAVAILABLE", NO_NODE_TRACE)
    if len(parts) == 1:
        return parts[0]
    lives = [life for p in parts for life in p.lives]
    merged = TlcValidation("PASS", seconds=sum(p.seconds for p in parts), events=sum(p.events for p in parts),
                           lives=lives, schedule=merge_schedules([p.schedule for p in parts]))  # fmt: skip
    failed = [p.message for p in parts if p.status == "FAIL"]
    statuses = {p.status for p in parts}
    if failed:
        merged.status, merged.message = "FAIL", "\n".join(failed)
    elif len(statuses) == 1 and statuses != {"PASS"}:
        merged.status, merged.message = parts[0].status, parts[0].message
    else:
        checked = sum(1 for life in lives if life.get("status") == "PASS")
        merged.message = f"{merged.events} events of {checked} life/lives of the target match KRaft"
    return merged


def merge_schedules(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The schedules of several targets (xdist workers): runs summed, the longest tail."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    return {
        "tlcRuns": sum(p.get("tlcRuns", 0) for p in parts),
        "tailS": max(p.get("tailS", 0.0) for p in parts),
        "runs": [r for p in parts for r in p.get("runs", [])],
    }


def _origin(files: list[Path], merged_seq: int) -> str:
    """Which incarnation's file and seq a row of the merged trace of one node came from (the merge of
    one node's files keeps their order)."""
    left = merged_seq
    for f in files:
        n = sum(1 for raw in f.read_text().splitlines()[1:] if raw.strip())
        if left < n:
            return f"{f.name} seq {left}"
        left -= n
    return "?"


def validate_node_trace(
    lives: list[list[Path]], out_dir: Path, processes: int = 2, timeout_s: float = 600.0, first_life: int = 0,
    numbers: list[int] | None = None,
) -> TlcValidation:
    """Validate each life of a node's trace with TLC (in as few TLC runs as possible, at most ``processes``
    at once: ``validate_traces``); the merged trace of ``lives[k]`` is ``node-life-{N}.ndjson`` in
    ``out_dir``, N being ``numbers[k]`` (default ``first_life + k``)."""
    node, _ = validate_lives(lives, out_dir, [], processes, timeout_s, first_life, numbers)
    return node if node is not None else TlcValidation("UNAVAILABLE", NO_NODE_TRACE)


def validate_lives(
    lives: list[list[Path]], out_dir: Path, sessions: list[SessionTrace], processes: int = 1,
    timeout_s: float = 600.0, first_life: int = 0, numbers: list[int] | None = None,
) -> tuple[TlcValidation | None, BlackBoxValidation | None]:
    """The node trace lives (as ``validate_node_trace``) and the session harness traces (as
    ``validate_session_traces``) in the same TLC runs (``validate_traces`` batches both kinds: one TLC start-up,
    about 0.65 CPU s, for a conformance run's lives of both kinds); None for a kind with nothing given."""
    from kraft_tck.tla.trace_merge import merge_node_traces
    from kraft_tck.tla.trace_validate import validate_traces

    numbered = list(zip(numbers or [first_life + k for k in range(len(lives))], lives, strict=True))
    numbered = [(n, [f for f in life if f.exists() and f.stat().st_size > 0]) for n, life in numbered]
    numbered = [(n, life) for n, life in numbered if life]
    if numbered:
        out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    merged = [merge_node_traces(life, out_dir / f"node-life-{n}.ndjson") for n, life in numbered]
    verdicts = validate_traces([*merged, *(t.path for t in sessions)], timeout=timeout_s, processes=processes)
    seconds = time.monotonic() - t0
    node_verdicts, session_verdicts = verdicts[: len(merged)], verdicts[len(merged) :]
    # the runs' time shared between the kinds by their rows (a report sums the two)
    rows = [sum(v.events for v in node_verdicts), sum(v.events for v in session_verdicts)]
    share = [seconds * r / max(1, sum(rows)) for r in rows]
    node = (
        node_result([life for _, life in numbered], merged, node_verdicts, share[0]) if numbered
        else None if not lives else TlcValidation("UNAVAILABLE", NO_NODE_TRACE)
    )  # fmt: skip
    blackbox = blackbox_result(sessions, session_verdicts, share[1]) if sessions else None
    return node, blackbox


def node_result(
    lives: list[list[Path]], merged: list[Path], verdicts: list[TraceVerdict], seconds: float
) -> TlcValidation:
    """The node trace verdict of a target's lives from TLC's verdicts on their merged traces."""
    result = TlcValidation("PASS", seconds=seconds, events=sum(v.events for v in verdicts))
    problems: list[str] = []
    for life, path, v in zip(lives, merged, verdicts, strict=True):
        entry: dict[str, Any] = {
            "files": [f.name for f in life], "merged": str(path), "status": v.status, "events": v.events,
            "reason": v.reason,
        }  # fmt: skip
        if v.failed_event is not None:
            ev = v.failed_event
            entry["failedEvent"] = {
                "seq": ev.seq, "node": ev.node, "event": ev.event, "state": ev.state,
                "origin": _origin(life, ev.seq),
            }  # fmt: skip
        if v.state_before is not None:
            entry["stateBefore"] = v.state_before
        result.lives.append(entry)
        if v.status == "FAIL":
            text = f"{path.name} ({', '.join(f.name for f in life)}): {v.reason}"
            if v.failed_event is not None:
                ev = v.failed_event
                text += (
                    f"\n  first unmatched event: seq {ev.seq} ({_origin(life, ev.seq)}), {ev.event} by node "
                    f"{ev.node}, reported state {ev.state}"
                )
            if v.state_before is not None:
                text += f"\n  spec state before it: {v.state_before}"
            problems.append(text)
    if problems:
        result.status, result.message = "FAIL", "\n".join(problems)
    elif all(v.status == "NOT CHECKED" for v in verdicts):
        result.status, result.message = "NOT CHECKED", verdicts[0].reason
    else:
        result.message = f"{result.events} events of {len(lives)} life/lives of the target match KRaft"
    return result


class Session:
    #: a case that fails while the harness's loop came this late says so (``ConformanceFailure.note_harness``)
    STALL_S = 0.1
    #: while cases run, a TLC run waits for this many rows (node trace lines and session trace rows): its start-up
    #: costs about 0.65 CPU s, as much as validating a thousand rows
    MIN_BACKGROUND_ROWS = 1500

    def __init__(
        self,
        target: Target,
        timeouts: Timeouts,
        trace_dir: Path | None,
        validate: bool = True,
        case_timeout_s: float = 30.0,
        tlc: bool = True,
        life_frames: int = 0,
        batch_rows: int = MIN_BACKGROUND_ROWS,
    ) -> None:
        self.target = target
        self.timeouts = timeouts
        self.trace_dir = trace_dir
        self.validate = validate
        self.tlc = tlc
        self.tlc_result: TlcValidation | None = None
        self.blackbox_result: BlackBoxValidation | None = None
        self._target_stopped = False
        #: start a new life (a wiped restart, between cases) once the current one has this many frames, so
        #: TLC can validate the finished life while later cases run (0: never; only a target that restarts)
        self.life_frames = life_frames
        #: while cases run, a TLC run waits for this many rows (``MIN_BACKGROUND_ROWS``)
        self.batch_rows = batch_rows
        #: background TLC runs (``_submit_lives``): one thread, taking every life waiting (both kinds) each time
        self._validator: concurrent.futures.ThreadPoolExecutor | None = None
        #: where that thread has the work done (conformance/validator.py): translating a trace into TLA+ is pure
        #: Python, and in the harness's process it would hold the GIL while the harness's loop must read the
        #: target's messages in time (a loop that waits for the GIL after every socket call falls behind); batch
        #: priority while cases run, the scheduler's defaults for the last run (``_final_process``)
        self._process: ValidationProcess | None = None
        self._final = False  # the catalog is done: the validator takes whatever waits, however little
        self._final_process: ValidationProcess | None = None
        self._node_waiting: list[tuple[int, list[Path], int]] = []  # (life, trace files, their lines)
        self._session_waiting: list[SessionTrace] = []
        self._waiting_lock = threading.Lock()
        self._jobs: list[Future[tuple[TlcValidation | None, BlackBoxValidation | None]]] = []
        self._lives_submitted = 0
        self._t0 = time.monotonic()
        self._runs: list[dict[str, Any]] = []
        self._tmp: Path | None = None
        self.case_timeout_s = case_timeout_s
        self.results: dict[str, CaseResult] = {}
        self.loop = LoopThread()
        layout = target.layout
        ports = dict(zip(layout.virtual_ids, layout.harness_ports, strict=True))
        self.quorum: Quorum = self.loop.run(self._make_quorum(layout.target_host, layout.target_port, ports))
        self.started = False
        # a restart on a wiped directory cuts the session's frame log into a new life, a kill -9 on the
        # same directory is marked in it; going through the loop also lets it read what the old process
        # had sent before it died (still before the mark)
        target.on_restart = self._on_restart

    async def _make_quorum(self, host: str, port: int, ports: dict[int, int]) -> Quorum:
        security = self.target.security
        q = Quorum(
            TargetAddress(self.target.node_id, host, port, ssl=self.target.ssl, sasl=self.target.sasl),
            self.target.cluster_id,
            ports,
            self.target.layout.harness_host,
            request_timeout_s=max(2.0, self.timeouts.request_timeout_ms / 250),
            server_ssl=security.server_context() if security is not None else None,
            server_sasl=security.accounts if security is not None else None,
        )
        await q.start()
        return q

    def start(self) -> None:
        """Virtual voters first (the target connects to them at once), then the target."""
        self.target.start()
        self.started = True
        if isinstance(self.target, AddressTarget):
            self._await_target_connections()

    def _await_target_connections(self, timeout_s: float = 5.0) -> None:
        """A node started by hand ran while nobody listened: when the harness comes up, its connections to
        the virtual voters may still be in reconnect backoff (Kafka's reconnect.backoff.max.ms, 1 s by
        default), and a follower that cannot reach the leader the first case announces within its fetch
        timeout starts an election instead.  So the first case waits, up to ``timeout_s``, until the target
        has sent something to every virtual voter: however long it ran alone, the cases then meet it with
        its connections up (it keeps holding elections meanwhile, all in the session trace)."""
        target, wanted = self.target.node_id, set(self.quorum.voters)

        async def reached() -> set[int]:
            return {e.frame.dst for e in self.quorum.session.entries if e.frame.src == target}

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not wanted <= self.loop.run(reached(), 5):
            time.sleep(0.05)

    def stop_target(self) -> None:
        """The catalog is done: the virtual voters leave and the target stops (its traces are final)."""
        if self._target_stopped:
            return
        self._target_stopped = True
        try:
            self.loop.run(self.quorum.close(), 10)
        finally:
            self.target.stop()

    def validate_node_trace(self) -> TlcValidation:
        """TLC on the target's own trace (stops the target first); the verdict goes to the report."""
        return self.validate_all()[0]

    def validate_session_traces(self) -> BlackBoxValidation:
        """TLC in black-box mode on the session harness trace of each life of the target (stops the
        target first): every case's exchange, checked from the target's fresh start."""
        return self.validate_all()[1]

    def validate_all(self) -> tuple[TlcValidation, BlackBoxValidation]:
        """Both TLC validations of every life of the target (stops the target first): the lives that ended
        while cases ran are in the background already; the last one's run starts now."""
        if not self.tlc:
            self.tlc_result = TlcValidation("OFF", "off (--no-tlc)")
            self.blackbox_result = BlackBoxValidation("OFF", "off (--no-tlc)")
            return self.tlc_result, self.blackbox_result
        if self.tlc_result is not None and self.blackbox_result is not None:
            return self.tlc_result, self.blackbox_result
        if self._validator is not None:  # the last run's process, started while the target stops
            self._job_process(final=True)
        self.stop_target()
        ended = time.monotonic()
        with self._waiting_lock:
            self._final = True
        self._submit_lives(self.quorum.session.life + 1)
        done = [job.result() for job in self._jobs]
        nodes = [node for node, _ in done if node is not None]
        sessions = [blackbox for _, blackbox in done if blackbox is not None]
        self.tlc_result = merge_tlc(nodes)
        self.blackbox_result = merge_blackbox(sessions) if sessions else validate_session_traces([], 1)
        self.tlc_result.schedule = {
            "tlcRuns": len(self._runs), "tailS": round(time.monotonic() - ended, 2), "runs": list(self._runs),
            "harnessPid": os.getpid(),
        }  # fmt: skip
        for case_id, result in self.results.items():
            result.tlc = self.blackbox_result.by_case.get(
                case_id, "nothing to check: no KRaft message of this case is in a session harness trace"
            )
        return self.tlc_result, self.blackbox_result

    def _out_dir(self) -> Path:
        if self.trace_dir is not None:
            return self.trace_dir
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="kraft-tck-tlc-"))
        return self._tmp

    def _submit_lives(self, upto: int) -> None:
        """Queue TLC on each life of the target before ``upto`` not queued yet (validated in a background
        thread, several waiting lives of both kinds in one TLC run)."""
        if not self.tlc:
            return
        out = self._out_dir()
        header = self._trace_header("session")
        queued = False
        while self._lives_submitted < upto:
            life = self._lives_submitted
            self._lives_submitted += 1
            files = self.target.trace_lives[life] if life < len(self.target.trace_lives) else []
            # the session log of that life is complete: later frames go to later lives
            traces = write_session_traces(
                self.quorum.session, out, header, set(self.quorum.voters), self.target.node_id, lives={life},
                cut_at=self.target.blackbox_cut_at,
            )
            if life in self.target.unmodelled_lives:  # e.g. run as an observer: tla/ models a voter target
                files, traces = [], []
            if life in self.target.blackbox_unmodelled_lives:
                traces = []
            lines = sum(_lines(f) for f in files)  # the life is over: its files are final, counted once
            with self._waiting_lock:
                if files:
                    self._node_waiting.append((life, list(files), lines))
                self._session_waiting.extend(traces)
            queued = True
        if not queued:
            return
        if self._validator is None:
            self._process = ValidationProcess()
            self._validator = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-tck-tlc")
        self._jobs.append(self._validator.submit(self._validate_waiting))

    def _validate_waiting(self) -> tuple[TlcValidation | None, BlackBoxValidation | None]:
        """Every life waiting, node traces and session traces, in one TLC run ((None, None): an earlier call took
        them all, or fewer than ``batch_rows`` wait while cases run)."""
        with self._waiting_lock:
            rows = sum(lines for _, _, lines in self._node_waiting) + sum(t.events for t in self._session_waiting)
            final = self._final
            if not final and rows < self.batch_rows:
                return None, None  # left for the next run
            nodes, self._node_waiting = self._node_waiting, []
            sessions, self._session_waiting = self._session_waiting, []
        if not nodes and not sessions:
            return None, None
        started = time.monotonic()
        process = self._job_process(final)
        cpu = process_cpu_s(process.pid)
        node, blackbox = process.run(validate_lives, [files for _, files, _ in nodes], self._out_dir() / "target",
                                     sessions, 1, 600.0, 0, [life for life, _, _ in nodes])  # fmt: skip
        self._log_run({"node": [life for life, _, _ in nodes], "session": [t.life for t in sessions]},
                      (node, blackbox), started, process.pid, cpu, final)  # fmt: skip
        return node, blackbox

    def _job_process(self, final: bool) -> ValidationProcess:
        """The validation process of a run: the batch one while cases run, the last run's once they are done (the
        first run may come after the catalog's end, as in a catalog of one case)."""
        if final and self._final_process is None:
            self._final_process = ValidationProcess(batch=False)
        process = self._final_process if final else self._process
        assert process is not None
        return process

    def _log_run(
        self, lives: dict[str, list[int]], results: tuple[TlcValidation | None, BlackBoxValidation | None],
        started: float, pid: int, cpu_before: float | None, final: bool,
    ) -> None:
        """One TLC run in the schedule: the lives of each kind it took, its rows, its wall-clock span and ``cpuS``,
        the CPU the validation process and its TLC spent on it (the throughput a machine busy with the cases does
        not distort: the run is batch work)."""
        ran = [r for r in results if r is not None and r.status not in ("NOT CHECKED", "UNAVAILABLE")]
        if not ran:
            return  # no row to check: TLC did not run
        cpu_after, nice = process_cpu_s(pid), process_nice(pid)
        cpu = round(cpu_after - cpu_before, 2) if cpu_before is not None and cpu_after is not None else None
        self._runs.append({
            "lives": lives, "rows": sum(r.events for r in ran), "startS": round(started - self._t0, 2),
            "endS": round(time.monotonic() - self._t0, 2), "pid": pid, "cpuS": cpu, "final": final, "nice": nice,
        })  # fmt: skip

    def _on_restart(self, wiped: bool) -> None:
        self.loop.run(self._restarted(wiped), 10)
        if wiped:
            # the life that ended is final (its process is dead, its frames logged): validate it now
            self._submit_lives(self.quorum.session.life)

    def close(self) -> None:
        try:
            self.stop_target()
        finally:
            if self._validator is not None:
                self._validator.shutdown(wait=True, cancel_futures=True)
            for process in (self._process, self._final_process):
                if process is not None:
                    process.close()
            self.target.collect(self.trace_dir)
            self.loop.stop()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    async def _within_budget(self, fn: ScenarioFn, sc: Scenario) -> None:
        """Run the case; past ``case_timeout_s`` of its own time (relaunches of the target not counted) it is
        cancelled and errors, saying so."""
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(fn(sc))
        started = loop.time()
        while True:
            now = loop.time()
            left = self.case_timeout_s + sc.relaunch_time(now) - (now - started)
            # while a relaunch is in progress the budget moves with it: look again in a second
            done, _ = await asyncio.wait({task}, timeout=max(0.0, left if sc.relaunch_started is None else 1.0))
            if done:
                return task.result()
            now = loop.time()
            if self.case_timeout_s + sc.relaunch_time(now) - (now - started) <= 0:  # not extended meanwhile
                task.cancel()
                await asyncio.wait({task}, timeout=5)  # its cleanup, not forever
                raise CaseTimeout(
                    f"the case did not finish within its {self.case_timeout_s:g} s budget (plus "
                    f"{sc.relaunch_time(now):.1f} s the target took to relaunch); a slow target needs --case-timeout "
                    "SECONDS")

    def run_case(self, case_id: str, fn: ScenarioFn) -> CaseResult:
        spec = catalog().get(case_id)
        if spec is None:
            raise LookupError(f"{case_id} is implemented but not in spec/scenarios/*.yaml; add it to the catalog")
        result = CaseResult(spec, started_at=time.time(), worker=os.environ.get("PYTEST_XDIST_WORKER", ""))
        self.results[case_id] = result
        own_life = bool(getattr(fn, OWN_LIFE, False))
        if self.target.retired and not own_life:
            self.heal()  # the case before retired its life (Scenario.retire_life)
        elif not own_life:  # an own-life case starts a new life anyway
            self._maybe_new_life()
        t0 = time.monotonic()
        sc = self.loop.run(self._scenario(spec))
        self.loop.reset_lag()
        try:
            self.loop.run(self._within_budget(fn, sc))
        except ConformanceFailure as exc:
            result.loop_lag_s = self.loop.reset_lag(sc.relaunch_windows)
            if result.loop_lag_s >= self.STALL_S:
                # the target's messages were read that much late: a verdict on a timing rule may be the harness's
                exc.note_harness(
                    f"the harness's own event loop stalled for up to {result.loop_lag_s * 1000:.0f} ms while this "
                    "case ran (a loaded machine): if the check is about timing, run the case again before blaming "
                    "the target")
            result.outcome, result.what, result.expected, result.actual = "failed", exc.what, exc.expected, exc.actual
            result.message = exc.render()
            raise
        except CaseSkipped as exc:
            result.outcome, result.message = "skipped", str(exc)
            raise
        except BaseException as exc:
            result.outcome, result.message = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            result.duration_s = time.monotonic() - t0
            result.loop_lag_s = max(result.loop_lag_s, self.loop.reset_lag(sc.relaunch_windows))
            result.frames = list(sc.frames.frames)
            result.wait_s = sc.frames.waited_s
            result.relaunch_s = sc.relaunch_s
            result.kafka_differences = list(sc.kafka_differences)
            result.observations = list(sc.observations)
            self.loop.run(self._end_case(), 10)
            result.trace = self._write_trace(spec, result.frames, sc.frames.restarts)
            if result.outcome in ("failed", "error"):
                self.heal()
            result.ended_at = time.time()
        return result

    def _maybe_new_life(self) -> None:
        """Between cases: once the current life has ``life_frames`` frames, a wiped restart starts a new
        one (as ``heal`` does), and TLC takes the finished life in the background."""
        if not self.life_frames or not self.tlc or not self.target.can_restart:
            return
        life = self.quorum.session.life
        frames = sum(1 for e in self.quorum.session.entries if e.life == life)
        if frames >= self.life_frames:
            self.heal()

    def heal(self) -> None:
        """After a failure the target's log may no longer match any history the harness can serve (a
        node that never truncates, say), and every later case would fail for that one reason. A target
        the harness can restart is started again on a fresh, formatted directory and the virtual voters
        forget their log with it: later cases then judge their own clause only."""
        if not self.target.can_restart:
            return
        self.target.restart(wipe=True, formatted=True)
        self.loop.run(self._forget_log(), 10)

    async def _forget_log(self) -> None:
        self.quorum.log = VLog()
        for v in self.quorum.voters.values():
            if v.client is not None:
                await v.client.close()

    async def _scenario(self, spec: CaseSpec) -> Scenario:
        await self.quorum.reset()
        self.quorum.session.begin_case(spec.id)
        return Scenario(spec, self.quorum, self.target, self.timeouts)

    async def _end_case(self) -> None:
        await self.quorum.stop_tasks()
        self.quorum.session.end_case()

    async def _restarted(self, wiped: bool) -> None:
        # the old process is dead and the new one not started: a moment for the loop to read and record
        # what the old one had sent, nothing of the new one can arrive yet
        await asyncio.sleep(0.05)
        if wiped and self.target.retired:  # what heal does: the new life starts from an empty log
            self.quorum.log = VLog()
        if wiped:
            self.quorum.session.new_life()
        else:
            self.quorum.session.restart()
            self.quorum.frames.restarts.append(len(self.quorum.frames.frames))

    def _trace_header(self, run: str) -> dict[str, Any]:
        header = {
            "source": "harness", "run": run, "implementation": self.target.describe(),
            "clusterId": self.target.cluster_id, "voters": self.quorum.voter_ids, "target": self.target.node_id,
            "config": {
                "controller.quorum.election.timeout.ms": self.timeouts.election_ms,
                "controller.quorum.fetch.timeout.ms": self.timeouts.fetch_ms,
                "controller.quorum.election.backoff.max.ms": self.timeouts.election_backoff_max_ms,
                "controller.quorum.request.timeout.ms": self.timeouts.request_timeout_ms,
            },
        }  # fmt: skip
        if isinstance(self.target, AddressTarget):
            # a node started by hand ran before the virtual voters listened: black-box validation lets it
            # start as the Candidate of elections nobody heard (tla/TraceKRaft.tla IsolatedCandidate)
            header["targetStartedBeforeHarness"] = True
        return header

    def _write_trace(self, spec: CaseSpec, frames: list[Frame], frame_restarts: list[int]) -> str | None:
        """The case's exchange as a harness trace (spec/trace.schema.json), validated after writing."""
        if self.trace_dir is None:
            return None
        path = self.trace_dir / (spec.id.replace("/", "_") + ".ndjson")
        virtual = set(self.quorum.voters)
        events: list[dict[str, Any]] = []
        restarts: list[int] = []
        marks = set(frame_restarts)
        for k, f in enumerate(frames):
            if k in marks:
                restarts.append(len(events))
            if (ev := harness_event(f, f.ts_ms, virtual, self.target.node_id)) is not None:
                events.append(ev)
        restarts += [len(events)] * sum(1 for k in frame_restarts if k >= len(frames))
        header = self._trace_header(spec.id)
        if restarts:
            header["targetRestarts"] = restarts
        write_harness_trace(path, header, events)
        if self.validate:
            bad = read_trace(path).bad
            if bad:
                raise AssertionError(f"{path}: the harness wrote an invalid trace: line {bad[0].line}: {bad[0].reason}")
        return str(path)
