"""Telling a person that long work goes on: TLC runs, trace validation, the pipeline's stages.

On a terminal a rich spinner shows the latest progress line. Elsewhere (CI logs, pipes, pytest) a spinner
shows nothing, so one plain line is written every ``every_s`` seconds — the label, the time so far and the
latest progress — and, when there was one, a last line when the work ends: a log never goes silent for
minutes, and quick work stays quiet.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console

#: Seconds between two progress lines when output is not a terminal (KRAFT_TCK_PROGRESS_SECONDS).
DEFAULT_EVERY_S = 10.0


def _every_s() -> float:
    raw = os.environ.get("KRAFT_TCK_PROGRESS_SECONDS")
    try:
        return max(0.1, float(raw)) if raw else DEFAULT_EVERY_S
    except ValueError:
        return DEFAULT_EVERY_S


class Progress:
    """``with Progress("TLC MCKRaft.cfg") as p: ... p.update(line) ...``.

    ``write``: where plain lines go (default: standard error); given, or when ``console`` is not a terminal,
    lines are used instead of a spinner.
    """

    def __init__(self, label: str, *, console: Console | None = None,
                 write: Callable[[str], None] | None = None, every_s: float | None = None) -> None:
        self.label = label
        self.latest = "starting"
        self._console = console or Console(stderr=True)
        self._spinner = write is None and self._console.is_terminal
        self._write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._every_s = every_s if every_s is not None else _every_s()
        self._t0 = time.monotonic()
        self._beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None

    def update(self, latest: str) -> None:
        self.latest = latest
        if self._status is not None:
            self._status.update(f"{self.label}: {latest}")

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _beat(self) -> None:
        while not self._stop.wait(self._every_s):
            self._beats += 1
            self._write(f"{self.label}: running for {self.elapsed():.0f} s ({self.latest})")

    def __enter__(self) -> Progress:
        if self._spinner:
            self._status = self._console.status(f"{self.label}: {self.latest}")
            self._status.__enter__()
        else:
            self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self._beats:
                self._write(f"{self.label}: {'stopped' if exc_type else 'done'} after {self.elapsed():.0f} s")
        if self._status is not None:
            self._status.__exit__(exc_type, exc, tb)
