"""The harness's own properties writer, port picker and formatting step (conformance/target.py), checked
against what reads them: the reference node's properties parser and its ``kraft-tck format`` command."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from kraft_tck.conformance.target import (
    EMBEDDED_TIMEOUTS,
    EmbeddedTarget,
    QuorumLayout,
    TargetError,
    free_base_port,
    render_properties,
)
from kraft_tck.reference.config import parse_properties


def test_properties_read_back_as_written() -> None:
    props = {
        "plain": "v",
        "key with=colon:and space": " leading blank, trailing \\ and\nnewline\ttab",
        "#not-a-comment": "!",
        "flag": True,
        "voters": ["1@h:1", "2@h:2"],
        "path": Path("/x/y"),
        "unicode": "café",
    }
    text = render_properties(props, header="first\nsecond")
    assert text.startswith("# first\n# second\n")
    assert parse_properties(text) == {
        "plain": "v",
        "key with=colon:and space": " leading blank, trailing \\ and\nnewline\ttab",
        "#not-a-comment": "!",
        "flag": "true",
        "voters": "1@h:1,2@h:2",
        "path": "/x/y",
        "unicode": "café",
    }


def test_free_base_port_gives_bindable_consecutive_ports() -> None:
    base = free_base_port(3)
    socks = []
    try:
        for port in range(base, base + 3):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))  # raises if not free
    finally:
        for s in socks:
            s.close()
    assert 1024 < base < 65533


def _formatted_target(tmp_path: Path) -> EmbeddedTarget:
    """An embedded target of a 3-voter quorum on free ports, its directory formatted through the format command."""
    base = free_base_port(3)
    layout = QuorumLayout(target_id=1, target_host="127.0.0.1", target_port=base, harness_host="127.0.0.1",
                          harness_ports=(base + 1, base + 2))  # fmt: skip
    target = EmbeddedTarget(layout, EMBEDDED_TIMEOUTS, "AAAAAAAAAAAAAAAAAAAAAQ", workdir=tmp_path)
    target.write_config()
    target.prepare(formatted=True)
    return target


def test_embedded_target_formats_through_the_format_command(tmp_path: Path) -> None:
    target = _formatted_target(tmp_path)
    meta = (target.data_dir / "meta.properties").read_text()
    assert "cluster.id=AAAAAAAAAAAAAAAAAAAAAQ" in meta and "node.id=1" in meta
    target.cluster_id = "BBBBBBBBBBBBBBBBBBBBBQ"  # a different cluster: the format command refuses, and says so
    with pytest.raises(TargetError, match="already formatted"):
        target.prepare(formatted=True)


def test_a_wiped_directory_gets_a_copy_of_the_same_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wiped relaunch formatted with the command and properties of an earlier format copies what that format wrote
    (no format process); other properties (an observer's) are formatted by the command again."""
    target = _formatted_target(tmp_path)
    first = (target.data_dir / "meta.properties").read_text()
    ran: list[list[str]] = []
    monkeypatch.setattr(target, "_format", lambda cmd: ran.append(cmd))
    shutil.rmtree(target.data_dir)
    target._fresh = True
    target.write_config()
    target.prepare(formatted=True)
    assert ran == [] and (target.data_dir / "meta.properties").read_text() == first
    shutil.rmtree(target.data_dir)
    target._fresh, target.observer = True, True
    target.write_config()
    target.prepare(formatted=True)
    assert len(ran) == 1 and "--cluster-id" in ran[0], "other properties: the format command runs"
