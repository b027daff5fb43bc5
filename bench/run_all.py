"""Run every benchmark in bench/ in turn (``make bench``); each prints its own side-by-side table.

``--quick`` is passed to scripts that accept it (see each script's --help) so the whole set stays short.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def accepts_quick(script: Path) -> bool:
    return "--quick" in script.read_text(encoding="utf-8")


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        args = [sys.executable, str(script)]
        if quick and accepts_quick(script):
            args.append("--quick")
        print(f"\n=== {script.name} {' '.join(args[2:])}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.call(args)
        print(f"=== {script.name}: exit {rc} in {time.monotonic() - t0:.1f}s", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"\nbenchmarks that failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
