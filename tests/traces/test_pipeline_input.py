"""Bad input: every line is accounted for (header + accepted + quarantined = lines in), and the run's exit
code says what happened. The quarantine equals the single-process checker's, line for line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.run import EXIT_BAD_INPUT, EXIT_VIOLATIONS, run_pipeline

pytestmark = pytest.mark.spark


def _quiet(_: str) -> None:
    return None


def _run(spark: Any, src: Path, tmp_path: Path) -> Any:
    return run_pipeline(spark, src, tmp_path / "out", validator=False, report=False, echo=_quiet)


def test_bad_lines_are_quarantined_and_counts_reconcile(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    synth.write_corpus(src, runs=2, events_per_run=300, seed=1)
    a, b = src / "seed-1.ndjson", src / "seed-2.ndjson"
    lines = a.read_text().splitlines(keepends=True)
    bad_event = json.loads(lines[10])
    bad_event["event"] = "HandleVoteReq"  # schema-invalid: not in the vocabulary
    lines[10] = json.dumps(bad_event) + "\n"
    lines[20] = "this is not json\n"
    a.write_text("".join(lines))
    with open(b, "a", encoding="utf-8") as fh:
        fh.write('{"type":"event","seq":')  # a torn last line
    total = len(lines) + len(b.read_text().splitlines())
    res = _run(spark, src, tmp_path)
    got = [(Path(q["file"]).name, q["line"]) for q in res.quarantine]
    assert got == [("seed-1.ndjson", 11), ("seed-1.ndjson", 21), ("seed-2.ndjson", len(b.read_text().splitlines()))]
    reasons = [q["reason"] for q in res.quarantine]
    assert "event: HandleVoteReq is not one of" in reasons[0]
    assert "not a JSON object" in reasons[1] and "truncated" in reasons[2]
    c = res.counts
    assert c["lines in"] == total == c["header lines"] + c["events accepted"] + c["quarantined"]
    assert c["header lines"] == 2 and c["quarantined"] == 3
    assert res.exit_code == EXIT_BAD_INPUT
    py = check_paths(trace_files(src))
    assert [(Path(q.file).name, q.line) for q in py.quarantined] == got
    assert py.accepted == c["events accepted"] and py.reconciled


def test_newer_format_file_is_refused_by_name(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    synth.write_corpus(src, runs=1, events_per_run=200, seed=3)
    newer = synth.header("future", 9)
    newer["format"] = 2
    n = synth.write_trace(src / "future.ndjson", newer, synth.synth_run("future", 9, 50))
    res = _run(spark, src, tmp_path)
    assert len(res.refused) == 1 and "trace format 2 is newer" in res.refused[0]
    assert len(res.quarantine) == n and all("file refused" in q["reason"] for q in res.quarantine)
    assert res.exit_code == EXIT_BAD_INPUT and not res.violations


def test_only_newer_format_files_is_bad_input(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    head = synth.header("future", 9)
    head["format"] = 2
    synth.write_trace(src / "future.ndjson", head, synth.synth_run("future", 9, 50))
    res = _run(spark, src, tmp_path)
    assert res.exit_code == EXIT_BAD_INPUT and res.bad_input and "newer" in res.bad_input


def test_empty_input_is_bad_input(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    res = _run(spark, tmp_path / "in", tmp_path)
    assert res.exit_code == EXIT_BAD_INPUT and res.bad_input and "empty input" in res.bad_input


def test_directory_of_non_traces_is_bad_input(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "notes.txt").write_text("hello\n")
    (src / "data.ndjson").write_text('{"a": 1}\n{"b": 2}\n')
    (src / "empty.ndjson").write_text("")
    res = _run(spark, src, tmp_path)
    assert res.exit_code == EXIT_BAD_INPUT and res.bad_input
    assert "none of the 2 files is a kraft-tck trace" in res.bad_input
    assert "not a trace header" in res.bad_input and "empty file" in res.bad_input
    (src / "data.ndjson").unlink()
    (src / "empty.ndjson").unlink()
    res = _run(spark, src, tmp_path)
    assert res.bad_input and "no trace files" in res.bad_input and "notes.txt" in res.bad_input


def test_violations_outrank_quarantine_in_the_exit_code(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    events = synth.synth_run("v", 5, 400)
    synth.plant_hw_backwards(events)
    synth.write_trace(src / "v.ndjson", synth.header("v", 5), events)
    with open(src / "v.ndjson", "a", encoding="utf-8") as fh:
        fh.write("{")
    res = _run(spark, src, tmp_path)
    assert [v.invariant for v in res.violations] == ["HighWatermarkMonotonic"]
    assert len(res.quarantine) == 1 and res.exit_code == EXIT_VIOLATIONS


def test_cli_exit_codes(tmp_path: Path) -> None:
    """The click command's exit code, without Spark: bad input is detected before a session is needed."""
    from click.testing import CliRunner
    from kraft_tck.traces.cli import COMMANDS

    cmd = next(c for c in COMMANDS if c.name == "pipeline")
    (tmp_path / "in").mkdir()
    res = CliRunner().invoke(cmd, ["--input", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--no-tlc"])
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    assert "empty input" in res.output
