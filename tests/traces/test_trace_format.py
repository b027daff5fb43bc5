"""The one trace format: the writer refuses invalid lines, the reader keeps and names bad ones."""

from __future__ import annotations

import enum
import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kraft_tck.spec.records import data_batch, encode_batches
from kraft_tck.spec.trace import (
    FORMAT_VERSION,
    Encoded,
    TraceError,
    TraceWriter,
    encode_line,
    line_errors,
    read_trace,
    to_jsonable,
)

HEADER = {"source": "node", "run": "t1", "voters": [1, 2, 3], "config": {"controller.quorum.election.timeout.ms": 1000}}
STATE = {"role": "Candidate", "epoch": 1, "votedId": 1, "leaderId": -1, "logEndOffset": 0,
         "lastFetchedEpoch": -1, "highWatermark": 0}


def _write(path: Path) -> None:
    with TraceWriter(path, HEADER) as w:
        w.emit({"ts": 0, "node": 1, "event": "StartElection", "cause": "ElectionTimeout", "state": STATE})
        w.emit({"ts": 1, "node": 1, "event": "Send", "msg": {
            "api": "Vote", "apiKey": 52, "kind": "request", "version": 0, "correlationId": 7, "from": 1, "to": 2,
            "body": {"ClusterId": None}}})


def test_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    _write(p)
    trace = read_trace(p)
    assert trace.ok and trace.header["format"] == FORMAT_VERSION
    assert [e["seq"] for e in trace.events] == [0, 1]
    assert [e["event"] for e in trace.events] == ["StartElection", "Send"]


def test_a_trace_appears_under_its_name_only_with_its_header(tmp_path: Path) -> None:
    """A node killed while it starts must never leave a headerless trace (CI flake of
    test_controlled_shutdown_then_restart_rebuilds_the_registry: an empty trace-2.ndjson after SIGTERM)."""
    p = tmp_path / "t.ndjson"
    with pytest.raises(TraceError, match="header"):
        TraceWriter(p, {**HEADER, "voters": "not a list"})
    assert list(tmp_path.iterdir()) == []  # neither an empty trace nor a leftover part file
    w = TraceWriter(p, HEADER)
    assert [x.name for x in tmp_path.iterdir()] == ["t.ndjson"]
    assert json.loads(p.read_bytes().splitlines()[0])["type"] == "header"  # before any event or close()
    w.close()


def test_writer_refuses_unknown_event_name(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.ndjson", HEADER) as w, pytest.raises(TraceError, match="event"):
        w.emit({"ts": 0, "node": 1, "event": "HandleVoteReq", "state": STATE})


def test_action_events_need_state_and_messages_need_msg() -> None:
    assert line_errors({"type": "event", "seq": 0, "ts": 0, "node": 1, "event": "BecomeLeader"})
    assert line_errors({"type": "event", "seq": 0, "ts": 0, "node": 1, "event": "Receive"})


def test_bad_lines_are_kept_with_line_number_and_reason(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    _write(p)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "event", "seq": 5, "ts": 2, "node": 1, "event": "Restart", "state": STATE}) + "\n")
        fh.write('{"type": "event", "seq": 2, "ts"')  # a torn last line
    trace = read_trace(p)
    assert [b.line for b in trace.bad] == [4, 5]
    assert "seq 5 where 2 was expected" in trace.bad[0].reason
    assert "truncated" in trace.bad[1].reason
    assert len(trace.events) == 2


def test_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    p.write_text(json.dumps({"type": "header", "format": FORMAT_VERSION + 1, "source": "node", "run": "x",
                             "voters": [1], "config": {}}) + "\n")
    with pytest.raises(TraceError, match="newer"):
        read_trace(p)


@pytest.mark.parametrize("content", ["", "hello world\n", '{"type": "event"}\n'])
def test_non_traces_are_refused(tmp_path: Path, content: str) -> None:
    p = tmp_path / "t.ndjson"
    p.write_text(content)
    with pytest.raises(TraceError):
        read_trace(p)


# ------------------------------------------------------------------------------------------ the encoder
# Traces must stay byte for byte what json.dumps(separators=(",", ":")) wrote before orjson did the work:
# the same seed gives the same file whichever encoder wrote a line.


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class _Code(enum.IntEnum):
    NONE = 0
    FENCED = 74


