"""Hand-written black-box harness traces for the TLA+ tests: (event, message) rows, numbered and framed as
the harness writes them (a header, then Send/Receive events seen from the virtual voters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Row = tuple[str, dict[str, Any]]


def write_harness_trace(path: Path, rows: list[Row], *, run: str, cluster_id: str, target: int = 1,
                        voters: tuple[int, ...] = (1, 2, 3), **header_extra: Any) -> Path:
    """``path`` holds a harness trace of ``rows``: a Send's node is the sender, a Receive's the receiver."""
    header: dict[str, Any] = {"type": "header", "format": 1, "source": "harness", "run": run,
                              "clusterId": cluster_id, "voters": list(voters), "target": target, "config": {},
                              **header_extra}  # fmt: skip
    lines = [json.dumps(header)]
    for seq, (event, msg) in enumerate(rows):
        node = msg["from"] if event == "Send" else msg["to"]
        lines.append(json.dumps({"type": "event", "seq": seq, "ts": seq, "node": node, "event": event, "msg": msg}))
    path.write_text("\n".join(lines) + "\n")
    return path
