"""Bad input: every line is accounted for (header + accepted + quarantined = lines in), and the run's exit
code says what happened. The quarantine equals the single-process checker's, line for line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.ingest import UNREADABLE
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
    assert "event: 'HandleVoteReq' is not one of" in reasons[0]
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


def test_a_trace_with_no_good_event_is_quarantined_not_a_crash(spark: Any, tmp_path: Path) -> None:
    """A valid header and only bad lines: no event is accepted, so every derived table is empty. The run
    still reads them (each keeps its schema), quarantines every line by number, and says bad input."""
    src = tmp_path / "in"
    src.mkdir()
    lines = [json.dumps(synth.header("all-bad", 1)), "{not json", '{"type":"event"}', "[]"]
    (src / "bad.ndjson").write_text("\n".join(lines) + "\n")
    res = _run(spark, src, tmp_path)
    assert res.exit_code == EXIT_BAD_INPUT and not res.violations
    assert [q["line"] for q in res.quarantine] == [2, 3, 4]
    assert res.counts["events accepted"] == 0 and res.counts["quarantined"] == 3
    for table in ("events", "messages", "appends", "transitions"):
        assert spark.read.parquet(str(tmp_path / "out" / "tables" / table)).count() == 0, table


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


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _first(events: list[dict[str, Any]], pred: Any) -> int:
    return next(i for i, e in enumerate(events) if pred(e))


def test_fast_path_never_clears_a_line_the_schema_rejects(spark: Any, tmp_path: Path) -> None:
    """The JVM fast path (schema.conforms) reads text counts where Spark's typed parse is blind: unknown
    keys, explicit nulls, a non-string in a string field, a string where an object belongs, text after the
    object. Each planted line must be quarantined exactly where the JSON Schema checker quarantines it, and
    unusual but valid lines (blank-separated JSON, escaped quotes, nullable nulls) must be accepted."""
    src = tmp_path / "in"
    events = synth.synth_run("adv", 7, 400)
    path = src / "adv.ndjson"
    synth.write_trace(path, synth.header("adv", 7), events)
    lines = path.read_text().splitlines(keepends=True)
    state_i = _first(events, lambda e: "state" in e and "log" not in e and "cause" not in e)
    send_i = _first(events, lambda e: e["event"] == "Send")
    batch_i = _first(events, lambda e: bool(e.get("log", {}).get("appended")))

    def ev(i: int) -> dict[str, Any]:
        return {"type": "event", "seq": i, **json.loads(json.dumps(events[i]))}

    def edit(i: int, fn: Any) -> dict[str, Any]:
        o = ev(i)
        fn(o)
        return o

    invalid = {
        "unknown top-level key": edit(state_i, lambda o: o.update(zz=1)),
        "unknown key with null": edit(state_i, lambda o: o.update(zz=None)),
        "unknown key in state": edit(state_i, lambda o: o["state"].update(zz=1)),
        "unknown key in msg": edit(send_i, lambda o: o["msg"].update(zz="x")),
        "unknown key in a batch": edit(batch_i, lambda o: o["log"]["appended"][0].update(zz=True)),
        "number as note": edit(state_i, lambda o: o.update(note=5)),
        "object as cause": edit(state_i, lambda o: o.update(cause={"a": 1})),
        "null note": edit(state_i, lambda o: o.update(note=None)),
        "null log": edit(state_i, lambda o: o.update(log=None)),
        "string body": edit(send_i, lambda o: o["msg"].update(body="{x}")),
        "number as clusterId": edit(state_i, lambda o: o["state"].update(clusterId=5)),
        "NaN ts": edit(state_i, lambda o: o.update(ts="NaN")),
        "missing state": edit(state_i, lambda o: o.pop("state")),
        "missing msg": edit(send_i, lambda o: o.pop("msg")),
        "null batch": edit(batch_i, lambda o: o["log"]["appended"].append(None)),
        "batch without epoch": edit(batch_i, lambda o: o["log"]["appended"][0].pop("epoch")),
        "number as digest": edit(batch_i, lambda o: o["log"]["appended"][0].update(digest=7)),
        "epoch below -1": edit(state_i, lambda o: o["state"].update(epoch=-2)),
    }
    trailing = {"text after the object": " x", "an empty object after it": "{}", "brackets after it": "]}"}
    valid = {
        "blank-separated JSON": lambda i: json.dumps(ev(i)) + "\n",
        "escaped quote in a note": lambda i: _line(edit(i, lambda o: o.update(note='say "hi": ok'))),
        "nullable null": lambda i: _line(edit(i, lambda o: o["state"].update(clusterId=None))),
        "note starting with a blank": lambda i: _line(edit(i, lambda o: o.update(note=" x: {y}"))),
    }
    # Each planted line replaces an event line well after the ones the edits copy, keeping its seq.
    free = [i for i in range(len(events)) if i > max(state_i, send_i, batch_i) and "state" in events[i]]
    planted: dict[int, str] = {}
    for slot, (name, obj) in zip(free, invalid.items(), strict=False):
        obj["seq"] = slot
        planted[slot + 2] = name
        lines[slot + 1] = _line(obj)
    rest = free[len(invalid):]
    for slot, (name, tail) in zip(rest, trailing.items(), strict=False):
        planted[slot + 2] = name
        lines[slot + 1] = _line(ev(slot)).rstrip("\n") + tail + "\n"
    accepted_slots = rest[len(trailing):len(trailing) + len(valid)]
    for slot, fn in zip(accepted_slots, valid.values(), strict=True):
        lines[slot + 1] = fn(slot)
    path.write_text("".join(lines))
    res = _run(spark, src, tmp_path)
    got = {q["line"]: q["reason"] for q in res.quarantine}
    assert set(got) == set(planted), {planted.get(n, n): r for n, r in got.items()}
    py = check_paths(trace_files(src))
    assert sorted(q.line for q in py.quarantined) == sorted(planted)
    c = res.counts
    assert c["lines in"] == len(lines) == c["header lines"] + c["events accepted"] + c["quarantined"]
    # Every planted line, and the valid ones with a backslash or a closing brace inside a string, went to
    # the Python validator. The nullable null is counted (not guessed) and cleared in the JVM, and so is
    # the blank-separated line (json.dumps' default separators): counted characters ignore blanks.
    assert c["suspect lines (Python-validated)"] == len(planted) + len(valid) - 2
    assert "zz" in got[min(n for n, w in planted.items() if w == "unknown top-level key")]


def test_line_numbers_are_exact_across_splits_of_one_file(spark: Any, tmp_path: Path) -> None:
    """A file read by several tasks (splits of 64 KiB here) keeps exact line numbers: bad and blank lines
    planted throughout are quarantined at their line, as the single-process checker finds them."""
    src = tmp_path / "in"
    synth.write_corpus(src, runs=1, events_per_run=3000, seed=11)
    path = next(src.iterdir())
    lines = path.read_text().splitlines(keepends=True)
    assert len("".join(lines)) > 8 * 65536
    bad = list(range(5, len(lines), 397))
    for n in bad:
        lines[n - 1] = "\n" if n % 2 else "not json\n"
    path.write_text("".join(lines))
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")
    try:
        res = _run(spark, src, tmp_path)
        assert spark.read.text(str(path)).rdd.getNumPartitions() >= 8
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert [q["line"] for q in res.quarantine] == bad
    assert {q["reason"] for q in res.quarantine} == {"empty line", "not a JSON object (malformed or truncated line)"}
    py = check_paths(trace_files(src))
    assert [(q.line, q.reason) for q in py.quarantined] == [(q["line"], q["reason"]) for q in res.quarantine]
    events = spark.read.parquet(str(tmp_path / "out" / "tables" / "events"))
    assert events.where("seq != line - 2").count() == 0 and events.count() == res.counts["events accepted"]


def test_integer_written_as_float_is_quarantined_by_name(spark: Any, tmp_path: Path) -> None:
    """JSON Schema takes 3.0 as an integer; Spark's typed reader cannot hold it: quarantined, not dropped."""
    src = tmp_path / "in"
    events = synth.synth_run("f", 3, 100)
    path = src / "f.ndjson"
    synth.write_trace(path, synth.header("f", 3), events)
    lines = path.read_text().splitlines(keepends=True)
    obj = json.loads(lines[50])
    obj["node"] = float(obj["node"])
    lines[50] = _line(obj)
    path.write_text("".join(lines))
    res = _run(spark, src, tmp_path)
    assert [(q["line"], q["reason"]) for q in res.quarantine] == [(51, UNREADABLE)]
