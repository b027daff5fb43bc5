"""The .properties reader/writer and NodeConfig: Kafka's keys, defaults, and one clear error per bad form."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kraft_tck.reference.config import (
    ConfigError,
    Endpoint,
    Listener,
    NodeConfig,
    Voter,
    load_properties,
    parse_properties,
    render_properties,
)

VOTERS_FORM = "controller.quorum.voters: expected id@host:port[,id@host:port...], got "

BASE = {
    "node.id": "1",
    "process.roles": "controller",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
    "log.dirs": "/var/lib/kraft/node-1",
}


def with_(**changes: str | None) -> dict[str, str]:
    props = dict(BASE)
    for k, v in changes.items():
        key = k.replace("_", ".")
        if v is None:
            props.pop(key, None)
        else:
            props[key] = v
    return props


# ---------------------------------------------------------------------------------------------- .properties


def test_parse_properties_java_forms() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "node.id=1\n"
        "  listeners : CONTROLLER://h:9093  \n"
        "log.dirs /data/x\n"
        "empty=\n"
        "bare\n"
        "multi=a,\\\n"
        "      b,\\\n"
        "   c\n"
        "esc=tab\\there\\nnl \\u00e9 back\\\\slash\n"
        "key\\=with\\:seps = v\n"
        "dup=first\n"
        "dup=second\r\n"
        "crlf=yes\r"
        "cr=also\n"
    )
    assert parse_properties(text) == {
        "node.id": "1",
        "listeners": "CONTROLLER://h:9093  ",  # Java keeps trailing blanks of a value
        "log.dirs": "/data/x",
        "empty": "",
        "bare": "",
        "multi": "a,b,c",
        "esc": "tab\there\nnl é back\\slash",
        "key=with:seps": "v",
        "dup": "second",
        "crlf": "yes",
        "cr": "also",
    }


def test_comment_marker_inside_continuation_is_value_text() -> None:
    assert parse_properties("k=a\\\n#not-a-comment\n") == {"k": "a#not-a-comment"}


def test_parse_properties_errors_name_source_and_line() -> None:
    with pytest.raises(ConfigError, match=r"^server.properties:3: malformed \\uXXXX escape"):
        parse_properties("a=1\n\nb=\\u12x4\n", source="server.properties")
    with pytest.raises(ConfigError, match=re.escape("f.properties:1: line '=value' has a value but no key")):
        parse_properties("=value\n", source="f.properties")


keys = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)
values = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)


@given(st.dictionaries(keys, values, max_size=8))
def test_render_then_parse_round_trips(props: dict[str, str]) -> None:
    assert parse_properties(render_properties(props, header="generated\nby a test")) == props


def test_render_properties_converts_values_and_keeps_order() -> None:
    text = render_properties({"b": 2, "a": True, "voters": ["1@h:1", "2@h:2"], "p": Path("/x")})
    assert text == "b=2\na=true\nvoters=1@h:1,2@h:2\np=/x\n"


# ---------------------------------------------------------------------------------------------- NodeConfig


def test_node_config_reads_kafka_keys_with_defaults() -> None:
    cfg = NodeConfig.from_properties(BASE)
    assert cfg.node_id == 1
    assert cfg.listener == Listener("CONTROLLER", Endpoint("127.0.0.1", 9093))
    assert cfg.voters == (
        Voter(1, Endpoint("127.0.0.1", 9093)),
        Voter(2, Endpoint("127.0.0.1", 9094)),
        Voter(3, Endpoint("127.0.0.1", 9095)),
    )
    assert cfg.voter_ids == {1, 2, 3} and cfg.is_voter
    assert cfg.log_dir == Path("/var/lib/kraft/node-1")
    assert cfg.process_roles == ("controller",)
    # Kafka's defaults (QuorumConfig, SocketServerConfigs); fetch.max.wait is KafkaRaftClient's 500 ms.
    assert (
        cfg.election_timeout_ms,
        cfg.fetch_timeout_ms,
        cfg.election_backoff_max_ms,
        cfg.request_timeout_ms,
        cfg.retry_backoff_ms,
        cfg.append_linger_ms,
        cfg.fetch_max_wait_ms,
        cfg.socket_request_max_bytes,
        cfg.broker_session_timeout_ms,
    ) == (1000, 2000, 1000, 2000, 20, 25, 500, 104857600, 9000)
    assert cfg.log_cache_bytes == 8 * 1024 * 1024  # this node's own setting: one default segment's worth
    assert cfg.extra == {}


def test_node_config_overrides_and_forms() -> None:
    cfg = NodeConfig.from_properties(
        with_(
            process_roles=None,
            node_id="7",
            listeners="PLAINTEXT://:9092,CONTROLLER://[::1]:9093",
            controller_listener_names="CONTROLLER",
            controller_quorum_voters=" 1@[::1]:9093 , 2@host-b:9094",
            log_dirs="/a, /b",
        )
        | {"controller.quorum.election.timeout.ms": "150", "controller.quorum.append.linger.ms": "0"}
    )
    assert cfg.listener == Listener("CONTROLLER", Endpoint("::1", 9093))
    assert str(cfg.listener) == "CONTROLLER://[::1]:9093"
    assert cfg.voters == (Voter(1, Endpoint("::1", 9093)), Voter(2, Endpoint("host-b", 9094)))
    assert not cfg.is_voter  # an observer: allowed when process.roles does not say controller
    assert cfg.log_dir == Path("/a")
    assert cfg.election_timeout_ms == 150 and cfg.append_linger_ms == 0
    assert cfg.voter(2).endpoint == Endpoint("host-b", 9094)
    with pytest.raises(KeyError, match=re.escape("node 9 is not in controller.quorum.voters")):
        cfg.voter(9)


def test_first_listener_without_controller_listener_names_and_metadata_log_dir_wins() -> None:
    cfg = NodeConfig.from_properties(
        with_(listeners="PLAINTEXT://h:1,CONTROLLER://h:2", metadata_log_dir="/meta")
    )
    assert cfg.listener.name == "PLAINTEXT"
    assert cfg.log_dir == Path("/meta")


def test_unknown_keys_kept_with_a_single_warning(caplog: pytest.LogCaptureFixture) -> None:
    props = BASE | {"num.partitions": "3", "listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}
    with caplog.at_level(logging.WARNING, logger="kraft_tck.reference.config"):
        cfg = NodeConfig.from_properties(props, source="server.properties")
    assert cfg.extra == {"num.partitions": "3", "listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}
    [rec] = caplog.records
    assert "server.properties" in rec.getMessage()
    # listener.security.protocol.map is read (the controller listener's protocol), so not named as unused.
    assert "keeping 1 key(s) this node does not use: num.partitions" in rec.getMessage()


def test_to_properties_round_trips_through_a_file(tmp_path: Path) -> None:
    cfg = NodeConfig.from_properties(BASE | {"controller.quorum.fetch.timeout.ms": "900", "x.y": "z"})
    path = tmp_path / "node.properties"
    path.write_text(render_properties(cfg.to_properties()))
    assert NodeConfig.load(path) == cfg
    assert load_properties(path)["controller.quorum.voters"] == BASE["controller.quorum.voters"]


def test_load_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.properties: config file not found"):
        NodeConfig.load(tmp_path / "nope.properties")


INT_KEYS = [
    ("controller.quorum.election.timeout.ms", 1),
    ("controller.quorum.fetch.timeout.ms", 1),
    ("controller.quorum.election.backoff.max.ms", 0),
    ("controller.quorum.request.timeout.ms", 1),
    ("controller.quorum.retry.backoff.ms", 0),
    ("controller.quorum.append.linger.ms", 0),
    ("controller.quorum.fetch.max.wait.ms", 0),
    ("socket.request.max.bytes", 1),
    ("broker.session.timeout.ms", 1),
    ("reference.log.cache.bytes", 0),
]


@pytest.mark.parametrize(("key", "minimum"), INT_KEYS)
@pytest.mark.parametrize("bad", ["abc", "1.5", "", "-5", "99999999999"])
def test_bad_integer_setting_names_key_and_form(key: str, minimum: int, bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig.from_properties(BASE | {key: bad})
    assert str(info.value) == f"{key}: expected an integer between {minimum} and 2147483647, got {bad!r}"


@pytest.mark.parametrize(("key", "minimum"), INT_KEYS)
def test_integer_setting_minimum_is_accepted(key: str, minimum: int) -> None:
    props = BASE | {key: str(minimum)}
    if key in ("controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms"):
        props["controller.quorum.fetch.max.wait.ms"] = "0"  # a long-poll must end before either
    cfg = NodeConfig.from_properties(props)
    assert cfg.to_properties()[key] == str(minimum)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (with_(node_id=None), "node.id: missing (expected an integer ≥ 0)"),
        (with_(node_id="-1"), "node.id: expected an integer between 0 and 2147483647, got '-1'"),
        (with_(node_id="one"), "node.id: expected an integer between 0 and 2147483647, got 'one'"),
        (with_(listeners=None), "listeners: missing (expected NAME://host:port"),
        (
            with_(listeners="127.0.0.1:9093"),
            "listeners: expected NAME://host:port[,NAME://host:port...], got '127.0.0.1:9093'",
        ),
        (with_(listeners="CONTROLLER://h:99999"), "listeners: expected NAME://host:port"),
        (with_(listeners="CONTROLLER://h:p"), "listeners: expected NAME://host:port"),
        (
            with_(controller_quorum_voters=None),
            "controller.quorum.voters: missing (expected id@host:port[,id@host:port...])",
        ),
        (
            with_(controller_quorum_voters="1@foo"),
            "controller.quorum.voters: expected id@host:port[,id@host:port...], got '1@foo'",
        ),
        (
            with_(controller_quorum_voters="foo:9093"),
            "controller.quorum.voters: expected id@host:port[,id@host:port...], got 'foo:9093'",
        ),
        (with_(controller_quorum_voters="x@h:1"), VOTERS_FORM + "'x@h:1'"),
        (with_(controller_quorum_voters="1@:9093"), VOTERS_FORM + "'1@:9093'"),
        (with_(controller_quorum_voters="1@h:1,"), VOTERS_FORM + "'1@h:1,'"),
        (with_(controller_quorum_voters="1@h:1,1@h:2"), "controller.quorum.voters: voter id 1 appears twice"),
        (with_(log_dirs=None), "log.dirs: missing (expected a directory path"),
        (with_(log_dirs=" , "), "log.dirs: missing"),
        (
            with_(process_roles="controller,zookeeper"),
            "process.roles: expected a subset of broker,controller, got 'controller,zookeeper'",
        ),
        (
            with_(node_id="4"),
            "controller.quorum.voters: node.id 4 has process.roles=controller but is not among the voters",
        ),
        (
            with_(controller_listener_names="CTRL"),
            "controller.listener.names: 'CTRL' is not one of the listeners CONTROLLER",
        ),
        (
            BASE | {"controller.quorum.fetch.max.wait.ms": "2000"},
            "controller.quorum.fetch.max.wait.ms: expected less than "
            "controller.quorum.fetch.timeout.ms (2000), got 2000",
        ),
        (
            BASE | {"controller.quorum.request.timeout.ms": "500"},
            "controller.quorum.fetch.max.wait.ms: expected less than "
            "controller.quorum.request.timeout.ms (500), got 500",
        ),
    ],
)
def test_bad_or_missing_setting_names_key_and_expected_form(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        NodeConfig.from_properties(props)
    assert str(info.value).startswith(message)


# ---------------------------------------------------------------------------------------------- KIP-853

BOOTSTRAP_KEY = "controller.quorum.bootstrap.servers"
KAFKA_FORM = 'Each entry should be in the form "{host}:{port}"'


def test_bootstrap_servers_make_controller_quorum_voters_optional() -> None:
    """KafkaConfig.validateQuorumVotersAndQuorumBootstrapServerForKRaft: one of the two keys is enough; the
    node.id-among-the-voters rule applies only when controller.quorum.voters is set."""
    props = with_(controller_quorum_voters=None) | {BOOTSTRAP_KEY: "127.0.0.1:9093, [::1]:9094,host-c:9095"}
    cfg = NodeConfig.from_properties(props)
    assert cfg.voters == () and cfg.bootstrap_servers == (
        Endpoint("127.0.0.1", 9093), Endpoint("::1", 9094), Endpoint("host-c", 9095))
    again = NodeConfig.from_properties(parse_properties(render_properties(cfg.to_properties())))
    assert again.bootstrap_servers == cfg.bootstrap_servers and again.voters == ()
    assert "controller.quorum.voters" not in cfg.to_properties()
    both = NodeConfig.from_properties(BASE | {BOOTSTRAP_KEY: "127.0.0.1:9093"})
    assert len(both.voters) == 3 and both.bootstrap_servers == (Endpoint("127.0.0.1", 9093),)
    assert NodeConfig.from_properties(BASE).bootstrap_servers == ()
    # A controller not in a static voter set is still refused; with bootstrap servers only, any node.id goes.
    assert NodeConfig.from_properties(props | {"node.id": "9"}).node_id == 9


@pytest.mark.parametrize(("value", "message"), [
    ("localhost", f"{BOOTSTRAP_KEY}: Failed to parse host name from localhost for the configuration "
                  f"{BOOTSTRAP_KEY}. {KAFKA_FORM}"),
    ("localhost:port", f"{BOOTSTRAP_KEY}: Failed to parse host name from localhost:port for the configuration "
                       f"{BOOTSTRAP_KEY}. {KAFKA_FORM}"),
    (":9093", f"{BOOTSTRAP_KEY}: Failed to parse host name from :9093"),
    ("a:1,,b:2", f"{BOOTSTRAP_KEY}: Failed to parse host name from  for the configuration"),
    ("a:1,b!:2", f"{BOOTSTRAP_KEY}: Failed to parse host name from b!:2"),
    ("a:70000", f"{BOOTSTRAP_KEY}: port out of range: 70000"),
])
def test_bad_bootstrap_servers_are_one_line_naming_the_key(value: str, message: str) -> None:
    props = with_(controller_quorum_voters=None) | {BOOTSTRAP_KEY: value}
    with pytest.raises(ConfigError) as info:
        NodeConfig.from_properties(props)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_neither_voters_nor_bootstrap_servers_is_kafkas_rule() -> None:
    for props in (with_(controller_quorum_voters=None), with_(controller_quorum_voters=None) | {BOOTSTRAP_KEY: " "}):
        with pytest.raises(ConfigError) as info:
            NodeConfig.from_properties(props)
        assert str(info.value).startswith("controller.quorum.voters: missing")
        assert (f"either {BOOTSTRAP_KEY} must contain the set of bootstrap controllers or controller.quorum.voters "
                "must contain a parseable set of controllers") in str(info.value)
