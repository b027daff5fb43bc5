"""TLC on kraft-tck's bounded model beside a public KRaft model at a comparable bound.

Run: ``python bench/bench_tlc_models.py [--public-model PATH] [--workers 2] [--timeout 600]``
(``--quick``: MCKRaftSmall.cfg beside the public model at one election; ``--snapshots``: also a row for
tla/MCKRaftSnapshot.cfg, the KIP-630 model with snapshots on, about 3 minutes on one worker).

Side by side, the same TLC (the jar kraft_tck.tla.tlc finds), the same JVM options and workers:

* ``kraft-tck``: tla/MCKRaft.tla with MCKRaft.cfg, what ``make tlc`` checks;
* ``Vanlightly``: Jack Vanlightly's KRaft.tla (github.com/Vanlightly/raft-tlaplus,
  specifications/pull-raft/KRaft.tla, MIT licence) with bench/public_models/VanlightlyKRaft.cfg.
  Its source is not part of this repository: pass the file with ``--public-model`` or put it at
  bench/public_models/KRaft.tla (see bench/public_models/README.md); without it the row says so.

How the bounds correspond, and where they do not (also in bench/public_models/README.md): both have
3 voters, symmetry over them, no restarts, no message loss or duplication, and two rounds of
elections.  kraft-tck bounds each node's epoch (MaxEpoch 2: a node may stand in epoch 1 and 2, so
up to six candidacies), Vanlightly counts elections globally (MaxElections 2: two candidacies in all,
epochs up to 3).  kraft-tck's logs hold the LeaderChange record of each epoch (up to 2 records, no
client values); Vanlightly's hold client values only (one value, appended once: up to 1 record).
kraft-tck bounds distinct messages in flight (3); Vanlightly sends each vote and BeginQuorum request
once and no identical Fetch response twice, with no bound on the bag.  kraft-tck also models
EndQuorumEpoch/Resign, the leader progress timeout, BeginQuorumEpoch responses and parked long polls,
which Vanlightly leaves out.  Distinct states therefore measure each model's own bound, not one
common state space: the comparison is of what a full check costs, not of equal coverage.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from kraft_tck.tla.tlc import DEFAULT_CONFIG, SMALL_CONFIG, SPEC_DIR, TlcResult, run_tlc

SNAPSHOT_CONFIG = "MCKRaftSnapshot.cfg"

HERE = Path(__file__).resolve().parent
PUBLIC_DIR = HERE / "public_models"
PUBLIC_CFG = PUBLIC_DIR / "VanlightlyKRaft.cfg"
PUBLIC_SOURCE = (
    "https://github.com/Vanlightly/raft-tlaplus/blob/cc86474227b163b074f211226302ecbd62789f94/"
    "specifications/pull-raft/KRaft.tla"
)
GOAL_SECONDS = 600.0
BOUND_WIDTH = 56
# TLC's progress line: "Progress(26) at ...: 5,697,285 states generated (...), 1,908,612 distinct states found"
# What kraft_tck.tla.tlc.run_tlc appends to the output when it stops TLC at the timeout.
STOPPED = "kraft-tck stopped TLC after the"
_PROGRESS = re.compile(r"^Progress\((\d+)\) at .*?, ([\d,]+) distinct states found", re.M)


def run_public(model: Path, max_elections: int, workers: int, timeout: float) -> TlcResult:
    """Vanlightly's KRaft.tla in a directory of its own (its module name is KRaft, like ours)."""
    with tempfile.TemporaryDirectory(prefix="bench-public-") as tmp:
        work = Path(tmp)
        (work / "KRaft.tla").write_text(model.read_text())
        cfg = PUBLIC_CFG.read_text().replace("MAX_ELECTIONS", str(max_elections))
        (work / "VanlightlyKRaft.cfg").write_text(cfg)
        return run_tlc("KRaft.tla", "VanlightlyKRaft.cfg", spec_dir=work, workers=workers, timeout=timeout)


def our_bound(config: str) -> str:
    """The bound of a kraft-tck config, read from its constants (MCKRaftSmall.cfg is epoch 1, log 1)."""
    text = (SPEC_DIR / config).read_text()

    def const(name: str) -> str:
        found = re.search(rf"^\s*{name}\s*=\s*(\S+)", text, re.M)
        return found.group(1) if found else "?"

    return f"{config}: 3 voters, epoch<={const('MaxEpoch')}/node, log<={const('MaxLogLen')}, {const('MaxMsgs')} msgs"


