"""Detection power of the simulator: the default run of ``kraft-tck simulate`` against every mutant.

Each mutant of tests/mutants/mutants.py runs as the core of every node of the simulator (traces/sim: a core
mutant plugs in through ``simulate(core_class=...)``; a shell mutant's ordering of persist and send through
``SimConfig.persist_after_send_ms``, the simulator's write-behind shell). The run is the default one of
``kraft-tck simulate`` — its seeds (0..99), nodes, duration, fault profile, write rate, brokers, observer and
foreign-cluster sender, Fetch answer cap (``--fetch-max-bytes``), read from the command's own defaults — except that
KIP-853 mutants (areas ``reconfig-*``) run the ``reconfig`` profile: at kraft.version 0 (the default profile's static
voters) their code never runs. A mutant's run stops at its first caught seed. No trace files are written (``--out
DIR`` writes them): the online checks are the same either way.

Each mutant's registry entry says which safety invariant it breaks (``Mutant.safety``, or None). One row per
mutant: that invariant, whether the simulator caught it (by which invariant, at which seed) and the seconds.

Exit status: 0 when the correct core passes the same seeds, every safety mutant is caught by a safety invariant,
and no mutant classified None is caught by one (its classification would be wrong); 1 otherwise; 2 when the correct
core fails.

    .venv/bin/python bench/mutants_sim.py                       # all mutants (make mutants-sim)
    .venv/bin/python bench/mutants_sim.py --safety-only         # only the ones the criterion is about
    .venv/bin/python bench/mutants_sim.py forget-vote --seeds 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MUTANTS_PY = REPO / "tests" / "mutants" / "mutants.py"

#: What the simulator reports that is not a safety invariant: the core raised (``CoreException``, or a
#: ``SafetyViolation`` naming no invariant), or the simulation itself stopped (``SimulationError``).
NOT_SAFETY = ("CoreException", "SafetyViolation", "SimulationError")


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


def default_run() -> dict[str, Any]:
    """The defaults of ``kraft-tck simulate`` (its click options), so this runner follows the command."""
    from kraft_tck.traces.cli import simulate_cmd

    out: dict[str, Any] = {}
    for p in simulate_cmd.params:
        if p.name is not None:  # a flag's default is off (click keeps an unset sentinel there)
            out[p.name] = False if getattr(p, "is_flag", False) else p.default
    return out


def safety_invariants() -> frozenset[str]:
    from kraft_tck.traces.sim.cluster import CLUSTER_ID_ISOLATION
    from kraft_tck.traces.sim.invariants import INVARIANTS

    return frozenset((*INVARIANTS, CLUSTER_ID_ISOLATION))


@dataclass
class SimRun:
    """One mutant's default run."""

    mutant: str
    safety: str | None
    safety_also: tuple[str, ...]
    profile: str
    seeds_run: int
    seconds: float
    invariant: str | None = None  # what the simulator caught, None: nothing in seeds_run seeds
    seed: int | None = None
    detail: str = ""

    @property
    def caught(self) -> bool:
        return self.invariant is not None

    def verdict(self, safe_names: frozenset[str]) -> str:
        """"ok" when the row is as it should be; otherwise what is wrong."""
        caught_safety = self.invariant in safe_names
        if self.safety is None:
            return f"CLASSIFIED None, BREAKS {self.invariant}" if caught_safety else "ok"
        if not caught_safety:
            return "MISSED" if not self.caught else f"MISSED (only {self.invariant})"
        if self.invariant != self.safety and self.invariant not in self.safety_also:
            return f"ok (by {self.invariant}, not the named {self.safety})"
        return "ok"


def sim_config(m: Any, seed: int, defaults: dict[str, Any]) -> Any:
    """The ``SimConfig`` of ``seed`` of the default run (``defaults``: ``default_run()``) for mutant ``m``: its profile
    and its shell's ordering bug (``Mutant.sim_config``)."""
    from kraft_tck.traces.cli import parse_duration_ms
    from kraft_tck.traces.sim import SimConfig

    profile = m.sim_profile if defaults["faults"] == "default" else defaults["faults"]
    return SimConfig(seed=seed, nodes=defaults["nodes"], duration_ms=parse_duration_ms(defaults["duration"]),
                     profile=profile, write_rate=defaults["write_rate"], brokers=defaults["brokers"],
                     observers=defaults["observers"], foreign_rate=defaults["foreign_rate"],
                     pre_vote=defaults["pre_vote"], snapshot_bytes=defaults["snapshot_bytes"],
                     joiners=defaults["joiners"], fetch_max_bytes=defaults["fetch_max_bytes"] or None, **m.sim_config)


