"""The deterministic simulator: replayable by seed, schema-valid traces, progress under faults."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_tck.reference import wire
from kraft_tck.reference.core import CoreConfig
from kraft_tck.reference.io import ElectionState
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
    api_name,
)
from kraft_tck.reference.registry import REGISTER, BrokerChange, BrokerRegistry
from kraft_tck.spec.records import data_batch, encode_batch
from kraft_tck.spec.trace import read_trace, to_jsonable, validate_file
from kraft_tck.traces.checker import check_paths
from kraft_tck.traces.cli import COMMANDS, parse_duration_ms
from kraft_tck.traces.sim import Crash, NetConfig, OneWay, Partition, SimConfig, simulate
from kraft_tck.traces.sim.bodies import MessageBodies
from kraft_tck.traces.sim.cluster import Simulation, _Node


def _run(tmp_path: Path, name: str, **kw: object) -> Path:
    path = tmp_path / f"{name}.ndjson"
    result = simulate(SimConfig(**kw), path)
    result.raise_for_violation()
    return path


def test_same_seed_gives_byte_identical_trace(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", seed=7, duration_ms=15_000, profile="default")
    b = _run(tmp_path, "b", seed=7, duration_ms=15_000, profile="default")
    assert a.read_bytes() == b.read_bytes()
    assert len(a.read_bytes().splitlines()) > 100


def test_different_seeds_give_different_traces(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", seed=1, duration_ms=5_000)
    b = _run(tmp_path, "b", seed=2, duration_ms=5_000)
    assert a.read_bytes() != b.read_bytes()


def test_tracing_does_not_change_the_run(tmp_path: Path) -> None:
    """Tracing off counts the same events (so violation seq numbers match a traced replay)."""
    config = SimConfig(seed=3, duration_ms=10_000, profile="heavy")
    traced = simulate(config, tmp_path / "t.ndjson")
    untraced = simulate(config)
    assert traced.events == untraced.events > 0
    assert (traced.leaders, traced.committed) == (untraced.leaders, untraced.committed)
    assert len((tmp_path / "t.ndjson").read_text().splitlines()) == traced.events + 1


@pytest.mark.parametrize("brokers", [0, 3])
def test_every_line_is_what_json_dumps_writes(tmp_path: Path, brokers: int) -> None:
    """The writer's fast paths (orjson, message events assembled from encoded parts) write each line
    byte for byte as json.dumps(separators=(",", ":")) writes the decoded line: the trace format's bytes."""
    path = _run(tmp_path, "t", seed=4, duration_ms=20_000, profile="heavy", brokers=brokers)
    lines = path.read_bytes().splitlines()
    assert len(lines) > 500
    for n, line in enumerate(lines, start=1):
        assert line == json.dumps(json.loads(line), separators=(",", ":")).encode(), f"line {n}"
    notes = {json.loads(line).get("note") for line in lines}
    assert {"duplicate", "lost"} <= notes  # message events with and without notes were among them


@pytest.mark.parametrize("profile", ["none", "default", "heavy"])
def test_traces_validate_against_the_schema(tmp_path: Path, profile: str) -> None:
    path = _run(tmp_path, profile, seed=11, duration_ms=20_000, profile=profile)
    assert validate_file(path) == []
    trace = read_trace(path)
    assert trace.header["source"] == "simulator"
    assert trace.header["run"] == "seed-11"
    assert trace.header["config"]["seed"] == 11
    kinds = {e["event"] for e in trace.events}
    assert {"Restart", "StartElection", "BecomeLeader", "Send", "Receive", "ClientAppend"} <= kinds