def figures(result: TlcResult) -> dict[str, object]:
    """Distinct states and depth of a run; for a run stopped at the timeout, the last progress line's
    figures, which are lower bounds (TLC's "Progress(D)" is the BFS level it had reached)."""
    stopped = STOPPED in result.output
    reached = _PROGRESS.findall(result.output)
    if stopped and result.distinct_states is None and reached:
        level, distinct = reached[-1]
        return {"stopped": True, "distinct_at_least": int(distinct.replace(",", "")), "depth_at_least": int(level)}
    return {"stopped": stopped, "distinct": result.distinct_states, "depth": result.depth}


def row(name: str, bound: str, result: TlcResult | None, note: str = "") -> str:
    if result is None:
        return f"{name:<11} {bound:<{BOUND_WIDTH}} {note}"
    fig = figures(result)
    if "distinct_at_least" in fig:
        distinct, depth = f">={fig['distinct_at_least']:,}", f">={fig['depth_at_least']}"
        verdict = (
            f"not finished in {result.seconds:.0f} s, >= {fig['distinct_at_least']:,} distinct states,"
            f" depth >= {fig['depth_at_least']}"
        )
    else:
        distinct = f"{result.distinct_states:,}" if result.distinct_states is not None else "?"
        depth = str(result.depth) if result.depth is not None else "?"
        verdict = "OK" if result.ok else (f"VIOLATED {result.violated}" if result.violated else "DID NOT FINISH")
        if not result.ok and not result.violated and result.errors and STOPPED not in result.output:
            verdict = f"ERROR {result.errors[0]}"
    return f"{name:<11} {bound:<{BOUND_WIDTH}} {distinct:>12} {depth:>6} {result.seconds:>8.1f} {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--public-model", type=Path, default=PUBLIC_DIR / "KRaft.tla")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--timeout",
        type=float,
        default=GOAL_SECONDS,
        help="seconds per model; a check still running is stopped and reported with the lower bounds it reached",
    )
    parser.add_argument("--quick", action="store_true", help="MCKRaftSmall.cfg and one election")
    parser.add_argument("--snapshots", action="store_true", help=f"also check {SNAPSHOT_CONFIG} (KIP-630)")
    args = parser.parse_args()
    config = SMALL_CONFIG if args.quick else DEFAULT_CONFIG
    elections = 1 if args.quick else 2
    theirs_bound = f"3 servers, MaxElections={elections}, 1 value"
    # run_tlc looks at the clock when TLC prints a line (a progress line a minute), so a check still
    # running at the timeout is stopped up to a minute after it; the seconds column is the real time.
    print(
        f"TLC, {args.workers} workers, stopped at TLC's first progress line after {args.timeout:.0f} s"
        " (goal: full check < 10 min)"
    )
    print(f"{'model':<11} {'bound':<{BOUND_WIDTH}} {'distinct':>12} {'depth':>6} {'seconds':>8} verdict")
    ours = run_tlc(config=config, workers=args.workers, timeout=args.timeout)
    print(row("kraft-tck", our_bound(config), ours), flush=True)
    theirs = None
    if args.public_model.is_file():
        theirs = run_public(args.public_model, elections, args.workers, args.timeout)
        print(row("Vanlightly", theirs_bound, theirs))
    else:
        note = f"not run: no {args.public_model} (get it from {PUBLIC_SOURCE})"
        print(row("Vanlightly", theirs_bound, None, note))
    summary: dict[str, object] = {
        "kraft-tck": {"config": config, **figures(ours), "seconds": round(ours.seconds, 1), "ok": ours.ok},
        "vanlightly": None
        if theirs is None
        else {"max_elections": elections, **figures(theirs), "seconds": round(theirs.seconds, 1), "ok": theirs.ok},
    }
    if args.snapshots:
        snap = run_tlc(config=SNAPSHOT_CONFIG, workers=args.workers, timeout=args.timeout)
        print(row("snapshots", our_bound(SNAPSHOT_CONFIG), snap), flush=True)
        summary["kraft-tck-snapshots"] = {
            "config": SNAPSHOT_CONFIG, **figures(snap), "seconds": round(snap.seconds, 1), "ok": snap.ok}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