def run_mutant(name: str, m: Any, seeds: range, defaults: dict[str, Any], out: Path | None = None) -> SimRun:
    """The mutant's default run, to its first caught seed."""
    from kraft_tck.traces.sim import simulate

    profile = m.sim_profile if defaults["faults"] == "default" else defaults["faults"]
    started = time.perf_counter()
    run = SimRun(name, m.safety, m.safety_also, profile, 0, 0.0)
    for seed in seeds:
        path = None if out is None else out / name / f"seed-{seed}.ndjson"
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            result = simulate(sim_config(m, seed, defaults), path, core_class=m.core)
            v = result.violation
            invariant, detail = (v.invariant, v.detail) if v is not None else (None, "")
        except Exception as exc:  # SimulationError (the simulator found the run impossible to go on with)
            invariant, detail = "SimulationError", f"{type(exc).__name__}: {exc}"
        run.seeds_run += 1
        if invariant is not None:
            run.invariant, run.seed, run.detail = invariant, seed, detail
            break
    run.seconds = round(time.perf_counter() - started, 1)
    return run


def print_table(runs: list[SimRun], safe_names: frozenset[str], seeds: range) -> None:
    head = ("mutant", "safety invariant", "caught by the simulator", "seconds", "verdict")
    rows = []
    for r in runs:
        named = r.safety or ("-" if r.mutant.startswith("none") else "none")
        if r.safety_also:
            named += " (or " + ", ".join(r.safety_also) + ")"
        if r.profile != "default":
            named += f" [{r.profile}]"
        found = f"{r.invariant}, seed {r.seed}" if r.caught else f"no ({r.seeds_run} seeds)"
        rows.append((r.mutant, named, found, f"{r.seconds:.1f}", r.verdict(safe_names)))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    line = "  ".join("{:<" + str(w) + "}" for w in widths)
    print(line.format(*head))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*row))
    mutants = [r for r in runs if not r.mutant.startswith("none")]
    safety = [r for r in mutants if r.safety is not None]
    caught = [r for r in safety if r.invariant in safe_names]
    print(f"\nseeds {seeds.start}..{seeds.stop - 1} of the default run; {len(mutants)} mutants, {len(safety)} break a "
          f"safety invariant, {len(caught)} of them caught ({100 * len(caught) // max(1, len(safety))}%)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mutants", nargs="*", help="mutant names (default: all)")
    ap.add_argument("--seeds", type=int, help="seeds per mutant (default: kraft-tck simulate's, 100)")
    ap.add_argument("--first-seed", type=int, help="default: kraft-tck simulate's, 0")
    ap.add_argument("--safety-only", action="store_true", help="only the mutants that break a safety invariant")
    ap.add_argument("--area", action="append", default=[], help="only mutants of this area (prefix; repeatable)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the correct core's run of the same seeds")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--out", type=Path, help="write every seed's trace under OUT/<mutant>/")
    ap.add_argument("--observers", type=int, help="observer replicas (not the default run's: say so)")
    ap.add_argument("--foreign-rate", type=float, help="the foreign-cluster sender's rate (not the default run's)")
    args = ap.parse_args(argv)

    registry = load_registry()
    defaults = default_run()
    changed = {k: v for k, v in (("observers", args.observers), ("foreign_rate", args.foreign_rate)) if v is not None}
    defaults.update(changed)
    first = defaults["first_seed"] if args.first_seed is None else args.first_seed
    seeds = range(first, first + (defaults["seeds"] if args.seeds is None else args.seeds))
    unknown = [n for n in args.mutants if n not in registry.MUTANTS]
    if unknown:
        print(f"unknown mutants: {', '.join(unknown)}", file=sys.stderr)
        return 2
    chosen = [(n, registry.MUTANTS[n]) for n in (args.mutants or registry.MUTANTS)]
    if args.area:
        chosen = [(n, m) for n, m in chosen if any(m.area.startswith(a) for a in args.area)]
    if args.safety_only:
        chosen = [(n, m) for n, m in chosen if m.safety is not None]
    safe_names = safety_invariants()
    runs: list[SimRun] = []
    status = 0
    if not args.no_baseline:
        profiles = sorted({m.sim_profile for _, m in chosen}) or ["default"]
        for profile in profiles:  # the correct core on the same seeds of each profile the mutants run
            none = registry.unmutated()
            base = run_mutant("none", none, seeds, {**defaults, "faults": profile} if profile != "default"
                              else defaults, args.out)
            base.mutant = "none" if profile == "default" else f"none [{profile}]"
            runs.append(base)
            verdict = f"FAILS {base.invariant} at seed {base.seed}" if base.caught else "clean"
            print(f"{base.mutant}: {verdict} ({base.seconds:.1f} s)", flush=True)
            if base.caught:
                status = 2
    for name, m in chosen:
        run = run_mutant(name, m, seeds, defaults, args.out)
        runs.append(run)
        print(f"{name}: {run.invariant or 'not caught'}"
              f"{'' if run.seed is None else ' at seed ' + str(run.seed)} ({run.seconds:.1f} s) "
              f"{run.verdict(safe_names)}", flush=True)
    print()
    print_table(runs, safe_names, seeds)
    if changed:
        print("NOT the default run: " + ", ".join(f"{k} {v}" for k, v in changed.items()))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    if status:
        return status
    bad = [r for r in runs if not r.mutant.startswith("none") and not r.verdict(safe_names).startswith("ok")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
