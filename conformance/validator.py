"""The validation process: a Python process beside the harness that runs its TLC validations (``Session``).

Translating a trace into TLA+ is pure Python; in the harness's own process it held the interpreter's lock while the
harness's event loop had to read the target's messages in time. So the session's validator thread has a
process of its own, ``python -m kraft_tck.conformance.validator``, and sends it jobs: a module-level function and its
arguments, pickled in a length-prefixed frame on the process's standard input; the answer (the result, or the
exception) comes back the same way on a pipe of its own (the job's prints go to standard error). Not
``multiprocessing``: its spawn start method runs the parent's main script again in the child, and a ``pytest``
script without an ``if __name__ == "__main__"`` guard then starts a second test session there.

The process and the TLC it starts are batch work while cases run: on a busy machine the harness and the target, whose
timers the cases judge, come first (SCHED_BATCH: its wake-ups never preempt them; nice 5: a smaller share of the CPU
while they want it, all of what they leave). Once the catalog is done the last lives' validations are all the run waits
for, and a process started then (``batch=False``) keeps the scheduler's defaults: an unprivileged process cannot take
back a priority it gave up.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, TypeVar

T = TypeVar("T")

_LENGTH = struct.Struct(">I")


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame, or None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError(f"the validation process's pipe ended inside a frame ({len(data)} of {size} bytes)")
    return data


class ValidationProcess:
    """One validation process; ``run`` sends it a job and waits for the answer (one job at a time)."""

    def __init__(self, batch: bool = True) -> None:
        read_fd, write_fd = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kraft_tck.conformance.validator", str(write_fd), "batch" if batch else "normal"],
            stdin=subprocess.PIPE, pass_fds=(write_fd,), close_fds=True,
        )  # fmt: skip
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, "rb")
        self._lock = threading.Lock()
        self.pid = self._proc.pid

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the validation process (``fn`` a module-level function, arguments picklable)."""
        assert self._proc.stdin is not None
        with self._lock:
            _write_frame(self._proc.stdin, pickle.dumps((fn, args)))
            data = _read_frame(self._answers)
        if data is None:
            raise RuntimeError(f"the validation process (pid {self.pid}) ended with exit status {self._proc.wait()}")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return,unused-ignore]

    def close(self, timeout_s: float = 10.0) -> None:
        """End the process once its job, if any, is done (its standard input closed); kill it after ``timeout_s``."""
        with contextlib.suppress(OSError):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._answers.close()


def _batch_priority() -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
    with contextlib.suppress(OSError):
        os.nice(5)


def main(argv: list[str]) -> int:
    """Serve jobs from standard input until it ends; answers go to the file descriptor ``argv[0]``; ``argv[1]``:
    ``batch`` (the default) or ``normal`` priority."""
    if argv[1:2] != ["normal"]:
        _batch_priority()
    answers = os.fdopen(int(argv[0]), "wb")
    jobs = sys.stdin.buffer
    sys.stdout = sys.stderr  # a job's prints must not reach the harness's terminal as its own output
    while (data := _read_frame(jobs)) is not None:
        fn, args = pickle.loads(data)
        try:
            answer = (True, fn(*args))
        except Exception as exc:  # the caller re-raises it
            answer = (False, exc)
        try:
            payload = pickle.dumps(answer)
        except Exception as exc:  # an answer that cannot cross the pipe still says what went wrong
            payload = pickle.dumps((False, RuntimeError(f"the validation job's answer cannot be pickled: {exc!r}")))
        _write_frame(answers, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
