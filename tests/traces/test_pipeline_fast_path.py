"""The ingest's JVM fast path (`schema.conforms`) against the JSON Schema checker, on thousands of lines.

`conforms` clears a line from Spark's typed parse plus a few counts in its text; it must never clear a
line the checker (`ingest.suspect_reason`: the JSON Schema validator and `checker.event_problems`)
rejects. The lines here are real events (simulated with brokers and a bootstrapped cluster id, and
synthetic ones) mutated at random — unknown or duplicate keys at any depth, values of another type or
null, fields removed, blanks around colons and commas, text after the object, strings holding JSON
punctuation — from a fixed seed, so a failure names a line that reproduces it.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.traces.pipeline import schema as S
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.ingest import suspect_reason
from kraft_tck.traces.pipeline.session import register_char_counts
from kraft_tck.traces.sim.cluster import SimConfig, simulate

pytestmark = pytest.mark.spark

KEYS = ["zz", "clusterId", "note", "cause", "body", "broker", "digest", "epoch", "state", "log", "msg"]
VALUES: list[Any] = [None, 5, -1, 2.5, "x", "", "5", "{}", "a:b", ' "c"', {}, {"a": 1}, {"clusterId": None}, [],
                     [1], ["x"], True, False, [1, 1], [-2]]
TAILS = [" x", "}", "{}", "]}", '"}', ' {"a":1}', ":}", "\n}", "x}"]
NOTES = [":", "{", "}", "[]", ",", "null", '"note":"x"', "a\\b", "{}", ' x: {y}']


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "sim.ndjson"
    simulate(SimConfig(seed=5, duration_ms=8_000, brokers=2), path)
    lines = path.read_text().splitlines()[1:]
    events = [json.loads(x) for x in lines]
    events += [{"type": "event", "seq": 0, **e} for e in synth.synth_run("fp", 3, 300)]
    # KIP-853: states with voters and kraftVersion, the voter-change events and messages, voterKey.
    path = tmp_path / "reconfig.ndjson"
    simulate(SimConfig(seed=5, duration_ms=8_000, profile="reconfig"), path)
    events += [json.loads(x) for x in path.read_text().splitlines()[1:]]
    events += [{"type": "event", "seq": 0, **e} for e in synth.reconfig_run("two-uncommitted")[0]]
    return events


def _objects(o: Any) -> list[dict[str, Any]]:
    """Every JSON object inside `o` (itself included), free-form ones too."""
    out: list[dict[str, Any]] = []
    if isinstance(o, dict):
        out.append(o)
        for v in o.values():
            out += _objects(v)
    elif isinstance(o, list):
        for v in o:
            out += _objects(v)
    return out


def _value(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(VALUES))  # later mutations may edit it


def _mutate(ev: dict[str, Any], rng: random.Random) -> str:
    o = copy.deepcopy(ev)
    for _ in range(rng.choice([0, 1, 1, 2])):
        target = rng.choice(_objects(o))
        kind = rng.randrange(4)
        if kind == 0:
            target[rng.choice(KEYS)] = _value(rng)
        elif kind == 1 and target:
            target[rng.choice(list(target))] = _value(rng)
        elif kind == 2 and target:
            del target[rng.choice(list(target))]
        else:
            o["note"] = rng.choice(NOTES)
    seps = rng.choice([(",", ":")] * 4 + [(", ", ": "), (",", " :"), (",", ":\t"), (" ,", ":")])
    text = json.dumps(o, separators=seps)
    if rng.random() < 0.15:  # a duplicate or unknown member, written into the text at a random object
        starts = [i for i, ch in enumerate(text) if ch == "{" and text[i + 1:i + 2] == '"']
        if starts:
            at = rng.choice(starts) + 1
            colon = rng.choice([":", ":", " :", ": ", "\t:"])
            text = text[:at] + f'"{rng.choice(KEYS)}"{colon}{json.dumps(rng.choice(VALUES))},' + text[at:]
    if rng.random() < 0.1:
        text += rng.choice(TAILS)
    return text


@pytest.mark.parametrize("counting", ["jvm", "sql"])
def test_fast_path_never_clears_a_line_the_json_schema_rejects(spark: Any, tmp_path: Path, counting: str) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(20261125)
    events = _events(tmp_path)
    originals = [json.dumps(e, separators=(",", ":")) for e in events]
    mutated = [_mutate(rng.choice(events), rng) for _ in range(6000)]
    texts = originals + mutated + _escapes(events)
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i long, value string")
    counts = None
    if counting == "jvm":  # the JVM helper's counts (jvm/CharCounts.java), as ingest uses them
        _require_helper(spark)
        df, counts = df.withColumn("counts", S.char_counts(F.col("value"))), F.col("counts")
    cleared = {r["i"] for r in df.select("i", S.conforms(S.parse(F.col("value")), F.col("value"), counts)
                                         .alias("ok")).where("ok").collect()}
    # The seq rule (seq = line - 2) is the ingest's, not the schema's: each line is judged at its own seq.
    verdicts = [suspect_reason(t, _seq(t) + 2) for t in texts]
    wrongly = [(texts[i], verdicts[i]) for i in sorted(cleared) if verdicts[i] is not None]
    assert not wrongly, wrongly[:5]
    rejected = sum(v is not None for v in verdicts[len(originals):])
    assert rejected > 1500, rejected  # the mutations do produce invalid lines
    # The fast path does its job: nearly every unmutated event, real or synthetic, is cleared in the JVM.
    assert len(cleared & set(range(len(originals)))) >= 0.99 * len(originals)


def _require_helper(spark: Any) -> None:
    why = register_char_counts(spark)
    if why is not None:
        pytest.skip(f"the JVM counting helper is unavailable: {why}")


@pytest.mark.parametrize("text", [
    '{"a":"b"}', "", "::::", '"}"}', "é:ü\"}", "\\u003a", "a\\b", "x" * 100 + ":" * 3000,
    '"' * ((1 << 21) - 1), '"' * (1 << 21), "}" * (1 << 21) + ":",
], ids=lambda t: t[:12] + (f"...({len(t)})" if len(t) > 12 else ""))
def test_jvm_counts_are_the_sql_counts(spark: Any, text: str) -> None:
    """The helper's one pass gives the same colon, quote and brace counts as Spark's replace, or null where
    counting cannot judge: a backslash, or a count beyond 21 bits (then the line is a suspect)."""
    from pyspark.sql import functions as F

    _require_helper(spark)
    df = spark.createDataFrame([(text,)], "value string").withColumn("counts", S.char_counts(F.col("value")))
    row = df.select("counts", *[S.count(F.col("value"), c, guarded=False).alias(n)
                                for c, n in ((":", "c"), ('"', "q"), ("}", "b"))]).first()
    if "\\" in text or max(row["c"], row["q"], row["b"]) >= 1 << 21:
        assert row["counts"] is None
    else:
        mask = (1 << 21) - 1
        assert (row["counts"] & mask, row["counts"] >> 21 & mask, row["counts"] >> 42) == (row["c"], row["q"], row["b"])


def _escapes(events: list[dict[str, Any]]) -> list[str]:
    """Lines whose escapes hide counted characters, which random mutation does not find: an escaped colon
    in the note makes up for the colon of an unknown key, whose quotes make up for a number where the
    cause (a string) belongs; an escaped quote does the same for the quotes."""
    ev = next(e for e in events if "state" in e and "note" not in e and "cause" not in e)
    base = json.dumps({**ev, "cause": 5}, separators=(",", ":"))
    return ['{"note":"\\u003a","zz":5,' + base[1:],
            '{"note":"\\u0022\\u0022","zz":5,' + json.dumps(ev, separators=(",", ":"))[1:]]


def _seq(text: str) -> int:
    try:
        seq = json.loads(text).get("seq")
    except (json.JSONDecodeError, AttributeError):
        return 0
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
