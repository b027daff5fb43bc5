"""TLC on kraft-tck's bounded model beside a public KRaft model at a comparable bound.

Run: ``python bench/bench_tlc_models.py [--public-model PATH] [--workers 2] [--timeout 600]``
(``--quick``: MCKRaftSmall.cfg beside the public model at one election).

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

from kraft_tck.tla.tlc import DEFAULT_CONFIG, SMALL_CONFIG, TlcResult, run_tlc

HERE = Path(__file__).resolve().parent
PUBLIC_DIR = HERE / "public_models"
PUBLIC_CFG = PUBLIC_DIR / "VanlightlyKRaft.cfg"
PUBLIC_SOURCE = (
    "https://github.com/Vanlightly/raft-tlaplus/blob/cc86474227b163b074f211226302ecbd62789f94/"
    "specifications/pull-raft/KRaft.tla"
)
GOAL_SECONDS = 600.0
# TLC's progress line: "Progress(26) at ...: 5,697,285 states generated (...), 1,908,612 distinct states found"
_PROGRESS = re.compile(r"^Progress\((\d+)\) at .*?, ([\d,]+) distinct states found", re.M)


def run_public(model: Path, max_elections: int, workers: int, timeout: float) -> TlcResult:
    """Vanlightly's KRaft.tla in a directory of its own (its module name is KRaft, like ours)."""
    with tempfile.TemporaryDirectory(prefix="bench-public-") as tmp:
        work = Path(tmp)
        (work / "KRaft.tla").write_text(model.read_text())
        cfg = PUBLIC_CFG.read_text().replace("MAX_ELECTIONS", str(max_elections))
        (work / "VanlightlyKRaft.cfg").write_text(cfg)
        return run_tlc("KRaft.tla", "VanlightlyKRaft.cfg", spec_dir=work, workers=workers, timeout=timeout)


def row(name: str, bound: str, result: TlcResult | None, note: str = "") -> str:
    if result is None:
        return f"{name:<11} {bound:<44} {note}"
    verdict = "OK" if result.ok else (f"VIOLATED {result.violated}" if result.violated else "DID NOT FINISH")
    distinct = f"{result.distinct_states:,}" if result.distinct_states is not None else "?"
    depth = str(result.depth) if result.depth is not None else "?"
    reached = _PROGRESS.findall(result.output)
    if result.distinct_states is None and reached:  # stopped: how far it got, at least
        depth, distinct = f">={reached[-1][0]}", f">={reached[-1][1]}"
    return f"{name:<11} {bound:<44} {distinct:>12} {depth:>6} {result.seconds:>8.1f} {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--public-model", type=Path, default=PUBLIC_DIR / "KRaft.tla")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=GOAL_SECONDS, help="seconds per TLC run")
    parser.add_argument("--quick", action="store_true", help="MCKRaftSmall.cfg and one election")
    args = parser.parse_args()
    config = SMALL_CONFIG if args.quick else DEFAULT_CONFIG
    elections = 1 if args.quick else 2
    print(f"TLC, {args.workers} workers, at most {args.timeout:.0f} s per model (goal: full check < 10 min)")
    print(f"{'model':<11} {'bound':<44} {'distinct':>12} {'depth':>6} {'seconds':>8} verdict")
    ours = run_tlc(config=config, workers=args.workers, timeout=args.timeout)
    print(row("kraft-tck", f"{config}: 3 voters, epoch<=2/node, log<=2, 3 msgs", ours), flush=True)
    theirs = None
    if args.public_model.is_file():
        theirs = run_public(args.public_model, elections, args.workers, args.timeout)
        print(row("Vanlightly", f"3 servers, MaxElections={elections}, 1 value", theirs))
    else:
        print(
            row(
                "Vanlightly",
                f"3 servers, MaxElections={elections}, 1 value",
                None,
                f"not run: no {args.public_model} (get it from {PUBLIC_SOURCE})",
            )
        )
    print(
        json.dumps(
            {
                "kraft-tck": {
                    "config": config,
                    "distinct": ours.distinct_states,
                    "depth": ours.depth,
                    "seconds": round(ours.seconds, 1),
                    "ok": ours.ok,
                },
                "vanlightly": None
                if theirs is None
                else {
                    "max_elections": elections,
                    "distinct": theirs.distinct_states,
                    "depth": theirs.depth,
                    "seconds": round(theirs.seconds, 1),
                    "ok": theirs.ok,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
