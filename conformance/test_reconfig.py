"""KIP-853 dynamic quorum: voter keys (Vote / BeginQuorumEpoch v1), AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter,
one change at a time, the voter set in force (the latest VotersRecord, committed or not) for the high watermark and
for elections, and DescribeQuorum v2.

Each case runs on a target formatted as a dynamic quorum (``--initial-controllers``: the target and the virtual
voters with their directory ids; conformance/reconfig.py): cases that leave the voter set as it was share one life,
a case that changes it gets a fresh one. When the module is done the target is relaunched in the static quorum for
the cases after it.

Kafka is the authority where the KIP leaves room (3.9 / 4.0-SNAPSHOT, Oct 2024): KafkaRaftClient.handleVoteRequest /
handleBeginQuorumEpochRequest (the voter-key check after the epoch transition), handleAddVoterRequest /
AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler, LeaderState (the high watermark over the latest voter set);
the tests of KafkaRaftClientReconfigTest. Error codes are KAFKA-level checks; "refused, and the voter set unchanged"
and the quorum rules are MUST.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.catalog import Clause
from kraft_tck.conformance.reconfig import (
    Admin,
    Reconf,
    errors_of,
    leave_dynamic_quorum,
    reconfig_life,
    voter_ids,
    voters_record,
)
from kraft_tck.conformance.reconfig import error_name as name
from kraft_tck.conformance.scenario import KAFKA, Scenario
from kraft_tck.conformance.session import Session
from kraft_tck.conformance.test_leaderprogress import (
    CHECK_QUORUM_FACTOR,
    EARLY_FACTOR,
    ROW_CHECK_QUORUM,
    declared_factor,
    gives_up,
)
from kraft_tck.conformance.virtual import LISTENER, MAX_PARK_MS, ZERO_UUID, Frame
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType

VOTE_KEY = Clause("KIP-853", "Vote Request Handling", "VoterId and VoterDirectoryId")
BQE_KEY = Clause("KIP-853", "BeginQuorumEpoch Request Handling", "VoterId and VoterDirectoryId")
ADD = Clause("KIP-853", "AddRaftVoter Request Handling")
ADD_COMMIT = Clause("KIP-853", "AddRaftVoter Request Handling", "answered once the new VotersRecord is committed")
ADD_LEADER = Clause("KIP-853", "AddRaftVoter Request Handling", "only the leader changes the voter set")
ADD_EPOCH = Clause("KIP-853", "AddRaftVoter Request Handling", "the leader has committed an entry of its epoch")
ADD_CHECKS = Clause("KIP-853", "AddRaftVoter Request Handling", "refused: the voter set is unchanged")
REMOVE = Clause("KIP-853", "RemoveRaftVoter Request Handling")
REMOVE_KEY = Clause("KIP-853", "RemoveRaftVoter Request Handling", "the exact voter key")
REMOVE_COMMIT = Clause("KIP-853", "RemoveRaftVoter Request Handling", "answered once the new VotersRecord is committed")
RESIGN = Clause("KIP-853", "RemoveRaftVoter Request Handling", "a removed leader resigns")
ONE_CHANGE = Clause("KIP-853", "Voter Changes", "at most one uncommitted voter change")
IN_FORCE = Clause("KIP-853", "Voter Changes", "the latest VotersRecord is in force, committed or not")
HIGH_WATERMARK = Clause("KIP-853", "High Watermark", "counted over the voters of the latest VotersRecord")
UPDATE = Clause("KIP-853", "UpdateRaftVoter Request Handling")
DESCRIBE = Clause("KIP-853", "DescribeQuorum", "ReplicaDirectoryId and Nodes")
UPDATE_SENT = Clause("KIP-853", "UpdateRaftVoter Request Handling", "a voter whose entry differs from its listeners "
                     "sends it to the leader")
CHECK_QUORUM = Clause("KIP-853", "Voter Changes", "check quorum counts the voters of the latest VotersRecord")
BOOTSTRAP = Clause("KIP-853", "Bootstrapping", "a --standalone voter leads a quorum of one")

#: spec/kafka-behaviour.yaml rows of the KAFKA-level checks
ROW_VOTE_KEY = "vote.invalid-voter-key"
ROW_VOTE_KEY_EPOCH = "vote.voter-key-after-epoch"
ROW_BQE_KEY = "begin.invalid-voter-key"
ROW_BQE_FOLLOWS = "begin.follow-before-voter-key"
ROW_ADD_CODES = "addvoter.error-codes"
ROW_ADD_NOT_LEADER = "addvoter.not-leader"
ROW_ADD_EPOCH = "addvoter.epoch-uncommitted"
ROW_ADD_PROBE = "addvoter.api-versions-probe"
ROW_CHANGE_PENDING = "voterchange.pending-refused"
ROW_CHANGE_UNCOMMITTED = "voterchange.uncommitted-refused"
ROW_ADD_TIMEOUT = "addvoter.timeout"
ROW_RESIGN_EQE = "removevoter.leader-end-quorum-epoch"
ROW_REMOVE_CODES = "removevoter.voter-not-found"
ROW_DESCRIBE = "describe.voter-nodes"
ROW_UPDATE_CODES = "updatevoter.error-codes"
ROW_UPDATE_AT_ONCE = "updatevoter.answered-at-once"
ROW_UPDATE_SENT = "updatevoter.follower-sends"
#: Kafka's UpdateRaftVoter period in fetch timeouts (FollowerState.updateVoterPeriodMs)
UPDATE_VOTER_PERIOD_FACTOR = 3
#: The cases of this module share a dynamic-quorum life and a module fixture that leaves it: a parallel run keeps
#: them on one target, one after another (conformance/schedule.py)
ONE_TARGET = True


@pytest.fixture(scope="module", autouse=True)
def static_quorum_after_reconfig(kraft_session: Session) -> Iterator[None]:
    """The cases after this module run on the static quorum again."""
    yield
    leave_dynamic_quorum(kraft_session)


def err(resp: dict[str, Any]) -> int:
    """The error of a KRaft single-partition answer: the top-level one, else the partition's."""
    top = int(resp.get("ErrorCode", 0))
    part = B.partition_or_none(resp) or {}
    return top or int(part.get("ErrorCode", 0))


async def vote_v1(sc: Scenario) -> None:
    client = await sc.v(0).connect()
    if client.versions.get(B.VOTE, (0, 0))[1] < 1 or client.versions.get(B.BEGIN_QUORUM_EPOCH, (0, 0))[1] < 1:
        sc.skip("needs Vote v1 and BeginQuorumEpoch v1 (KIP-853 voter keys); the target advertises "
                f"Vote {client.versions.get(B.VOTE)}, BeginQuorumEpoch {client.versions.get(B.BEGIN_QUORUM_EPOCH)}")


# ---------------------------------------------------------------------------------------------- voter keys


@case("KIP-853/VoterKey/1")
async def test_misaddressed_vote_refused(sc: Scenario) -> None:
    """A Vote v1 addressed to another voter key: INVALID_VOTER_KEY, not granted, the epoch adopted first."""
    async with reconfig_life(sc, changes_voters=False):
        await vote_v1(sc)
        a, c = sc.virtual_ids[0], sc.virtual_ids[-1]
        epoch = await sc.make_follower(a)
        await sc.catch_up(a, epoch)
        sc.q.set_leader(-1, -1)
        log = sc.q.log
        cand = sc.q.voters[c]
        wrong = [
            ("another voter's id", {"voter_id": a}),
            ("the target's id with another directory id", {"voter_directory_id": uuid.uuid4()}),
        ]
        for what, key in wrong:
            e = sc.q.next_epoch()
            resp = await sc.call(f"Vote({what}) is answered", cand.vote(e, log.last_epoch, log.end, **key), VOTE_KEY)
            part = B.partition_or_none(resp) or {}
            sc.check(not part.get("VoteGranted"), f"a Vote v1 naming {what} as its VoterId/VoterDirectoryId is not "
                     "granted (it is not addressed to this replica)", "VoteGranted=false",
                     B.describe("Vote", "response", resp), VOTE_KEY)  # fmt: skip
            sc.check(err(resp) == Errors.INVALID_VOTER_KEY, f"a Vote v1 naming {what} is answered INVALID_VOTER_KEY "
                     "(KafkaRaftClient.handleVoteRequest isValidVoterKey)", "INVALID_VOTER_KEY", name(err(resp)),
                     VOTE_KEY, level=KAFKA, kafka=ROW_VOTE_KEY)  # fmt: skip
            sc.check(int(part.get("LeaderEpoch", -1)) == e, "the candidate's higher epoch is adopted before the voter "
                     "key is checked (KafkaRaftClient.handleVoteRequest: transitionToUnattached first)",
                     f"LeaderEpoch={e}", part.get("LeaderEpoch"), VOTE_KEY, level=KAFKA,
                     kafka=ROW_VOTE_KEY_EPOCH)  # fmt: skip
        e = sc.q.next_epoch()
        resp = await sc.call("a correctly addressed Vote is answered", cand.vote(e, log.last_epoch, log.end), VOTE_KEY)
        part = B.partition_or_none(resp) or {}
        sc.check(bool(part.get("VoteGranted")), "the same candidate with the same log, addressed to the target's own "
                 "voter key, is granted (the refusals above were for the key alone)", "VoteGranted=true",
                 B.describe("Vote", "response", resp), Clause("KIP-595", "Vote Request Handling"))  # fmt: skip


