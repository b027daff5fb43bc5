"""TLC on pre-vote (KIP-996, Kafka 4.x) in tla/KRaft.tla.

* A voter cut off from a stable leader reconnects (tla/MCKRaftPreVote.tla): with pre-vote the leader keeps
  its epoch (LeaderUndisturbed holds), without it (Kafka 3.x elections) TLC finds the reconnecting voter
  moving the leader to a new epoch.
* Broken variants of the pre-vote, each a temporary copy of tla/ with one rule changed: a pre-vote that bumps
  the epoch is found by LeaderUndisturbed, a pre-vote grant that persists the vote by VoteOnce.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import SPEC_DIR, TlcResult, run_tlc, tlc_unavailable_reason

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

SCENARIO = "MCKRaftPreVote.tla"


END = "============================================================================="


def _run(tmp_path: Path, config: str, spec: str = SCENARIO, replacements: Sequence[tuple[str, str]] = (),
         config_changes: Sequence[tuple[str, str]] = (), scenario_extra: str = "") -> TlcResult:
    """TLC on a copy of tla/ in tmp_path: KRaft.tla and the config edited, definitions added to the scenario."""
    for module in SPEC_DIR.glob("*.tla"):
        shutil.copy(module, tmp_path / module.name)
    kraft = (tmp_path / "KRaft.tla").read_text()
    for old, new in replacements:
        assert kraft.count(old) == 1, f"the spec no longer contains exactly one {old!r}"
        kraft = kraft.replace(old, new)
    (tmp_path / "KRaft.tla").write_text(kraft)
    if scenario_extra:
        text = (tmp_path / SCENARIO).read_text().rstrip()
        assert text.endswith(END)
        (tmp_path / SCENARIO).write_text(text[: -len(END)] + scenario_extra + "\n" + END + "\n")
    cfg = (SPEC_DIR / config).read_text()
    for old, new in config_changes:
        assert cfg.count(old) == 1, f"{config} has no single {old!r}"
        cfg = cfg.replace(old, new)
    (tmp_path / "Variant.cfg").write_text(cfg)
    return run_tlc(spec, tmp_path / "Variant.cfg", spec_dir=tmp_path, workers=2, timeout=600)


# --------------------------------------------------------------------------- the reconnecting voter


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_reconnecting_voter_does_not_disturb_the_leader_with_prevote(tmp_path: Path) -> None:
    # KIP-996 "Motivation": a voter that was cut off times out, asks for pre-votes in its own epoch and is
    # refused by the leader and by a follower that has fetched from it (Kafka 4.x FollowerState.canGrantVote,
    # KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollower): it never becomes a Candidate. ~3k states.
    result = _run(tmp_path, "MCKRaftPreVote.cfg")
    assert result.errors == []
    assert result.ok, result.summary()
    assert result.distinct_states is not None and result.distinct_states > 500


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_the_reconnecting_voter_does_ask_for_pre_votes(tmp_path: Path) -> None:
    # Not vacuous: in the same model R becomes Prospective and its pre-vote reaches the leader.
    result = _run(tmp_path, "MCKRaftPreVote.cfg",
                  config_changes=[("    LeaderUndisturbed\n", "    LeaderUndisturbed\n    NoPreVoteAnswered\n")],
                  scenario_extra='NoPreVoteAnswered == ~\\E m \\in DOMAIN msgs : '
                                 'm.type = "VoteResponse" /\\ m.preVote /\\ m.to = R')
    assert result.violated == "NoPreVoteAnswered", result.summary()
    actions = [s.action for s in result.counterexample]
    assert "BecomeProspective" in actions and actions[-1] == "HandleVoteRequest", actions


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_without_prevote_the_reconnecting_voter_disturbs_the_leader(tmp_path: Path) -> None:
    # The same model with Kafka 3.x elections: R's timeout makes it the Candidate of epoch 2 at once, and its
    # Vote request moves the leader to epoch 2 ("Vote Request Handling": a higher epoch is adopted).
    result = _run(tmp_path, "MCKRaftPreVoteOff.cfg")
    assert result.violated == "LeaderUndisturbed", result.summary()
    assert result.violation_kind == "invariant"
    actions = [s.action for s in result.counterexample]
    assert actions[0] == "Init"
    assert "StartElection" in actions and actions[-1] == "HandleVoteRequest", actions
    assert "BecomeProspective" not in actions


# --------------------------------------------------------------------------- broken pre-votes


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_prevote_that_bumps_the_epoch_disturbs_the_leader(tmp_path: Path) -> None:
    # KIP-996: a Prospective asks in its current epoch.  The broken variant bumps the epoch when it becomes
    # Prospective (as a candidate would), so its pre-vote carries epoch 2 and the leader adopts it.
    result = _run(tmp_path, "MCKRaftPreVote.cfg", replacements=[
        ("           e == IF resigned THEN epoch[i] + 1 ELSE epoch[i]\n",
         "           e == epoch[i] + 1\n")])
    assert result.violated == "LeaderUndisturbed", result.summary()
    actions = [s.action for s in result.counterexample]
    assert "BecomeProspective" in actions and "StartElection" not in actions, actions
    assert actions[-1] == "HandleVoteRequest"


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_prevote_that_persists_the_vote_violates_vote_once(tmp_path: Path) -> None:
    # KIP-996 / Kafka 4.x (QuorumState.unattachedOrProspectiveCanGrantVote): a pre-vote is granted on the log
    # alone, whatever the voter voted, because it binds nothing.  The broken variant persists it as the vote:
    # a voter that voted for v1 in an epoch then grants v3's pre-vote of that epoch and now holds v3 as its
    # vote while v1 counted it.
    result = _run(tmp_path, "MCKRaftSmall.cfg", spec="MCKRaft.tla",
                  replacements=[("             vote == grant /\\ ~IsPreVote(m)\n", "             vote == grant\n")],
                  config_changes=[("PreVote = FALSE", "PreVote = TRUE"), ("MaxEpoch = 1", "MaxEpoch = 2"),
                                  ("MaxMsgs = 3", "MaxMsgs = 4")])
    assert result.violated in {"VoteOnce", "ElectionSafety"}, result.summary()
    actions = [s.action for s in result.counterexample]
    assert "BecomeProspective" in actions and "StartElection" in actions, actions
    assert actions[-1] in {"HandleVoteRequest", "HandleVoteResponse", "BecomeLeader", "BecomeLeaderAppending"}


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_small_model_with_prevote_passes(tmp_path: Path) -> None:
    # MCKRaftSmall.cfg's bound with Kafka 4.x elections (BecomeProspective, pre-votes, StartElection from
    # Prospective, AbandonProspective): every invariant holds. ~40k distinct states, ~15 s.
    result = _run(tmp_path, "MCKRaftSmall.cfg", spec="MCKRaft.tla",
                  config_changes=[("PreVote = FALSE", "PreVote = TRUE")])
    assert result.ok, result.summary()
    assert result.distinct_states is not None and result.distinct_states > 1000
