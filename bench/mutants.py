"""Detection power of the conformance catalog: run it against every mutant of tests/mutants/mutants.py.

For each mutant (and first the unmutated node) the catalog runs black-box — ``pytest conformance --no-tlc``,
only the verdicts a third-party target would get — stopping at the first failing case (``-x``). With
``--tlc``, a mutant that survives runs again with TLC on: the node-trace validation (white-box: needs the
node's own trace) and the black-box TLC check of the harness's traces. Prints one row per mutant: caught
or not, by which case, black-box or white-box only, and the seconds it took.

Exit status: 0 when the unmutated node passes and every mutant is caught; 1 when a mutant survives; 2 when
the unmutated node fails (then no verdict on the mutants means anything).

    .venv/bin/python bench/mutants.py                 # all mutants, black-box only
    .venv/bin/python bench/mutants.py --tlc           # and TLC for the survivors
    .venv/bin/python bench/mutants.py vote-twice-per-epoch forget-vote
    .venv/bin/python bench/mutants.py --area reconfig    # the KIP-853 (dynamic quorum) mutants
    .venv/bin/python bench/mutants.py --area reconfig --case 'KIP-853/*'   # a quick look: only those cases

The table names, for a caught mutant, the first failing case and the clause of its failed check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MUTANTS_PY = REPO / "tests" / "mutants" / "mutants.py"
WHITEBOX_PY = REPO / "tests" / "mutants" / "whitebox.py"
LAUNCHER = REPO / "tests" / "mutants" / "launcher.py"


def load_whitebox() -> ModuleType:
    """tests/mutants/whitebox.py: the unit checks of mutants no scenario can see on the wire."""
    name = "kraft_tck_mutants_whitebox"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, WHITEBOX_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def white_box_unit(m: Any) -> bool | None:
    """The mutant's white-box unit check (tests/mutants/whitebox.py): True when it catches the mutant and
    passes the product's core; None when the mutant has none."""
    from kraft_tck.reference.core import KRaftCore

    check = load_whitebox().CHECKS.get(m.name)
    if check is None:
        return None
    return bool(check(m.core)) and not check(KRaftCore)


def load_registry() -> ModuleType:
    """tests/mutants/mutants.py, loaded by path (tests/ is no package)."""
    name = "kraft_tck_mutants"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MUTANTS_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Run:
    """One catalog run against one mutant."""

    mutant: str
    tlc: bool
    returncode: int
    seconds: float
    failed: list[str] = field(default_factory=list)  # failing case ids, in run order
    clause: str = ""  # the clause of the first failing case's failed check
    tlc_node: str = "OFF"  # status of the TLC validation of the node's trace
    tlc_black_box: str = "OFF"  # status of the black-box TLC check of the harness's traces
    tlc_message: str = ""
    kafka_rows: list[str] = field(default_factory=list)  # KAFKA-level differences reported
    kafka_cases: list[str] = field(default_factory=list)  # the cases that reported them
    strict: bool = False  # --strict, no case failed, exit 9 with a KAFKA-level difference reported
    note: str = ""  # when no results.json was written: why (the run's last output)
    timed_out: bool = False  # no verdict: the run was killed at its time limit

    @property
    def caught(self) -> bool:
        if self.timed_out:
            return False
        return (bool(self.failed) or self.tlc_node == "FAIL" or self.tlc_black_box == "FAIL" or self.strict
                or bool(self.note))


