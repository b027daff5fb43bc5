"""bench/mutants_sim.py (the default run of ``make mutants-sim``), loaded by path for the simulator's tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_runner() -> ModuleType:
    """The runner module, once per process."""
    name = "kraft_tck_mutants_sim_runner"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "mutants_sim.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