def test_a_run_under_faults_elects_leaders_and_commits(tmp_path: Path) -> None:
    """Crash the first leader, partition, cut a link: the cluster still elects and commits (on the trace)."""
    faults = (
        Crash(4_000, 1, 2_000),
        Crash(4_000, 2, 2_000),  # two of three down: no quorum until they return
        Partition(9_000, 3_000, ((1,), (2, 3))),
        OneWay(14_000, 2_000, 3, 2),
        Crash(17_000, 3, 1_000, graceful=True),
    )
    path = _run(tmp_path, "faults", seed=5, duration_ms=25_000, faults=faults, write_rate=20)
    events = read_trace(path).events
    leaders = {(e["state"]["epoch"], e["node"]) for e in events if e["event"] == "BecomeLeader"}
    assert len({epoch for epoch, _ in leaders}) >= 2, "a new leader after the crashes"
    restarts = [e["node"] for e in events if e["event"] == "Restart" and e["ts"] > 0]
    assert sorted(restarts) == [1, 2, 3]
    # Progress after the double crash and the partition (a stale, cut-off voter may later keep
    # disrupting elections — no Pre-Vote in the core — so the check looks at the window before that).
    appended = [e for e in events if e["event"] == "ClientAppend" and 12_000 < e["ts"] < 14_000]
    assert appended, "writes are accepted again after the crashes and the partition"
    hw_early = max(e["state"]["highWatermark"] for e in events if "state" in e and e["ts"] < 4_000)
    hw_late = max(e["state"]["highWatermark"] for e in events if "state" in e and e["ts"] < 14_000)
    assert hw_late > hw_early > 0, "entries written after the faults are committed"
    assert any(e.get("note") == "partitioned" for e in events if e["event"] == "Send")


def test_a_crashed_node_comes_back_from_its_durable_state_only(tmp_path: Path) -> None:
    path = _run(tmp_path, "crash", seed=9, duration_ms=12_000, faults=(Crash(6_000, 2, 1_000),))
    events = read_trace(path).events
    before = [e for e in events if e["node"] == 2 and "state" in e and e["ts"] <= 6_000][-1]["state"]
    restart = next(e for e in events if e["node"] == 2 and e["event"] == "Restart" and e["ts"] > 0)
    assert restart["ts"] == 7_000
    assert restart["state"]["epoch"] == before["epoch"]  # quorum-state kept
    assert restart["state"]["logEndOffset"] == before["logEndOffset"]  # the log kept
    # volatile: relearnt from the leader; it starts at the log start (0, or the end of the snapshot there:
    # KIP-630, everything below the log start is committed)
    assert restart["state"]["highWatermark"] == restart["state"].get("logStartOffset", 0)
    assert not any(e["node"] == 2 and e["ts"] in range(6_001, 7_000) for e in events)  # silent while down


def test_partitioned_links_deliver_nothing(tmp_path: Path) -> None:
    path = _run(tmp_path, "part", seed=4, duration_ms=8_000, faults=(Partition(2_000, 4_000, ((1,), (2, 3))),))
    events = read_trace(path).events
    for e in events:
        if e["event"] == "Receive" and 2_100 <= e["ts"] < 6_000:  # after in-flight messages (<= 10ms) land
            assert (e["msg"]["from"] == 1) == (e["msg"]["to"] == 1), e


def test_links_are_fifo_unless_reordering_is_on(tmp_path: Path) -> None:
    def overtakes(path: Path) -> int:
        sent: dict[int, int] = {}
        last: dict[tuple[int, int], int] = {}
        count = 0
        for e in read_trace(path).events:
            if e["event"] == "Send":
                sent[e["msg"]["correlationId"] * 2 + (e["msg"]["kind"] == "response")] = e["seq"]
            elif e["event"] == "Receive" and e.get("note") != "duplicate":
                m = e["msg"]
                key = m["correlationId"] * 2 + (m["kind"] == "response")
                link = (m["from"], m["to"])
                if sent[key] < last.get(link, -1):
                    count += 1
                last[link] = max(last.get(link, -1), sent[key])
        return count

    fifo = _run(tmp_path, "fifo", seed=8, duration_ms=10_000, net=NetConfig(1, 50))
    assert overtakes(fifo) == 0
    wild = simulate(SimConfig(seed=8, duration_ms=10_000, net=NetConfig(1, 50, reorder=0.3)), tmp_path / "w.ndjson")
    assert overtakes(tmp_path / "w.ndjson") > 0, wild


