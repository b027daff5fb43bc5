"""Test-only launcher: the reference node without ``--trace-file``, so it reads and writes Fetch the typed
way (reference/typed_wire.py) instead of the dict path a frame-tracing node takes.

Used as ``pytest conformance --target-launcher tests/conformance/untraced_node.py``; takes the reference
CLI's ``node --config F --trace-file T`` arguments and drops the last two.
"""

from __future__ import annotations

import contextlib
import sys

from kraft_tck.reference.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--trace-file" in args:
        i = args.index("--trace-file")
        del args[i:i + 2]
    with contextlib.suppress(KeyboardInterrupt):
        main(args, prog_name="kraft-tck")
