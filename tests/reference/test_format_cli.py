"""``kraft-tck format`` and ``kraft-tck random-uuid`` take kafka-storage's flags and behave as it does
(Kafka's ``StorageTool`` and ``Formatter``): ``-t/--cluster-id``, ``-c/--config``, ``-g/--ignore-formatted``;
an already formatted directory fails the command unless ``--ignore-formatted``; another cluster id fails
it either way. Real files; environment problems are one line.

KIP-853: ``--standalone``, ``--initial-controllers`` and ``--no-initial-controllers`` (StorageTool.runFormatCommand,
``DynamicVoters.parse``, ``Formatter.effectiveKRaftFeatureLevel`` with their messages); the bootstrap checkpoint is
compared byte for byte with a RecordBatch built by hand from Kafka's record format and message JSONs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kraft_tck.reference.cli import main
from kraft_tck.reference.storage import read_meta_file

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def config(tmp_path: Path, data: Path | None = None, node_id: int = 1) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=controller\n"
        f"node.id={node_id}\n"
        "listeners=CONTROLLER://127.0.0.1:19093\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters={node_id}@127.0.0.1:19093\n"
        f"log.dirs={data or tmp_path / 'data'}\n"
    )
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


def test_short_flags_format_and_a_second_format_needs_ignore_formatted(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    code, out, _ = run("format", "-t", CLUSTER, "-c", str(cfg))
    assert code == 0 and CLUSTER in out
    meta = read_meta_file(tmp_path / "data" / "meta.properties")
    assert meta is not None and (meta.cluster_id, meta.node_id) == (CLUSTER, 1)
    before = (tmp_path / "data" / "meta.properties").read_bytes()
    assert run("format", "-t", CLUSTER, "-c", str(cfg)) == (
        1, "", f"Log directory {tmp_path / 'data'} is already formatted. "
               "Use --ignore-formatted to ignore this directory and format the others.\n")
    assert run("format", "--cluster-id", CLUSTER, "--config", str(cfg), "--ignore-formatted") == (
        0, "All of the log directories are already formatted.\n", "")
    assert run("format", "-g", "-t", CLUSTER, "-c", str(cfg))[0] == 0
    assert (tmp_path / "data" / "meta.properties").read_bytes() == before


def test_ignore_formatted_does_not_let_another_cluster_in(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert run("format", "-t", CLUSTER, "-c", str(cfg))[0] == 0
    code, _, err = run("format", "-g", "-t", "AAAAAAAAAAAAAAAAAAAAAQ", "-c", str(cfg))
    assert code == 1 and "already formatted for cluster.id" in err and len(err.splitlines()) == 1


def test_random_uuid_prints_a_new_kafka_uuid_each_time(tmp_path: Path) -> None:
    ids = {run("random-uuid")[1].strip() for _ in range(5)}
    assert len(ids) == 5 and all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) for i in ids), ids
    cid = ids.pop()
    assert run("format", "-t", cid, "-c", str(config(tmp_path)))[0] == 0


def test_random_cluster_id_still_works_and_excludes_cluster_id(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    code, out, _ = run("format", "--config", str(cfg), "--random-cluster-id")
    meta = read_meta_file(tmp_path / "data" / "meta.properties")
    assert code == 0 and meta is not None and meta.cluster_id in out
    code, _, err = run("format", "-c", str(cfg), "-t", CLUSTER, "--random-cluster-id")
    assert code == 2 and "exactly one of -t/--cluster-id" in err


def test_a_data_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = config(tmp_path, data=blocker / "data")  # below a regular file: no one can create it, root included
    code, out, err = run("format", "-t", CLUSTER, "-c", str(cfg))
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert str(blocker) in err and "log.dirs" in err


# ---------------------------------------------------------------------------------------------- KIP-853

DIR_A, DIR_B, DIR_C = "wZoXPqWoSu6F6c8MkmdyAg", "_KWDkTahTVaiVVVTaugNew", "J8aAPcfLQt2bqs1JT_rMgQ"


def dynamic_config(tmp_path: Path, node_id: int = 1, roles: str = "controller", port: int = 19093,
                   voters: str | None = None, extra: str = "") -> Path:
    """A controller of a dynamic quorum: controller.quorum.bootstrap.servers instead of controller.quorum.voters."""
    path = tmp_path / f"server-{node_id}.properties"
    quorum = (f"controller.quorum.voters={voters}\n" if voters
              else f"controller.quorum.bootstrap.servers=127.0.0.1:{port}\n")
    path.write_text(f"process.roles={roles}\nnode.id={node_id}\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                    f"controller.listener.names=CONTROLLER\n{quorum}log.dirs={tmp_path / f'data-{node_id}'}\n{extra}")
    return path


def checkpoint(tmp_path: Path, node_id: int = 1) -> Path:
    return tmp_path / f"data-{node_id}" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _varint(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))


def _compact_string(s: str) -> bytes:
    return _uvarint(len(s.encode()) + 1) + s.encode()


def kafka_voters_record(voters: list[tuple[int, str, str, int]], listener: str = "CONTROLLER") -> bytes:
    """VotersRecord v0 as Kafka's generated serializer writes it (flexible: compact arrays and strings, an empty
    tagged-field section after every struct), built by hand from the message JSON."""
    import base64
    import struct

    out = struct.pack(">h", 0) + _uvarint(len(voters) + 1)
    for node_id, directory, host, port in voters:
        out += struct.pack(">i", node_id) + base64.urlsafe_b64decode(directory + "==")
        out += _uvarint(2) + _compact_string(listener) + _compact_string(host) + struct.pack(">H", port) + b"\0"
        out += struct.pack(">hh", 0, 1) + b"\0"  # KRaftVersionFeature 0..1 (DynamicVoter.toVoterNode)
        out += b"\0"
    return out + b"\0"


def kafka_control_batch(base_offset: int, timestamp: int, records: list[tuple[int, bytes]]) -> bytes:
    """A RecordBatch v2 control batch at epoch 0 as Kafka's MemoryRecordsBuilder writes it, built by hand."""
    import struct

    from kraft_tck.spec.records import crc32c

    body = b""
    for delta, (ctype, value) in enumerate(records):
        rec = b"\0" + _varint(0) + _varint(delta) + _varint(4) + struct.pack(">hh", 0, ctype)
        rec += _varint(len(value)) + value + _varint(0)
        body += _varint(len(rec)) + rec
    after_crc = (struct.pack(">hiqqqhii", 0x20, len(records) - 1, timestamp, timestamp, -1, -1, -1, len(records))
                 + body)
    head = struct.pack(">iB", 0, 2)  # partition leader epoch 0, magic 2
    crc = struct.pack(">I", crc32c(after_crc))
    return struct.pack(">qi", base_offset, len(head) + len(crc) + len(after_crc)) + head + crc + after_crc


