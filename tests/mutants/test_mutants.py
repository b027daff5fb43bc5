"""A sample of the mutation suite (bench/mutants.py runs all of it: ``make mutants``): mutants of different
handlers, each run through the runner against the case aimed at it, must fail exactly that case; the
unmutated node must pass the same cases. Plus the registry's own consistency."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import pytest
from kraft_tck.conformance.catalog import catalog
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.node import Node

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


runner = _load("kraft_tck_mutants_runner", REPO / "bench" / "mutants.py")
registry = runner.load_registry()

#: (mutant, the handler it breaks, the one case it must fail)
SAMPLE = [
    ("vote-twice-per-epoch", "Vote request", "KIP-595/Vote/5"),
    ("follower-drops-leader-hint", "Fetch response", "KIP-595/Epochs/2"),
    ("describe-unknown-as-zero", "DescribeQuorum", "KIP-836/DescribeQuorum/1"),
    ("vote-persisted-after-grant", "shell: persist after send", "KIP-595/Vote/8"),
    ("diverging-fetch-is-progress", "Fetch request (DivergingEpoch)", "KIP-595/HighWatermark/4"),
    ("truncation-keeps-voters-record", "KIP-853 voter set on truncation", "KIP-853/FollowerView/2"),
]


def test_registry_is_consistent() -> None:
    mutants = registry.MUTANTS
    assert len(mutants) >= 40
    known = set(catalog())
    areas = {m.area for m in mutants.values()}
    for needed in ("vote-request", "vote-response", "begin-quorum-epoch", "end-quorum-epoch", "fetch-request",
                   "fetch-response", "check-quorum", "election", "describe-quorum", "shell", "restart"):
        assert needed in areas, needed
    # KIP-853 (dynamic quorum): the add, remove and update handlers, the voter set in force, check quorum
    kip853 = [m for m in mutants.values() if m.area.startswith("reconfig")]
    assert len(kip853) >= 10, [m.name for m in kip853]
    for needed in ("reconfig-add", "reconfig-remove", "reconfig-update", "reconfig-voter-set", "reconfig-check-quorum"):
        assert needed in areas, needed
    for m in [*mutants.values(), *registry.SURVIVORS.values()]:
        assert m.expect and m.breaks, m.name
        assert issubclass(m.core, KRaftCore) and issubclass(m.node, Node), m.name
        # a mutant changes something: its core or its shell is not the product's own
        assert m.core is not KRaftCore or m.node is not Node, m.name
        # every override names a method the product has (a rename there must not turn a mutant into a no-op)
        for cls, base in ((m.core, KRaftCore), (m.node, Node)):
            for klass in cls.__mro__:
                if klass is base or not issubclass(klass, base):
                    continue
                for attr, value in vars(klass).items():
                    if callable(value) and not attr.startswith("__") and attr not in ("_write_late", "_delay_s"):
                        assert hasattr(base, attr), f"{m.name}: {klass.__name__}.{attr} overrides nothing"
                        # and takes what the product passes it (a new parameter there would crash the node,
                        # a "catch" for the wrong reason)
                        mine = list(inspect.signature(value).parameters)
                        theirs = list(inspect.signature(getattr(base, attr)).parameters)
                        assert mine == theirs, f"{m.name}: {klass.__name__}.{attr}{mine} vs the product's {theirs}"
        for cid in m.expect:
            # a case id of the catalog, a scenario still to be written, or the white-box TLC check
            assert cid in known or cid.startswith(registry.PENDING) or cid == registry.WHITE_BOX, (m.name, cid)


def test_no_mutant_is_left_to_a_pending_scenario() -> None:
    """Every mutant names the case that catches it black-box, or is a documented white-box class: a reason
    it is not observable on the wire and a unit check (tests/mutants/whitebox.py) that catches it while the
    product's core passes."""
    whitebox = runner.load_whitebox()
    for m in registry.MUTANTS.values():
        assert not m.pending, f"{m.name}: {m.expect[0]}"
        if m.white_box_only:
            assert len(m.unobservable) > 80, f"{m.name}: say why no scenario can see it"
            assert m.name in whitebox.CHECKS, f"{m.name}: no white-box check"
            assert runner.white_box_unit(m) is True, m.name
        else:
            assert not m.unobservable, m.name


def test_known_survivors_name_the_scenario_that_would_catch_them() -> None:
    """A mutant no case catches yet stays in the registry (``SURVIVORS``; ``make mutants`` runs it and reports it as a
    survivor) with the scenario still to write, not dropped."""
    known = set(catalog())
    for m in registry.SURVIVORS.values():
        assert m.pending and len(m.expect[0]) > 80, f"{m.name}: describe the scenario that would catch it"
        assert m.name not in registry.MUTANTS, m.name
        # once the scenario exists the mutant belongs in MUTANTS with that case id
        assert m.expect[0].removeprefix(registry.PENDING).strip() not in known, m.name
        assert registry.lookup(m.name) is m


@pytest.mark.slow
@pytest.mark.cluster
def test_sample_mutants_are_caught_and_the_clean_node_passes(tmp_path: Path) -> None:
    cases = [cid for _, _, cid in SAMPLE]
    clean = runner.run_catalog("none", False, tmp_path, 300, cases=cases)
    if clean.caught:  # timing cases may flake on a loaded machine: once more before concluding
        clean = runner.run_catalog("none", False, tmp_path / "again", 300, cases=cases)
    assert not clean.caught, (clean.failed, clean.note)
    for name, handler, cid in SAMPLE:
        assert cid in registry.MUTANTS[name].expect, (name, cid)
        run = runner.run_catalog(name, False, tmp_path, 300, cases=[cid])
        assert run.failed == [cid], f"{name} ({handler}): failed {run.failed}, expected [{cid}] {run.note}"
        assert run.returncode == 1, (name, run.returncode)