def run_catalog(
    mutant: str, tlc: bool, workdir: Path, timeout_s: float, cases: list[str] | None = None, extra: tuple[str, ...] = ()
) -> Run:
    """``pytest conformance`` against the launcher with ``KRAFT_TCK_MUTANT=mutant`` (plus ``extra`` options);
    stops at the first failure."""
    tag = "".join(a.strip("-").replace("-", "") for a in extra)
    report = workdir / f"{mutant}{'-tlc' if tlc else ''}{'-' + tag if tag else ''}"
    args = [
        sys.executable, "-m", "pytest", "conformance", "-q", "-x", "-p", "no:cacheprovider",
        "--target-launcher", str(LAUNCHER), "--report", str(report),
    ]
    if not tlc:
        args.append("--no-tlc")
    args += extra
    for pattern in cases or ():
        args += ["--case", pattern]
    env = {**os.environ, "KRAFT_TCK_MUTANT": mutant}
    started = time.monotonic()
    # A session of its own: on timeout the whole group goes (the target node, TLC's java), not only pytest.
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        run = Run(mutant, tlc, -1, round(time.monotonic() - started, 1), timed_out=True)
        run.note = f"no verdict: killed after {timeout_s:.0f} s"
        return run
    run = Run(mutant, tlc, rc, round(time.monotonic() - started, 1))
    results = report / "results.json"
    if not results.exists():
        lines = [ln for ln in out.strip().splitlines() if ln.strip()]
        run.note = f"no results (exit {rc}): {lines[-1][:200] if lines else ''}"
        return run
    doc: dict[str, Any] = json.loads(results.read_text())
    failing = [c for c in doc["cases"] if c["outcome"] in ("failed", "error")]
    run.failed = [c["id"] for c in failing]
    if failing:
        run.clause = failed_clause(failing[0])
    rows = {str(d.get("kafka")) for c in doc["cases"] for d in c.get("kafkaDifferences", [])}
    run.kafka_rows = sorted(rows)
    run.kafka_cases = [c["id"] for c in doc["cases"] if c.get("kafkaDifferences")]
    for key, attr in (("tlcValidation", "tlc_node"), ("tlcBlackBox", "tlc_black_box")):
        value = doc.get(key)
        if isinstance(value, dict):
            setattr(run, attr, str(value.get("status", "OFF")))
            if value.get("status") == "FAIL":
                run.tlc_message = str(value.get("message", ""))[:300]
    if rc == 9 and "--strict" in extra and not run.failed:
        # --strict fails a run on a KAFKA-level difference and on a skip: only the difference is a verdict
        # (the catalog skips what the target cannot do, e.g. Vote v2 pre-vote, TLS, a 5-voter-only case)
        run.strict = bool(run.kafka_rows)
    elif rc not in (0, 1) and not run.failed and run.tlc_node != "FAIL" and run.tlc_black_box != "FAIL":
        run.note = f"exit {rc} without a failing case"
    return run


def failed_clause(case: dict[str, Any]) -> str:
    """The clause a failing case's failed check names (its message's ``clause:`` line; else the case's own)."""
    for line in str(case.get("message", "")).splitlines():
        if line.startswith("clause:"):
            return line.split(":", 1)[1].strip()
    return str(case.get("clause", ""))


@dataclass
class Verdict:
    mutant: str
    area: str
    caught: bool
    by: str
    mode: str  # black-box | black-box (2nd run) | black-box TLC | white-box only | - (survived)
    expected: str
    as_expected: bool
    seconds: float
    flagged: list[str] = field(default_factory=list)  # KAFKA-level rows the clean node does not get
    rerun: bool = False
    opts: str = ""  # the extra pytest options of the mutant's runs
    clause: str = ""  # the clause of the failed check that caught it
    # --confirm: the catching case run again alone against the mutant ("2/2": caught again by it; "1/2": a
    # flaky kill; "": not confirmed, e.g. a white-box unit check, which is deterministic)
    repro: str = ""


def judge(m: Any, runs: list[Run], clean_rows: set[str], unit: bool | None = None) -> Verdict:
    bb = runs[0]
    seconds = round(sum(r.seconds for r in runs), 1)
    flagged = sorted(set(bb.kafka_rows) - clean_rows)
    expected = ", ".join(m.expect)
    if bb.caught and not bb.failed and bb.strict:
        by = f"{', '.join(bb.kafka_cases)} [{', '.join(flagged) or 'a skip'}]"
        return Verdict(m.name, m.area, True, by, "black-box (--strict)", expected,
                       bool(set(bb.kafka_cases) & set(m.expect)), seconds, flagged)
    if bb.caught:
        by = ", ".join(bb.failed) if bb.failed else bb.note
        return Verdict(m.name, m.area, True, by, "black-box", expected, bool(set(bb.failed) & set(m.expect)),
                       seconds, flagged, clause=bb.clause)
    if unit:
        return Verdict(m.name, m.area, True, "tests/mutants/whitebox.py (not observable on the wire)",
                       "white-box (unit)", expected, m.white_box_only, seconds, flagged)
    wb = runs[1] if len(runs) > 1 else None
    if bb.timed_out or (wb is not None and wb.timed_out):
        return Verdict(m.name, m.area, False, (wb or bb).note, "timeout", expected, False, seconds, flagged)
    if wb is not None and wb.caught:
        if wb.failed:
            by, mode = ", ".join(wb.failed), "black-box (2nd run)"
            return Verdict(m.name, m.area, True, by, mode, expected, m.white_box_only, seconds, flagged,
                           clause=wb.clause)
        elif wb.tlc_black_box == "FAIL":
            by, mode = "TLC black-box (harness trace)", "black-box TLC"
        else:
            by, mode = "TLC node trace", "white-box only"
        return Verdict(m.name, m.area, True, by, mode, expected, m.white_box_only, seconds, flagged)
    return Verdict(m.name, m.area, False, "-", "-", expected, False, seconds, flagged)


