"""A reference node started by hand, as conformance/README.md says, then the harness after a delay.

The README's steps for a node you run yourself::

    kraft-tck profile --target-id 1 --harness-ports P2,P3 --target-port P1 > server.properties
    kraft-tck format --config server.properties --cluster-id X
    kraft-tck node --config server.properties
    pytest conformance --target 127.0.0.1:P1 --cluster-id X --harness-ports P2,P3 \\
        --target-election-timeout-ms ... --target-fetch-timeout-ms ... --target-broker-session-timeout-ms ...

Until the harness listens, the node's Vote requests reach nobody: it holds elections on its own (an epoch
every election timeout or so), and the harness finds it as the Candidate of some epoch.  The verdict,
the black-box TLC item included, must not depend on how long that took.  ``hand_started_run`` does the
steps above with a delay of D seconds before pytest; ``tests/conformance/test_hand_started.py`` runs it
once (D = 5), and ``make gate-selfcheck`` (this module as a script) runs it several times per delay and
prints a table::

    .venv/bin/python tests/conformance/hand_started_runs.py --runs 5 --delays 0,5,30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "aGFuZC1zdGFydGVkLW5vZGU"  # 22 characters, like a Kafka cluster id
ELECTION_MS, FETCH_MS, SESSION_MS = 300, 600, 1500
BLACKBOX_ITEM = "TLC black-box validation of the session harness trace"


def _kraft_tck() -> list[str]:
    """The ``kraft-tck`` command of this interpreter's environment."""
    script = Path(sys.executable).parent / "kraft-tck"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from kraft_tck.reference.cli import main; main()"]


def _free_ports(count: int) -> list[int]:
    from kraft_tck.conformance.target import free_ports

    return list(free_ports(count))


@dataclass
class HandStartedRun:
    delay_s: float
    returncode: int
    blackbox: str  # the black-box TLC item's status in results.json (PASS, FAIL, ...; "missing")
    seconds: float
    summary: str  # pytest's last line
    failure: str  # what failed, short ("" when the run passed)
    workdir: Path

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.blackbox == "PASS"


def hand_started_run(
    delay_s: float, workdir: Path, pytest_args: tuple[str, ...] = (), timeout_s: float = 900
) -> HandStartedRun:
    """Start a reference node by hand in ``workdir``, wait ``delay_s``, run the whole catalog against it."""
    t0 = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    p1, p2, p3 = _free_ports(3)
    data, config, report = workdir / "data", workdir / "server.properties", workdir / "report"
    cli = _kraft_tck()
    profile = subprocess.run(
        [*cli, "profile", "--target-id", "1", "--harness-ports", f"{p2},{p3}", "--target-port", str(p1),
         "--data-dir", str(data), "--election-timeout-ms", str(ELECTION_MS), "--fetch-timeout-ms", str(FETCH_MS)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    config.write_text(profile.stdout)
    subprocess.run(
        [*cli, "format", "--config", str(config), "--cluster-id", CLUSTER],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    node_out = (workdir / "node.out").open("wb")
    node = subprocess.Popen(
        [*cli, "node", "--config", str(config)], stdout=node_out, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        time.sleep(delay_s)
        if node.poll() is not None:
            raise RuntimeError(f"the hand-started node exited with {node.returncode}: see {workdir / 'node.out'}")
        cmd = [
            sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
            "--target", f"127.0.0.1:{p1}", "--cluster-id", CLUSTER, "--harness-ports", f"{p2},{p3}",
            "--target-election-timeout-ms", str(ELECTION_MS), "--target-fetch-timeout-ms", str(FETCH_MS),
            "--target-broker-session-timeout-ms", str(SESSION_MS), "--report", str(report), *pytest_args,
        ]  # fmt: skip
        proc = subprocess.run(cmd, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=timeout_s)
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(10)
        node_out.close()
    (workdir / "pytest.out").write_text(proc.stdout + proc.stderr)
    results: dict[str, Any] = {}
    if (report / "results.json").exists():
        results = json.loads((report / "results.json").read_text())
    blackbox = str((results.get("tlcBlackBox") or {}).get("status", "missing"))
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith("FAILED") or ln.startswith("ERROR")]
    message = str((results.get("tlcBlackBox") or {}).get("message", ""))
    failure = "; ".join(failed)[:800]
    if blackbox != "PASS":
        failure = (failure + " | black-box: " + message[:1500]).strip(" |")
    return HandStartedRun(
        delay_s, proc.returncode, blackbox, time.monotonic() - t0, lines[-1] if lines else "", failure, workdir
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per delay (default 5)")
    parser.add_argument("--delays", default="0,5,30", help="seconds between starting the node and pytest")
    parser.add_argument("--keep", help="keep each run's directory under this one (default: a temporary one)")
    args = parser.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kraft-tck-hand-started-"))
    rows: list[tuple[float, int, int, list[str]]] = []
    for delay in delays:
        failures: list[str] = []
        for k in range(args.runs):
            run = hand_started_run(delay, base / f"d{delay:g}-{k}")
            status = "pass" if run.passed else "FAIL"
            print(f"D={delay:g}s run {k + 1}/{args.runs}: {status} in {run.seconds:.0f}s ({run.summary}; black-box "
                  f"{run.blackbox})", flush=True)  # fmt: skip
            if not run.passed:
                failures.append(f"{run.workdir}: {run.failure}")
            elif not args.keep:
                shutil.rmtree(run.workdir, ignore_errors=True)
        rows.append((delay, args.runs, len(failures), failures))
    print("\n| delay D (s) | runs | failures |\n| --- | --- | --- |")
    for delay, runs, failed, _ in rows:
        print(f"| {delay:g} | {runs} | {failed} |")
    for delay, _, _, failures in rows:
        for f in failures:
            print(f"D={delay:g}s: {f}")
    return 1 if any(failed for _, _, failed, _ in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
