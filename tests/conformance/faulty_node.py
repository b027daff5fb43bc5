"""Test-only launcher: the reference node with one injected fault, chosen by KRAFT_TCK_FAULT.

Used as ``pytest conformance --target-launcher tests/conformance/faulty_node.py``; takes the reference
CLI's ``node --config F --trace-file T`` arguments. The faults override the core's named rule methods
(reference/core.py "Fault injection"), never a flag in the product.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.node import Node


class SkipTruncation(KRaftCore):
    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        return self.log.end_offset  # ignore DivergingEpoch entirely


class TruncateBelowHighWatermark(KRaftCore):
    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        return 0  # throws away committed records too

    def _guard_truncation(self, offset: int) -> None:
        return None


class ForgetVote(KRaftCore):
    def _persist_vote(self) -> None:
        return None  # the vote lives in memory only


class NeverResign(KRaftCore):
    def _should_resign(self) -> bool:
        return False


class IgnoreClusterId(KRaftCore):
    def _cluster_id_ok(self, cluster_id: str | None) -> bool:
        return True


class ObserversCount(KRaftCore):
    def _counts_toward_hw(self, replica_id: int) -> bool:
        return True


FAULTS: dict[str, type[KRaftCore]] = {
    "skip-truncation": SkipTruncation,
    "truncate-below-hw": TruncateBelowHighWatermark,
    "forget-vote": ForgetVote,
    "never-resign": NeverResign,
    "ignore-cluster-id": IgnoreClusterId,
    "observers-count": ObserversCount,
    "none": KRaftCore,
}


def _arg(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


async def _run(cfg: NodeConfig, trace: str | None, factory: Any) -> None:
    node = Node(cfg, trace_file=trace, core_factory=factory)
    await node.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await node.stop(graceful=False)


def main(argv: list[str]) -> None:
    fault = os.environ.get("KRAFT_TCK_FAULT", "none")
    if fault not in FAULTS:
        raise SystemExit(f"KRAFT_TCK_FAULT={fault!r}: expected one of {', '.join(sorted(FAULTS))}")
    config = _arg(argv, "--config")
    if argv[:1] != ["node"] or config is None:
        raise SystemExit("usage: faulty_node.py node --config FILE [--trace-file FILE]")
    asyncio.run(_run(NodeConfig.load(config), _arg(argv, "--trace-file"), FAULTS[fault]))


if __name__ == "__main__":
    main(sys.argv[1:])
