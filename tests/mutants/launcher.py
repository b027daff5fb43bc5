"""Test-only launcher: the reference node with one mutant of tests/mutants/mutants.py, chosen by
KRAFT_TCK_MUTANT (``none``: the unmutated node).

Used as ``pytest conformance --target-launcher tests/mutants/launcher.py``; takes the reference CLI's
``node --config F --trace-file T`` arguments, like tests/conformance/faulty_node.py.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mutants  # a sibling file: tests/ is no package


def main(argv: list[str]) -> None:
    mutant = mutants.lookup(os.environ.get("KRAFT_TCK_MUTANT", "none"))
    config = mutants._faulty.node_arg(argv, "--config")
    if argv[:1] != ["node"] or config is None:
        raise SystemExit("usage: launcher.py node --config FILE [--trace-file FILE]")
    asyncio.run(mutants.run_node(mutant, config, mutants._faulty.node_arg(argv, "--trace-file")))


if __name__ == "__main__":
    main(sys.argv[1:])
