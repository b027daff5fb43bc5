"""Whole conformance catalog against the embedded reference node: wall time, and the share of it spent
waiting on the target's protocol timers (election/fetch timeouts), which no harness speed-up can remove.

Goal: under 60 s with the reference node's default test timeouts. Prints one row per run and
per KIP section, from the harness's own results.json. Each run is made twice, as ``make conformance`` runs
it (TLC validation of the target's node trace at the end) and with ``--no-tlc``, so the price of the
validation shows side by side.

    python bench/bench_conformance.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(out: Path, *extra: str) -> tuple[float, dict]:  # type: ignore[type-arg]
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
                           "--report", str(out), *extra], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        raise SystemExit(f"the catalog failed (exit {proc.returncode}); fix that before benchmarking it")
    return wall, json.loads((out / "results.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one run")
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    print(f"{'run':>4} {'wall s':>8} {'no-tlc s':>9} {'cases s':>8} {'waiting s':>10} {'waiting %':>10} "
          f"{'cases':>6}  goal: wall < 60 s")
    by_section: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for i in range(1, runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            wall, res = run_once(Path(tmp))
        with tempfile.TemporaryDirectory() as tmp:
            bare, _ = run_once(Path(tmp), "--no-tlc")
        cases = res["durationS"]
        wait = res["protocolWaitS"]
        share = 100 * wait / cases if cases else 0.0
        print(f"{i:>4} {wall:>8.1f} {bare:>9.1f} {cases:>8.1f} {wait:>10.1f} {share:>9.0f}% {len(res['cases']):>6}  "
              f"{'ok' if wall < 60 else 'MISSED'}")
        for c in res["cases"]:
            section = c["section"]
            by_section[section][0] += c.get("durationS", 0.0) / runs
            by_section[section][1] += c.get("waitS", 0.0) / runs
    print(f"\n{'section':<32} {'mean s':>8} {'waiting s':>10}")
    for section, (dur, wait) in sorted(by_section.items(), key=lambda kv: -kv[1][0]):
        print(f"{section:<32} {dur:>8.2f} {wait:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
