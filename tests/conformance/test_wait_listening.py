"""conformance.target.wait_listening (tenacity): returns once a connect succeeds, says in one line that
nothing listens after its timeout, and stops early, with the process's output, when the target exits."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kraft_tck.conformance.target import TargetError, free_port, wait_listening


def test_it_returns_once_the_port_listens() -> None:
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def listen_later() -> None:
        time.sleep(0.3)
        server.bind(("127.0.0.1", port))
        server.listen()

    t = threading.Thread(target=listen_later)
    t.start()
    try:
        t0 = time.monotonic()
        wait_listening("127.0.0.1", port, 10)
        assert 0.25 < time.monotonic() - t0 < 5
    finally:
        t.join()
        server.close()


def test_nothing_listening_is_one_line_after_the_timeout() -> None:
    t0 = time.monotonic()
    with pytest.raises(TargetError, match=r"^nothing listens on 127.0.0.1:\d+ after 1 s; is the target up\?$"):
        wait_listening("127.0.0.1", free_port(), 1)
    assert 0.9 < time.monotonic() - t0 < 5


def test_a_target_that_exits_stops_the_wait_with_its_output(tmp_path: Path) -> None:
    log = tmp_path / "target.out"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "print('port taken'); raise SystemExit(3)"], stdout=out)
    t0 = time.monotonic()
    with pytest.raises(TargetError, match=r"exited with status 3 before listening") as info:
        wait_listening("127.0.0.1", free_port(), 30, proc, log)
    assert "port taken" in str(info.value)
    assert time.monotonic() - t0 < 10
