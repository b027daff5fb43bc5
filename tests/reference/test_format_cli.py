"""``kraft-tck format`` and ``kraft-tck random-uuid`` take kafka-storage's flags and behave as it does
(Kafka's ``StorageTool`` and ``Formatter``): ``-t/--cluster-id``, ``-c/--config``, ``-g/--ignore-formatted``;
an already formatted directory fails the command unless ``--ignore-formatted``; another cluster id fails
it either way. Real files; environment problems are one line."""

from __future__ import annotations

import re
from pathlib import Path

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
