"""How a parallel run (pytest-xdist ``-n N``) hands the catalog's cases to its workers: longest first, in units
that must share one target, so that the workers finish together and no target relaunches more than it must.

xdist's own ``--dist load`` hands out cases in collection order, a few at a time to whichever worker asks. For this
catalog that has two costs: the workers finish up to a long case apart (the other worker's target, and its TLC,
then sit idle), and cases that should run one after another on one target are split between targets:

* **own-life cases** (``@case(..., own_life=True)``: the snapshot cases, Observer/1, ...) each start by relaunching
  the target on a wiped directory, and leave their life retired; run one after another, each one's relaunch also
  replaces the life the one before retired, so a chain of N such cases relaunches N times instead of 2N;
* **modules that share a target life** (``ONE_TARGET = True`` in the test module: the KIP-853 module shares a
  dynamic-quorum life between its cases and restores the static quorum in a module fixture) relaunch into and out
  of that life once per worker that gets any of their cases.

``CaseScheduling`` makes those groups units, orders the units by their expected time, longest first (the last run's
case times, kept in the user cache, else ``conformance/durations.json``, else the median), and gives a worker its
next unit when it has fewer than two cases left (so it always knows its next case). A collection with no
conformance case (``pytest tests -n 2``) is scheduled as ``--dist load`` schedules it.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kraft_tck.conformance.cases import OWN_LIFE
from xdist.scheduler import LoadScheduling

#: The module attribute by which a test module asks for all its cases on one target, one after another.
ONE_TARGET = "ONE_TARGET"
#: Case id -> seconds, committed: the expected time of each case when no run on this machine recorded one.
DEFAULT_DURATIONS = Path(__file__).with_name("durations.json")
#: A case none of the files knows (a new one) counts as the median case.
FALLBACK_S = 1.0


def durations_path() -> Path:
    """The user cache's record of the last run's case times (``$KRAFT_TCK_CACHE``, else ``~/.cache/kraft-tck``)."""
    from kraft_tck.tla.tlc import cache_dir

    return cache_dir() / "conformance-durations.json"


def load_durations() -> dict[str, float]:
    """Case id -> expected seconds: the committed defaults, overridden by the times this machine recorded."""
    out: dict[str, float] = {}
    for path in (DEFAULT_DURATIONS, durations_path()):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.update({str(k): float(v) for k, v in data.items() if isinstance(v, int | float)})
    return out


def save_durations(times: Mapping[str, float]) -> None:
    """Record the case times of a run (merged into what earlier runs recorded; best effort)."""
    if not times:
        return
    path = durations_path()
    try:
        old = json.loads(path.read_text("utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        old = {}
    if not isinstance(old, dict):
        old = {}
    old.update({k: round(v, 2) for k, v in times.items()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(sorted(old.items())), indent=0) + "\n", "utf-8")
        tmp.replace(path)
    except OSError:
        pass


def describe_item(nodeid: str, root: Path | None = None) -> tuple[str | None, bool, str | None]:
    """A collected item's (case id, own life?, one-target module or None) from its node id
    (``conformance/test_vote.py::test_vote_survives_restart``, relative to ``root``, the run's root directory): the
    controller of an xdist run collects nothing itself, so it imports the test module by name (and checks it is
    that file). Anything it cannot place is an ordinary item."""
    path, _, name = nodeid.partition("::")
    stem = Path(path).stem
    if not stem.startswith("test_") or not name:
        return None, False, None
    try:
        module = importlib.import_module(f"kraft_tck.conformance.{stem}")
    except Exception:  # not a conformance module (or it does not import): an ordinary item
        return None, False, None
    if root is not None and (root / path).resolve() != Path(str(module.__file__)).resolve():
        return None, False, None  # another file of that name (tests/conformance/test_x.py)
    test = getattr(module, name.split("[", 1)[0], None)
    case_id = getattr(test, "case_id", None)
    if not isinstance(case_id, str):
        return None, False, None
    return case_id, bool(getattr(test, OWN_LIFE, False)), (stem if getattr(module, ONE_TARGET, False) else None)


def plan_units(
    collection: list[str], durations: Mapping[str, float], root: Path | None = None
) -> list[list[int]] | None:
    """The collection's indices in units (each run on one worker, in collection order), longest unit first; None
    when the collection holds no conformance case."""
    described = [describe_item(nodeid, root) for nodeid in collection]
    if not any(case_id for case_id, _, _ in described):
        return None
    known = [durations[c] for c, _, _ in described if c is not None and c in durations]
    fallback = statistics.median(known) if known else FALLBACK_S
    units: dict[str, list[int]] = {}
    for k, (_case_id, own, module) in enumerate(described):
        key = "own-life" if own else f"module:{module}" if module else f"item:{k}"
        units.setdefault(key, []).append(k)

    def cost(unit: Iterable[int]) -> float:
        return sum(durations.get(described[k][0] or "", fallback) for k in unit)

    ordered = sorted(units.values(), key=lambda u: (-cost(u), u[0]))
    return ordered


def make_scheduler(config: Any, log: Any) -> Any:
    """A ``CaseScheduling`` for ``--dist load`` (xdist's default with ``-n``); None for any other mode."""
    if config.getvalue("dist") != "load":
        return None
    return CaseScheduling(config, log)


class CaseScheduling(LoadScheduling):
    """xdist's load scheduling, with the catalog's units handed out longest first (module docstring)."""

    collection: list[str] | None

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self.unit_of: dict[int, int] | None = None  # item index -> unit number; None: plain load scheduling

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a later call: as LoadScheduling (new nodes get work)
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection = next(iter(self.node2collection.values()))
        units = plan_units(collection, load_durations(), Path(self.config.rootpath))
        if units is None:
            super().schedule()
            return
        self.collection = collection
        self.unit_of = {k: n for n, unit in enumerate(units) for k in unit}
        self.pending[:] = [k for unit in units for k in unit]
        for node in self.nodes:
            self.check_schedule(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if self.unit_of is None:
            super().check_schedule(node, duration)
            return
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()
            return
        # fewer than two cases left: the next unit (a worker runs a case once it knows the next one)
        while self.pending and len(self.node2pending[node]) < 2:
            unit = self.unit_of.get(self.pending[0])
            take = [k for k in self.pending if self.unit_of.get(k) == unit]
            self.pending[:] = [k for k in self.pending if self.unit_of.get(k) != unit]
            self.node2pending[node].extend(take)
            node.send_runtest_some(take)
        if not self.pending:
            node.shutdown()


__all__ = ["CaseScheduling", "describe_item", "load_durations", "make_scheduler", "plan_units", "save_durations"]