@case("KIP-853/VoterKey/2")
async def test_misaddressed_begin_quorum_epoch(sc: Scenario) -> None:
    """A BeginQuorumEpoch v1 addressed to another voter key: INVALID_VOTER_KEY, and the target follows the leader."""
    async with reconfig_life(sc, changes_voters=False):
        await vote_v1(sc)
        a, c = sc.virtual_ids[0], sc.virtual_ids[-1]
        leader = sc.q.voters[c]
        t = sc.timeouts
        for what, key in (("another voter's id", {"voter_id": a}),
                          ("the target's id with another directory id", {"voter_directory_id": uuid.uuid4()})):
            await sc.make_follower(a)
            # v{a} goes silent once the fetch it holds is answered: the target can learn the new epoch from the
            # BeginQuorumEpoch alone (no fetch answer of v{a} names the next leader)
            sc.q.partition(a)
            await asyncio.sleep(MAX_PARK_MS / 1000 + 0.05)
            e = sc.q.next_epoch()
            sc.q.set_leader(c, e)
            mark = sc.frames.mark()
            resp = await sc.call(f"BeginQuorumEpoch({what}) is answered", leader.begin_quorum_epoch(e, **key), BQE_KEY)
            sc.check(err(resp) == Errors.INVALID_VOTER_KEY, f"a BeginQuorumEpoch v1 naming {what} is answered "
                     "INVALID_VOTER_KEY (KafkaRaftClient.handleBeginQuorumEpochRequest isValidVoterKey)",
                     "INVALID_VOTER_KEY", name(err(resp)), BQE_KEY, level=KAFKA, kafka=ROW_BQE_KEY)  # fmt: skip
            got = await sc.frames.wait_for(
                lambda f, e=e: sc.from_target("Fetch", dst=c)(f) and f.part.get("CurrentLeaderEpoch") == e,
                sc.bound_ms(t.request_timeout_ms + t.fetch_max_wait_ms) / 1000, mark)
            sc.check(got is not None, f"the target follows v{c} in epoch {e} all the same (Kafka transitions to "
                     "follower before it checks the voter key)", f"Fetch(CurrentLeaderEpoch={e}) to v{c}",
                     "no such Fetch", BQE_KEY, level=KAFKA, kafka=ROW_BQE_FOLLOWS)  # fmt: skip
            sc.q.partition(a, False)


# ---------------------------------------------------------------------------------------------- refusals


async def elect(sc: Scenario, r: Reconf, keep: bool = True, every_ms: int | None = None) -> int:
    """Elect the target in the dynamic quorum; ``keep``: v2 keeps fetching from it (so it stays leader), every
    ``every_ms`` (default: a sixth of the fetch timeout)."""
    epoch = await sc.make_leader()
    if keep:
        r.keep_fetching(sc.followers[0], epoch, every_ms)
    return epoch


def unchanged(sc: Scenario, r: Reconf, what: str, clause: Clause) -> None:
    off, ids = r.voters_in_log()
    sc.check(ids == r.initial, f"{what}: the voter set stays {r.initial}", f"voters {r.initial}",
             f"a VotersRecord at offset {off} with voters {ids}", clause)  # fmt: skip


@case("KIP-853/AddVoter/3")
async def test_add_voter_to_follower(sc: Scenario) -> None:
    """Only the leader adds a voter: a follower answers AddRaftVoter NOT_LEADER_OR_FOLLOWER."""
    async with reconfig_life(sc, changes_voters=False) as r:
        await sc.make_follower(sc.virtual_ids[0])
        j = await r.joiner()
        resp = await sc.call("AddRaftVoter is answered", r.admin.add_voter(j.node_id, j.directory_id, [j.endpoint]),
                             ADD_LEADER)
        code = errors_of(resp)
        sc.check(code != Errors.NONE, "a follower refuses AddRaftVoter (only the leader writes VotersRecords)",
                 "an error", name(code), ADD_LEADER)
        sc.check(code == Errors.NOT_LEADER_OR_FOLLOWER, "the refusal is NOT_LEADER_OR_FOLLOWER "
                 "(KafkaRaftClientReconfigTest.testAddVoterToNotLeader)", "NOT_LEADER_OR_FOLLOWER", name(code),
                 ADD_LEADER, level=KAFKA, kafka=ROW_ADD_NOT_LEADER)  # fmt: skip