@pytest.mark.parametrize("with_bytes", [False, True])
def test_fetch_response_summary_matches_to_jsonable(with_bytes: bool) -> None:
    """The simulator's shortcut for Records encodes to the bytes wire + to_jsonable + json.dumps give,
    whether it summarises the batches or the bytes the response carries (the leader's log's)."""
    batches = (data_batch(5, 2, [b"a", b"bb"]), data_batch(7, 3, [b"ccc"]))
    encoded = tuple(encode_batch(b) for b in batches) if with_bytes else None
    resp = FetchResponse(9, batches, None, LeaderIdAndEpoch(1, 3), encoded=encoded)
    bodies = MessageBodies()
    line = bodies.response(resp, 42, 1, 2)
    version = bodies.version(wire.api_key(resp))
    msg = json.loads(line)
    reference = to_jsonable(wire.response_to_body(resp, version))
    assert msg["body"] == reference
    assert msg["body"]["Responses"][0]["Partitions"][0]["Records"]["batches"][1]["baseOffset"] == 7
    assert line == json.dumps(
        {"api": "Fetch", "apiKey": 1, "kind": "response", "version": version, "correlationId": 42, "from": 1,
         "to": 2, "body": reference},
        separators=(",", ":"),
    ).encode()


def test_message_bodies_encode_what_the_whole_msg_encodes() -> None:
    """A msg is assembled from its type's head (encoded once) and its encoded body: the same bytes as the
    whole msg object encoded at once, on orjson's path and on json's (a null cluster id), for requests
    and responses, also the second time a type is seen (cached head)."""
    bodies = MessageBodies()

    def whole(message: Request | Response, kind: str, corr: int, body: dict[str, Any]) -> bytes:
        msg = {"api": api_name(message), "apiKey": wire.api_key(message), "kind": kind,
               "version": bodies.version(wire.api_key(message)), "correlationId": corr, "from": 1, "to": 2,
               "body": to_jsonable(body)}
        return json.dumps(msg, separators=(",", ":")).encode()

    requests: list[Request] = [
        VoteRequest(None, 3, 1, 2, 17, voter_id=2),
        VoteRequest("abc", 4, 1, 2, 18, voter_id=3),
        FetchRequest("cid", 2, 5, 40, 4, 500, 1024),
    ]
    for corr, req in enumerate(requests):
        body = wire.request_to_body(req, bodies.version(wire.api_key(req)))
        assert bodies.request(req, corr, 1, 2) == whole(req, "request", corr, body), req
    responses: list[Response] = [
        VoteResponse(1, 3, True),
        VoteResponse(2, 4, False),
        FetchResponse(9, (), (2, 30), LeaderIdAndEpoch(1, 3)),
    ]
    for corr, resp in enumerate(responses):
        body = wire.response_to_body(resp, bodies.version(wire.api_key(resp)))
        assert bodies.response(resp, corr, 1, 2) == whole(resp, "response", corr, body), resp


def test_message_fates_draw_what_randrange_draws() -> None:
    """_fate inlines rng.randrange for the delay: from the same rng state, the same delays as the plain
    calls (loss, duplication and reordering draws in between)."""
    net = NetConfig(min_delay_ms=3, max_delay_ms=40, loss=0.1, duplicate=0.2, reorder=0.1, reorder_max_ms=70)
    sim = Simulation(SimConfig(seed=5, net=net, faults=()))
    twin = random.Random()
    twin.setstate(sim.rng.getstate())
    for _ in range(3000):
        sim._link_clear.clear()
        delays, why = sim._fate(1, 2)
        expected: list[int] = []
        if twin.random() < net.loss:
            assert (delays, why) == ([], "lost")
            continue
        last = 0
        for _ in range(2 if twin.random() < net.duplicate else 1):
            d = twin.randrange(net.min_delay_ms, net.max_delay_ms + 1)
            if twin.random() < net.reorder:
                expected.append(d + twin.randrange(0, net.reorder_max_ms + 1))
            else:
                last = max(last, d)  # FIFO on the link: a later copy never arrives first
                expected.append(last)
        assert (delays, why) == (expected, None)
    assert sim.rng.getstate() == twin.getstate()


def test_skewed_clock_round_trips() -> None:
    for ppm in (-100_000, -1, 0, 7, 20_000):
        node = _Node(1, CoreConfig(node_id=1, voters=frozenset({1})), ppm, ElectionState(), Log())
        for local in (0, 1, 999, 1000, 123_457):
            g = node.global_time(local)
            assert node.local(g) >= local
            assert g == 0 or node.local(g - 1) < local