def test_standalone_writes_kafkas_bootstrap_checkpoint_byte_for_byte(tmp_path: Path) -> None:
    """Formatter.writeDynamicQuorumSnapshot: one control batch (SnapshotHeader, KRaftVersion(0, 1), Voters), then
    the SnapshotFooter batch; meta.properties' directory.id is the voter's
    (StorageTool.createStandaloneDynamicVoters)."""
    import struct

    code, out, err = run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path)), "--standalone")
    assert code == 0, err
    meta = read_meta_file(tmp_path / "data-1" / "meta.properties")
    assert meta is not None and meta.directory_id is not None and meta.directory_id in out
    data = checkpoint(tmp_path).read_bytes()
    ts = struct.unpack_from(">q", data, 27)[0]  # the header batch's base timestamp: Kafka's "now"
    assert abs(ts - time.time() * 1000) < 60_000
    header = struct.pack(">hq", 0, ts) + b"\0"  # SnapshotHeaderRecord v0, LastContainedLogTimestamp = now
    expected = kafka_control_batch(0, ts, [(3, header), (5, struct.pack(">hh", 0, 1) + b"\0"),
                                           (6, kafka_voters_record([(1, meta.directory_id, "127.0.0.1", 19093)]))])
    expected += kafka_control_batch(3, ts, [(4, struct.pack(">h", 0) + b"\0")])
    assert data == expected
    assert (tmp_path / "data-1" / "bootstrap.checkpoint").exists()  # the usual bootstrap metadata too


def test_initial_controllers_voter_and_non_voter_directories(tmp_path: Path) -> None:
    """Formatter.DirectoryType: a node named in --initial-controllers takes its directory id from there; any other
    node gets a random one; both get the same bootstrap checkpoint (IPv6 hosts in brackets, DynamicVoters.parse)."""
    controllers = f"2@[::1]:9094:{DIR_B},1@localhost:9093:{DIR_A},3@host-c:9095:{DIR_C}"
    for node in (1, 4):
        code, _, err = run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path, node)),
                           "--initial-controllers", controllers)
        assert code == 0, err
    meta1 = read_meta_file(tmp_path / "data-1" / "meta.properties")
    meta4 = read_meta_file(tmp_path / "data-4" / "meta.properties")
    assert meta1 is not None and meta1.directory_id == DIR_A
    assert meta4 is not None and meta4.directory_id not in (None, DIR_A, DIR_B, DIR_C)
    want = kafka_voters_record([(1, DIR_A, "localhost", 9093), (2, DIR_B, "::1", 9094), (3, DIR_C, "host-c", 9095)])
    for node in (1, 4):
        data = checkpoint(tmp_path, node).read_bytes()
        assert want in data  # sorted by id, each on the controller listener name
    from kraft_tck.reference.bootstrap import read_bootstrap_voters

    voters = read_bootstrap_voters(tmp_path / "data-4")
    assert voters is not None and sorted(voters.ids()) == [1, 2, 3]


