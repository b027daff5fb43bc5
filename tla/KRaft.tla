-------------------------------- MODULE KRaft --------------------------------
(***************************************************************************)
(* KRaft (KIP-595) as the kraft-tck reference core implements it.          *)
(*                                                                         *)
(* Action names are the shared vocabulary of spec/README.md: the TLA+      *)
(* action HandleVoteRequest is the core handler handle_vote_request and    *)
(* the trace event "HandleVoteRequest".  State variables carry the names   *)
(* of the trace's "state" object.                                          *)
(*                                                                         *)
(* Modelled:                                                               *)
(*  - roles Unattached / Voted / Candidate / Leader / Follower / Resigned, *)
(*    epochs, the durable vote (votedId is kept for the whole epoch, also  *)
(*    across restarts, so a node never votes twice in one epoch);          *)
(*  - Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch requests and        *)
(*    responses over a network that loses (DropMessage), duplicates        *)
(*    (DuplicateMessage) and reorders (any message can be received next);  *)
(*  - the LeaderChange control record a new leader appends first;          *)
(*  - the high-watermark rule: the leader only moves its HW once an entry  *)
(*    of its own epoch is on a majority of voters ("Fetch Request Handling"*)
(*    step 4), and only publishes it after that;                           *)
(*  - DivergingEpoch = the largest epoch <= the fetcher's LastFetchedEpoch *)
(*    with its end offset ("Fetch Request Handling" step 3) and follower   *)
(*    truncation to min(local end of that epoch, leader's end offset),     *)
(*    refused below its HW (Kafka's follower throws and halts);            *)
(*  - the leader progress timeout (Kafka behaviour: Leader -> Resigned,    *)
(*    EndQuorumEpoch sent, a later StartElection), graceful Resign;        *)
(*  - clusterId checks: a request stamped with a foreign cluster id        *)
(*    (ForeignClusterCopy) is consumed and changes nothing;                *)
(*  - crash and restart: epoch, votedId, leaderId (quorum-state), the log *)
(*    and clusterId are durable; role, HW and the leader's replica state   *)
(*    are lost; the role resumed follows Kafka's QuorumState.initialize;   *)
(*  - the leader's long poll: a caught-up fetch may be parked and answered *)
(*    later (AnswerParkedFetch) with the log and HW of that later moment;  *)
(*  - observers: they fetch and follow, but never vote or count for the HW;*)
(*  - the leader's BeginQuorumEpoch heartbeat (Kafka 3.9+, KAFKA-16536):   *)
(*    a leader sends BeginQuorumEpoch again for as long as it leads,       *)
(*    acknowledged or not (SendBeginQuorumEpoch);                          *)
(*  - pre-vote (KIP-996, Kafka 4.x), switched by the constant PreVote: a   *)
(*    voter whose fetch or election timer fires becomes Prospective        *)
(*    (BecomeProspective: same epoch, no vote persisted) and asks the      *)
(*    voters with Vote PreVote=true; only a majority of pre-vote grants    *)
(*    makes it a Candidate (StartElection, epoch + 1); AbandonProspective  *)
(*    gives up.  A pre-vote is granted on an up-to-date log alone, except  *)
(*    that a Leader and a Follower that has fetched from its leader since  *)
(*    it began following it (Kafka's FollowerState.hasFetchedFromLeader,   *)
(*    variable hasFetched) refuse.                                         *)
(*    With PreVote = FALSE elections start as in Kafka 3.x, straight from  *)
(*    the timeout;                                                         *)
(*  - snapshots (KIP-630), switched by the constant Snapshots: a node     *)
(*    snapshots its state machine at a committed offset (CreateSnapshot:   *)
(*    end offset <= its HW), moves its log start up to a snapshot's end    *)
(*    (CleanLog), a leader answers a Fetch its log can no longer serve     *)
(*    with the SnapshotId of its latest snapshot, and the follower         *)
(*    downloads it (SendFetchSnapshotRequest, HandleFetchSnapshotRequest,  *)
(*    HandleFetchSnapshotResponse) and installs it: its log is emptied     *)
(*    and starts at the snapshot's end offset.  See "Snapshots" below for  *)
(*    how a snapshot is represented.                                       *)
(*  - dynamic voter sets (KIP-853), switched by the constant Reconfig:    *)
(*    see "Voter changes" below.                                           *)
(*                                                                         *)
(* Deliberately not modelled (and why):                                    *)
(*  - time: timers are nondeterministic enabling conditions, so every      *)
(*    timeout "may fire"; this over-approximates any timing and keeps the  *)
(*    safety results valid for all timer settings;                         *)
(*  - PreferredSuccessors only changes how long a successor waits before   *)
(*    StartElection (cause EndQuorumEpoch), i.e. timing, so it is not      *)
(*    carried; leaving it out also keeps node ids free of any order, which *)
(*    makes symmetry reduction over voters sound;                          *)
(*  - resending Vote / EndQuorumEpoch until answered: DuplicateMessage     *)
(*    already lets a request arrive any number of times.  (Node-trace      *)
(*    validation maps a BeginQuorumEpoch heartbeat to such a copy too,     *)
(*    made while the first send was in flight: the same behaviour; a       *)
(*    black-box target's heartbeat is a hidden SendBeginQuorumEpoch.)      *)
(*  - correlation ids: a follower only acts on the answer to the fetch it  *)
(*    has in flight; the model approximates that by the answer echoing the *)
(*    request's FetchOffset/LastFetchedEpoch, which must still match the   *)
(*    follower's log, and by never moving a follower's HW backwards;       *)
(*  - record batches: one record per entry, at most MaxFetchRecords per    *)
(*    Fetch response (Kafka's max bytes), record values are abstract;      *)
(*  - Vote v0/v1                                                         *)
(*    peers of a pre-vote voter (Kafka falls back to a real election: the  *)
(*    PreVote = FALSE path).  DescribeQuorum is a read-only action         *)
(*    (HandleDescribeQuorumRequest) that changes no protocol state.        *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Voters,          \* node ids that vote and count for the HW: the static voter set
                     \* (controller.quorum.voters) or, with Reconfig, the bootstrap
                     \* checkpoint's set (InitVoters), in force until a VotersRecord
    Observers,       \* node ids that only fetch; with Reconfig, those a leader may add
                     \* (the joiners)
    Values,          \* client record values
    LocalCluster,    \* the cluster id every node has in meta.properties
    ForeignCluster,  \* a cluster id a rogue request may carry
    MaxFetchRecords, \* records per Fetch response (Kafka's max bytes, in records)
    PreVote,         \* BOOLEAN: elections go through pre-vote (KIP-996, Kafka 4.x)
    Snapshots,       \* BOOLEAN: nodes take snapshots and clean their logs (KIP-630)
    Reconfig,        \* BOOLEAN: leaders add and remove voters (KIP-853, kraft.version 1)
    OneChangeAtATime, \* BOOLEAN: a change waits for the last one to commit (TRUE in Kafka)
    CommitInEpochFirst \* BOOLEAN: a change waits for the leader's HW in its epoch (TRUE in Kafka)

ASSUME Voters # {} /\ Voters \cap Observers = {} /\ LocalCluster # ForeignCluster
ASSUME PreVote \in BOOLEAN /\ Snapshots \in BOOLEAN
ASSUME Reconfig \in BOOLEAN /\ OneChangeAtATime \in BOOLEAN /\ CommitInEpochFirst \in BOOLEAN

Nodes == Voters \cup Observers

\* Kafka encodes "none" as -1 for node ids (LeaderId, VotedId) and HWs.
Nil == -1
\* The LeaderChange control record's value; never a client value.
LeaderChange == "LeaderChange"
\* The cluster-id bootstrap record's value (KIP-595 "Cluster Bootstrapping").
ClusterIdRecord == "ClusterIdRecord"
\* The VotersRecord control record's value (KIP-853); the record carries the voter set
\* in a field of its own: [epoch |-> e, value |-> VotersRecord, voters |-> S].
VotersRecord == "VotersRecord"
\* KRaftVersionRecord's value (KIP-853: kraft.version, written with the first VotersRecord).
KRaftVersionRecord == "KRaftVersionRecord"
\* KIP-853's name for the first voter set (the bootstrap checkpoint's, or the static one).
InitVoters == Voters

Unattached == "Unattached"
Voted      == "Voted"
Candidate  == "Candidate"
Leader     == "Leader"
Follower   == "Follower"
Resigned   == "Resigned"
\* Kafka 4.x's ProspectiveState (KIP-996): asking for pre-votes in its epoch.
\* (Voted is Kafka 4.x's UnattachedState with a votedKey.)
Prospective == "Prospective"
Roles == {Unattached, Voted, Prospective, Candidate, Leader, Follower, Resigned}

VARIABLES
    role,           \* role[i]: one of Roles (volatile)
    epoch,          \* epoch[i]: the node's epoch (durable, quorum-state)
    votedId,        \* votedId[i]: whom i voted for in epoch[i], or Nil (durable)
    leaderId,       \* leaderId[i]: the leader i knows for epoch[i], or Nil (durable:
                    \* quorum-state holds LeaderId next to LeaderEpoch and VotedId)
    log,            \* log[i]: sequence of [epoch, value] records (durable)
    highWatermark,  \* highWatermark[i]: records at offsets < HW are committed (volatile)
    clusterId,      \* clusterId[i]: from meta.properties (durable, never changes)
    votesGranted,   \* votesGranted[i]: voters that granted i's candidacy in epoch[i]
                    \* (as Prospective: its pre-vote, Kafka's EpochElection)
    endOffset,      \* endOffset[i][j]: leader i's knowledge of voter j's fetch offset
    msgs,           \* the network: a bag, message -> number of copies in flight
    restarts,       \* number of Restart steps taken (only to bound the model)
    hasFetched,     \* hasFetched[i]: Follower i has had an answer from its leader since
                    \* it began following it (Kafka's FollowerState.hasFetchedFromLeader;
                    \* volatile); such a follower refuses pre-votes
    logStart,       \* logStart[i]: i's log start offset (durable); records below it are
                    \* gone from the log and held by the snapshot that ends there
    snapshots,      \* snapshots[i]: the end offsets of the snapshots i holds (durable)
    fetchingSnapshot \* fetchingSnapshot[i]: the id of the snapshot Follower i downloads,
                    \* or NoSnapshotId (Kafka's FollowerState.fetchingSnapshot; volatile)

snapVars == <<logStart, snapshots>>
nodeVars == <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, hasFetched,
              logStart, snapshots, fetchingSnapshot>>
leaderVars == <<votesGranted, endOffset>>
vars == <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
          votesGranted, endOffset, msgs, restarts, hasFetched,
          logStart, snapshots, fetchingSnapshot>>

-----------------------------------------------------------------------------
(* Helpers *)

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

MaxOf(S) == CHOOSE n \in S : \A k \in S : k <= n
\* S holds a majority of the voter set C.
IsQuorumOf(S, C) == 2 * Cardinality(S \cap C) > Cardinality(C)
IsQuorum(S) == IsQuorumOf(S, Voters)

(***************************************************************************)
(* Voter changes (KIP-853).  The voter set in force on a node is the one   *)
(* of the latest VotersRecord in its log, committed or not, else           *)
(* InitVoters (Kafka's KRaftControlRecordStateMachine reads the log        *)
(* uncommitted; VoterSetHistory.lastValue).  A truncation that cuts the    *)
(* record puts the previous set back in force; log[i] keeps the records a *)
(* snapshot stands for (see "Snapshots"), so a snapshot's voter set needs   *)
(* nothing of its own.  Config(i) is used for quorums (elections, the HW,  *)
(* the leader counted only while it is in its own set), for who may start  *)
(* an election and for whom Vote, BeginQuorumEpoch and EndQuorumEpoch go    *)
(* to.  With Reconfig = FALSE no VotersRecord is ever written and          *)
(* Config(i) = Voters: the model is the static one, state for state.       *)
(* Simplified: endpoints and directory ids are not modelled (UpdateRaftVoter *)
(* writes the same set); the AddRaftVoter probe's round trip is one message *)
(* (ApiVersionsResponse, which the network may lose); a pending             *)
(* RemoveRaftVoter has no state of its own (its uncommitted record blocks   *)
(* the next change anyway); a Resigned leader outside its voter set stays   *)
(* Resigned until it hears of a higher epoch (Kafka moves it to Unattached  *)
(* in epoch + 1 as an observer: liveness only); a leader's epoch-start      *)
(* KRaftVersionRecord/VotersRecord (bootstrap set) is taken by trace        *)
(* validation only (BecomeLeaderAppending), the model's sets need no rewrite.*)
(***************************************************************************)
IsConfigEntry(e) == e.value = VotersRecord
\* the index (1-based) of the latest VotersRecord in lg[1..k], 0 if none (a set, not a recursion: trace
\* validation replays logs of thousands of records, deeper than TLC's stack)
LastConfigIndex(lg, k) ==
    LET ks == {n \in 1..k : IsConfigEntry(lg[n])} IN IF ks = {} THEN 0 ELSE MaxOf(ks)
ConfigOf(lg) ==
    IF ~Reconfig THEN Voters
    ELSE LET k == LastConfigIndex(lg, Len(lg)) IN IF k = 0 THEN InitVoters ELSE lg[k].voters
Config(i) == ConfigOf(log[i])
\* The nodes whose fetch offsets a leader tracks (endOffset): with Reconfig every node, since a
\* joiner's progress decides whether it may be added (Kafka's observer states) and it counts at once.
Tracked == IF Reconfig THEN Nodes ELSE Voters

\* Kafka's log end offset is the number of records (offsets start at 0),
\* so the record at offset o is log[i][o + 1].
LogEndOffset(lg) == Len(lg)
LastEpoch(lg) == IF lg = <<>> THEN 0 ELSE lg[Len(lg)].epoch

\* Kafka's endOffsetForEpoch: the largest epoch <= e in the log and the end
\* offset (exclusive) of that epoch.  When every record has a larger epoch,
\* Kafka answers e itself with the start offset of the first epoch, 0
\* (LeaderEpochFileCache.endOffsetFor); <<0, 0>> for an empty log.
\* Epochs never decrease along a log, so the records with epoch <= e are a
\* prefix of it, found by binary search (trace validation replays logs of
\* thousands of records; a set comprehension and CHOOSE were quadratic).
RECURSIVE PrefixAtMost(_, _, _, _)
\* lg[1..lo] have epoch <= e, lg[hi+1..] have epoch > e
PrefixAtMost(lg, e, lo, hi) ==
    IF lo >= hi THEN lo
    ELSE LET mid == (lo + hi + 1) \div 2
         IN IF lg[mid].epoch <= e THEN PrefixAtMost(lg, e, mid, hi)
            ELSE PrefixAtMost(lg, e, lo, mid - 1)
EndOffsetForEpoch(lg, e) ==
    LET k == PrefixAtMost(lg, e, 0, Len(lg))
    IN IF k = 0 THEN [epoch |-> IF lg = <<>> THEN 0 ELSE e, offset |-> 0]
       ELSE [epoch |-> lg[k].epoch, offset |-> k]

\* "Vote Request Handling": the candidate's log is at least as up to date.
LogUpToDate(lastEpoch, lastOffset, lg) ==
    \/ lastEpoch > LastEpoch(lg)
    \/ lastEpoch = LastEpoch(lg) /\ lastOffset >= LogEndOffset(lg)

\* The HWs a leader may publish.  Once its HW covers an entry of its own
\* epoch ("Fetch Request Handling" step 4) it publishes it.  Before that,
\* Kafka's leader publishes none (-1), while the reference core publishes the
\* HW it kept from earlier epochs: a prefix it already knew to be committed,
\* which every later leader holds (LeaderCompleteness), so both are allowed.
PublishedHWs(lg, e, hw) ==
    IF hw > 0 /\ lg[hw].epoch = e THEN {hw}
    ELSE IF hw > 0 THEN {Nil, hw} ELSE {Nil}

\* Bag operations on msgs.
WithMsg(b, m) ==
    IF m \in DOMAIN b THEN [b EXCEPT ![m] = @ + 1] ELSE b @@ (m :> 1)
WithoutMsg(b, m) ==
    IF b[m] = 1 THEN [x \in DOMAIN b \ {m} |-> b[x]] ELSE [b EXCEPT ![m] = @ - 1]
WithMsgs(b, S) ==
    [x \in DOMAIN b \cup S |-> (IF x \in DOMAIN b THEN b[x] ELSE 0) + (IF x \in S THEN 1 ELSE 0)]

Send(m) == msgs' = WithMsg(msgs, m)
Discard(m) == msgs' = WithoutMsg(msgs, m)
Reply(resp, req) == msgs' = WithMsg(WithoutMsg(msgs, req), resp)
InFlight(m) == m \in DOMAIN msgs

Requests == {"VoteRequest", "BeginQuorumEpochRequest", "EndQuorumEpochRequest", "FetchRequest",
             "FetchSnapshotRequest"}

\* A request from another cluster: Kafka answers INCONSISTENT_CLUSTER_ID to
\* the foreign sender (outside the model) and changes nothing.
Foreign(m) == m.clusterId # clusterId[m.to]

(***************************************************************************)
(* Snapshots (KIP-630).  A snapshot is the state machine's state after the *)
(* records below its end offset; its id is (end offset, epoch of the       *)
(* record at end offset - 1).  The state is a function of those records,   *)
(* so the model represents a snapshot by them: log[i] is i's whole log as  *)
(* the protocol sees it, the records its snapshot at logStart[i] stands for *)
(* (offsets below logStart[i], gone from the log on disk) followed by the  *)
(* records of its log (offsets logStart[i] .. Len(log[i]) - 1).  Nothing   *)
(* reads a record below logStart[i] but as snapshot content: a leader      *)
(* answers a Fetch that would need one with a SnapshotId (NeedsSnapshot),  *)
(* FetchSnapshot sends the content whole, and the epoch of the record at   *)
(* logStart[i] - 1 is the epoch of the snapshot at the log start (Kafka's  *)
(* earliestSnapshotId).  So the invariants over log[i] (LogMatching,       *)
(* LeaderCompleteness, CommittedNeverTruncated) are stated over snapshot   *)
(* + log, as KIP-630 asks.                                                 *)
(***************************************************************************)
NoSnapshotId == [endOffset |-> Nil, epoch |-> Nil]
SnapshotIdAt(lg, n) == [endOffset |-> n, epoch |-> IF n = 0 THEN 0 ELSE lg[n].epoch]
LatestSnapshotEnd(i) == IF snapshots[i] = {} THEN 0 ELSE MaxOf(snapshots[i])
LatestSnapshotId(i) == SnapshotIdAt(log[i], LatestSnapshotEnd(i))
\* i holds the snapshot with id s (Kafka's ReplicatedLog.readSnapshot).
HasSnapshot(i, s) ==
    /\ s.endOffset \in snapshots[i]
    /\ s.endOffset <= Len(log[i])
    /\ SnapshotIdAt(log[i], s.endOffset) = s
\* What i knows to be committed: the records below its HW, and those of its snapshots (taken at or
\* below its HW, or installed from a leader's).
Committed(i) == Max(highWatermark[i], LatestSnapshotEnd(i))

\* A new FollowerState (another role, epoch or leader) drops the download in progress
\* (Kafka's FollowerState closes its fetchingSnapshot writer; core: AbortSnapshotDownload).
KeepFetching(i) ==
    fetchingSnapshot' = [fetchingSnapshot EXCEPT ![i] =
                           IF role'[i] = Follower /\ role[i] = Follower
                              /\ epoch'[i] = epoch[i] /\ leaderId'[i] = leaderId[i]
                           THEN @ ELSE NoSnapshotId]
StopFetching(i) == fetchingSnapshot' = [fetchingSnapshot EXCEPT ![i] = NoSnapshotId]

\* hasFetched after a step that may change i's role, epoch or leader: it
\* survives only while i stays the Follower of the same leader in the same
\* epoch (Kafka makes a new FollowerState on every such transition).
KeepFetched(i) ==
    /\ hasFetched' = [hasFetched EXCEPT ![i] =
                        @ /\ role'[i] = Follower /\ role[i] = Follower
                          /\ epoch'[i] = epoch[i] /\ leaderId'[i] = leaderId[i]]
    /\ KeepFetching(i)

\* Move to a higher epoch: the vote and the leader of the old epoch are gone.
\* With a known leader the node follows it, otherwise it is Unattached.
\* Observers never hold a vote.
BumpEpoch(i, e, ldr) ==
    /\ epoch' = [epoch EXCEPT ![i] = e]
    /\ votedId' = [votedId EXCEPT ![i] = Nil]
    /\ leaderId' = [leaderId EXCEPT ![i] = ldr]
    /\ role' = [role EXCEPT ![i] = IF ldr = Nil THEN Unattached ELSE Follower]
    /\ votesGranted' = [votesGranted EXCEPT ![i] = {}]
    /\ KeepFetched(i)

\* What every response does first (Kafka's maybeHandleCommonResponse): a
\* higher epoch moves the receiver to it, following the leader if named.
LearnHigherEpoch(i, m) ==
    /\ m.epoch > epoch[i]
    /\ BumpEpoch(i, m.epoch, m.leaderId)
    /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>

\* The same, in the receiver's own epoch (core: _handle_common_response): an
\* answer that names the leader of that epoch, a refusal or one without error
\* (Kafka's third case: a Candidate's Vote refused by a Follower of the leader
\* elected meanwhile), makes a receiver that knows no leader its Follower,
\* keeping its vote.  A VoteResponse carries no error.
ErrorOf(m) == IF "error" \in DOMAIN m THEN m.error ELSE "NONE"

CanLearnLeader(i, m) ==
    /\ m.epoch = epoch[i]
    /\ ErrorOf(m) \in {"FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER", "NONE"}
    /\ m.leaderId # Nil
    /\ leaderId[i] = Nil

LearnLeader(i, m) ==
    /\ CanLearnLeader(i, m)
    /\ role' = [role EXCEPT ![i] = Follower]
    /\ leaderId' = [leaderId EXCEPT ![i] = m.leaderId]
    /\ votesGranted' = [votesGranted EXCEPT ![i] = {}]
    /\ UNCHANGED <<epoch, votedId, log, highWatermark, clusterId, endOffset, restarts, snapVars>>
    /\ KeepFetched(i)

-----------------------------------------------------------------------------
(* Initial state: a fresh cluster, epoch 0, empty logs. *)

\* No snapshot, logs from offset 0 (a start state of a scenario module uses it too).
SnapshotInit ==
    /\ logStart = [i \in Nodes |-> 0]
    /\ snapshots = [i \in Nodes |-> {}]
    /\ fetchingSnapshot = [i \in Nodes |-> NoSnapshotId]

Init ==
    /\ role = [i \in Nodes |-> Unattached]
    /\ epoch = [i \in Nodes |-> 0]
    /\ votedId = [i \in Nodes |-> Nil]
    /\ leaderId = [i \in Nodes |-> Nil]
    /\ log = [i \in Nodes |-> <<>>]
    /\ highWatermark = [i \in Nodes |-> 0]
    /\ clusterId = [i \in Nodes |-> LocalCluster]
    /\ votesGranted = [i \in Nodes |-> {}]
    /\ endOffset = [i \in Nodes |-> [j \in Tracked |-> 0]]
    /\ msgs = <<>>
    /\ restarts = 0
    /\ hasFetched = [i \in Nodes |-> FALSE]
    /\ SnapshotInit

-----------------------------------------------------------------------------
(* Election *)

\* A Vote request of i in epoch e; preVote: KIP-996's PreVote flag (Vote v2).
VoteRequestsOf(i, e, pv) ==
    {[type |-> "VoteRequest", from |-> i, to |-> j,
      clusterId |-> clusterId[i], epoch |-> e, preVote |-> pv,
      lastOffsetEpoch |-> LastEpoch(log[i]),
      lastOffset |-> LogEndOffset(log[i])] : j \in Config(i) \ {i}}

\* A Vote request or response of a pre-vote.  Vote v0/v1 has no PreVote field: a record without it
\* (trace validation of a Kafka 3.x node's messages) is a real vote.
IsPreVote(m) == "preVote" \in DOMAIN m /\ m.preVote

\* The roles whose timer may start an election (Kafka 3.x: election, fetch or
\* backoff timer, or an EndQuorumEpoch naming i) or, with pre-vote, a
\* pre-vote (Kafka 4.x QuorumState.transitionToProspective: any voter but a
\* Leader or a Prospective).
TimeoutRoles == {Unattached, Voted, Follower, Candidate, Resigned}

\* core: become_prospective.  KIP-996 / Kafka 4.x (QuorumState.transitionToProspective,
\* KafkaRaftClient's fetch and election timeouts): a voter whose fetch timer
\* (Follower), election timer (Unattached, Voted) or election (Candidate:
\* lost or timed out) expired becomes Prospective in its epoch, keeping its
\* vote and the leader it knew (nothing is persisted), counts its own
\* pre-vote and sends Vote PreVote=true, with its epoch, to every other
\* voter.  A Resigned leader first leaves its epoch: Kafka 4.x moves it to
\* Unattached in epoch + 1 once its election timer expires, and that state's
\* expired timer makes it Prospective at once; the model takes both in one
\* step.
BecomeProspective(i) ==
    /\ PreVote
    /\ i \in Config(i)
    /\ role[i] \in TimeoutRoles
    /\ LET resigned == role[i] = Resigned
           e == IF resigned THEN epoch[i] + 1 ELSE epoch[i]
       IN /\ role' = [role EXCEPT ![i] = Prospective]
          /\ epoch' = [epoch EXCEPT ![i] = e]
          /\ votedId' = [votedId EXCEPT ![i] = IF resigned THEN Nil ELSE @]
          /\ leaderId' = [leaderId EXCEPT ![i] = IF resigned THEN Nil ELSE @]
          /\ votesGranted' = [votesGranted EXCEPT ![i] = {i}]
          /\ msgs' = WithMsgs(msgs, VoteRequestsOf(i, e, TRUE))
    /\ hasFetched' = [hasFetched EXCEPT ![i] = FALSE]
    /\ StopFetching(i)
    /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>

\* core: abandon_prospective.  Kafka 4.x (ProspectiveState's lifetime, step 4):
\* a majority refused the pre-vote, or its election timer expired: back to
\* following the leader it knew, or Unattached (Voted, Kafka's Unattached with
\* a votedKey, when it holds a vote) in the same epoch.  Timing is not
\* modelled, so it may give up at any moment.
AbandonProspective(i) ==
    /\ role[i] = Prospective
    /\ role' = [role EXCEPT ![i] = IF leaderId[i] # Nil THEN Follower
                                   ELSE IF votedId[i] # Nil THEN Voted
                                   ELSE Unattached]
    /\ votesGranted' = [votesGranted EXCEPT ![i] = {}]
    /\ hasFetched' = [hasFetched EXCEPT ![i] = FALSE]
    /\ StopFetching(i)
    /\ UNCHANGED <<epoch, votedId, leaderId, log, highWatermark, clusterId, endOffset, msgs, restarts, snapVars>>

\* core: start_election.  Bump the epoch, vote for itself (persisted) and ask
\* every other voter with a real Vote ("Leader Election" / "Vote").  With
\* pre-vote only a Prospective with a majority of pre-vote grants does so
\* (Kafka 4.x QuorumState.transitionToCandidate: only from Prospective);
\* without (pv = FALSE) also a voter whose timer fired, or that an
\* EndQuorumEpoch named (Kafka 3.x), and a Prospective without a majority:
\* Kafka 4.x falls back to a real election when a peer answers a pre-vote
\* with UNSUPPORTED_VERSION (Vote v0/v1), which trace validation allows so.
StartElectionAs(i, pv) ==
    /\ i \in Config(i)
    /\ \/ role[i] = Prospective /\ IsQuorumOf(votesGranted[i], Config(i))
       \/ ~pv /\ role[i] \in TimeoutRoles \cup {Prospective}
    /\ role' = [role EXCEPT ![i] = Candidate]
    /\ epoch' = [epoch EXCEPT ![i] = epoch[i] + 1]
    /\ votedId' = [votedId EXCEPT ![i] = i]
    /\ leaderId' = [leaderId EXCEPT ![i] = Nil]
    /\ votesGranted' = [votesGranted EXCEPT ![i] = {i}]
    /\ msgs' = WithMsgs(msgs, VoteRequestsOf(i, epoch[i] + 1, FALSE))
    /\ hasFetched' = [hasFetched EXCEPT ![i] = FALSE]
    /\ StopFetching(i)
    /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>
StartElection(i) == StartElectionAs(i, PreVote)

\* core: handle_vote_request.  "Vote Request Handling": refuse a foreign
\* cluster or an old epoch; a higher epoch makes i Unattached first (for a
\* pre-vote too: Kafka 4.x, KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollower).
\* A real vote is granted when i has not voted for another candidate in this
\* epoch, has no leader and the candidate's log is at least as up to date;
\* the vote is persisted (votedId) before the response is sent.  A pre-vote
\* (Kafka 4.x QuorumState.unattachedOrProspectiveCanGrantVote and the
\* states' canGrantVote) is granted on an up-to-date log alone, whatever i
\* voted, by an Unattached, Voted, Prospective, Candidate or Resigned node
\* and by a Follower that has not fetched from its leader yet; a Leader and
\* a Follower that has refuse; nothing is persisted.  A Prospective that
\* grants a real vote stays Prospective with the vote and a fresh tally of
\* its own pre-vote (Kafka 4.x QuorumState.prospectiveAddVotedState).
HandleVoteRequest(i, m) ==
    /\ InFlight(m)
    /\ m.type = "VoteRequest"
    /\ m.to = i
    /\ IF Foreign(m)
       THEN /\ Discard(m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE IF m.epoch < epoch[i]
       THEN /\ Reply([type |-> "VoteResponse", from |-> i, to |-> m.from,
                      epoch |-> epoch[i], leaderId |-> leaderId[i],
                      granted |-> FALSE, preVote |-> IsPreVote(m)], m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE
         LET higher == m.epoch > epoch[i]
             \* the vote state after moving to the candidate's epoch
             vid == IF higher THEN Nil ELSE votedId[i]
             ldr == IF higher THEN Nil ELSE leaderId[i]
             r   == IF higher THEN Unattached ELSE role[i]
             fetched == ~higher /\ hasFetched[i]
             upToDate == LogUpToDate(m.lastOffsetEpoch, m.lastOffset, log[i])
             \* KIP-853: any replica answers Vote, an observer too (Kafka 3.9 handleVoteRequest has
             \* no voter check); the candidate counts only the grants of its voter set
             grant == /\ (Reconfig \/ i \in Voters)
                      /\ upToDate
                      /\ IF IsPreVote(m)
                         THEN \/ r \in {Unattached, Voted, Prospective, Candidate, Resigned}
                              \/ r = Follower /\ ~fetched
                         ELSE /\ r \in {Unattached, Voted, Prospective}
                              /\ ldr = Nil
                              /\ vid \in {Nil, m.from}
             vote == grant /\ ~IsPreVote(m)
         IN /\ epoch' = [epoch EXCEPT ![i] = m.epoch]
            /\ votedId' = [votedId EXCEPT ![i] = IF vote THEN m.from ELSE vid]
            /\ leaderId' = [leaderId EXCEPT ![i] = ldr]
            \* a Prospective that votes stays Prospective (Kafka 4.x prospectiveAddVotedState)
            /\ role' = [role EXCEPT ![i] = IF vote /\ r # Prospective THEN Voted ELSE r]
            /\ votesGranted' = [votesGranted EXCEPT ![i] = IF higher THEN {}
                                                          ELSE IF vote /\ r = Prospective THEN {i}
                                                          ELSE @]
            /\ hasFetched' = [hasFetched EXCEPT ![i] = fetched]
            /\ KeepFetching(i)
            /\ Reply([type |-> "VoteResponse", from |-> i, to |-> m.from,
                      epoch |-> m.epoch, leaderId |-> ldr, granted |-> grant,
                      preVote |-> IsPreVote(m)], m)
            /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>

\* core: handle_vote_response.  "Vote Response Handling": learn a higher
\* epoch, or the leader of this one; a Candidate of this epoch counts a
\* granted vote, a Prospective of this epoch a granted pre-vote (Kafka 4.x
\* counts any grant in the nominee's epoch: a real one of its own earlier
\* candidacy in that epoch too).
HandleVoteResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "VoteResponse"
    /\ m.to = i
    /\ \/ /\ LearnHigherEpoch(i, m)
          /\ Discard(m)
       \/ /\ LearnLeader(i, m)
          /\ Discard(m)
       \/ /\ m.epoch <= epoch[i]
          /\ ~CanLearnLeader(i, m)
          /\ votesGranted' =
                IF /\ m.epoch = epoch[i] /\ m.granted
                   /\ \/ role[i] = Candidate /\ ~IsPreVote(m)
                      \/ role[i] = Prospective
                THEN [votesGranted EXCEPT ![i] = @ \cup {m.from}]
                ELSE votesGranted
          /\ Discard(m)
          /\ UNCHANGED <<nodeVars, endOffset, restarts>>

\* core: become_leader.  "Vote Response Handling" 2: with a majority a
\* Candidate becomes Leader, appends the LeaderChange control record in its
\* epoch and sends BeginQuorumEpoch to every other voter.
\* KIP-595 "Cluster Bootstrapping": the first leader of a cluster without an
\* id also appends, right after LeaderChange and in the same step, the record
\* that carries the new cluster id (a ClusterIdRecord entry); it is an
\* ordinary record of the leader's epoch for replication and the HW.
BeginQuorumEpochTo(i, j) ==
    [type |-> "BeginQuorumEpochRequest", from |-> i, to |-> j,
     clusterId |-> clusterId[i], epoch |-> epoch[i], leaderId |-> i]

\* entries: the whole records the leader writes after LeaderChange in the same step (the cluster-id
\* record above; in trace validation, with kraft.version 1, KRaftVersionRecord and VotersRecord too).
BecomeLeaderAppending(i, entries) ==
    /\ role[i] = Candidate
    /\ IsQuorumOf(votesGranted[i], Config(i))
    /\ role' = [role EXCEPT ![i] = Leader]
    /\ leaderId' = [leaderId EXCEPT ![i] = i]
    /\ LET lg == (log[i] \o <<[epoch |-> epoch[i], value |-> LeaderChange]>>) \o entries
           eo == [j \in Tracked |-> 0]
       IN /\ log' = [log EXCEPT ![i] = lg]
          /\ endOffset' = [endOffset EXCEPT ![i] = eo]
          \* Kafka's onBecomeLeader appends, then updateLocalState -> maybeUpdateHighWatermark: a
          \* leader that alone is a majority of its voters (a sole voter) commits its whole log at
          \* once (its last record is of its epoch); with other voters (end offsets 0) the HW stays.
          /\ highWatermark' = [highWatermark EXCEPT ![i] =
                                  IF IsQuorumOf({i}, ConfigOf(lg)) THEN Len(lg) ELSE @]
    /\ msgs' = WithMsgs(msgs, {BeginQuorumEpochTo(i, j) : j \in Config(i) \ {i}})
    /\ UNCHANGED <<epoch, votedId, clusterId, votesGranted, restarts, hasFetched,
                   snapVars, fetchingSnapshot>>
BecomeLeader(i) == BecomeLeaderAppending(i, <<>>)

\* core: _send_begin_quorum_epoch.  The leader's heartbeat (Kafka 3.9+, KAFKA-16536:
\* KafkaRaftClient.maybeSendBeginQuorumEpochRequests, every fetch.timeout/2 while it
\* leads; KafkaRaftClientTest.testBeginQuorumEpochHeartbeat): BeginQuorumEpoch of its
\* epoch to another voter, whether that voter acknowledged the last one or not.
\* KIP-595 "BeginQuorumEpoch" asks only for sends until acknowledged, which this
\* allows too.  Timers are not modelled: the leader may send at any step.  Only
\* voters get it (Kafka's lastVoterSet), never observers.
SendBeginQuorumEpoch(i, j) ==
    /\ role[i] = Leader
    /\ j \in Config(i) \ {i}
    /\ Send(BeginQuorumEpochTo(i, j))
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* core: handle_begin_quorum_epoch_request.  "BeginQuorumEpoch Request
\* Handling": follow the announced leader of this or a higher epoch; refuse
\* an older epoch (the response carries i's epoch and leader).
HandleBeginQuorumEpochRequest(i, m) ==
    /\ InFlight(m)
    /\ m.type = "BeginQuorumEpochRequest"
    /\ m.to = i
    /\ IF Foreign(m)
       THEN /\ Discard(m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE IF m.epoch < epoch[i] \/ (m.epoch = epoch[i] /\ role[i] = Leader)
       THEN \* older epoch, or (impossible when safe) a second leader of i's epoch
            /\ Reply([type |-> "BeginQuorumEpochResponse", from |-> i, to |-> m.from,
                      epoch |-> epoch[i], leaderId |-> leaderId[i],
                      error |-> "FENCED_LEADER_EPOCH"], m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE /\ IF m.epoch > epoch[i]
               THEN BumpEpoch(i, m.epoch, m.leaderId)
               ELSE IF role[i] = Prospective /\ leaderId[i] # Nil
               \* a Prospective that knows the leader already stays one (Kafka 4.x
               \* maybeTransition: only a leader it did not know makes it a Follower)
               THEN UNCHANGED <<role, epoch, votedId, leaderId, votesGranted, hasFetched, fetchingSnapshot>>
               ELSE /\ role' = [role EXCEPT ![i] = Follower]
                    /\ leaderId' = [leaderId EXCEPT ![i] = m.leaderId]
                    /\ votesGranted' = [votesGranted EXCEPT ![i] = {}]
                    /\ UNCHANGED <<epoch, votedId>>
                    /\ KeepFetched(i)
            /\ Reply([type |-> "BeginQuorumEpochResponse", from |-> i, to |-> m.from,
                      epoch |-> m.epoch, leaderId |-> m.leaderId,
                      error |-> "NONE"], m)
            /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>

\* core: handle_begin_quorum_epoch_response.  "BeginQuorumEpoch Response
\* Handling": a higher epoch deposes the leader; an acknowledgement changes
\* nothing (Kafka 3.9+ keeps sending the heartbeat regardless).
HandleBeginQuorumEpochResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "BeginQuorumEpochResponse"
    /\ m.to = i
    /\ \/ /\ LearnHigherEpoch(i, m)
          /\ Discard(m)
       \/ /\ m.epoch <= epoch[i]
          /\ Discard(m)
          /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

-----------------------------------------------------------------------------
(* Replication *)

\* core: send_fetch_request.  "Fetch": a Follower fetches from its leader at
\* FetchOffset = log end with the epoch of its last record; an observer that
\* knows no leader asks any voter.  Kafka keeps one fetch outstanding: a new
\* one goes out once the previous request or its answer is gone (answered,
\* or lost and timed out).
FetchOutstanding(i) ==
    \E m \in DOMAIN msgs :
        \/ m.type \in {"FetchRequest", "ParkedFetch", "FetchSnapshotRequest"} /\ m.from = i
        \/ m.type \in {"FetchResponse", "FetchSnapshotResponse"} /\ m.to = i
\* The fetch itself; trace validation uses it without the FetchOutstanding
\* guard, which stands for "the follower's own fetch is outstanding" by "a
\* copy of it is in the network": a duplicated request breaks that (the
\* follower moves on while the network still holds the extra copy), and the
\* trace shows when the follower really fetched.
FetchFromLeader(i) ==
    /\ \/ role[i] = Follower /\ leaderId[i] # Nil
       \* an observer that granted a vote (KIP-853: any replica answers Vote) is Kafka's UnattachedState
       \* with a votedKey, and fetches as one (pollUnattachedAsObserver)
       \/ i \notin Config(i) /\ role[i] \in {Unattached, Voted}
    \* a follower downloading a snapshot sends FetchSnapshot instead (Kafka's maybeSendFetchOrFetchSnapshot)
    /\ fetchingSnapshot[i] = NoSnapshotId
    /\ \E j \in (IF role[i] = Follower THEN {leaderId[i]} ELSE Config(i)) :
         Send([type |-> "FetchRequest", from |-> i, to |-> j,
               clusterId |-> clusterId[i], epoch |-> epoch[i],
               fetchOffset |-> LogEndOffset(log[i]),
               lastFetchedEpoch |-> LastEpoch(log[i])])
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
\* An observer (not in its own voter set) whose timer fires looks for the leader again, in the same
\* step as its next fetch (the core has no event of its own for it): a Follower's fetch timeout makes it
\* Unattached in its epoch, leader forgotten, or Voted when it voted in that epoch (the vote stays: Kafka's
\* UnattachedState with a votedKey; core: _observer_fetch_timeout), and ends a snapshot download in
\* progress; a Resigned leader that removed itself (KIP-853, Kafka's pollResigned) becomes Unattached in
\* epoch + 1.  It then asks any voter it knows.
\* Static observers never resign, so with Observers = {} this adds nothing.
ObserverLooksForLeader(i) ==
    /\ i \notin Config(i)
    /\ role[i] \in {Follower, Resigned}
    /\ LET e == IF role[i] = Resigned THEN epoch[i] + 1 ELSE epoch[i]
       IN /\ role' = [role EXCEPT ![i] = IF e = epoch[i] /\ votedId[i] # Nil THEN Voted ELSE Unattached]
          /\ epoch' = [epoch EXCEPT ![i] = e]
          /\ votedId' = [votedId EXCEPT ![i] = IF e # epoch[i] THEN Nil ELSE @]
          /\ leaderId' = [leaderId EXCEPT ![i] = Nil]
          /\ \E j \in Config(i) :
               Send([type |-> "FetchRequest", from |-> i, to |-> j,
                     clusterId |-> clusterId[i], epoch |-> e,
                     fetchOffset |-> LogEndOffset(log[i]),
                     lastFetchedEpoch |-> LastEpoch(log[i])])
    /\ hasFetched' = [hasFetched EXCEPT ![i] = FALSE]
    /\ StopFetching(i)
    /\ UNCHANGED <<log, highWatermark, clusterId, logStart, snapshots, leaderVars, restarts>>
SendFetch(i) == FetchFromLeader(i) \/ ObserverLooksForLeader(i)
SendFetchRequest(i) ==
    /\ ~FetchOutstanding(i)
    /\ SendFetch(i)

\* The HW a leader may move to: the largest offset a majority of voters has
\* reached (its own log end counts for itself), but only if the record just
\* below it is of the leader's epoch ("Fetch Request Handling" step 4).
\* KIP-853: the voters are those of the leader's log (Config); the leader
\* counts for itself only while it is one of them (Kafka's LeaderState
\* maybeUpdateHighWatermark over voterStates, after removing itself).
QuorumOffsetIn(i, lg, eo) ==
    LET C == ConfigOf(lg)
        reach(v) == IF v = i THEN Len(lg) ELSE Min(eo[v], Len(lg))
        reached(n) == {v \in C : reach(v) >= n}
        \* reached(n) only shrinks where n passes some voter's offset, so the
        \* largest n with a quorum is one of those offsets (or 0); checking
        \* only them keeps this linear in the log (trace validation replays
        \* logs of thousands of records).
        ok == {n \in {reach(v) : v \in C} \cup {0} : IsQuorumOf(reached(n), C)}
    IN CHOOSE n \in ok : \A k \in ok : k <= n
QuorumOffset(i, eo) == QuorumOffsetIn(i, log[i], eo)
NewHighWatermark(i, eo) ==
    LET n == QuorumOffset(i, eo)
    IN IF n > highWatermark[i] /\ log[i][n].epoch = epoch[i]
       THEN n ELSE highWatermark[i]
\* The same rule over the log lg the leader has just written (a VotersRecord changes the quorum
\* at once: Kafka's updateLocalState after the append, then maybeUpdateHighWatermark).
NewHighWatermarkIn(i, lg, eo) ==
    LET n == QuorumOffsetIn(i, lg, eo)
    IN IF n > highWatermark[i] /\ lg[n].epoch = epoch[i] THEN n ELSE highWatermark[i]

\* KIP-630 / Kafka (KafkaRaftClient.tryCompleteFetchRequest, ReplicatedLog.validateOffsetAndEpoch):
\* the leader answers fetch m with the SnapshotId of its latest snapshot, and no records, when the
\* fetcher's log is empty and it holds a snapshot, or when its log start is past 0 (a snapshot ends
\* there, Kafka's earliestSnapshotId) and the fetch is below the log start, at the log start with
\* another last epoch than that snapshot's, or with a last epoch older than that snapshot's: the
\* records or the DivergingEpoch it would need are gone.
NeedsSnapshot(i, m) ==
    LET startEpoch == SnapshotIdAt(log[i], logStart[i]).epoch IN
    /\ Snapshots
    /\ \/ m.fetchOffset = 0 /\ snapshots[i] # {}
       \/ /\ logStart[i] > 0
          /\ \/ m.fetchOffset < logStart[i]
             \/ m.fetchOffset = logStart[i] /\ m.lastFetchedEpoch # startEpoch
             \/ m.lastFetchedEpoch < startEpoch

\* The leader's answer to fetch m with its log of now, publishing HW pub: the next records, a
\* DivergingEpoch (diverging, d: EndOffsetForEpoch of m's last epoch) or a SnapshotId (snap).
FetchReply(i, m, pub, diverging, d, snap) ==
    [type |-> "FetchResponse", from |-> i, to |-> m.from,
     epoch |-> epoch[i], leaderId |-> i, error |-> "NONE",
     fetchOffset |-> m.fetchOffset, lastFetchedEpoch |-> m.lastFetchedEpoch,
     records |-> IF diverging \/ snap THEN <<>>
                 ELSE SubSeq(log[i], m.fetchOffset + 1,
                             Min(Len(log[i]), m.fetchOffset + MaxFetchRecords)),
     divergingEpoch |-> IF diverging THEN d.epoch ELSE Nil,
     divergingEndOffset |-> IF diverging THEN d.offset ELSE Nil,
     snapshotEndOffset |-> IF snap THEN LatestSnapshotId(i).endOffset ELSE Nil,
     snapshotEpoch |-> IF snap THEN LatestSnapshotId(i).epoch ELSE Nil,
     highWatermark |-> pub]

\* The answer to a parked (caught-up) fetch: the log of now, or a SnapshotId should the leader have
\* cleaned its log past the fetch meanwhile (Kafka completes a parked fetch through the same checks).
FetchAnswer(i, m, pub) ==
    FetchReply(i, m, pub, FALSE, EndOffsetForEpoch(log[i], m.lastFetchedEpoch), NeedsSnapshot(i, m))

\* The answer of a node that is not (or no longer) the leader of m's epoch.
FetchError(i, m) ==
    [type |-> "FetchResponse", from |-> i, to |-> m.from,
     epoch |-> epoch[i], leaderId |-> leaderId[i],
     error |-> IF m.epoch < epoch[i] THEN "FENCED_LEADER_EPOCH"
               ELSE IF m.epoch > epoch[i] THEN "UNKNOWN_LEADER_EPOCH"
               ELSE "NOT_LEADER_OR_FOLLOWER",
     fetchOffset |-> m.fetchOffset, lastFetchedEpoch |-> m.lastFetchedEpoch,
     records |-> <<>>, divergingEpoch |-> Nil, divergingEndOffset |-> Nil,
     snapshotEndOffset |-> Nil, snapshotEpoch |-> Nil,
     highWatermark |-> Nil]

\* core: handle_fetch_request.  "Fetch Request Handling" 1-4: refuse a
\* foreign cluster (step 1); answer an epoch mismatch or a non-leader with an
\* error naming i's epoch and leader (step 2); check LastFetchedEpoch and
\* FetchOffset against the log and answer DivergingEpoch when they disagree
\* (step 3), or a SnapshotId when the log cannot tell (NeedsSnapshot, KIP-630);
\* otherwise record the voter's offset, maybe advance the HW
\* (step 4) and answer with the next record (or none: a long poll timing out).
HandleFetchRequest(i, m) ==
    /\ InFlight(m)
    /\ m.type = "FetchRequest"
    /\ m.to = i
    /\ IF Foreign(m)
       THEN /\ Discard(m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE IF role[i] # Leader \/ m.epoch # epoch[i]
       THEN /\ Reply(FetchError(i, m), m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE
         LET snap == NeedsSnapshot(i, m)
             d == EndOffsetForEpoch(log[i], m.lastFetchedEpoch)
             diverging == ~snap /\ (d.epoch # m.lastFetchedEpoch \/ d.offset < m.fetchOffset)
             eo == IF m.from \in Tracked /\ ~diverging /\ ~snap
                   THEN [endOffset[i] EXCEPT ![m.from] = m.fetchOffset]
                   ELSE endOffset[i]
             hw == NewHighWatermark(i, eo)
             caughtUp == ~diverging /\ ~snap /\ m.fetchOffset >= Len(log[i])
         IN /\ endOffset' = [endOffset EXCEPT ![i] = eo]
            /\ highWatermark' = [highWatermark EXCEPT ![i] = hw]
            /\ \/ \* answer now: records, DivergingEpoch, SnapshotId, or (caught up) none
                  \E pub \in PublishedHWs(log[i], epoch[i], hw) :
                     Reply(FetchReply(i, m, pub, diverging, d, snap), m)
               \/ \* long poll: a caught-up fetch waits for new data, a new HW or
                  \* MaxWaitMs; AnswerParkedFetch answers it
                  /\ caughtUp
                  /\ Reply([m EXCEPT !.type = "ParkedFetch"], m)
            /\ UNCHANGED <<role, epoch, votedId, leaderId, log, clusterId,
                           votesGranted, restarts, hasFetched, snapVars, fetchingSnapshot>>

\* core: _answer_parked_fetch (no action event of its own: it happens inside the
\* leader's step that brought new data or a new HW, when MaxWaitMs expires,
\* or when it stops leading).  The answer carries the log and HW of that moment,
\* or an error once i no longer leads m's epoch.
AnswerParkedFetch(i, m) ==
    /\ InFlight(m)
    /\ m.type = "ParkedFetch"
    /\ m.to = i
    /\ IF role[i] = Leader /\ m.epoch = epoch[i]
       THEN \E pub \in PublishedHWs(log[i], epoch[i], highWatermark[i]) :
                Reply(FetchAnswer(i, m, pub), m)
       ELSE Reply(FetchError(i, m), m)
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* The Follower's part of "Fetch Response Handling" 2 for an answer to its
\* position (m.fetchOffset/m.lastFetchedEpoch are i's log end and last
\* epoch): truncate on DivergingEpoch, else append the records and set
\* HW = min(leader's HW, log end), never backwards.
\* A DivergingEpoch that would cut the log below i's HW is refused: no step
\* handles it.  Kafka's follower throws (KafkaRaftClient.handleFetchResponse:
\* "The leader requested truncation to offset ..., which is below the current
\* high watermark"; KafkaMetadataLog.truncateTo refuses any offset below the
\* HW) and halts; so does the reference node (KRaftCore raises
\* SafetyViolation before any change, Node._halt stops it).  Committed entries are
\* never removed and the HW never goes back (CommittedNeverTruncated,
\* HighWatermarkMonotonic).
\* A correct leader never sends one (LeaderCompleteness); only a faulty one,
\* or a stale answer, could.
\* A SnapshotId (KIP-630) starts the download of that snapshot, unless i holds
\* it already (Kafka's handleFetchResponse: createNewSnapshotUnchecked finds
\* it stored); log and HW stay.
FetchedAtPosition(i, m) ==
    /\ m.error = "NONE"
    /\ m.fetchOffset = LogEndOffset(log[i])
    /\ m.lastFetchedEpoch = LastEpoch(log[i])
TruncationPoint(i, m) ==
    Min(EndOffsetForEpoch(log[i], m.divergingEpoch).offset, m.divergingEndOffset)
FetchedSnapshotId(m) == [endOffset |-> m.snapshotEndOffset, epoch |-> m.snapshotEpoch]
ApplyFetched(i, m) ==
    IF m.divergingEpoch # Nil
    THEN LET keep == TruncationPoint(i, m)
         IN /\ keep >= highWatermark[i]
            /\ log' = [log EXCEPT ![i] = SubSeq(@, 1, keep)]
            /\ UNCHANGED <<highWatermark, fetchingSnapshot>>
    ELSE IF m.snapshotEndOffset # Nil
    THEN /\ fetchingSnapshot' = [fetchingSnapshot EXCEPT ![i] =
                                  IF HasSnapshot(i, FetchedSnapshotId(m)) THEN @
                                  ELSE FetchedSnapshotId(m)]
         /\ UNCHANGED <<log, highWatermark>>
    ELSE LET lg == log[i] \o m.records
             hw == IF m.highWatermark = Nil THEN highWatermark[i]
                   ELSE Max(highWatermark[i], Min(m.highWatermark, Len(lg)))
         IN /\ log' = [log EXCEPT ![i] = lg]
            /\ highWatermark' = [highWatermark EXCEPT ![i] = hw]
            /\ UNCHANGED fetchingSnapshot

\* core: handle_fetch_response.  "Fetch Response Handling" 1-2: a higher
\* epoch (FENCED_LEADER_EPOCH) moves i to it and to the named leader; in i's
\* epoch an Unattached/Voted node learns the leader and, when the leader
\* itself answered its position without error, handles the answer as its
\* Follower in the same step (Kafka's maybeHandleCommonResponse, third case:
\* the answer still goes to handleFetchResponse); the Follower of that leader
\* truncates or appends (ApplyFetched).  An answer to a fetch that is no
\* longer i's position (duplicated or reordered) is ignored.  Any answer of
\* the leader without error marks i as having fetched (hasFetched).
\* An answer in i's epoch that names a leader i does not know yet (Kafka's
\* maybeHandleCommonResponse: a Prospective that knew no leader learns it too).
LearnsLeaderByFetch(i, m) ==
    /\ m.epoch = epoch[i]
    /\ \/ role[i] \in {Unattached, Voted}
       \/ role[i] = Prospective /\ leaderId[i] = Nil
    /\ m.leaderId \notin {Nil, i}
\* The leader of i's epoch answered i's fetch without error: the fetch succeeded, at i's position or
\* not (KafkaRaftClient.handleFetchResponse restarts the fetch timer; hasFetchedFromLeader).
\* Only pre-vote reads hasFetched: without it the flag stays FALSE, which keeps the state space as it was.
LeaderAnswered(i, m) == PreVote /\ m.epoch = epoch[i] /\ m.from = m.leaderId /\ m.error = "NONE"
HandleFetchResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "FetchResponse"
    /\ m.to = i
    /\ \/ /\ LearnHigherEpoch(i, m)
          /\ Discard(m)
       \/ /\ LearnsLeaderByFetch(i, m)
          /\ role' = [role EXCEPT ![i] = Follower]
          /\ leaderId' = [leaderId EXCEPT ![i] = m.leaderId]
          /\ IF m.from = m.leaderId /\ FetchedAtPosition(i, m)
             THEN ApplyFetched(i, m)
             ELSE UNCHANGED <<log, highWatermark, fetchingSnapshot>>
          /\ hasFetched' = [hasFetched EXCEPT ![i] = LeaderAnswered(i, m)]
          /\ Discard(m)
          /\ UNCHANGED <<epoch, votedId, clusterId, leaderVars, restarts, snapVars>>
       \/ /\ m.epoch = epoch[i]
          /\ role[i] = Follower /\ leaderId[i] = m.from
          /\ FetchedAtPosition(i, m)
          /\ ApplyFetched(i, m)
          /\ hasFetched' = [hasFetched EXCEPT ![i] = LeaderAnswered(i, m)]
          /\ Discard(m)
          /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, leaderVars, restarts, snapVars>>
       \/ \* older epoch, error in i's epoch, or a stale answer: nothing to do
          /\ \/ m.epoch < epoch[i]
             \/ /\ m.epoch = epoch[i]
                /\ ~LearnsLeaderByFetch(i, m)
                /\ ~(role[i] = Follower /\ leaderId[i] = m.from /\ FetchedAtPosition(i, m))
          \* a stale answer of i's leader still tells it the leader is alive
          /\ hasFetched' = [hasFetched EXCEPT ![i] =
                              @ \/ (role[i] = Follower /\ leaderId[i] = m.from /\ LeaderAnswered(i, m))]
          /\ Discard(m)
          /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, leaderVars, restarts,
                         snapVars, fetchingSnapshot>>

\* core: client_append.  The leader appends a client record in its epoch.
\* Kafka's appendAsLeader, then updateLocalState -> maybeUpdateHighWatermark: the HW
\* moves at once only when the leader alone is a majority of its voters (a sole voter);
\* otherwise the other voters' end offsets, which this append does not change, hold it.
ClientAppend(i, v) ==
    /\ role[i] = Leader
    /\ LET lg == Append(log[i], [epoch |-> epoch[i], value |-> v])
       IN /\ log' = [log EXCEPT ![i] = lg]
          /\ highWatermark' = [highWatermark EXCEPT ![i] = NewHighWatermarkIn(i, lg, endOffset[i])]
    /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId,
                   leaderVars, msgs, restarts, hasFetched, snapVars, fetchingSnapshot>>

-----------------------------------------------------------------------------
(* Snapshots (KIP-630) *)

\* core: create_snapshot.  KIP-630 / Kafka (KafkaRaftClient.createSnapshot,
\* KafkaMetadataLog.createNewSnapshot): a node snapshots its state machine at
\* a committed offset n: past its log start, at most its HW (Kafka refuses a
\* snapshot "greater than the high-watermark"); the id's epoch is that of the
\* record at n - 1.  Any node may, leader, follower or observer.  Its content
\* is log[i][1..n] (see "Snapshots" above).  (The project's nodes snapshot at
\* batch boundaries only; the model has one record per batch.)
CreateSnapshotAt(i, n) ==
    /\ Snapshots
    /\ n > logStart[i]
    /\ n <= highWatermark[i]
    /\ n \notin snapshots[i]
    /\ snapshots' = [snapshots EXCEPT ![i] = @ \cup {n}]
    /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, hasFetched,
                   logStart, fetchingSnapshot, leaderVars, msgs, restarts>>
CreateSnapshot(i) == \E n \in 1..Len(log[i]) : CreateSnapshotAt(i, n)

\* core: clean_log.  Kafka's KafkaMetadataLog.deleteBeforeSnapshot (run by
\* maybeClean and the retention settings): the log start moves up to the end
\* of one of i's snapshots, at most its latest; the records below it leave the
\* log (they stay in log[i] as that snapshot's content) and the snapshots
\* before it are forgotten.  The HW is the client's, not the log's: it stays.
CleanLogTo(i, n) ==
    /\ n \in snapshots[i]
    /\ n > logStart[i]
    /\ logStart' = [logStart EXCEPT ![i] = n]
    /\ snapshots' = [snapshots EXCEPT ![i] = {k \in @ : k >= n}]
    /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, hasFetched,
                   fetchingSnapshot, leaderVars, msgs, restarts>>
CleanLog(i) == \E n \in snapshots[i] : CleanLogTo(i, n)

\* core: send_fetch_snapshot_request.  A Follower downloading a snapshot asks
\* its leader for it (Kafka's maybeSendFetchOrFetchSnapshot when
\* FollowerState.fetchingSnapshot is set), one request outstanding as for
\* Fetch.  The model has no Position: HandleFetchSnapshotRequest sends the
\* whole snapshot in one answer (trace validation also takes answers with a
\* chunk of it, HandleFetchSnapshotRequestAs(i, m, FALSE)).
SendFetchSnapshot(i) ==
    /\ role[i] = Follower /\ leaderId[i] # Nil
    /\ fetchingSnapshot[i] # NoSnapshotId
    /\ Send([type |-> "FetchSnapshotRequest", from |-> i, to |-> leaderId[i],
             clusterId |-> clusterId[i], epoch |-> epoch[i],
             snapshotEndOffset |-> fetchingSnapshot[i].endOffset,
             snapshotEpoch |-> fetchingSnapshot[i].epoch])
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
SendFetchSnapshotRequest(i) ==
    /\ ~FetchOutstanding(i)
    /\ SendFetchSnapshot(i)

\* The answer to FetchSnapshot m (Kafka's handleFetchSnapshotRequest): the
\* epoch and leader checks of Fetch (validateLeaderOnlyRequest), then
\* SNAPSHOT_NOT_FOUND unless i holds that snapshot, else the snapshot: all of
\* its content when whole (the answer completes the download), none of it
\* otherwise (a chunk before the last: the follower only writes it down).
\* POSITION_OUT_OF_RANGE has no counterpart (no positions in the model).
FetchSnapshotReply(i, m, whole) ==
    LET s == [endOffset |-> m.snapshotEndOffset, epoch |-> m.snapshotEpoch]
        err == IF m.epoch < epoch[i] THEN "FENCED_LEADER_EPOCH"
               ELSE IF m.epoch > epoch[i] THEN "UNKNOWN_LEADER_EPOCH"
               ELSE IF role[i] # Leader THEN "NOT_LEADER_OR_FOLLOWER"
               ELSE IF ~HasSnapshot(i, s) THEN "SNAPSHOT_NOT_FOUND"
               ELSE "NONE"
        ok == err = "NONE"
    IN [type |-> "FetchSnapshotResponse", from |-> i, to |-> m.from,
        epoch |-> epoch[i], leaderId |-> leaderId[i], error |-> err,
        snapshotEndOffset |-> IF ok THEN s.endOffset ELSE Nil,
        snapshotEpoch |-> IF ok THEN s.epoch ELSE Nil,
        records |-> IF ok /\ whole THEN SubSeq(log[i], 1, s.endOffset) ELSE <<>>,
        complete |-> ok /\ whole]

HandleFetchSnapshotRequestAs(i, m, whole) ==
    /\ InFlight(m)
    /\ m.type = "FetchSnapshotRequest"
    /\ m.to = i
    /\ IF Foreign(m) THEN Discard(m) ELSE Reply(FetchSnapshotReply(i, m, whole), m)
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
\* core: handle_fetch_snapshot_request.  The leader serves a snapshot it holds.
HandleFetchSnapshotRequest(i, m) == HandleFetchSnapshotRequestAs(i, m, TRUE)

\* Kafka's KafkaMetadataLog.truncateToLatestSnapshot only empties a log the
\* snapshot is past (a later epoch, or the same epoch and a larger offset);
\* otherwise Kafka's follower throws (IllegalStateException) and no step of
\* the model handles the answer.
SnapshotPastLog(i, s) ==
    \/ s.epoch > LastEpoch(log[i])
    \/ s.epoch = LastEpoch(log[i]) /\ s.endOffset > Len(log[i])

\* core: handle_fetch_snapshot_response.  Kafka's handleFetchSnapshotResponse:
\* first the common handling of every answer (a higher epoch, a leader not known
\* yet); then, for the Follower of the sender downloading a snapshot:
\* SNAPSHOT_NOT_FOUND drops the download (it fetches again), a chunk is written
\* down, and the answer that completes the snapshot installs it (freeze, then
\* truncateToLatestSnapshot): the log is emptied and starts at the snapshot's
\* end offset (log[i] becomes the snapshot's content), it is i's only snapshot
\* and the HW is at least its end offset.  Anything else is stale: dropped.
HandleFetchSnapshotResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "FetchSnapshotResponse"
    /\ m.to = i
    /\ \/ /\ LearnHigherEpoch(i, m)
          /\ Discard(m)
       \/ /\ LearnLeader(i, m)
          /\ Discard(m)
       \/ /\ m.epoch <= epoch[i]
          /\ ~CanLearnLeader(i, m)
          /\ LET s == FetchedSnapshotId(m)
                 mine == /\ m.epoch = epoch[i] /\ role[i] = Follower /\ leaderId[i] = m.from
                         /\ fetchingSnapshot[i] # NoSnapshotId
             IN IF mine /\ m.error = "NONE" /\ m.complete /\ s = fetchingSnapshot[i]
                THEN /\ SnapshotPastLog(i, s)
                     /\ log' = [log EXCEPT ![i] = m.records]
                     /\ logStart' = [logStart EXCEPT ![i] = s.endOffset]
                     /\ snapshots' = [snapshots EXCEPT ![i] = {s.endOffset}]
                     /\ highWatermark' = [highWatermark EXCEPT ![i] = Max(@, s.endOffset)]
                     /\ StopFetching(i)
                     /\ hasFetched' = [hasFetched EXCEPT ![i] = @ \/ LeaderAnswered(i, m)]
                     /\ Discard(m)
                     /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, leaderVars, restarts>>
                ELSE /\ fetchingSnapshot' = [fetchingSnapshot EXCEPT ![i] =
                                               IF mine /\ m.error = "SNAPSHOT_NOT_FOUND" THEN NoSnapshotId
                                               ELSE @]
                     /\ hasFetched' = [hasFetched EXCEPT ![i] = @ \/ (mine /\ LeaderAnswered(i, m))]
                     /\ Discard(m)
                     /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
                                    snapVars, leaderVars, restarts>>

-----------------------------------------------------------------------------
(* Voter changes (KIP-853, switched by Reconfig) *)

\* The VotersRecord a leader of epoch e writes for the set S.
VotersEntry(e, S) == [epoch |-> e, value |-> VotersRecord, voters |-> S]
\* The AddRaftVoter in progress of leader i: its ApiVersions probe of the new voter, whose answer
\* is in flight (the model abstracts the round trip into one message the probe's target "sends").
ProbeOf(i) == {m \in DOMAIN msgs : m.type = "ApiVersionsResponse" /\ m.to = i /\ m.epoch = epoch[i]}
\* Kafka's checks before any change (AddVoterHandler/RemoveVoterHandler, KIP-853 "Voter changes"):
\* (c) the HW is known: an entry of the leader's epoch is committed (LeaderState.highWatermark is
\*     empty before; the fix of Ongaro's single-server-change bug), CommitInEpochFirst;
\* (b) the latest VotersRecord is committed (its offset < HW), and (a) no AddRaftVoter is pending
\*     (LeaderState.isOperationPending), OneChangeAtATime.  A refusal (REQUEST_TIMED_OUT) changes nothing.
HWKnown(i) == highWatermark[i] > 0 /\ log[i][highWatermark[i]].epoch = epoch[i]
LastConfigCommitted(i) == LastConfigIndex(log[i], Len(log[i])) <= highWatermark[i]
ChangeAllowed(i) ==
    /\ CommitInEpochFirst => HWKnown(i)
    /\ OneChangeAtATime => LastConfigCommitted(i)
\* The leader appends the VotersRecord for S; the new set is in force at once, so the HW may
\* move (a removed voter no longer holds it back).
AppendVoters(i, S) ==
    LET lg == Append(log[i], VotersEntry(epoch[i], S))
    IN /\ log' = [log EXCEPT ![i] = lg]
       /\ highWatermark' = [highWatermark EXCEPT ![i] = NewHighWatermarkIn(i, lg, endOffset[i])]

\* core: handle_add_raft_voter_request.  Kafka's KafkaRaftClient.handleAddVoterRequest and
\* AddVoterHandler.handleAddVoterRequest: the leader checks (a) (b) (c) (ChangeAllowed, no probe in
\* flight) and that j is not a voter (DUPLICATE_VOTER), then probes j with ApiVersions; the
\* operation is pending until the answer.  The request comes from an admin client outside the model.
HandleAddRaftVoterRequest(i, j) ==
    /\ Reconfig
    /\ role[i] = Leader
    /\ j \in Nodes \ Config(i)
    /\ ChangeAllowed(i)
    /\ OneChangeAtATime => ProbeOf(i) = {}
    /\ Send([type |-> "ApiVersionsResponse", from |-> j, to |-> i, epoch |-> epoch[i]])
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* core: handle_api_versions_response.  AddVoterHandler.handleApiVersionsResponse: the leader
\* (still the leader of the probe's epoch) appends VotersRecord(Config \cup {j}) if j has caught up
\* (LeaderState.isReplicaCaughtUp; here: j has fetched from i in this epoch at a position of i's
\* log past offset 0, which over-approximates Kafka's "fetched up to the leader's end once") and
\* no change came first; otherwise the operation ends (REQUEST_TIMED_OUT, or ignored by a node
\* that no longer leads that epoch) and nothing changes.
HandleApiVersionsResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "ApiVersionsResponse"
    /\ m.to = i
    /\ Discard(m)
    /\ IF /\ role[i] = Leader /\ m.epoch = epoch[i]
          /\ m.from \notin Config(i)
          /\ endOffset[i][m.from] > 0
          /\ ChangeAllowed(i)
       THEN /\ AppendVoters(i, Config(i) \cup {m.from})
            /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, hasFetched, snapVars,
                           fetchingSnapshot, leaderVars, restarts>>
       ELSE UNCHANGED <<nodeVars, leaderVars, restarts>>

\* core: handle_remove_raft_voter_request.  RemoveVoterHandler: the leader checks (a) (b) (c) and
\* that j is a voter and not the last one (VOTER_NOT_FOUND), and appends VotersRecord(Config \ {j})
\* at once; the answer waits for its commit (no state of its own: the HW).  j may be the leader
\* itself: it keeps leading, without counting for the HW, and resigns once the record commits
\* (Resign, cause RemovedFromVoters).
HandleRemoveRaftVoterRequest(i, j) ==
    /\ Reconfig
    /\ role[i] = Leader
    /\ j \in Config(i)
    /\ Config(i) # {j}
    /\ ChangeAllowed(i)
    /\ OneChangeAtATime => ProbeOf(i) = {}
    /\ AppendVoters(i, Config(i) \ {j})
    /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, hasFetched, snapVars,
                   fetchingSnapshot, leaderVars, msgs, restarts>>

\* core: voter_change_timeout.  LeaderState.maybeExpirePendingOperation: the pending operation's
\* deadline passed, it is answered REQUEST_TIMED_OUT and forgotten; the log is untouched (a
\* VotersRecord already written stays, and still blocks the next change until it commits).  For an
\* AddRaftVoter still waiting for its probe, the late answer is then ignored: the probe is dropped.
\* For a RemoveRaftVoter, or an AddRaftVoter past its append, nothing the model holds changes.
VoterChangeTimeout(i) ==
    /\ Reconfig
    /\ role[i] = Leader
    /\ \/ \E m \in ProbeOf(i) : Discard(m)
       \/ UNCHANGED msgs
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* core: handle_update_raft_voter_request.  UpdateVoterHandler: a voter's endpoints or supported
\* kraft.version range changed (not modelled), so the leader, after the same checks (b) (c), appends
\* a VotersRecord with the same voter set and answers at once.  It matters to the model only as a
\* VotersRecord that blocks the next change until it commits.
HandleUpdateRaftVoterRequest(i, j) ==
    /\ Reconfig
    /\ role[i] = Leader
    /\ j \in Config(i)
    /\ ChangeAllowed(i)
    /\ OneChangeAtATime => ProbeOf(i) = {}
    /\ AppendVoters(i, Config(i))
    /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, hasFetched, snapVars,
                   fetchingSnapshot, leaderVars, msgs, restarts>>

\* core: send_update_raft_voter_request.  A follower voter whose entry in the voter set differs from
\* its own endpoints sends UpdateRaftVoter (Kafka's pollFollowerAsVoter).  Endpoints are not in the
\* model and the request travels outside its network (the leader's handling is the step above), so
\* no modelled state changes: a stutter, left out of Next like HandleDescribeQuorumRequest.
SendUpdateRaftVoterRequest(i) ==
    /\ i \in Nodes
    /\ UNCHANGED vars

\* core: handle_update_raft_voter_response.  The follower only runs the common response handling
\* (Kafka's handleUpdateVoterResponse); the answer is outside the modelled network: a stutter.
HandleUpdateRaftVoterResponse(i) ==
    /\ i \in Nodes
    /\ UNCHANGED vars

-----------------------------------------------------------------------------
(* Leaving leadership *)

\* Leader -> Resigned and EndQuorumEpoch to every other voter (it keeps
\* knowing itself as the leader of the epoch it gives up).
StepDown(i) ==
    /\ role[i] = Leader
    /\ role' = [role EXCEPT ![i] = Resigned]
    /\ msgs' = WithMsgs(msgs,
                 {[type |-> "EndQuorumEpochRequest", from |-> i, to |-> j,
                   clusterId |-> clusterId[i], epoch |-> epoch[i],
                   leaderId |-> i] : j \in Config(i) \ {i}})
    /\ UNCHANGED <<epoch, votedId, leaderId, log, highWatermark, clusterId,
                   leaderVars, restarts, hasFetched, snapVars, fetchingSnapshot>>

\* core: leader_progress_timeout.  "Leader Progress Timeout": no fetches
\* from a majority within controller.quorum.fetch.timeout.ms.  Kafka resigns
\* (Resigned + EndQuorumEpoch) and a later StartElection elects again.  The
\* only voter is its own majority and never times out (Kafka's
\* LeaderState.timeUntilCheckQuorumExpires).
LeaderProgressTimeout(i) ==
    /\ Config(i) # {i}
    /\ StepDown(i)

\* core: resign.  Graceful shutdown ("EndQuorumEpoch"); PreferredSuccessors
\* only orders the successors' backoff, which the model leaves to timing.
\* KIP-853: also a leader whose own removal has committed (Kafka's
\* RemoveVoterHandler.highWatermarkUpdated -> requestResign, cause
\* RemovedFromVoters; ResignAfterRemoval is that case).  Resign is enabled at any
\* moment, so the model covers it either way.
Resign(i) == StepDown(i)
ResignAfterRemoval(i) ==
    /\ i \notin Config(i)
    /\ LastConfigCommitted(i)
    /\ Resign(i)

\* core: handle_end_quorum_epoch_request.  "EndQuorumEpoch Request
\* Handling": refuse an older epoch; a higher epoch is learned, and so is the
\* leader of i's epoch when i knew none; the resigned
\* leader's voters may now start an election (StartElection, cause
\* EndQuorumEpoch) at once or after a backoff: timing, so no state here.
HandleEndQuorumEpochRequest(i, m) ==
    /\ InFlight(m)
    /\ m.type = "EndQuorumEpochRequest"
    /\ m.to = i
    /\ IF Foreign(m)
       THEN /\ Discard(m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE IF m.epoch < epoch[i]
       THEN /\ Reply([type |-> "EndQuorumEpochResponse", from |-> i, to |-> m.from,
                      epoch |-> epoch[i], leaderId |-> leaderId[i],
                      error |-> "FENCED_LEADER_EPOCH"], m)
            /\ UNCHANGED <<nodeVars, leaderVars, restarts>>
       ELSE /\ IF m.epoch > epoch[i]
               THEN BumpEpoch(i, m.epoch, m.leaderId)
               ELSE IF leaderId[i] = Nil
               \* the leader of i's own epoch, not known yet (after a pre-vote of a higher
               \* epoch moved i there, say): i follows it (KafkaRaftClient.maybeTransition)
               THEN /\ role' = [role EXCEPT ![i] = Follower]
                    /\ leaderId' = [leaderId EXCEPT ![i] = m.leaderId]
                    /\ votesGranted' = [votesGranted EXCEPT ![i] = {}]
                    /\ UNCHANGED <<epoch, votedId>>
                    /\ KeepFetched(i)
               ELSE UNCHANGED <<role, epoch, votedId, leaderId, votesGranted, hasFetched, fetchingSnapshot>>
            /\ Reply([type |-> "EndQuorumEpochResponse", from |-> i, to |-> m.from,
                      epoch |-> m.epoch, leaderId |-> m.leaderId,
                      error |-> "NONE"], m)
            /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, snapVars>>

\* core: handle_end_quorum_epoch_response.  "EndQuorumEpoch Response
\* Handling": the resigned leader stops resending; a higher epoch is learned,
\* and so is the leader of its own epoch when a voter's answer names it.
HandleEndQuorumEpochResponse(i, m) ==
    /\ InFlight(m)
    /\ m.type = "EndQuorumEpochResponse"
    /\ m.to = i
    /\ \/ /\ LearnHigherEpoch(i, m)
          /\ Discard(m)
       \/ /\ LearnLeader(i, m)
          /\ Discard(m)
       \/ /\ m.epoch <= epoch[i]
          /\ ~CanLearnLeader(i, m)
          /\ Discard(m)
          /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

-----------------------------------------------------------------------------
(* Crash and restart ("Persistence") *)

\* core: restart (KRaftCore._initial_role, Kafka's QuorumState.initialize).
\* quorum-state (epoch, votedId, leaderId), the log and meta.properties
\* (clusterId) survive, and so do the snapshots and the log start (the node
\* loads its latest snapshot, then the log after it); role, HW, the leader's
\* replica state and a snapshot download in progress are lost.  The HW
\* starts at the log start offset: everything below it is committed (core;
\* Kafka's UnifiedLog never has a HW below its log start).
\* The role resumed, from quorum-state:
\*  - a node that was the leader comes back Resigned (its unflushed tail may
\*    be gone and it cannot be re-elected in the same epoch without a second
\*    vote) and tells the other voters with EndQuorumEpoch, a voter or not
\*    (KIP-853: Kafka's QuorumState.initialize has no voter check);
\*  - a voter that voted for itself with no leader known is again the
\*    Candidate of its epoch (its own vote only) and re-sends its Vote;
\*  - a node that voted (for another, or a non-voter for itself) and has no
\*    leader it follows is Voted;
\*  - with a known leader (a voter), a Follower of it, keeping votedId;
\*  - otherwise Unattached.
\* (Kafka's case "the log has a later epoch than quorum-state" cannot occur
\* here: quorum-state is never lost and a log never outruns its epoch.)
\* RestartKeeping(i, snaps): the restart with the snapshots snaps on disk (trace validation: a
\* snapshot the shell wrote just before the crash, before the core recorded it); Restart keeps i's own.
RestartKeeping(i, snaps) ==
    LET wasLeader == leaderId[i] = i
        candidate == i \in Config(i) /\ leaderId[i] = Nil /\ votedId[i] = i
        follower  == leaderId[i] # Nil /\ leaderId[i] \in Config(i) /\ ~wasLeader
        voted     == votedId[i] # Nil /\ ~candidate /\ ~wasLeader /\ ~follower
    IN
    /\ role' = [role EXCEPT ![i] = CASE wasLeader -> Resigned
                                     [] candidate -> Candidate
                                     [] voted     -> Voted
                                     [] follower  -> Follower
                                     [] OTHER     -> Unattached]
    /\ highWatermark' = [highWatermark EXCEPT ![i] = logStart[i]]
    /\ votesGranted' = [votesGranted EXCEPT ![i] = IF candidate THEN {i} ELSE {}]
    /\ endOffset' = [endOffset EXCEPT ![i] = [j \in Tracked |-> 0]]
    /\ restarts' = restarts + 1
    /\ msgs' = CASE wasLeader ->
                    WithMsgs(msgs, {[type |-> "EndQuorumEpochRequest", from |-> i, to |-> j,
                                     clusterId |-> clusterId[i], epoch |-> epoch[i],
                                     leaderId |-> i] : j \in Config(i) \ {i}})
                 [] candidate ->
                    WithMsgs(msgs, VoteRequestsOf(i, epoch[i], FALSE))
                 [] OTHER -> msgs
    /\ hasFetched' = [hasFetched EXCEPT ![i] = FALSE]
    /\ StopFetching(i)
    /\ snapshots' = [snapshots EXCEPT ![i] = snaps]
    /\ UNCHANGED <<epoch, votedId, leaderId, log, clusterId, logStart>>
Restart(i) == RestartKeeping(i, snapshots[i])

\* core: handle_describe_quorum_request.  KIP-595 "DescribeQuorum" / KIP-836:
\* the leader answers from its replica state (LogEndOffset, fetch times),
\* others answer NOT_LEADER_OR_FOLLOWER.  Read-only: no protocol state
\* changes, and the request and answer travel outside the modelled network
\* (an admin client, not a quorum member), so the step is a stutter.  It is
\* named so that the vocabulary holds; Next leaves it out since a stutter
\* adds no behaviour.
HandleDescribeQuorumRequest(i) ==
    /\ i \in Nodes
    /\ UNCHANGED vars

-----------------------------------------------------------------------------
(* The network: loss, duplication, a foreign cluster's requests *)

\* A message is lost.
DropMessage(m) ==
    /\ InFlight(m)
    /\ Discard(m)
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* A message is delivered twice (a retry, a replayed connection).
DuplicateMessage(m) ==
    /\ InFlight(m)
    /\ Send(m)
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

\* A node of another cluster, configured with our voters' addresses, sends
\* the same request stamped with its own cluster id.
ForeignClusterCopy(m) ==
    /\ InFlight(m)
    /\ m.type \in Requests
    /\ m.clusterId = LocalCluster
    /\ Send([m EXCEPT !.clusterId = ForeignCluster])
    /\ UNCHANGED <<nodeVars, leaderVars, restarts>>

-----------------------------------------------------------------------------

\* One disjunct per action, so that TLC names the action in a counterexample.
Next ==
    \/ \E i \in Nodes : BecomeProspective(i)
    \/ \E i \in Nodes : StartElection(i)
    \/ \E i \in Nodes : AbandonProspective(i)
    \/ \E i \in Nodes : BecomeLeader(i)
    \/ \E i, j \in Nodes : SendBeginQuorumEpoch(i, j)
    \/ \E i \in Nodes : SendFetchRequest(i)
    \/ \E i \in Nodes, v \in Values : ClientAppend(i, v)
    \/ \E i \in Nodes : LeaderProgressTimeout(i)
    \/ \E i \in Nodes : Resign(i)
    \/ \E i \in Nodes : Restart(i)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : AnswerParkedFetch(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochResponse(i, m)
    \/ \E i \in Nodes : CreateSnapshot(i)
    \/ \E i \in Nodes : CleanLog(i)
    \/ \E i \in Nodes : SendFetchSnapshotRequest(i)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchSnapshotRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchSnapshotResponse(i, m)
    \/ \E i, j \in Nodes : HandleAddRaftVoterRequest(i, j)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleApiVersionsResponse(i, m)
    \/ \E i, j \in Nodes : HandleRemoveRaftVoterRequest(i, j)
    \/ \E i, j \in Nodes : HandleUpdateRaftVoterRequest(i, j)
    \/ \E i \in Nodes : VoterChangeTimeout(i)
    \/ \E m \in DOMAIN msgs : DropMessage(m)
    \/ \E m \in DOMAIN msgs : DuplicateMessage(m)
    \/ \E m \in DOMAIN msgs : ForeignClusterCopy(m)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants *)

Entries == [epoch : Nat, value : Values \cup {LeaderChange, ClusterIdRecord, KRaftVersionRecord}]
           \cup [epoch : Nat, value : {VotersRecord}, voters : SUBSET Nodes]

\* TypeOK: every variable stays in its domain; HW never exceeds the log (a
\* node's log: its snapshot content and its records, see "Snapshots").
TypeOK ==
    /\ role \in [Nodes -> Roles]
    /\ epoch \in [Nodes -> Nat]
    /\ votedId \in [Nodes -> Nodes \cup {Nil}]
    /\ leaderId \in [Nodes -> Nodes \cup {Nil}]
    /\ \A i \in Nodes : log[i] \in Seq(Entries)
    /\ \A i \in Nodes : highWatermark[i] \in 0..Len(log[i])
    /\ clusterId = [i \in Nodes |-> LocalCluster]
    /\ votesGranted \in [Nodes -> SUBSET Nodes]
    /\ \A i \in Nodes : endOffset[i] \in [Tracked -> Nat]
    /\ \A m \in DOMAIN msgs : m.type \in Requests \cup
          {"VoteResponse", "BeginQuorumEpochResponse", "EndQuorumEpochResponse",
           "FetchResponse", "ParkedFetch", "FetchSnapshotResponse", "ApiVersionsResponse"}
       /\ msgs[m] \in Nat \ {0}
    /\ ~Reconfig => \A i \in Observers : role[i] \in {Unattached, Follower}
    /\ restarts \in Nat
    /\ hasFetched \in [Nodes -> BOOLEAN]
    /\ \A i \in Nodes : hasFetched[i] => role[i] = Follower
    /\ \A m \in DOMAIN msgs : m.type \in {"VoteRequest", "VoteResponse"} => m.preVote \in BOOLEAN
    \* snapshots: within the log (snapshot + log), one at the log start (Kafka's earliestSnapshotId),
    \* a download only by a Follower
    /\ \A i \in Nodes : logStart[i] \in 0..Len(log[i])
    /\ \A i \in Nodes : snapshots[i] \subseteq 1..Len(log[i])
    /\ \A i \in Nodes : logStart[i] > 0 => logStart[i] \in snapshots[i]
    /\ \A i \in Nodes : logStart[i] <= LatestSnapshotEnd(i)
    /\ \A i \in Nodes : fetchingSnapshot[i] # NoSnapshotId => role[i] = Follower
    /\ ~Snapshots => \A i \in Nodes : snapshots[i] = {} /\ fetchingSnapshot[i] = NoSnapshotId

\* ElectionSafety: at most one leader per epoch.  Every node that knows a
\* leader of epoch e, and every BeginQuorumEpoch of e in flight, names the
\* same node, and no two nodes are Leader of e.
ElectionSafety ==
    \A e \in {epoch[i] : i \in Nodes} :
        LET claims == {i \in Nodes : role[i] = Leader /\ epoch[i] = e}
                      \cup {leaderId[k] : k \in {x \in Nodes : epoch[x] = e /\ leaderId[x] # Nil}}
                      \cup {m.leaderId : m \in {x \in DOMAIN msgs :
                               x.type = "BeginQuorumEpochRequest" /\ x.epoch = e
                               /\ x.clusterId = LocalCluster}}
        IN Cardinality(claims) <= 1

\* VoteOnce: a voter gives at most one vote per epoch.  The evidence of v's
\* vote in epoch e: its durable votedId, the candidates and leaders of e
\* that counted it, and granted VoteResponses of e in flight (real votes:
\* a pre-vote grant binds nothing, KIP-996); all name at most one candidate.
VoteOnce ==
    \A v \in Nodes :
        \A e \in {epoch[i] : i \in Nodes} :
            LET evidence ==
                  (IF epoch[v] = e /\ votedId[v] # Nil THEN {votedId[v]} ELSE {})
                  \cup {c \in Nodes : role[c] \in {Candidate, Leader} /\ epoch[c] = e
                                              /\ v \in votesGranted[c]}
                  \cup {m.to : m \in {x \in DOMAIN msgs : x.type = "VoteResponse" /\ x.from = v
                                                          /\ x.epoch = e /\ x.granted
                                                          /\ ~IsPreVote(x)}}
            IN Cardinality(evidence) <= 1

\* LogMatching: two logs with a record of the same epoch at the same offset
\* are identical up to and including that offset.  A log is snapshot + log:
\* a record below the log start is the one the snapshot there stands for.
LogMatching ==
    \A i, j \in Nodes :
        \A n \in 1..Min(Len(log[i]), Len(log[j])) :
            log[i][n].epoch = log[j][n].epoch =>
                SubSeq(log[i], 1, n) = SubSeq(log[j], 1, n)

\* LeaderCompleteness: what a node knows to be committed (its log below its
\* HW or the end of its latest snapshot, Committed(i), learned in an epoch <=
\* its own) is in the log (snapshot + log) of every leader of that or a later
\* epoch.
LeaderCompleteness ==
    \A l \in Nodes : role[l] = Leader =>
        \A i \in Nodes : epoch[i] <= epoch[l] =>
            /\ Committed(i) <= Len(log[l])
            /\ SubSeq(log[i], 1, Committed(i)) = SubSeq(log[l], 1, Committed(i))

\* CommittedNeverTruncated (action property): no step removes or rewrites a
\* record below a node's HW or its latest snapshot's end (Committed), in its
\* snapshot + log: a snapshot install replaces only what was not committed.
CommittedNeverTruncated ==
    [][\A i \in Nodes :
         /\ Len(log'[i]) >= Committed(i)
         /\ SubSeq(log'[i], 1, Committed(i)) = SubSeq(log[i], 1, Committed(i))]_vars

\* HighWatermarkMonotonic (action property): a node's HW never moves
\* backwards, except that a Restart forgets it.
HighWatermarkMonotonic ==
    [][\A i \in Nodes : highWatermark'[i] >= highWatermark[i] \/ Restart(i)]_vars

\* EpochMonotonic (action property): a node's epoch never decreases, not
\* even across a Restart (it is in quorum-state).
EpochMonotonic ==
    [][\A i \in Nodes : epoch'[i] >= epoch[i]]_vars

\* KIP-853 (KAFKA-16580's simulation invariants, over the model).
\* AtMostOneUncommittedConfig: a leader whose HW is known in its epoch (every record of earlier
\* epochs is then committed) has at most one VotersRecord at or past its HW.
AtMostOneUncommittedConfig ==
    \A i \in Nodes : role[i] = Leader /\ HWKnown(i) =>
        Cardinality({k \in (highWatermark[i] + 1)..Len(log[i]) : IsConfigEntry(log[i][k])}) <= 1

\* CommittedConfigsDifferByOne: along what a node knows to be committed, each voter set differs
\* from the one before it (InitVoters first) by at most one voter added or removed.
ConfigChain(lg, n) ==
    LET ks == {k \in 1..n : IsConfigEntry(lg[k])}
        prev(k) == LET before == {x \in ks : x < k}
                   IN IF before = {} THEN InitVoters ELSE lg[MaxOf(before)].voters
    IN {<<prev(k), lg[k].voters>> : k \in ks}
CommittedConfigsDifferByOne ==
    \A i \in Nodes :
        \A p \in ConfigChain(log[i], Committed(i)) :
            Cardinality((p[1] \ p[2]) \cup (p[2] \ p[1])) <= 1

\* ConfigQuorumsOverlap: every two leaders' voter sets share a voter in any two of their quorums
\* (Raft's single-server-change argument: consecutive sets have overlapping majorities, and a
\* leader never runs ahead by two).  Checked on leaders only: a node cut off may hold an older set
\* than the next but one, which is safe since it cannot be elected.
QuorumsOverlap(C, D) == \A Q \in SUBSET C : \A R \in SUBSET D :
                           IsQuorumOf(Q, C) /\ IsQuorumOf(R, D) => Q \cap R # {}
ConfigQuorumsOverlap ==
    \A i, j \in Nodes : role[i] = Leader /\ role[j] = Leader => QuorumsOverlap(Config(i), Config(j))

=============================================================================
