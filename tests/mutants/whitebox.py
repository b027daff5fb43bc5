"""White-box checks for the mutants no black-box scenario can see (``Mutant.unobservable`` says why).

Each check drives a core class directly (no node, no wire) and returns True when the class breaks the
property; the product's ``KRaftCore`` must return False. ``bench/mutants.py`` runs the check for a mutant
whose catalog run survives, and reports it "white-box (unit)".
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ElectionState, ResponseReceived
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import FetchResponse, LeaderIdAndEpoch
from kraft_tck.spec.records import data_batch


def follower_hw_goes_back(core_cls: type[KRaftCore]) -> bool:
    """HighWatermarkMonotonic on a follower: a leader's answer naming a lower high watermark than one it
    named before must not move the follower's back (Kafka's FollowerState.updateHighWatermark refuses a
    non-monotonic update)."""
    batches = tuple(data_batch(i, 1, [b"r%d" % i]) for i in range(4))
    core = core_cls(CoreConfig(2, frozenset({1, 2, 3}), "cid", election_timeout_ms=1000, fetch_timeout_ms=2000),
                    ElectionState(1, 1), Log(batches), random.Random(2), 0)
    leader = LeaderIdAndEpoch(1, 1)
    core.step(ResponseReceived(1, FetchResponse(4, (), None, leader)), 10)
    before = core.high_watermark
    core.step(ResponseReceived(1, FetchResponse(2, (), None, leader)), 20)
    assert before == 4, f"setup: the follower learned high watermark 4, has {before}"
    return core.high_watermark < before


#: mutant name -> its white-box check
CHECKS: dict[str, Callable[[type[KRaftCore]], bool]] = {
    "follower-hw-backwards": follower_hw_goes_back,
}
