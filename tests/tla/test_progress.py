"""Long work is never silent: a line every few seconds when output is not a terminal (CI logs, pytest)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.tla.cli import tlc_command
from kraft_tck.tla.progress import Progress
from kraft_tck.tla.tlc import tlc_unavailable_reason
from rich.console import Console

REPO = Path(__file__).resolve().parents[2]


def test_plain_lines_while_work_goes_on_and_one_at_the_end() -> None:
    lines: list[str] = []
    with Progress("TLC MCKRaft.cfg", write=lines.append, every_s=0.05) as p:
        p.update("Progress(3) 1,000 states")
        time.sleep(0.3)
    assert len(lines) >= 3, lines
    assert all(line.startswith("TLC MCKRaft.cfg: ") for line in lines)
    assert "running for" in lines[0] and "Progress(3) 1,000 states" in lines[0]
    assert lines[-1].startswith("TLC MCKRaft.cfg: done after")


def test_a_failure_ends_with_stopped_and_quick_work_stays_quiet() -> None:
    lines: list[str] = []
    with pytest.raises(RuntimeError), Progress("validating t.ndjson", write=lines.append, every_s=0.05):
        time.sleep(0.12)
        raise RuntimeError("TLC died")
    assert lines[-1].startswith("validating t.ndjson: stopped after")
    quick: list[str] = []
    with Progress("TLC", write=quick.append, every_s=10):
        pass
    assert quick == []


def test_a_terminal_gets_a_spinner_not_lines(capsys: pytest.CaptureFixture[str]) -> None:
    screen = io.StringIO()
    with Progress("TLC", console=Console(file=screen, force_terminal=True), every_s=0.05) as p:
        p.update("Progress(1)")
        time.sleep(0.2)
    assert capsys.readouterr().err == ""  # no plain lines
    assert "TLC: Progress(1)" in screen.getvalue()


@pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=f"TLC unavailable: {tlc_unavailable_reason()}")
def test_tlc_takes_a_config_path_relative_to_the_working_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's `kraft-tck tlc --config tla/MCKRaft.cfg`, run from the checkout, used to look for
    # tla/tla/MCKRaft.cfg. A one-second timeout: the point is that TLC starts on the right file.
    monkeypatch.chdir(REPO)
    out = CliRunner().invoke(tlc_command, ["--config", os.path.join("tla", "MCKRaftSmall.cfg"), "--timeout", "1"])
    assert "not found" not in out.output, out.output
    assert "stopped TLC after the 1s timeout" in out.output, out.output  # it ran, on the file named