@case("KIP-853/AddVoter/2")
async def test_add_voter_refusals(sc: Scenario) -> None:
    """A leader refuses an AddRaftVoter that fails a check (cluster id, key, listener, duplicate, kraft.version,
    catch-up) and leaves the voter set unchanged."""
    async with reconfig_life(sc, changes_voters=False) as r:
        epoch = await elect(sc, r)
        j = await r.joiner(0)
        await r.follow(j, epoch)
        twin_dir = uuid.uuid4()  # v2's id under another directory id
        v2 = sc.followers[0]
        no_kraft = await r.joiner(1, features={})
        await r.follow(no_kraft, epoch)
        lagging = await r.joiner(2)
        other = {"Name": "OTHER", "Host": j.host, "Port": j.port}
        tries: list[tuple[str, Any, Errors, str]] = [
            ("a ClusterId that is not the target's", r.admin.add_voter(j.node_id, j.directory_id, [j.endpoint],
             cluster_id="wrong-cluster-id-0000000"), Errors.INCONSISTENT_CLUSTER_ID, "testAddVoterInvalidClusterId"),
            ("no VoterDirectoryId (ZERO_UUID)", r.admin.add_voter(j.node_id, ZERO_UUID, [j.endpoint]),
             Errors.INVALID_REQUEST, "testAddVoterWithMissingDirectoryId"),
            ("no endpoint on the leader's controller listener", r.admin.add_voter(j.node_id, j.directory_id, [other]),
             Errors.INVALID_REQUEST, "testAddVoterWithMissingDefaultListener"),
            (f"the id of voter {v2} (another directory id)", r.admin.add_voter(v2, twin_dir, [j.endpoint]),
             Errors.DUPLICATE_VOTER, "testAddVoterWithExistingVoter"),
            ("a replica whose ApiVersions answer lists no kraft.version",
             r.admin.add_voter(no_kraft.node_id, no_kraft.directory_id, [no_kraft.endpoint]),
             Errors.INVALID_REQUEST, "testAddVoterInvalidFeatureVersion"),
            ("a replica that never fetched (not caught up)",
             r.admin.add_voter(lagging.node_id, lagging.directory_id, [lagging.endpoint]),
             Errors.REQUEST_TIMED_OUT, "testAddVoterWithLaggingNewVoter"),
        ]  # fmt: skip
        for what, coro, expected, kafka_test in tries:
            resp = await sc.call(f"AddRaftVoter with {what} is answered", coro, ADD_CHECKS)
            code = errors_of(resp)
            sc.check(code != Errors.NONE, f"AddRaftVoter with {what} is refused", "an error", name(code), ADD_CHECKS)
            sc.check(code == expected, f"AddRaftVoter with {what} is answered {expected.name} "
                     f"(KafkaRaftClientReconfigTest.{kafka_test})", expected.name, name(code), ADD_CHECKS,
                     level=KAFKA, kafka=ROW_ADD_CODES)  # fmt: skip
        await asyncio.sleep(3 * max(20, sc.timeouts.fetch_ms // 6) / 1000)  # v2 mirrors whatever was appended
        unchanged(sc, r, "after six refused AddRaftVoter requests", ADD_CHECKS)


@case("KIP-853/AddVoter/4")
async def test_add_voter_before_epoch_commit(sc: Scenario) -> None:
    """A new leader that has not committed an entry of its epoch refuses AddRaftVoter and appends nothing."""
    async with reconfig_life(sc, changes_voters=False) as r:
        epoch = await sc.make_leader(follow=False)  # no voter fetches: nothing of this epoch commits
        j = await r.joiner()
        await r.follow(j, epoch)  # an observer: its fetches never commit anything
        resp = await sc.call("AddRaftVoter is answered", r.admin.add_voter(j.node_id, j.directory_id, [j.endpoint]),
                             ADD_EPOCH)
        code = errors_of(resp)
        sc.check(code != Errors.NONE, "a leader whose epoch has no committed entry refuses AddRaftVoter (a change "
                 "before it could undo a change of an earlier leader that it does not know committed)", "an error",
                 name(code), ADD_EPOCH)  # fmt: skip
        sc.check(code == Errors.REQUEST_TIMED_OUT, "the refusal is REQUEST_TIMED_OUT "
                 "(KafkaRaftClientReconfigTest.testAddVoterWithoutFencedPreviousLeaders)", "REQUEST_TIMED_OUT",
                 name(code), ADD_EPOCH, level=KAFKA, kafka=ROW_ADD_EPOCH)  # fmt: skip
        await r.follow(j, epoch)
        off, ids = r.voters_in_log()
        sc.check(j.node_id not in ids, "nothing is appended for the refused AddRaftVoter", f"no VotersRecord with "
                 f"voter {j.node_id}", f"a VotersRecord at offset {off} with voters {ids}", ADD_EPOCH)  # fmt: skip


@case("KIP-853/OneChange/2")
async def test_change_refused_while_add_pending(sc: Scenario) -> None:
    """While an AddRaftVoter waits for the new voter's ApiVersions answer, a RemoveRaftVoter is refused."""
    async with reconfig_life(sc, changes_voters=False) as r:
        await elect(sc, r)
        hole = await r.black_hole()
        # an id no other case adds: the leader backs off from a node whose probe went unanswered (Kafka refuses an
        # add of a node it cannot send to now), which must not hold up a later case's add
        jid = r.joiner_id(7)
        listener = {"Name": LISTENER, "Host": hole.host, "Port": hole.port}
        pending = sc.q.spawn(r.admin.add_voter(jid, uuid.uuid4(), [listener]))
        t = sc.timeouts
        try:  # the target asked the new voter for its ApiVersions: the add is pending
            await asyncio.wait_for(hole.received.wait(), sc.bound_ms(t.request_timeout_ms) / 1000)
        except TimeoutError:  # no pending add to test a second change against
            sc.check(False, "the leader asks the new voter for its ApiVersions at the endpoint AddRaftVoter names",
                     f"a request at {hole.host}:{hole.port}", "none", ADD, level=KAFKA, kafka=ROW_ADD_PROBE)
            return
        second = Admin(sc)
        try:
            v3 = sc.q.voters[sc.bystander]
            resp = await sc.call("RemoveRaftVoter is answered", second.remove_voter(v3.node_id, v3.directory_id),
                                 ONE_CHANGE)
        finally:
            await second.close()
        code = errors_of(resp)
        if code == Errors.NONE:
            r.mark_changed()
        sc.check(code == Errors.REQUEST_TIMED_OUT, "a RemoveRaftVoter while an AddRaftVoter is pending is refused "
                 "REQUEST_TIMED_OUT (KafkaRaftClientReconfigTest.testRemoveVoterWithPendingAddVoter)",
                 "REQUEST_TIMED_OUT", name(code), ONE_CHANGE, level=KAFKA, kafka=ROW_CHANGE_PENDING)  # fmt: skip
        try:
            add = await asyncio.wait_for(pending, sc.bound_ms(2 * t.request_timeout_ms) / 1000)
        except (TimeoutError, Exception) as exc:
            sc.fail("the pending AddRaftVoter is answered once its timer expires", "REQUEST_TIMED_OUT",
                    f"no answer: {type(exc).__name__} {exc}", ADD)
        code = errors_of(add)
        sc.check(code == Errors.REQUEST_TIMED_OUT, "an AddRaftVoter whose new voter never answers ApiVersions times "
                 "out (KafkaRaftClientReconfigTest.testAddVoterTimeout)", "REQUEST_TIMED_OUT", name(code), ADD,
                 level=KAFKA, kafka=ROW_ADD_TIMEOUT)  # fmt: skip
        if code == Errors.NONE:
            r.mark_changed()


@case("KIP-853/Fields/1")
async def test_describe_quorum_v2(sc: Scenario) -> None:
    """DescribeQuorum v2 of a dynamic quorum: each replica's directory id, the voters' listeners in Nodes."""
    async with reconfig_life(sc, changes_voters=False) as r:
        epoch = await elect(sc, r)
        j = await r.joiner()
        await r.follow(j, epoch)
        version, resp = await r.admin.describe_quorum()
        if version < 2:
            sc.check(False, "the target serves DescribeQuorum v2 (KIP-853: ReplicaDirectoryId, Nodes)", "v2",
                     f"v{version}", DESCRIBE, level=KAFKA, kafka=ROW_DESCRIBE)
            return
        part = B.partition(resp)
        voters = {int(v["ReplicaId"]): v for v in part.get("CurrentVoters") or []}
        sc.check(sorted(voters) == r.initial, "CurrentVoters lists the voter set", str(r.initial), sorted(voters),
                 DESCRIBE)
        keys = {sc.target_id: r.target_dir, **{v.node_id: v.directory_id for v in sc.q.voters.values()}}
        got = {vid: v.get("ReplicaDirectoryId") for vid, v in voters.items()}
        sc.check(got == {vid: keys[vid] for vid in voters}, "each voter's ReplicaDirectoryId is its directory id",
                 str({k: str(v) for k, v in keys.items()}), {k: str(v) for k, v in got.items()}, DESCRIBE, level=KAFKA,
                 kafka=ROW_DESCRIBE)  # fmt: skip
        observers = {int(o["ReplicaId"]): o.get("ReplicaDirectoryId") for o in part.get("Observers") or []}
        sc.check(observers.get(j.node_id) == j.directory_id, f"the observer {j.node_id} is listed with its directory "
                 "id", f"{j.node_id}: {j.directory_id}", {k: str(v) for k, v in observers.items()}, DESCRIBE,
                 level=KAFKA, kafka=ROW_DESCRIBE)  # fmt: skip
        nodes = {int(n["NodeId"]): n.get("Listeners") or [] for n in resp.get("Nodes") or []}
        addr = {sc.target_id: (sc.target.host, sc.target.port),
                **{v.node_id: (v.host, v.port) for v in sc.q.voters.values()}}  # fmt: skip
        want = {vid: [(LISTENER, h, p)] for vid, (h, p) in addr.items()}
        have = {vid: [(ls["Name"], ls["Host"], int(ls["Port"])) for ls in lst] for vid, lst in nodes.items()}
        sc.check(have == want, "Nodes lists every voter (and only the voters) with its controller listener "
                 "(RaftUtil.singletonDescribeQuorumResponse)", str(want), have, DESCRIBE, level=KAFKA,
                 kafka=ROW_DESCRIBE)  # fmt: skip


@case("KIP-853/RemoveVoter/2")
async def test_remove_voter_refusals(sc: Scenario) -> None:
    """RemoveRaftVoter of an id that is no voter, or of a voter's id with another directory id, is refused and
    changes nothing."""
    async with reconfig_life(sc, changes_voters=False) as r:
        await elect(sc, r)
        v3 = sc.q.voters[sc.bystander]
        tries = [
            ("an id that is no voter", r.joiner_id(5), uuid.uuid4()),
            (f"voter {v3.node_id}'s id with another directory id", v3.node_id, uuid.uuid4()),
        ]
        for what, vid, dir_id in tries:
            resp = await sc.call(f"RemoveRaftVoter of {what} is answered", r.admin.remove_voter(vid, dir_id), REMOVE)
            code = errors_of(resp)
            if code == Errors.NONE:
                r.mark_changed()
            sc.check(code != Errors.NONE, f"RemoveRaftVoter of {what} is refused (a voter is removed by its exact "
                     "key)", "an error", name(code), REMOVE_KEY)  # fmt: skip
            sc.check(code == Errors.VOTER_NOT_FOUND, "the refusal is VOTER_NOT_FOUND "
                     "(KafkaRaftClientReconfigTest.testRemoveVoterWithNoneVoter)", "VOTER_NOT_FOUND", name(code),
                     REMOVE_KEY, level=KAFKA, kafka=ROW_REMOVE_CODES)  # fmt: skip
        await asyncio.sleep(3 * max(20, sc.timeouts.fetch_ms // 6) / 1000)
        unchanged(sc, r, "after two refused RemoveRaftVoter requests", REMOVE_KEY)


# ---------------------------------------------------------------------------------------------- changes


def first_fetch_past(sc: Scenario, voter: int, offset: int, start: int = 0) -> Frame | None:
    got = sc.frames.select(lambda f: f.src == voter and f.api == "Fetch" and f.kind == "request"
                           and int(f.part.get("FetchOffset", -1)) > offset, start)  # fmt: skip
    return got[0] if got else None


def answer_frame(sc: Scenario, api: str, start: int) -> Frame | None:
    got = sc.frames.select(lambda f: f.src == sc.target_id and f.api == api and f.kind == "response", start)
    return got[0] if got else None


async def wait_voters_record(sc: Scenario, r: Reconf, pred: Any, what: str, clause: Clause,
                             timeout_ms: float, since: int) -> tuple[int, list[int]]:
    """Wait until the harness log (mirrored by a fetching virtual voter) holds a VotersRecord at an offset >= ``since``
    (appended by this case) whose ids satisfy ``pred``; returns (offset, ids)."""
    ok = await r.wait_for(lambda: any(pred(voter_ids(b)) for _, b in r.voters_records(since)), timeout_ms)
    if not ok:
        off, ids = r.voters_in_log()
        sc.fail(what, f"a VotersRecord with that voter set at offset >= {since}, fetched by a virtual follower",
                f"within {timeout_ms:.0f} ms the last VotersRecord is at {off} with voters {ids}", clause)
    off, body = next((o, b) for o, b in r.voters_records(since) if pred(voter_ids(b)))
    return off, voter_ids(body)


async def wait_for_record(sc: Scenario, r: Reconf, voter: Any, epoch: int, since: int, ids: list[int], what: str,
                          clause: Clause) -> tuple[int, list[int]]:
    """``voter`` fetches from the target leader (mirroring its log) until the harness log holds a VotersRecord with
    ``ids`` at an offset >= ``since``; its fetches were all at offsets up to that record, never past it (it does
    not help commit it). Returns (offset, ids)."""
    bound = sc.bound_ms(sc.timeouts.request_timeout_ms)
    deadline = asyncio.get_running_loop().time() + bound / 1000
    while True:
        got = [o for o, b in r.voters_records(since) if voter_ids(b) == ids]
        if got:
            return got[0], ids
        if asyncio.get_running_loop().time() >= deadline:
            sc.fail(what, f"a VotersRecord with voters {ids} at offset >= {since}, fetched by v{voter.node_id}",
                    f"within {bound:.0f} ms the last VotersRecord is {r.voters_in_log()}", clause)
        await sc.call(f"v{voter.node_id} fetches from the target leader", voter.follow_once(epoch), clause)
        await asyncio.sleep(0.02)


@case("KIP-853/AddVoter/1")
async def test_add_voter(sc: Scenario) -> None:
    """AddRaftVoter: the leader probes the new voter, appends VotersRecord(old + new) and answers only once a
    majority of the new set has it."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, every_ms=30)  # the add's timer (the request timeout) runs from its probe on
        j = await r.joiner()
        await r.follow(j, epoch)
        await r.follow(j, epoch)  # the last Fetch was at the leader's end: caught up (LeaderState.isReplicaCaughtUp)
        mark = sc.frames.mark()
        since = sc.q.log.end
        adding = sc.q.spawn(r.admin.add_voter(j.node_id, j.directory_id, [j.endpoint]))
        t = sc.timeouts
        probe = await sc.frames.wait_for(lambda f: f.src == sc.target_id and f.dst == j.node_id
                                         and f.api == "ApiVersions" and f.kind == "request",
                                         sc.bound_ms(t.request_timeout_ms) / 1000, mark)  # fmt: skip
        sc.check(probe is not None, f"the leader asks the new voter {j.node_id} for its ApiVersions at the endpoint "
                 "the AddRaftVoter names (does it support kraft.version 1?)", f"ApiVersions to {j.host}:{j.port}",
                 "none", ADD, level=KAFKA, kafka=ROW_ADD_PROBE)  # fmt: skip
        new = sorted([*r.initial, j.node_id])
        off, _ = await wait_voters_record(sc, r, lambda ids: ids == new, "the leader appends VotersRecord(voters + "
                                          f"{j.node_id})", ADD, sc.bound_ms(t.request_timeout_ms), since)  # fmt: skip
        r.mark_changed()
        v2 = sc.followers[0]
        past = await sc.frames.wait_for(lambda f: f.src == v2 and f.api == "Fetch" and f.kind == "request"
                                        and int(f.part.get("FetchOffset", -1)) > off, sc.bound_ms(200) / 1000, mark)
        sc.check(past is not None, f"v{v2} keeps fetching past the VotersRecord at {off}", f"Fetch(FetchOffset>{off})",
                 "none", ADD)  # fmt: skip
        await asyncio.sleep(0.02)  # the leader and v2 hold it: 2 of 4 voters, not a majority of the new set
        early = answer_frame(sc, "AddRaftVoter", mark)
        sc.check(early is None and not adding.done(), f"AddRaftVoter is not answered while VotersRecord({new}) at "
                 f"offset {off} is held by the leader and v{sc.followers[0]} only (2 of {len(new)} voters)",
                 "no answer yet", early.summary() if early else "answered", ADD_COMMIT)  # fmt: skip
        await r.follow(j, epoch)  # the new voter fetches past it: 3 of 4
        try:
            resp = await asyncio.wait_for(adding, sc.bound_ms(t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("AddRaftVoter is answered once a majority of the new voter set has the VotersRecord", "NONE",
                    f"no answer: {type(exc).__name__} {exc}", ADD_COMMIT)
        sc.check(errors_of(resp) == Errors.NONE, "AddRaftVoter succeeds once VotersRecord commits in the new set",
                 "NONE", name(errors_of(resp)), ADD_COMMIT)


@case("KIP-853/RemoveVoter/1")
async def test_remove_voter(sc: Scenario) -> None:
    """RemoveRaftVoter: the leader appends VotersRecord(old - voter) and answers once the remaining voters commit it."""
    async with reconfig_life(sc, changes_voters=True) as r:
        await elect(sc, r)
        v3 = sc.q.voters[sc.bystander]
        mark = sc.frames.mark()
        since = sc.q.log.end
        removing = sc.q.spawn(r.admin.remove_voter(v3.node_id, v3.directory_id))
        left = [v for v in r.initial if v != v3.node_id]
        t = sc.timeouts
        off, _ = await wait_voters_record(sc, r, lambda ids: ids == left, "the leader appends VotersRecord(voters - "
                                          f"{v3.node_id})", REMOVE, sc.bound_ms(t.request_timeout_ms),
                                          since)  # fmt: skip
        r.mark_changed()
        try:
            resp = await asyncio.wait_for(removing, sc.bound_ms(t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("RemoveRaftVoter is answered once the new voter set commits it", "NONE",
                    f"no answer: {type(exc).__name__} {exc}", REMOVE_COMMIT)
        sc.check(errors_of(resp) == Errors.NONE, "RemoveRaftVoter succeeds", "NONE", name(errors_of(resp)),
                 REMOVE_COMMIT)
        answer = answer_frame(sc, "RemoveRaftVoter", mark)
        past = first_fetch_past(sc, sc.followers[0], off, mark)
        sc.check(answer is not None and past is not None and past.seq < answer.seq, "RemoveRaftVoter is answered only "
                 f"after v{sc.followers[0]} (the other voter of the new set) fetched past the VotersRecord at {off}",
                 f"a Fetch(FetchOffset>{off}) from v{sc.followers[0]} before the answer",
                 f"answer #{answer.seq if answer else None}, first such Fetch #{past.seq if past else None}",
                 REMOVE_COMMIT)  # fmt: skip


@case("KIP-853/HighWatermark/1")
async def test_removed_voter_stops_counting_at_append(sc: Scenario) -> None:
    """A removed voter's fetches stop counting toward the high watermark as soon as its removal is appended."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, keep=False)  # v2 fetched just now; nobody fetches in the background
        v3 = sc.q.voters[sc.bystander]
        v2 = sc.q.voters[sc.followers[0]]
        since = sc.q.log.end
        removing = sc.q.spawn(r.admin.remove_voter(v3.node_id, v3.directory_id))
        left = [v for v in r.initial if v != v3.node_id]
        off = await r.follow_until_voters_record(v3, epoch, since, left)  # v3 mirrors the log
        if off < 0:
            sc.fail("the leader appends VotersRecord(voters - removed)", f"voters {left}", str(r.voters_in_log()),
                    REMOVE)
        r.mark_changed()
        resp = await r.follow(v3, epoch)  # at the end: its offset is past the record
        hw = int(B.partition(resp).get("HighWatermark", -1))
        sc.check(hw <= off, f"voter {v3.node_id}, removed by the VotersRecord at {off}, no longer counts: its fetch "
                 f"past it does not commit it (the new set {left} needs v{v2.node_id})", f"HighWatermark <= {off}",
                 f"HighWatermark={hw}", HIGH_WATERMARK)  # fmt: skip
        sc.check(not removing.done(), "RemoveRaftVoter is not answered before the new set commits it", "no answer yet",
                 "answered", REMOVE_COMMIT)
        await r.follow(v2, epoch)
        resp = await r.follow(v2, epoch)
        hw = int(B.partition(resp).get("HighWatermark", -1))
        sc.check(hw > off, f"v{v2.node_id} (leader + v{v2.node_id} = the new majority) commits the VotersRecord",
                 f"HighWatermark > {off}", f"HighWatermark={hw}", HIGH_WATERMARK)
        try:
            done = await asyncio.wait_for(removing, sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("RemoveRaftVoter is answered once committed", "NONE", f"no answer: {exc}", REMOVE_COMMIT)
        sc.check(errors_of(done) == Errors.NONE, "RemoveRaftVoter succeeds once committed", "NONE",
                 name(errors_of(done)), REMOVE_COMMIT)


@case("KIP-853/OneChange/1")
async def test_one_uncommitted_change(sc: Scenario) -> None:
    """While a VotersRecord is uncommitted the leader refuses every other change and appends no second one."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, keep=False)
        v3 = sc.q.voters[sc.bystander]
        v2 = sc.q.voters[sc.followers[0]]
        since = sc.q.log.end
        first = sc.q.spawn(r.admin.remove_voter(v3.node_id, v3.directory_id))
        left = [v for v in r.initial if v != v3.node_id]
        await r.follow_until_voters_record(v3, epoch, since, left)  # removed: it sees the record, does not commit it
        r.mark_changed()
        recs = r.voters_records(since)
        before = len(recs)
        off = next((o for o, b in recs if voter_ids(b) == left), -1)
        if off < 0:
            sc.fail("the leader appends VotersRecord(voters - removed)", f"voters {left}", str(r.voters_in_log()),
                    REMOVE)
        second = Admin(sc)
        try:
            j = await r.joiner()
            for what, coro in ((f"RemoveRaftVoter({v2.node_id})", second.remove_voter(v2.node_id, v2.directory_id)),
                               (f"AddRaftVoter({j.node_id})",
                                second.add_voter(j.node_id, j.directory_id, [j.endpoint]))):
                resp = await sc.call(f"{what} is answered", coro, ONE_CHANGE)
                code = errors_of(resp)
                sc.check(code != Errors.NONE, f"{what} while VotersRecord({left}) at {off} is uncommitted is refused",
                         "an error", name(code), ONE_CHANGE)
                sc.check(code == Errors.REQUEST_TIMED_OUT, f"the refusal of {what} is REQUEST_TIMED_OUT "
                         "(KafkaRaftClientReconfigTest.testRemoveVoterWithPendingRemoveVoter)", "REQUEST_TIMED_OUT",
                         name(code), ONE_CHANGE, level=KAFKA, kafka=ROW_CHANGE_UNCOMMITTED)  # fmt: skip
        finally:
            await second.close()
        await r.follow(v3, epoch)
        after = r.voters_records(since)
        sc.check(len(after) == before, f"no second VotersRecord while the one at {off} is uncommitted (two changes "
                 "at once can leave two quorums without a common member)", f"{before} VotersRecord(s)",
                 [(o, voter_ids(b)) for o, b in after], ONE_CHANGE)  # fmt: skip
        await r.follow(v2, epoch)
        try:
            with_answer = await asyncio.wait_for(first, sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("the first change is answered", "NONE or REQUEST_TIMED_OUT", f"no answer: {exc}", REMOVE)
        sc.check(errors_of(with_answer) in (Errors.NONE, Errors.REQUEST_TIMED_OUT), "the first change is answered",
                 "NONE (or REQUEST_TIMED_OUT when its timer ran out first)", name(errors_of(with_answer)), REMOVE)


@case("KIP-853/RemoveVoter/3")
async def test_leader_removes_itself(sc: Scenario) -> None:
    """A leader that removes itself leads until the removal commits, answers NONE, then resigns and never stands
    for election again (it is an observer)."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, keep=False)  # v2 fetched just now; nobody fetches in the background
        v2, v3 = sc.q.voters[sc.followers[0]], sc.q.voters[sc.bystander]
        mark = sc.frames.mark()
        t = sc.timeouts
        since = sc.q.log.end
        # v3 keeps the leader in office but holds back below the record: only v2 holds it at first, and the leader,
        # no voter of the new set from the append on, must not count its own log toward the high watermark
        # (KIP-853 "High Watermark"; LeaderState.maybeUpdateHighWatermark counts the voters of the latest set)
        r.keep_fetching_at(v3.node_id, epoch, since)
        removing = sc.q.spawn(r.admin.remove_voter(sc.target_id, r.target_dir))
        left = [v for v in r.initial if v != sc.target_id]
        off = await r.follow_until_voters_record(v2, epoch, since, left)  # v2 mirrors the log
        if off < 0:
            sc.fail("the leader appended VotersRecord(voters - itself)", f"voters {left}", str(r.voters_in_log()),
                    REMOVE)
        r.mark_changed()
        await r.follow(v2, epoch)  # at the end: its offset is past the record
        # the highest HighWatermark the leader told v2 since the request (an answer after it resigned says -1)
        hw = max((int(f.part.get("HighWatermark", -1)) for f in sc.frames.select(
            lambda f: f.src == sc.target_id and f.dst == v2.node_id and f.api == "Fetch" and f.kind == "response",
            mark)), default=-1)  # fmt: skip
        sc.check(hw <= off, f"the leader, removed by the VotersRecord at {off}, no longer counts itself: "
                 f"v{v2.node_id}'s fetch past it does not commit it (the new set {left} needs v{v3.node_id} too)",
                 f"HighWatermark <= {off}", f"HighWatermark={hw}", HIGH_WATERMARK)  # fmt: skip
        sc.check(not removing.done(), "RemoveRaftVoter(the leader itself) is not answered before the new set "
                 f"{left} commits it", "no answer yet", "answered", REMOVE_COMMIT)  # fmt: skip
        await r.quiesce()
        r.keep_fetching(v2.node_id, epoch)
        r.keep_fetching(v3.node_id, epoch)  # v3 catches up: the new set holds the record
        try:
            resp = await asyncio.wait_for(removing, sc.bound_ms(t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("RemoveRaftVoter(the leader itself) is answered once the remaining voters commit it", "NONE",
                    f"no answer: {type(exc).__name__} {exc}", REMOVE_COMMIT)  # fmt: skip
        sc.check(errors_of(resp) == Errors.NONE, "the leader's own removal succeeds once the remaining voters commit "
                 "it", "NONE", name(errors_of(resp)), REMOVE_COMMIT)  # fmt: skip
        answer = answer_frame(sc, "RemoveRaftVoter", mark)
        for vid in left:
            past = first_fetch_past(sc, vid, off, mark)
            sc.check(answer is not None and past is not None and past.seq < answer.seq, "the removal of the leader "
                     f"commits in the new set {left} alone: v{vid} fetched past the VotersRecord at {off} before the "
                     "answer", f"Fetch(FetchOffset>{off}) from v{vid} first",
                     f"answer #{answer.seq if answer else None}, Fetch #{past.seq if past else None}",
                     REMOVE_COMMIT)  # fmt: skip
        eqe = await sc.frames.wait_for(sc.from_target("EndQuorumEpoch"), sc.bound_ms(t.election_ms) / 1000, mark)
        sc.check(eqe is not None, "the removed leader resigns with EndQuorumEpoch to the remaining voters "
                 "(KafkaRaftClientReconfigTest.testRemoveVoterIsLeader)", "EndQuorumEpoch from the target", "none",
                 RESIGN, level=KAFKA, kafka=ROW_RESIGN_EQE)  # fmt: skip
        # v2 and v3 go on fetching (a majority of the new set: a leader that does not resign stays in office, not
        # unseated by check quorum) while v2 asks the removed leader until it no longer leads: an upper bound
        resign_ms = sc.bound_ms(t.election_ms)
        sc.frames.note(sc.target_id, f"v2 asks the removed leader until it no longer leads, for up to {resign_ms:.0f} "
                                     "ms")  # fmt: skip
        v2 = sc.q.voters[sc.followers[0]]
        deadline = time.monotonic() + resign_ms / 1000
        while True:
            probe = await sc.call("a Fetch to the removed leader is answered", v2.fetch(epoch, sc.q.log.end,
                                  sc.q.log.last_epoch), RESIGN)  # fmt: skip
            part = B.partition_or_none(probe) or {}
            leader = part.get("CurrentLeader") or {}
            still = err(probe) == 0 and (leader.get("LeaderId"), leader.get("LeaderEpoch")) == (sc.target_id, epoch)
            if not still or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        await r.quiesce()
        sc.frames.note(sc.target_id, "the virtual voters stop fetching")
        sc.check(not still, "the removed leader stops leading once its removal is committed (it is no voter)",
                 "NOT_LEADER_OR_FOLLOWER (or another leader/epoch)", B.describe("Fetch", "response", probe),
                 RESIGN)  # fmt: skip
        start = sc.frames.mark()
        await sc.idle(sc.bound_ms(2 * t.election_ms + t.election_backoff_max_ms) / 1000)
        votes = sc.frames.select(sc.from_target("Vote"), start)
        sc.check(not votes, "a replica outside the voter set never stands for election", "no Vote from the target",
                 votes[0].summary() if votes else "", IN_FORCE)


@case("KIP-853/Restart/1")
async def test_restart_takes_voters_from_log(sc: Scenario) -> None:
    """A relaunched voter takes its voter set from its log's VotersRecords, not from the bootstrap checkpoint it was
    formatted with (KIP-853 "Bootstrapping": the checkpoint seeds an empty log only; Kafka's
    KRaftControlRecordStateMachine reads the snapshot and the log at start-up): after a committed removal of v3 the
    relaunched target stands for election asking v2 alone."""
    async with reconfig_life(sc, changes_voters=True) as r:
        t = sc.timeouts
        epoch = await elect(sc, r, keep=False)  # v2 fetched just now; nobody fetches in the background
        v2, v3 = sc.q.voters[sc.followers[0]], sc.q.voters[sc.bystander]
        since = sc.q.log.end
        removing = sc.q.spawn(r.admin.remove_voter(v3.node_id, v3.directory_id))
        left = [v for v in r.initial if v != v3.node_id]
        off = await r.follow_until_voters_record(v2, epoch, since, left)  # v2 mirrors the log
        if off < 0:
            sc.fail("the leader appends VotersRecord(voters - removed)", f"voters {left}", str(r.voters_in_log()),
                    REMOVE)
        r.mark_changed()
        await r.follow(v2, epoch)  # past the record: leader + v2 commit it in the new set
        try:
            done = await asyncio.wait_for(removing, sc.bound_ms(t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail(f"RemoveRaftVoter({v3.node_id}) is answered once committed", "NONE",
                    f"no answer: {type(exc).__name__} {exc}", REMOVE_COMMIT)  # fmt: skip
        sc.check(errors_of(done) == Errors.NONE, f"RemoveRaftVoter({v3.node_id}) succeeds once committed", "NONE",
                 name(errors_of(done)), REMOVE_COMMIT)  # fmt: skip
        await sc.restart_target()
        start = sc.frames.mark()
        vote = await sc.frames.wait_for(sc.from_target("Vote"),
                                        sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms) / 1000,
                                        start)  # fmt: skip
        sc.check(vote is not None, f"the relaunched target, a voter of {left} with no leader fetching from it, stands "
                 "for election", "a Vote (or pre-vote) from the target", "none", IN_FORCE)  # fmt: skip
        await sc.idle(sc.bound_ms(t.election_ms) / 1000)  # its Vote requests go to every voter of the set at once
        to_v3 = sc.frames.select(sc.from_target("Vote", dst=v3.node_id), start)
        sc.check(not to_v3, f"after a restart the voter set in force is the log's VotersRecord({left}) at {off}, not "
                 f"the bootstrap checkpoint's {r.initial}: no Vote to v{v3.node_id}, removed", "Vote requests to "
                 f"{[v for v in left if v != sc.target_id]} only", to_v3[0].summary() if to_v3 else "",
                 IN_FORCE)  # fmt: skip


@case("KIP-853/FollowerView/1")
async def test_follower_removed_by_uncommitted_record(sc: Scenario) -> None:
    """A follower that appends an uncommitted VotersRecord without itself is no longer a voter: no elections."""
    async with reconfig_life(sc, changes_voters=True) as r:
        a = sc.virtual_ids[0]
        epoch = await sc.make_follower(a)
        await sc.feed(a, epoch, 2)
        without = [v for v in r.initial if v != sc.target_id]
        off = sc.q.log.append_control(epoch, ControlType.KRAFT_VOTERS, voters_record(sc, without), commit=False)
        sc.q.changed()
        r.mark_changed()
        await sc.catch_up(a, epoch)
        sc.frames.note(a, f"v{a} holds VotersRecord({without}) at {off}, uncommitted; v{a} goes silent")
        sc.q.partition(a)
        t = sc.timeouts
        start = sc.frames.mark()
        await sc.idle(sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms) / 1000)
        votes = sc.frames.select(sc.from_target("Vote"), start)
        sc.check(not votes, f"the target appended VotersRecord({without}) (uncommitted): the latest voter set, in "
                 "force at once, does not hold it, so it never stands for election", "no Vote (nor pre-vote)",
                 votes[0].summary() if votes else "", IN_FORCE)  # fmt: skip


@case("KIP-853/FollowerView/2")
async def test_truncated_voters_record_restores_voter(sc: Scenario) -> None:
    """A follower that truncates an uncommitted VotersRecord without itself is a voter again: it stands for
    election when its leader goes silent."""
    async with reconfig_life(sc, changes_voters=True) as r:
        a, c = sc.virtual_ids[0], sc.virtual_ids[-1]
        epoch = await sc.make_follower(a)
        await sc.feed(a, epoch, 2)
        without = [v for v in r.initial if v != sc.target_id]
        log = sc.q.log
        off = log.append_control(epoch, ControlType.KRAFT_VOTERS, voters_record(sc, without), commit=False)
        sc.q.changed()
        r.mark_changed()
        await sc.catch_up(a, epoch)
        e2 = sc.q.next_epoch()
        log.truncate(off)
        sc.q.set_leader(c, e2)
        log.append_metadata(e2, 1)
        sc.q.changed()
        sc.frames.note(c, f"v{c} leads epoch {e2} without the VotersRecord at {off}")
        resp = await sc.call(f"BeginQuorumEpoch(epoch={e2}) from v{c} is answered",
                             sc.q.voters[c].begin_quorum_epoch(e2), IN_FORCE)
        sc.check(err(resp) == 0, f"the target accepts BeginQuorumEpoch from v{c}", "NONE", name(err(resp)), IN_FORCE)
        await sc.catch_up(c, e2)  # it truncated the VotersRecord (DivergingEpoch) and fetched v{c}'s records
        sc.q.partition(c)
        t = sc.timeouts
        start = sc.frames.mark()
        vote = await sc.frames.wait_for(sc.from_target("Vote"),
                                        sc.bound_ms(t.fetch_ms + 2 * t.election_ms + t.election_backoff_max_ms) / 1000,
                                        start)  # fmt: skip
        sc.check(vote is not None, f"after truncating VotersRecord({without}) the set in force holds the target "
                 "again: with its leader silent it stands for election", "a Vote (or pre-vote) from the target",
                 "none", IN_FORCE)  # fmt: skip


@case("KIP-853/UpdateVoter/1")
async def test_update_voter(sc: Scenario) -> None:
    """UpdateRaftVoter: the leader checks the epoch, the voter and the range, then appends a VotersRecord with the
    voter's new listeners and answers at once, naming itself as the current leader."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r)
        v2 = sc.q.voters[sc.followers[0]]
        extra = {"Name": "EXTRA", "Host": v2.host, "Port": v2.port}
        listeners = [v2.endpoint, extra]
        tries: list[tuple[str, Any, Errors, str]] = [
            (f"a stale CurrentLeaderEpoch ({epoch - 1})", r.admin.update_voter(epoch - 1, v2.node_id, v2.directory_id,
             listeners), Errors.FENCED_LEADER_EPOCH, "testUpdateVoterOldEpoch"),
            (f"a future CurrentLeaderEpoch ({epoch + 1})", r.admin.update_voter(epoch + 1, v2.node_id,
             v2.directory_id, listeners), Errors.UNKNOWN_LEADER_EPOCH, "testUpdateVoterNewEpoch"),
            ("an id that is no voter", r.admin.update_voter(epoch, r.joiner_id(5), uuid.uuid4(), listeners),
             Errors.VOTER_NOT_FOUND, "testUpdateVoterWithNoneVoterId"),
            ("a kraft.version range whose max is below its min", r.admin.update_voter(epoch, v2.node_id,
             v2.directory_id, listeners, kraft_range=(1, 0)), Errors.INVALID_REQUEST, "testUpdateVoter*"),
            # last: a node that ignores the directory id accepts it and appends a VotersRecord (the voter key is the
            # pair (id, directory id): VoterSet.updateVoter; UpdateVoterHandler answers VOTER_NOT_FOUND)
            (f"voter {v2.node_id}'s id with another directory id", r.admin.update_voter(epoch, v2.node_id,
             uuid.uuid4(), listeners), Errors.VOTER_NOT_FOUND, "testUpdateVoterWithNoneVoter"),
        ]  # fmt: skip
        for what, coro, expected, kafka_test in tries:
            resp = await sc.call(f"UpdateRaftVoter with {what} is answered", coro, UPDATE)
            code = errors_of(resp)
            sc.check(code != Errors.NONE, f"UpdateRaftVoter with {what} is refused", "an error", name(code), UPDATE)
            sc.check(code == expected, f"UpdateRaftVoter with {what} is answered {expected.name} "
                     f"(KafkaRaftClientReconfigTest.{kafka_test})", expected.name, name(code), UPDATE, level=KAFKA,
                     kafka=ROW_UPDATE_CODES)  # fmt: skip
        unchanged(sc, r, f"after {len(tries)} refused UpdateRaftVoter requests", UPDATE)
        mark, since = sc.frames.mark(), sc.q.log.end
        resp = await sc.call("UpdateRaftVoter is answered", r.admin.update_voter(epoch, v2.node_id, v2.directory_id,
                             listeners), UPDATE)  # fmt: skip
        r.mark_changed()
        sc.check(errors_of(resp) == Errors.NONE, f"UpdateRaftVoter of voter {v2.node_id} with an extra listener "
                 "succeeds", "NONE", name(errors_of(resp)), UPDATE)  # fmt: skip
        current = resp.get("CurrentLeader") or {}
        sc.check((current.get("LeaderId"), current.get("LeaderEpoch")) == (sc.target_id, epoch), "the answer names "
                 "the leader and its epoch (CurrentLeader; RaftUtil.updateVoterResponse)",
                 f"LeaderId={sc.target_id}, LeaderEpoch={epoch}", current, UPDATE, level=KAFKA,
                 kafka=ROW_UPDATE_AT_ONCE)  # fmt: skip

        def updated() -> bool:
            for _, body in r.voters_records(since):
                for v in body.get("Voters") or []:
                    if int(v["VoterId"]) == v2.node_id and any(e.get("Name") == "EXTRA" for e in v["Endpoints"]):
                        return True
            return False

        ok = await r.wait_for(updated, sc.bound_ms(sc.timeouts.request_timeout_ms))
        sc.check(ok, f"the leader appends a VotersRecord with voter {v2.node_id}'s new listeners", "a VotersRecord "
                 "listing the EXTRA listener", str(r.voters_in_log()), UPDATE)  # fmt: skip
        off, ids = r.voters_in_log()
        sc.check(ids == r.initial, "an update changes a voter's listeners, never the voter set", str(r.initial), ids,
                 UPDATE)
        answer = answer_frame(sc, "UpdateRaftVoter", mark)
        past = first_fetch_past(sc, v2.node_id, off, mark)
        sc.check(answer is not None and (past is None or answer.seq < past.seq), "UpdateRaftVoter is answered at "
                 "once, not at the commit of its VotersRecord (UpdateVoterHandler)", "the answer before "
                 f"v{v2.node_id} fetched past offset {off}", f"answer #{answer.seq if answer else None}, Fetch "
                 f"#{past.seq if past else None}", UPDATE, level=KAFKA, kafka=ROW_UPDATE_AT_ONCE)  # fmt: skip



# ---------------------------------------------------------------------------------------------- timers


@case("KIP-853/OneChange/3")
async def test_add_voter_timeout_keeps_record(sc: Scenario) -> None:
    """An AddRaftVoter whose VotersRecord does not commit in time is answered REQUEST_TIMED_OUT; the record stays in
    the log (and in force), and every later change is refused until it commits (testAddVoterTimeout)."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, keep=False)
        v2 = sc.q.voters[sc.followers[0]]
        v3 = sc.q.voters[sc.bystander]
        j = await r.joiner()
        await r.follow(j, epoch)
        await r.follow(j, epoch)  # caught up: the add goes through to the VotersRecord
        since = sc.q.log.end
        for v in (v2, v3):  # they keep the leader in office (check quorum) and never hold the VotersRecord
            r.keep_fetching_at(v.node_id, epoch, since)
        mark = sc.frames.mark()
        sent = sc.frames.now_ms()
        adding = sc.q.spawn(r.admin.add_voter(j.node_id, j.directory_id, [j.endpoint]))
        new = sorted([*r.initial, j.node_id])
        t = sc.timeouts
        # the new voter mirrors the leader's log up to (not past) the VotersRecord, then is silent
        off, _ = await wait_for_record(sc, r, j, epoch, since, new, f"the leader appends VotersRecord(voters + "
                                       f"{j.node_id})", ADD)  # fmt: skip
        r.mark_changed()
        sc.frames.note(j.node_id, f"v{j.node_id} has VotersRecord({new}) at {off} (not past it) and goes silent; "
                       f"v{v2.node_id} and v{v3.node_id} fetch at {since} only: the leader alone holds it")
        try:
            resp = await asyncio.wait_for(adding, sc.bound_ms(2 * t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail("an AddRaftVoter whose VotersRecord does not commit is answered all the same", "REQUEST_TIMED_OUT",
                    f"no answer within {sc.bound_ms(2 * t.request_timeout_ms):.0f} ms: {type(exc).__name__}",
                    ADD_COMMIT)  # fmt: skip
        code = errors_of(resp)
        sc.check(code != Errors.NONE, f"AddRaftVoter is not answered NONE while VotersRecord({new}) at {off} is "
                 "uncommitted", "an error (REQUEST_TIMED_OUT)", name(code), ADD_COMMIT)  # fmt: skip
        answer = answer_frame(sc, "AddRaftVoter", mark)
        waited = (answer.ts_ms if answer is not None else sc.frames.now_ms()) - sent
        low = 0.8 * t.request_timeout_ms
        sc.check(code == Errors.REQUEST_TIMED_OUT and waited >= low, "the add times out with REQUEST_TIMED_OUT after "
                 "the request timeout (KafkaRaftClientReconfigTest.testAddVoterTimeout: the timer is "
                 "controller.quorum.request.timeout.ms)", f"REQUEST_TIMED_OUT after >= {low:.0f} ms",
                 f"{name(code)} after {waited:.0f} ms", ADD, level=KAFKA, kafka=ROW_ADD_TIMEOUT)  # fmt: skip
        await r.quiesce()
        r.keep_fetching_at(v3.node_id, epoch, since)
        resp = await r.follow(v2, epoch)  # v2 mirrors what the leader holds now
        recs = [(o, voter_ids(b)) for o, b in r.voters_records(off)]
        sc.check(bool(recs) and recs[-1] == (off, new), f"the timed-out add's VotersRecord at {off} stays in the "
                 "leader's log, the last one (no record undoes it: it stays in force)", f"last VotersRecord "
                 f"({off}, {new})", recs, IN_FORCE)  # fmt: skip
        sc.check(int(B.partition(resp).get("HighWatermark", -1)) <= off, f"v{v2.node_id}'s catch-up alone (2 of "
                 f"{len(new)}) does not commit it", f"HighWatermark <= {off}",
                 B.describe("Fetch", "response", resp), HIGH_WATERMARK)  # fmt: skip
        second = Admin(sc)
        try:
            resp = await sc.call(f"RemoveRaftVoter({v3.node_id}) is answered",
                                 second.remove_voter(v3.node_id, v3.directory_id), ONE_CHANGE)
        finally:
            await second.close()
        code = errors_of(resp)
        sc.check(code != Errors.NONE, f"a change while the timed-out add's VotersRecord at {off} is uncommitted is "
                 "refused", "an error", name(code), ONE_CHANGE)  # fmt: skip
        sc.check(code == Errors.REQUEST_TIMED_OUT, "the refusal is REQUEST_TIMED_OUT (AddVoterHandler / "
                 "RemoveVoterHandler: the latest VotersRecord is uncommitted)", "REQUEST_TIMED_OUT", name(code),
                 ONE_CHANGE, level=KAFKA, kafka=ROW_CHANGE_UNCOMMITTED)  # fmt: skip
        await r.follow(v2, epoch)
        after = [(o, voter_ids(b)) for o, b in r.voters_records(off)]
        sc.check(after == [(off, new)], f"no second VotersRecord while the timed-out add's one at {off} is "
                 "uncommitted", f"only ({off}, {new})", after, ONE_CHANGE)  # fmt: skip
        await r.follow(j, epoch)  # 3 of 4 voters hold it: committed
        resp = await r.follow(v2, epoch)
        hw = int(B.partition(resp).get("HighWatermark", -1))
        sc.check(hw > off, f"with v{j.node_id} the new set's majority holds it: committed", f"HighWatermark > {off}",
                 f"HighWatermark={hw}", HIGH_WATERMARK)  # fmt: skip
        r.keep_fetching(v2.node_id, epoch)  # commits the next change in the set without the joiner
        resp = await sc.call(f"RemoveRaftVoter({j.node_id}) after the commit is answered",
                             r.admin.remove_voter(j.node_id, j.directory_id), ONE_CHANGE)
        sc.check(errors_of(resp) == Errors.NONE, f"once VotersRecord({new}) is committed the next change goes "
                 f"through: RemoveRaftVoter({j.node_id}) succeeds", "NONE", name(errors_of(resp)),
                 ONE_CHANGE)  # fmt: skip


@case("KIP-853/CheckQuorum/1")
async def test_removed_voter_keeps_no_leader_in_office(sc: Scenario) -> None:
    """Once a voter's removal is in the log its fetches no longer keep the leader in office: with the remaining voter
    silent, the leader gives up after the check-quorum timeout although the removed voter keeps fetching (Kafka's
    LeaderState.updateCheckQuorumForFollowingVoter counts the voters of the latest set only; the removed one is an
    observer from the append on, LeaderState.updateVoterAndObserverStates)."""
    async with reconfig_life(sc, changes_voters=True) as r:
        epoch = await elect(sc, r, keep=False)
        v2 = sc.q.voters[sc.followers[0]]
        v3 = sc.q.voters[sc.bystander]
        since = sc.q.log.end
        removing = sc.q.spawn(r.admin.remove_voter(v2.node_id, v2.directory_id))
        left = [v for v in r.initial if v != v2.node_id]
        t = sc.timeouts
        off, _ = await wait_for_record(sc, r, v3, epoch, since, left, f"the leader appends VotersRecord(voters - "
                                       f"{v2.node_id})", REMOVE)  # fmt: skip
        r.mark_changed()
        r.keep_fetching(v2.node_id, epoch)  # the removed voter fetches on, to the end, all along
        last = await sc.call(f"v{v3.node_id} fetches past the VotersRecord at {off}",
                             v3.follow_once(epoch), HIGH_WATERMARK)  # fmt: skip
        try:
            done = await asyncio.wait_for(removing, sc.bound_ms(t.request_timeout_ms) / 1000)
        except Exception as exc:
            sc.fail(f"RemoveRaftVoter({v2.node_id}) is answered once v{v3.node_id} commits it", "NONE",
                    f"no answer: {type(exc).__name__} {exc}", REMOVE_COMMIT)
        sc.check(errors_of(done) == Errors.NONE, f"RemoveRaftVoter({v2.node_id}) succeeds", "NONE",
                 name(errors_of(done)), REMOVE_COMMIT)
        # v3's last Fetch and its answer: the leader's last check-quorum credit came in between
        asked = sc.frames.select(lambda f: f.src == v3.node_id and f.api == "Fetch" and f.kind == "request")[-1]
        answered = sc.frames.select(lambda f: f.dst == v3.node_id and f.api == "Fetch" and f.kind == "response")[-1]
        sc.frames.note(v3.node_id, f"v{v3.node_id} goes silent; only v{v2.node_id}, removed, fetches from the leader "
                       f"({B.describe('Fetch', 'response', last)})")
        # upper bound (MUST): Kafka's 1.5 x fetch.timeout, which holds the KIP's 1.0 x (or the factor the target's
        # profile declares), plus the slack, after v3's last fetch was answered
        limit = max(CHECK_QUORUM_FACTOR, declared_factor(sc)) * t.fetch_ms
        quit_ = await sc.frames.wait_for(gives_up(sc, epoch), sc.bound_ms(limit) / 1000, answered.seq + 1)
        sc.check(quit_ is not None, f"v{v2.node_id}'s fetches no longer count once its removal is appended: with "
                 f"v{v3.node_id}, the only other voter of {left}, silent the leader gives up (check quorum over the "
                 "latest voter set)", f"EndQuorumEpoch or Vote(epoch>{epoch}) within {limit / t.fetch_ms:g} x "
                 f"fetch.timeout = {limit:.0f} ms + slack {sc.slack_ms} ms of v{v3.node_id}'s last fetch",
                 "the target still leads", CHECK_QUORUM)  # fmt: skip
        assert quit_ is not None
        # lower bound (KAFKA, as conformance/test_checkquorum.py): not before 1.25 x after v3's last Fetch was sent
        waited = quit_.ts_ms - asked.ts_ms
        sc.frames.note(sc.target_id, f"gave up with {quit_.api}, {waited:.0f} ms after v{v3.node_id}'s last fetch")
        early = EARLY_FACTOR * t.fetch_ms
        sc.check(waited >= early, "the leader gives up after Kafka's check-quorum timeout, 1.5 x fetch.timeout "
                 "(LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR)", f"at least {early:.0f} ms after the last fetch (1.5 x "
                 f"{t.fetch_ms} ms, less scheduling)", f"{waited:.0f} ms", CHECK_QUORUM, level=KAFKA,
                 kafka=ROW_CHECK_QUORUM)  # fmt: skip


@case("KIP-853/UpdateVoter/2")
async def test_follower_sends_update_voter(sc: Scenario) -> None:
    """A follower voter whose entry in the voter set in force names other listeners than its own tells its leader
    with UpdateRaftVoter: its key, the leader's epoch and its real listeners (KafkaRaftClient.pollFollowerAsVoter /
    maybeSendUpdateVoterRequest every FollowerState.updateVoterPeriodMs; KafkaRaftClientReconfigTest
    .testFollowerSendsUpdateVoter, testFollowerSendsUpdateVoterWhenDifferent)."""
    async with reconfig_life(sc, changes_voters=True) as r:
        a = sc.virtual_ids[0]
        epoch = await sc.make_follower(a)
        await sc.catch_up(a, epoch)
        tgt = sc.target
        other = tgt.port + 1 if tgt.port < 65535 else tgt.port - 1
        body = voters_record(sc, r.initial)
        for v in body["Voters"]:
            if v["VoterId"] == tgt.node_id:
                v["Endpoints"] = [{"Name": LISTENER, "Host": tgt.host, "Port": other}]
        mark = sc.frames.mark()
        off = sc.q.log.append_control(epoch, ControlType.KRAFT_VOTERS, body, commit=True)
        sc.q.changed()
        r.mark_changed()
        sc.frames.note(a, f"v{a} writes VotersRecord({r.initial}) at {off} naming the target at {tgt.host}:{other}, "
                       f"not {tgt.host}:{tgt.port}")
        await sc.catch_up(a, epoch)
        held = sc.frames.select(lambda f: sc.from_target("Fetch", dst=a)(f) and f.part.get("FetchOffset") == off + 1
                                and f.part.get("CurrentLeaderEpoch") == epoch, mark)  # fmt: skip
        held_ms = held[0].ts_ms if held else sc.frames.now_ms()
        t = sc.timeouts
        period = UPDATE_VOTER_PERIOD_FACTOR * t.fetch_ms
        # Kafka checks every period (FollowerState.hasUpdateVoterPeriodExpired) and may skip one while a Fetch is in
        # flight: two periods and a parked fetch at most
        bound = sc.bound_ms(2 * period + MAX_PARK_MS)
        update = await sc.frames.wait_for(sc.from_target("UpdateRaftVoter", dst=a), bound / 1000, mark)
        sc.check(update is not None, f"the target, whose entry in the voter set in force names {tgt.host}:{other}, "
                 f"tells its leader v{a} its own listener (UpdateRaftVoter)", f"UpdateRaftVoter to v{a} within "
                 f"{bound:.0f} ms", "none", UPDATE_SENT)  # fmt: skip
        assert update is not None
        waited = update.ts_ms - held_ms
        once = sc.bound_ms(period + MAX_PARK_MS)
        sc.check(waited <= once, "the update goes out within one update period, 3 x fetch.timeout, of the target "
                 "holding the record (KafkaRaftClient.pollFollowerAsVoter; FollowerState.updateVoterPeriodMs)",
                 f"<= {once:.0f} ms", f"{waited:.0f} ms", UPDATE_SENT, level=KAFKA, kafka=ROW_UPDATE_SENT)  # fmt: skip
        req = update.body
        listeners = [(e.get("Name"), e.get("Host"), int(e.get("Port", -1))) for e in req.get("Listeners") or []]
        key = (req.get("VoterId"), req.get("VoterDirectoryId"), req.get("CurrentLeaderEpoch"))
        want = (tgt.node_id, r.target_dir, epoch)
        sc.check(key == want and (LISTENER, tgt.host, tgt.port) in listeners, "the UpdateRaftVoter names the target's "
                 "voter key, its leader's epoch and the listener it really has (KafkaRaftClient"
                 ".buildUpdateVoterRequest)", f"VoterId={want[0]}, VoterDirectoryId={want[1]}, CurrentLeaderEpoch="
                 f"{epoch}, Listeners with {LISTENER}://{tgt.host}:{tgt.port}", update.summary(),
                 UPDATE_SENT)  # fmt: skip
        feature = req.get("KRaftVersionFeature") or {}
        lo, hi = int(feature.get("MinSupportedVersion", -1)), int(feature.get("MaxSupportedVersion", -1))
        sc.check(0 <= lo <= 1 <= hi, "the UpdateRaftVoter's kraft.version range holds the finalized kraft.version 1 "
                 "(the leader refuses one that does not: UpdateVoterHandler)", "MinSupportedVersion <= 1 <= "
                 "MaxSupportedVersion", f"{lo}-{hi}", UPDATE_SENT, level=KAFKA, kafka=ROW_UPDATE_SENT)  # fmt: skip
        # v{a} answered NONE as the leader of that epoch; it records the update as Kafka's leader does (a VotersRecord
        # with the voter's new entry), so the target's entry matches its listeners again
        sc.q.log.append_control(epoch, ControlType.KRAFT_VOTERS, voters_record(sc, r.initial), commit=True)
        sc.q.changed()
        await sc.catch_up(a, epoch)


async def add_until_committed(sc: Scenario, r: Reconf, epoch: int, v: Any, holder: Any | None) -> None:
    """The virtual controller ``v`` joins the target leader's quorum (KIP-853 "AddRaftVoter Request Handling"): it
    fetches as an observer to the leader's end, the harness sends AddRaftVoter for it, it fetches up to (not past)
    the new VotersRecord; the answer must wait until it fetches past it. ``holder``: a voter of the old set that
    meanwhile fetches at an offset before the record (it keeps the leader in office, and never holds the record),
    so that only the new set's majority (leader + ``v``) can commit it (KafkaRaftClientReconfigTest.testAddVoter)."""
    await r.follow(v, epoch)
    await r.follow(v, epoch)  # the last Fetch was at the leader's end: caught up (LeaderState.isReplicaCaughtUp)
    since = sc.q.log.end
    if holder is not None:
        r.keep_fetching_at(holder.node_id, epoch, since)
    mark = sc.frames.mark()
    new = sorted([*r.voters_in_log()[1], v.node_id])
    adding = sc.q.spawn(r.admin.add_voter(v.node_id, v.directory_id, [v.endpoint]))
    off, _ = await wait_for_record(sc, r, v, epoch, since, new, f"the leader appends VotersRecord(voters + "
                                   f"{v.node_id})", ADD)  # fmt: skip
    r.mark_changed()
    await asyncio.sleep(0.05)
    early = answer_frame(sc, "AddRaftVoter", mark)
    sc.check(early is None and not adding.done(), f"AddRaftVoter({v.node_id}) is not answered while "
             f"VotersRecord({new}) at {off} is held by the leader alone ({len(new) // 2 + 1} of {len(new)} voters "
             "commit it)",
             "no answer yet", early.summary() if early else "answered", ADD_COMMIT)  # fmt: skip
    await sc.call(f"v{v.node_id} fetches past the VotersRecord at {off}", v.follow_once(epoch), ADD_COMMIT)
    try:
        resp = await asyncio.wait_for(adding, sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
    except Exception as exc:
        sc.fail(f"AddRaftVoter({v.node_id}) is answered once the new voter fetched past its VotersRecord (with the "
                f"leader a majority of {new})", "NONE", f"no answer: {type(exc).__name__} {exc}",
                ADD_COMMIT)  # fmt: skip
    sc.check(errors_of(resp) == Errors.NONE, f"AddRaftVoter({v.node_id}) succeeds once VotersRecord({new}) commits in "
             "the new set", "NONE", name(errors_of(resp)), ADD_COMMIT)  # fmt: skip
    answer = answer_frame(sc, "AddRaftVoter", mark)
    past = first_fetch_past(sc, v.node_id, off, mark)
    sc.check(answer is not None and past is not None and past.seq < answer.seq, f"AddRaftVoter({v.node_id}) is "
             f"answered only after the new voter fetched past the VotersRecord at {off}", f"a Fetch(FetchOffset>{off}) "
             f"from v{v.node_id} before the answer", f"answer #{answer.seq if answer else None}, first such Fetch "
             f"#{past.seq if past else None}", ADD_COMMIT)  # fmt: skip
    await r.quiesce()


@case("KIP-853/Bootstrap/1")
async def test_standalone_grows_to_three_voters(sc: Scenario) -> None:
    """A target formatted --standalone (the only voter) elects itself and is grown to three voters by the harness's
    virtual controllers, one AddRaftVoter at a time, each answered once the new voter set's majority holds it (KIP-853
    "Bootstrapping"; Kafka's StorageTool --standalone, KafkaRaftClientReconfigTest.testLeaderWritesBootstrapRecords,
    testAddVoter, testAddVoterWithLaggingNewVoter)."""
    async with reconfig_life(sc, changes_voters=True, standalone=True) as r:
        t = sc.timeouts
        # how soon a sole voter stands is the target's business (Kafka's KafkaRaftClient.initialize: at once); it
        # must within its election timeout (and backoff)
        bound = sc.bound_ms(2 * t.election_ms + t.election_backoff_max_ms + t.request_timeout_ms)
        led = await r.wait_leader(bound)
        if led is None:
            sc.fail("the target formatted --standalone, the only voter of its quorum, elects itself",
                    f"DescribeQuorum naming it leader within {bound:.0f} ms", "it does not lead", BOOTSTRAP)
        epoch, part = led
        voters = {int(v["ReplicaId"]): v for v in part.get("CurrentVoters") or []}
        sc.check(sorted(voters) == [sc.target_id], "the voter set of a target formatted --standalone is the target "
                 "alone (StorageTool: the node on its first controller listener)", f"[{sc.target_id}]",
                 sorted(voters), BOOTSTRAP)  # fmt: skip
        own = voters[sc.target_id].get("ReplicaDirectoryId")
        if isinstance(own, uuid.UUID) and own.int:  # the directory id it chose when formatted
            sc.q.target_directory_id = own
        # a sole voter's leader never resigns for lack of a quorum, and its check-quorum timer keeps running while it
        # is the only voter (LeaderState.timeUntilCheckQuorumExpires), so it stays in office past the check-quorum
        # timeout and a first AddRaftVoter after it finds a fresh timer, not an expired one
        quiet = sc.bound_ms(max(CHECK_QUORUM_FACTOR, declared_factor(sc)) * t.fetch_ms)
        await asyncio.sleep(quiet / 1000)
        still = await r.wait_leader(sc.bound_ms(t.request_timeout_ms))
        sc.check(still is not None and still[0] == epoch, f"the --standalone target, the only voter, still leads "
                 f"epoch {epoch} {quiet:.0f} ms after its election (past the check-quorum timeout: no quorum to lose)",
                 f"leader in epoch {epoch}", f"epoch {still[0]}" if still else "it does not lead", CHECK_QUORUM)
        first, second = sc.q.voters[sc.virtual_ids[0]], sc.q.voters[sc.virtual_ids[1]]
        await add_until_committed(sc, r, epoch, first, None)
        # the second controller has not fetched yet: not caught up, so refused, the voter set unchanged
        r.keep_fetching(first.node_id, epoch)
        resp = await sc.call(f"AddRaftVoter({second.node_id}) before it fetched is answered",
                             r.admin.add_voter(second.node_id, second.directory_id, [second.endpoint]),
                             ADD_CHECKS)  # fmt: skip
        code = errors_of(resp)
        sc.check(code != Errors.NONE, f"AddRaftVoter of controller {second.node_id}, which never fetched from this "
                 "leader (not caught up), is refused", "an error", name(code), ADD_CHECKS)  # fmt: skip
        sc.check(code == Errors.REQUEST_TIMED_OUT, "the refusal is REQUEST_TIMED_OUT "
                 "(KafkaRaftClientReconfigTest.testAddVoterWithLaggingNewVoter)", "REQUEST_TIMED_OUT", name(code),
                 ADD_CHECKS, level=KAFKA, kafka=ROW_ADD_CODES)  # fmt: skip
        await r.quiesce()
        await r.follow(first, epoch)
        off, ids = r.voters_in_log()
        grown = sorted([sc.target_id, first.node_id])
        sc.check(ids == grown, f"the refused AddRaftVoter({second.node_id}) leaves the voter set {grown}",
                 f"voters {grown}", f"a VotersRecord at offset {off} with voters {ids}", ADD_CHECKS)  # fmt: skip
        await add_until_committed(sc, r, epoch, second, first)
        _version, resp = await r.admin.describe_quorum()
        part = B.partition_or_none(resp) or {}
        final = {int(v["ReplicaId"]): v.get("ReplicaDirectoryId") for v in part.get("CurrentVoters") or []}
        want = sorted([sc.target_id, first.node_id, second.node_id])
        sc.check(sorted(final) == want and (part.get("LeaderId"), part.get("LeaderEpoch")) == (sc.target_id, epoch),
                 "DescribeQuorum: the target still leads its epoch, with three voters", f"leader {sc.target_id} in "
                 f"epoch {epoch}, CurrentVoters {want}", B.describe("DescribeQuorum", "response", resp) +
                 f" CurrentVoters {sorted(final)}", BOOTSTRAP)  # fmt: skip
        dirs = {first.node_id: first.directory_id, second.node_id: second.directory_id}
        ok = all(final.get(vid) == d for vid, d in dirs.items()) and isinstance(final.get(sc.target_id), uuid.UUID) \
            and final[sc.target_id] != ZERO_UUID
        sc.check(ok, "each voter is listed with its directory id (DescribeQuorum v2 ReplicaDirectoryId)",
                 str({k: str(v) for k, v in dirs.items()}) + " and the target's own",
                 {k: str(v) for k, v in final.items()}, DESCRIBE, level=KAFKA, kafka=ROW_DESCRIBE)  # fmt: skip
