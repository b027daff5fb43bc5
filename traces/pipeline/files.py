"""Which files under an input directory are traces (pure Python: shared by the pipeline and the checker)."""

from __future__ import annotations

import os
from pathlib import Path

#: File names read as traces (compressed ones are decompressed by Spark's text reader).
TRACE_SUFFIXES = (".ndjson", ".jsonl", ".ndjson.gz", ".jsonl.gz")


class BadInput(Exception):
    """The input cannot be checked at all (nothing to read, no trace in it): exit code 2."""


def list_trace_files(input_dir: str | os.PathLike[str]) -> list[Path]:
    """Trace files under `input_dir` (recursively, sorted); BadInput when there are none."""
    root = Path(input_dir)
    if not root.exists():
        raise BadInput(f"{root}: no such file or directory")
    if root.is_file():
        return [root.resolve()]
    found: list[Path] = []
    others: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
        for name in sorted(filenames):
            if name.startswith((".", "_")):
                continue
            p = Path(dirpath, name)
            (found if name.endswith(TRACE_SUFFIXES) else others).append(p.resolve())
    if not found:
        if others:
            listed = ", ".join(str(p.relative_to(root.resolve())) for p in others[:5])
            more = f" and {len(others) - 5} more" if len(others) > 5 else ""
            raise BadInput(f"{root}: no trace files ({', '.join(TRACE_SUFFIXES)}) among {len(others)} files"
                           f" ({listed}{more})")
        raise BadInput(f"{root}: empty input, no trace files")
    return found