def test_bad_configuration_is_named() -> None:
    with pytest.raises(ValueError, match="node 4 is not in the cluster"):
        SimConfig(seed=1, faults=(Crash(0, 4, 100),))
    with pytest.raises(ValueError, match="unknown fault profile 'wild'"):
        SimConfig(seed=1, profile="wild")
    with pytest.raises(ValueError, match="loss is a probability"):
        NetConfig(loss=1.5)
    with pytest.raises(ValueError, match="brokers must be >= 0"):
        SimConfig(seed=1, brokers=-2)
    with pytest.raises(ValueError, match="must exceed broker_heartbeat_interval_ms"):
        SimConfig(seed=1, broker_session_timeout_ms=500, broker_heartbeat_interval_ms=1000)


def test_cli_simulate_writes_one_trace_per_seed(tmp_path: Path) -> None:
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        command, ["--seeds", "3", "--first-seed", "10", "--duration", "3s", "--out", str(out), "--faults", "none"]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["seed-10.ndjson", "seed-11.ndjson", "seed-12.ndjson"]
    assert "seeds run" in result.output and "events/s" in result.output


def test_cli_rejects_a_bad_duration() -> None:
    assert parse_duration_ms("60s") == 60_000 and parse_duration_ms("1500ms") == 1500
    assert parse_duration_ms("2m") == 120_000 and parse_duration_ms("5") == 5000
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    result = CliRunner().invoke(command, ["--duration", "soon", "--out", "x"])
    assert result.exit_code != 0 and "expected a positive duration" in result.output


@pytest.mark.parametrize("brokers", [0, 3])
@pytest.mark.parametrize("seed", [6, 30, 98, 119, 134])
def test_heavy_fault_seeds_that_once_broke_committed_never_truncated(seed: int, brokers: int, tmp_path: Path) -> None:
    """Under heavy faults (reordering, duplication) these seeds made the core apply a stale DivergingEpoch
    and truncate below its high watermark (CommittedNeverTruncated) before the core kept one request in
    flight per destination and dropped responses that do not answer it. ``brokers=0`` replays those very
    runs (a broker-less trace is what it was before brokers existed); with brokers, the same schedules."""
    result = simulate(SimConfig(seed=seed, nodes=3, duration_ms=60_000, profile="heavy", brokers=brokers),
                      trace_path=tmp_path / f"seed-{seed}.ndjson")
    assert result.violation is None, result.violation


# ------------------------------------------------------------------------------------ brokers


def _broker_events(path: Path) -> list[dict[str, Any]]:
    return [e for e in read_trace(path).events if e["event"] == "BrokerEvent"]


def test_brokers_register_come_online_and_every_node_applies_the_same_records(tmp_path: Path) -> None:
    """KIP-631 "Register Flow": a broker registers Fenced, is unfenced once caught up; crashed
    brokers are fenced when their session expires; controlled shutdowns pass Stopping to Offline. Every
    node reports the same changes (a registry is a pure function of the committed log)."""
    seen: set[tuple[str, str]] = set()
    for seed in (0, 1, 3):
        path = tmp_path / f"b{seed}.ndjson"
        result = simulate(SimConfig(seed=seed, duration_ms=60_000, profile="default"), path)
        assert result.violation is None, result.violation
        assert validate_file(path) == []
        events = _broker_events(path)
        assert result.broker_events == len(events) > 0
        header = read_trace(path).header
        assert header["config"]["brokers"] == [100, 101, 102]
        by_node: dict[int, list[tuple[int, str, int, str]]] = {}
        for e in events:
            b = e["broker"]
            assert e["note"] == b["record"]
            by_node.setdefault(e["node"], []).append((b["offset"], b["record"], b["brokerId"], b["state"]))
            seen.add((b["record"], b["state"]))
        # Restarted nodes replay from offset 0: compare each node's changes by offset, once each.
        histories = [dict(((o, r, i), s) for o, r, i, s in changes) for changes in by_node.values()]
        common = set.intersection(*(set(h) for h in histories))
        assert common, "the nodes share committed broker records"
        for key in common:
            assert len({h[key] for h in histories}) == 1, f"nodes disagree on {key}"
    assert {("RegisterBrokerRecord", "Fenced"), ("UnfenceBrokerRecord", "Online"), ("FenceBrokerRecord", "Fenced"),
            ("BrokerRegistrationChangeRecord", "Stopping"), ("BrokerRegistrationChangeRecord", "Offline")} <= seen