def test_no_initial_controllers_and_a_static_quorum_write_no_checkpoint(tmp_path: Path) -> None:
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path, 1)), "-N")[0] == 0
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path, 2, voters="2@127.0.0.1:19093")))[0] == 0
    for node in (1, 2):
        assert (tmp_path / f"data-{node}" / "meta.properties").exists()
        assert not checkpoint(tmp_path, node).exists()
    from kraft_tck.reference.bootstrap import read_bootstrap_voters

    assert read_bootstrap_voters(tmp_path / "data-1") is None


@pytest.mark.parametrize(("value", "message"), [
    ("1localhost:9093:" + DIR_A, "No @ found in dynamic voter string."),
    ("@localhost:9093:" + DIR_A, "Invalid @ at beginning of dynamic voter string."),
    ("x@localhost:9093:" + DIR_A, "Failed to parse node id in dynamic voter string."),
    ("-1@localhost:9093:" + DIR_A, "Invalid negative node id -1 in dynamic voter string."),
    ("1@", "No hostname found after node id."),
    ("1@[::1:9093:" + DIR_A, "Hostname began with left bracket, but no right bracket was found."),
    ("1@localhost", "No colon following hostname could be found."),
    ("1@[::1]9093:" + DIR_A, "Port section must start with a colon."),
    ("1@localhost:9093", "No colon following port could be found."),
    ("1@localhost:port:" + DIR_A, "Failed to parse port in dynamic voter string."),
    ("1@localhost:70000:" + DIR_A, "Invalid port 70000 in dynamic voter string."),
    ("1@localhost:9093:not-a-uuid", "Failed to parse directory ID in dynamic voter string."),
    (",,", "No voters given."),
    (f"1@a:1:{DIR_A},1@b:2:{DIR_B}", "Node id 1 was specified more than once."),
])
def test_initial_controllers_errors_are_kafkas(tmp_path: Path, value: str, message: str) -> None:
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path)), "-I", value) == (1, "", message + "\n")
    assert not (tmp_path / "data-1").exists()  # nothing written


@pytest.mark.parametrize(("args", "message"), [
    ([], "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
         "--standalone, --initial-controllers, or --no-initial-controllers."),
    (["--standalone", "-N"], "argument --no-initial-controllers/-N: not allowed with argument --standalone/-s"),
    (["-I", f"1@a:1:{DIR_A}", "--standalone"],
     "argument --initial-controllers/-I: not allowed with argument --standalone/-s"),
    (["--standalone", "--feature", "kraft.version=0"],
     "Cannot set kraft.version to 0 if KIP-853 configuration is present. Try removing the --feature flag for "
     "kraft.version."),
    (["-N", "--feature", "kraft.version=1"],
     "Cannot set kraft.version to 1 unless KIP-853 configuration is present. Try removing the --feature flag for "
     "kraft.version."),
    (["--standalone", "-f", "kraft.version=2"], "No feature:kraft.version with feature level 2"),
    (["--standalone", "-f", "kraft.version"], "Can't parse feature=level string kraft.version: equals sign not found."),
    (["--standalone", "-f", "kraft.version=one"],
     "Can't parse feature=level string kraft.version=one: unable to parse one as a short."),
    (["--standalone", "-f", "group.version=1"], "Unsupported feature: group.version. Supported features are: "
                                                "kraft.version"),
])
def test_dynamic_quorum_option_errors_are_kafkas(tmp_path: Path, args: list[str], message: str) -> None:
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path)), *args) == (1, "", message + "\n")
    assert not (tmp_path / "data-1").exists()


def test_standalone_only_on_a_controller_and_feature_levels_that_agree(tmp_path: Path) -> None:
    broker = dynamic_config(tmp_path, 7, roles="broker", voters="1@127.0.0.1:19093")
    assert run("format", "-t", CLUSTER, "-c", str(broker), "--standalone") == (
        1, "", "You can only use --standalone on a controller.\n")
    # A broker needs no KIP-853 option (the safeguard is for controllers only).
    assert run("format", "-t", CLUSTER, "-c", str(broker))[0] == 0
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path, 1)), "--standalone", "-f",
               "kraft.version=1")[0] == 0
    assert run("format", "-t", CLUSTER, "-c", str(dynamic_config(tmp_path, 2)), "-N", "-f", "kraft.version=0")[0] == 0
    assert checkpoint(tmp_path, 1).exists() and not checkpoint(tmp_path, 2).exists()


def test_standalone_takes_the_advertised_controller_listener(tmp_path: Path) -> None:
    cfg = dynamic_config(tmp_path, 3, port=19099, extra="advertised.listeners=CONTROLLER://node-3.example:29099\n")
    code, out, err = run("format", "-t", CLUSTER, "-c", str(cfg), "-s")
    assert code == 0, err
    assert re.search(r"3@node-3\.example:29099:[A-Za-z0-9_-]{22}", out), out
    assert b"node-3.example" in checkpoint(tmp_path, 3).read_bytes()