def catching_cases(v: Verdict) -> list[str]:
    """The case ids whose failure (or KAFKA-level difference, with --strict) caught the mutant."""
    if v.mode == "black-box (--strict)":
        return v.by.split(" [", 1)[0].split(", ")
    first = v.by.split(", ")[0]
    if v.mode in ("black-box", "black-box (2nd run)") and "/" in first and " " not in first:
        return [first]  # a case id (else the note of a run that ended without results)
    return []


def confirm(v: Verdict, m: Any, workdir: Path, timeout_s: float) -> str:
    """No flaky kills: run the case that caught the mutant again, alone, against it. "2/2" when it fails (or
    reports the difference) again, "1/2" when it passes this time."""
    cases = catching_cases(v)
    if not cases:
        return ""
    run = run_catalog(m.name, False, workdir / "confirm", timeout_s, cases, extra=m.args)
    # the same case catches it again: by a failed check, or (with --strict) by the KAFKA-level difference
    if set(run.failed) & set(cases) or (run.strict and set(run.kafka_cases) & set(cases)):
        return "2/2"
    return "1/2"


def print_table(verdicts: list[Verdict], clean: Run, out: Any = sys.stdout) -> None:
    headers = ["mutant", "area", "caught", "by", "clause", "mode", "opts", "expected", "s"]
    if any(v.repro for v in verdicts):
        headers.insert(6, "repro")
    rows = [
        [
            v.mutant, v.area, "yes" if v.caught else "NO",
            v.by + (" (rerun)" if v.rerun else ""), v.clause, v.mode,
            *([v.repro or "-"] if len(headers) > 9 else []), v.opts,
            ("" if v.as_expected or not v.caught else "UNEXPECTED; ") + v.expected, f"{v.seconds:.0f}",
        ]
        for v in verdicts
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    widths = [min(w, 60) for w in widths]

    def line(cells: list[str]) -> str:
        return "  ".join(c[: widths[i]].ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    print(f"unmutated node: {'PASS' if not clean.caught else 'FAIL ' + (', '.join(clean.failed) or clean.note)}"
          f" ({clean.seconds:.0f} s)", file=out)
    print(line(headers), file=out)
    print(line(["-" * w for w in widths]), file=out)
    for r in rows:
        print(line(r), file=out)
    caught = sum(v.caught for v in verdicts)
    print(f"\n{caught}/{len(verdicts)} mutants caught "
          f"({sum(v.mode == 'black-box' for v in verdicts)} black-box, "
          f"{sum(v.mode == 'black-box (--strict)' for v in verdicts)} black-box with --strict, "
          f"{sum(v.mode == 'black-box TLC' for v in verdicts)} black-box TLC, "
          f"{sum(v.mode == 'white-box only' for v in verdicts)} white-box only, "
          f"{sum(v.mode == 'white-box (unit)' for v in verdicts)} white-box unit check: documented as not "
          "observable on the wire)", file=out)
    for v in verdicts:
        if v.flagged:
            print(f"  {v.mutant}: reported as differing from Kafka: {', '.join(v.flagged)}", file=out)
    if any(v.repro for v in verdicts):
        flaky = [v.mutant for v in verdicts if v.repro == "1/2"]
        confirmed = sum(v.repro == "2/2" for v in verdicts)
        print(f"kills reproduced: {confirmed} in 2 of 2 runs (the catching case alone, again)"
              + (f"; NOT reproduced: {', '.join(flaky)}" if flaky else ""), file=out)
    survivors = [v for v in verdicts if not v.caught]
    if survivors:
        print("survivors (expected catcher, or the scenario still to write):", file=out)
        for v in survivors:
            print(f"  {v.mutant}: {v.expected}", file=out)
    known = [v.mutant for v in verdicts if v.caught and v.expected.startswith("pending:")]
    if known:
        print(f"caught although registered as waiting for a scenario (move to MUTANTS): {', '.join(known)}", file=out)


def main(argv: list[str] | None = None) -> int:
    reg = load_registry()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mutants", nargs="*", help="mutant names (default: all)")
    ap.add_argument("--tlc", action="store_true", help="run survivors again with TLC (node trace + black-box)")
    ap.add_argument("--timeout", type=float, default=420, help="seconds per black-box catalog run (default 420)")
    ap.add_argument("--tlc-timeout", type=float, default=1200, help="seconds per run with TLC (default 1200)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1; timing cases may flake)")
    ap.add_argument("--json", type=Path, help="also write the verdicts here")
    ap.add_argument("--workdir", type=Path, help="reports go here (default: a temporary directory)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--area", action="append", default=[],
                    help="only the mutants whose area starts with this (repeatable; e.g. reconfig: the KIP-853 ones)")
    ap.add_argument("--case", action="append", default=[], dest="cases",
                    help="run only the cases matching this pattern (fnmatch, repeatable; a quick look: a mutant that "
                         "survives a subset may be caught by the rest of the catalog)")
    ap.add_argument("--own-cases", action="store_true",
                    help="run each mutant first against only the cases the registry says catch it (the case of the "
                         "clause it breaks); the whole catalog only when they do not")
    ap.add_argument("--confirm", action="store_true",
                    help="run the case that caught each mutant again, alone: a kill must reproduce in 2 of 2 runs "
                         "(exit 1 if one does not)")
    ap.add_argument("--confirm-from", type=Path, metavar="JSON",
                    help="only the --confirm pass, for the verdicts of an earlier run's --json file")
    opts = ap.parse_args(argv)
    if opts.confirm_from:
        return confirm_from(reg, opts.confirm_from, opts.workdir, opts.timeout, opts.json)
    everyone = [*reg.MUTANTS.values(), *reg.SURVIVORS.values()]
    if opts.list:
        for m in everyone:
            print(f"{m.name:36} {m.area:22} {', '.join(m.expect)}")
        return 0
    # every mutant, the known survivors (a scenario still to write: reg.SURVIVORS) included
    chosen = [reg.lookup(n) for n in opts.mutants] if opts.mutants else everyone
    if opts.area:
        chosen = [m for m in chosen if any(m.area.startswith(a) for a in opts.area)]
    cases: list[str] | None = opts.cases or None
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="kraft-tck-mutants-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"reports in {workdir}", file=sys.stderr)

    # The unmutated node, once per set of options the chosen mutants need (a 5-voter quorum, --strict).
    cleans: dict[tuple[str, ...], Run] = {}
    for extra in sorted({(), *(m.args for m in chosen)}):
        clean = run_catalog("none", False, workdir, opts.timeout, cases, extra=extra)
        if clean.caught:  # timing tests may flake on a loaded machine: once more before concluding
            print(f"unmutated node {' '.join(extra)} failed ({clean.failed or clean.note}); running it again",
                  file=sys.stderr)
            clean = run_catalog("none", False, workdir / "again", opts.timeout, cases, extra=extra)
        cleans[extra] = clean
    clean = cleans[()]

    def report_line(v: Verdict) -> None:
        print(f"{v.mutant}: {'caught by ' + v.by if v.caught else 'SURVIVED'} [{v.mode}] {v.seconds:.0f} s",
              file=sys.stderr, flush=True)

    def black_box(m: Any) -> tuple[list[Run], bool]:
        own = [c for c in m.expect if "/" in c and " " not in c]  # case ids (not "white-box", "pending: ...")
        if opts.own_cases and own and cases is None:
            run = run_catalog(m.name, False, workdir / "own", opts.timeout, own, extra=m.args)
            if set(run.failed) & set(m.expect) or (run.strict and set(run.kafka_cases) & set(m.expect)):
                report_line(judge(m, [run], set(cleans[m.args].kafka_rows)))
                return [run], False
            # its own cases did not catch it: the whole catalog decides (and names what does, if anything)
        runs, rerun = [run_catalog(m.name, False, workdir, opts.timeout, cases, extra=m.args)], False
        if runs[0].failed and not set(runs[0].failed) & set(m.expect):
            # caught by a case nobody expected: a flake of a timing case, or a real side effect; run again
            runs, rerun = [run_catalog(m.name, False, workdir / "again", opts.timeout, cases, extra=m.args)], True
        if runs[0].caught:  # progress as it comes (a whole registry takes an hour or more)
            report_line(judge(m, runs, set(cleans[m.args].kafka_rows)))
        return runs, rerun

    with ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        first = list(pool.map(black_box, chosen))
        units = {i: white_box_unit(m) for i, (m, (runs, _)) in enumerate(zip(chosen, first, strict=True))
                 if not runs[0].caught}
        survivors = [i for i, (runs, _) in enumerate(first)
                     if not runs[0].caught and not runs[0].timed_out and not units.get(i)]
        if opts.tlc and survivors:
            # TLC on the unmutated node first: a white-box verdict means something only if it passes.
            clean_tlc = run_catalog("none", True, workdir, opts.tlc_timeout, cases)
            print(f"unmutated node with TLC: node trace {clean_tlc.tlc_node}, black-box {clean_tlc.tlc_black_box}"
                  f"{' ' + clean_tlc.note if clean_tlc.note else ''} ({clean_tlc.seconds:.0f} s)", file=sys.stderr)
            cleans[("--tlc",)] = clean_tlc
            if not clean_tlc.caught and not clean_tlc.timed_out:
                second = list(pool.map(lambda i: run_catalog(chosen[i].name, True, workdir, opts.tlc_timeout, cases,
                                                              extra=chosen[i].args), survivors))
                for i, wb in zip(survivors, second, strict=True):
                    first[i][0].append(wb)
    verdicts: list[Verdict] = []
    for i, (m, (runs, rerun)) in enumerate(zip(chosen, first, strict=True)):
        v = judge(m, runs, set(cleans[m.args].kafka_rows), units.get(i))
        v.rerun, v.opts = rerun, " ".join(m.args)
        verdicts.append(v)
        if not runs[0].caught:
            report_line(v)
    if opts.confirm:
        by_name = {m.name: m for m in chosen}
        for v in verdicts:
            v.repro = confirm(v, by_name[v.mutant], workdir, opts.timeout) if v.caught else ""
    print_table(verdicts, clean)
    for extra, other in cleans.items():
        if extra:
            if extra == ("--tlc",):
                print(f"unmutated node with TLC: node trace {other.tlc_node}, black-box {other.tlc_black_box} "
                      f"({other.seconds:.0f} s)")
                continue
            state = "PASS" if not other.caught else "FAIL " + (", ".join(other.failed) or other.note)
            print(f"unmutated node with {' '.join(extra)}: {state} ({other.seconds:.0f} s)")
    if opts.json:
        doc = {"clean": {" ".join(k) or "default": asdict(v) for k, v in cleans.items()},
               "verdicts": [asdict(v) for v in verdicts]}
        opts.json.write_text(json.dumps(doc, indent=1))
    if any(c.caught for c in cleans.values()):
        return 2
    return 0 if all(v.caught and v.repro != "1/2" for v in verdicts) else 1


def confirm_from(reg: ModuleType, path: Path, workdir: Path | None, timeout_s: float, out_json: Path | None) -> int:
    """The --confirm pass over an earlier run's verdicts (its --json file): each kill once more."""
    doc: dict[str, Any] = json.loads(path.read_text())
    workdir = workdir or Path(tempfile.mkdtemp(prefix="kraft-tck-mutants-confirm-"))
    workdir.mkdir(parents=True, exist_ok=True)
    verdicts = [Verdict(**v) for v in doc["verdicts"]]
    for v in verdicts:
        if v.caught:
            v.repro = confirm(v, reg.lookup(v.mutant), workdir, timeout_s)
            print(f"{v.mutant}: {v.repro or 'no case to rerun (' + v.mode + ')'}", file=sys.stderr, flush=True)
    clean = Run(**doc["clean"]["default"])
    print_table(verdicts, clean)
    if out_json:
        doc["verdicts"] = [asdict(v) for v in verdicts]
        out_json.write_text(json.dumps(doc, indent=1))
    return 0 if all(v.caught and v.repro != "1/2" for v in verdicts) and not clean.caught else 1


if __name__ == "__main__":
    sys.exit(main())