def test_brokers_keep_a_seeds_schedule_and_zero_brokers_add_nothing(tmp_path: Path) -> None:
    with_brokers = simulate(SimConfig(seed=21, duration_ms=20_000), tmp_path / "with.ndjson")
    without = simulate(SimConfig(seed=21, duration_ms=20_000, brokers=0), tmp_path / "without.ndjson")
    a, b = read_trace(tmp_path / "with.ndjson"), read_trace(tmp_path / "without.ndjson")
    for key in ("schedule", "clock.skew.ppm", "net", "clock"):
        assert a.header["config"][key] == b.header["config"][key], key
    assert with_brokers.faults == without.faults
    assert without.broker_events == 0 and not _broker_events(tmp_path / "without.ndjson")
    assert not any(k.startswith("broker") for k in b.header["config"])
    assert with_brokers.broker_events > 0


class EagerRegistry(BrokerRegistry):
    """Bug: a registration is applied unfenced, so the broker is Online before any catch-up (KIP-631 says
    a registered broker starts Fenced) — and no earlier registration backs that Online."""

    def apply(self, offset: int, name: str, body: dict[str, Any]) -> BrokerChange:
        if name == REGISTER:
            body = {**body, "Fenced": False}
        return super().apply(offset, name, body)


def test_online_without_an_earlier_committed_registration_stops_the_seed(tmp_path: Path) -> None:
    config = SimConfig(seed=2, duration_ms=20_000, profile="none")
    result = simulate(config, tmp_path / "bad.ndjson", registry_class=EagerRegistry)
    v = result.violation
    assert v is not None and v.invariant == "OnlineRequiresRegistration", v
    assert "shows no earlier RegisterBrokerRecord" in v.detail and f"epoch {v.epoch}" in v.detail
    again = simulate(config, registry_class=EagerRegistry).violation
    assert again is not None and (again.node, again.epoch, again.seq, again.ts) == (v.node, v.epoch, v.seq, v.ts)
    # The trace ends at the violating event: it is the next line's seq, and the checker names the same event.
    events = read_trace(tmp_path / "bad.ndjson").events
    assert len(events) == v.seq
    assert simulate(config).violation is None


def test_the_checker_finds_an_online_broker_without_registration(tmp_path: Path) -> None:
    path = tmp_path / "seed-4.ndjson"
    simulate(SimConfig(seed=4, duration_ms=30_000, profile="none"), path).raise_for_violation()
    assert check_paths([path]).violations == []
    lines = path.read_text().splitlines()
    i, ev = next((i, json.loads(t)) for i, t in enumerate(lines) if '"state":"Online"' in t)
    ev["broker"]["brokerId"] = 999  # never registered
    lines[i] = json.dumps(ev)
    path.write_text("\n".join(lines) + "\n")
    found = check_paths([path]).violations
    assert [(v.invariant, v.node, v.epoch, v.seq) for v in found] == [
        ("OnlineRequiresRegistration", ev["node"], ev["broker"]["brokerEpoch"], ev["seq"])]
    assert "broker 999 reported Online" in found[0].detail


def test_cli_simulate_takes_the_broker_count(tmp_path: Path) -> None:
    (command,) = [c for c in COMMANDS if c.name == "simulate"]
    for brokers, expected in (("0", None), ("2", [100, 101])):
        out = tmp_path / brokers
        result = CliRunner().invoke(command, ["--seeds", "1", "--duration", "5s", "--out", str(out),
                                              "--brokers", brokers])
        assert result.exit_code == 0, result.output
        assert read_trace(out / "seed-0.ndjson").header["config"].get("brokers") == expected
    result = CliRunner().invoke(command, ["--seeds", "1", "--out", str(tmp_path / "x"), "--brokers", "-1"])
    assert result.exit_code != 0 and "--brokers" in result.output