@pytest.mark.parametrize(
    "value",
    [
        {"type": "event", "seq": 3, "ts": 10, "node": 1, "event": "StartElection", "state": STATE, "log": {}},
        {"note": "caf\u00e9 \u2028 \U0001f600"},  # non-ASCII: json escapes it, orjson would not
        {"note": "del \x7f, controls \x00\x01\x1f\t\n\r\b\f, quote \" backslash \\ slash /"},
        {"f": [0.1, 10.0, 0.0, -0.0, 1e16, 1.5e300, 1e-4, 2.5e-4]},  # floats both write alike
        {"f": [1.5e-05, 1e-07, 9.9e-05, 5e-324, -3e-06, 1e-10]},  # floats orjson writes differently
        {"f": [math.nan, math.inf, -math.inf]},  # not JSON, but what json.dumps always wrote
        {"big": [2**64, -(2**63) - 1, 2**63 - 1, -(2**63), 10**40]},
        {"keys": {1: "a", 2: {3: None}}},  # non-str keys: json makes them strings, orjson refuses
        {"enum": _Code.FENCED, "t": (1, 2, (3,))},
        {"null": None, "nested": [[], {}, [None, True, False]]},
        {"digest": "3e-5", "text": ":1e-5,", "zeros": "0.00001"},  # look like small floats, are strings
    ],
)
def test_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert encode_line(value) == _json(value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(_JSON)
def test_encoder_matches_json_dumps_on_any_json_value(value: Any) -> None:
    line = encode_line({"v": value})
    assert line == _json({"v": value})
    assert line.isascii()


def test_encoder_converts_like_to_jsonable() -> None:
    """uuids as strings and record bytes as batch summaries, without a converted copy first."""
    records = encode_batches((data_batch(0, 1, [b"x"]), data_batch(1, 1, [b"yy", b"z"])))
    value = {"TopicId": uuid.UUID(int=7), "Records": records, "Ids": (uuid.UUID(int=0),)}
    assert encode_line(value) == _json(to_jsonable(value))
    assert json.loads(encode_line(value))["Records"]["batches"][1]["lastOffset"] == 2


@pytest.mark.parametrize(
    "inner", [{"a": 1, "b": "x"}, {"ClusterId": None}, {"note": "\u00e9"}, [1e-05, 2**70], "text"]
)
def test_encoded_values_are_spliced_in_as_they_were(inner: Any) -> None:
    """Encoded (a msg shared by a Send and its Receive) writes the same bytes, on either encoder's path."""
    shared = Encoded(inner)
    assert shared.data == _json(inner)
    line = encode_line({"ts": 1, "msg": shared, "note": "duplicate"})
    assert line == _json({"ts": 1, "msg": inner, "note": "duplicate"})


def test_encoder_names_what_has_no_json_form() -> None:
    with pytest.raises(TypeError, match="Path"):
        encode_line({"ts": 1, "where": Path("/tmp")})


@pytest.mark.parametrize("validate", [True, False])
def test_emitted_lines_are_what_json_dumps_wrote(tmp_path: Path, validate: bool) -> None:
    p = tmp_path / "t.ndjson"
    events = [
        {"ts": 0, "node": 1, "event": "StartElection", "cause": "ElectionTimeout", "state": STATE},
        {"ts": 1, "node": 2, "event": "Restart", "state": STATE, "note": "r\u00e9start"},
    ]
    with TraceWriter(p, HEADER, validate=validate) as w:
        for ev in events:
            w.emit(ev)
    lines = p.read_bytes().splitlines()
    assert lines[0] == _json({"type": "header", "format": FORMAT_VERSION, **HEADER})
    assert lines[1:] == [_json({"type": "event", "seq": i, **ev}) for i, ev in enumerate(events)]


def test_event_keys_named_type_or_seq_keep_their_place(tmp_path: Path) -> None:
    """{"type": "event", "seq": n, **event}: an event's own type/seq replaces the value, not the position."""
    p = tmp_path / "t.ndjson"
    with TraceWriter(p, HEADER, validate=False) as w:
        w.emit({"ts": 0, "seq": 99, "node": 1})
        w.emit({"type": "event", "ts": 1, "node": 1})
    assert p.read_bytes().splitlines()[1:] == [
        _json({"type": "event", "seq": 99, "ts": 0, "node": 1}),
        _json({"type": "event", "seq": 1, "ts": 1, "node": 1}),
    ]


def test_encoded_events_get_type_and_seq_and_are_validated_when_asked(tmp_path: Path) -> None:
    ev = {"ts": 0, "node": 1, "event": "StartElection", "cause": "ElectionTimeout", "state": STATE}
    p = tmp_path / "t.ndjson"
    with TraceWriter(p, HEADER, validate=False) as w:
        assert w.emit_encoded(encode_line(ev)) == 0
        assert w.emit(ev) == 1
    assert p.read_bytes().splitlines()[1:] == [_json({"type": "event", "seq": i, **ev}) for i in (0, 1)]
    with TraceWriter(tmp_path / "v.ndjson", HEADER) as w, pytest.raises(TraceError, match="event"):
        w.emit_encoded(encode_line({**ev, "event": "HandleVoteReq"}))
    with TraceWriter(tmp_path / "b.ndjson", HEADER, validate=False) as w:
        for bad in (b"[1]", b"{}"):
            with pytest.raises(TraceError, match="non-empty JSON object"):
                w.emit_encoded(bad)


# ------------------------------------------------------------------ the fast schema check is a yes only


@pytest.fixture(scope="module")
def simulated_lines(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every line of a simulated trace with brokers and faults: all the event kinds the format has."""
    from kraft_tck.traces.sim import SimConfig, simulate

    p = tmp_path_factory.mktemp("sim") / "t.ndjson"
    simulate(SimConfig(seed=3, nodes=3, duration_ms=8_000, profile="heavy", brokers=2), p)
    return [json.loads(raw) for raw in p.read_bytes().splitlines()]


def test_fast_check_clears_every_valid_line(simulated_lines: list[dict[str, Any]]) -> None:
    """Valid lines never reach jsonschema (else the fast path would buy nothing), and they are valid."""
    from kraft_tck.spec.trace import _accepts, _validator

    kinds = {(o.get("type"), o.get("event")) for o in simulated_lines}
    assert len(kinds) > 10, kinds
    for obj in simulated_lines:
        _accepts()(obj)  # raises JsonSchemaException on a refusal
        assert _validator().is_valid(obj)


_ODD = st.sampled_from([None, True, False, 0, 1, -1, 1.0, 1.5, 2**70, "", "x", "Leader", [], [1], {}, {"a": 1}])


def _paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*at, i))
    return out


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_fast_check_never_accepts_what_jsonschema_refuses(
    simulated_lines: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A line changed in one place (a value replaced by one of another type or range, a key dropped, an
    unknown key added): whenever the fast check accepts it, jsonschema (the authority) accepts it too, and
    line_errors agrees with jsonschema."""
    import copy

    import fastjsonschema
    from kraft_tck.spec.trace import _accepts, _validator

    obj = copy.deepcopy(data.draw(st.sampled_from(simulated_lines)))
    path = data.draw(st.sampled_from(_paths(obj)))
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    how = data.draw(st.sampled_from(["replace", "drop", "add"]))
    if how == "replace":
        parent[path[-1]] = data.draw(_ODD)
    elif how == "drop" and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["zz", "Zz", "state2"]))] = data.draw(_ODD)
    try:
        _accepts()(obj)
        fast = True
    except fastjsonschema.JsonSchemaException:
        fast = False
    valid = _validator().is_valid(obj)
    assert not (fast and not valid), f"fast check accepted a line jsonschema refuses: {obj}"
    assert (line_errors(obj) == []) == valid


def test_fast_check_leaves_the_shared_schema_as_it_was() -> None:
    """fastjsonschema rewrites the $refs of the document it compiles; the schema others read stays intact."""
    from importlib import resources

    from kraft_tck.spec.trace import _accepts, schema

    _accepts.cache_clear()
    _accepts()
    on_disk = json.loads(resources.files("kraft_tck.spec").joinpath("trace.schema.json").read_text(encoding="utf-8"))
    assert schema() == on_disk
