------------------------------ MODULE TraceKRaft ------------------------------
(***************************************************************************)
(* Trace validation (Cirstea, Kuppe, Loillier, Merz 2024): KRaft           *)
(* constrained by a recorded trace. Python (kraft_tck.tla.trace_translate) *)
(* turns the NDJSON trace into the module TraceData: the voters, the       *)
(* cluster id and TraceLog, the sequence of action events with the state   *)
(* the node reported after each.  Step l of a behaviour of this spec must  *)
(* be the KRaft action named by TraceLog[l], taken by that node, ending in *)
(* exactly the reported state.                                             *)
(*                                                                         *)
(* The trace is a behaviour of KRaft iff some behaviour consumes all of    *)
(* TraceLog, i.e. TLC finds a state violating TraceNotDone.  If none does, *)
(* the largest l reached (printed through TLCSet/PrintT) is the first      *)
(* event no behaviour can produce, and the state printed with it is the    *)
(* spec state just before that event.                                      *)
(*                                                                         *)
(* Messages are matched by what the trace says about them: a handler     *)
(* row carries the fields of KRaft's record of the message it handles     *)
(* (TraceData builds them from the Receive before the handler event) and  *)
(* of the answer it sends, so one event selects one message in flight and *)
(* one successor state; a row with no message named (type "") takes any   *)
(* message of its action's type.  The leader's answers to parked long     *)
(* polls, the network's drops and duplicates are rows of their own,       *)
(* derived from Send/Receive events.  Hidden steps (HiddenSteps > 0, for  *)
(* black-box harness traces that see only the target's messages) let any  *)
(* KRaft action of any node happen between two events, at most           *)
(* HiddenSteps in a row.                                                  *)
(*                                                                         *)
(* Black-box mode (BlackBox, a harness trace: only the messages between  *)
(* the harness's virtual voters and TraceTarget): the voters are the      *)
(* environment as above, and every step of the target is hidden          *)
(* (TargetNext, at most HiddenSteps in a row, taken only when the next    *)
(* row needs them: NeedsHiddenStep).  A message the target sent must be   *)
(* in flight when the harness receives it (EnvironmentReceive), so each   *)
(* answer is checked against what the target's spec state allows.  The   *)
(* harness's kill -9 restarts of the target are rows (TargetRestart).     *)
(*                                                                         *)
(* Environment mode (a node's own trace, e.g. the harness's embedded      *)
(* target): the nodes of TraceEnvironment have no trace of their own and  *)
(* take no KRaft step.  What they send the traced node enters the network *)
(* as recorded (EnvironmentSend, a whole KRaft message record) right      *)
(* before the handler row that takes it; what the traced node sends them  *)
(* leaves it (EnvironmentReceive).  Only the traced node's steps are      *)
(* KRaft actions, each checked against the state it reported.             *)
(***************************************************************************)
EXTENDS TraceData, Integers, Sequences, FiniteSets, TLC

VARIABLES role, epoch, votedId, leaderId, log, highWatermark, clusterId,
          votesGranted, endOffset, msgs, restarts, hasFetched,
          logStart, snapshots, fetchingSnapshot,
          l,      \* the next trace event to match
          hidden, \* hidden steps taken since the last matched event
          epochCache  \* epochCache[i]: the epoch cache of log[i] (see TraceView)

K == INSTANCE KRaft WITH
        Voters <- TraceVoters, Observers <- TraceObservers, Values <- {"record"},
        LocalCluster <- TraceCluster, ForeignCluster <- "<foreign>",
        MaxFetchRecords <- TraceMaxFetchRecords, PreVote <- TracePreVote,
        Snapshots <- TraceSnapshots, Reconfig <- TraceReconfig,
        OneChangeAtATime <- TRUE, CommitInEpochFirst <- TRUE

\* A trace whose Fetch answers are capped in bytes (Kafka's fetch max bytes, whole batches, at least one)
\* answers with as many records as its row's reply shows, up to the ones there are: KRaft with that many
\* records per answer (MaxFetchRecords), for that one step.  KRaft.tla counts the cap in records.
\* TraceFetchCapAt: row -> the records its Fetch answer carries, TraceFetchCaps: those counts ({} for a
\* trace without a byte cap); an instance's parameter must be a constant, so the step picks n from that set.
KCap(n) == INSTANCE KRaft WITH
        Voters <- TraceVoters, Observers <- TraceObservers, Values <- {"record"},
        LocalCluster <- TraceCluster, ForeignCluster <- "<foreign>",
        MaxFetchRecords <- n, PreVote <- TracePreVote,
        Snapshots <- TraceSnapshots, Reconfig <- TraceReconfig,
        OneChangeAtATime <- TRUE, CommitInEpochFirst <- TRUE
FetchCap(ev) == IF l \in DOMAIN TraceFetchCapAt THEN TraceFetchCapAt[l] ELSE TraceMaxFetchRecords
CappedFetch(ev, i, M) ==
    IF TraceFetchCaps = {}
    THEN \E m \in M : K!HandleFetchRequest(i, m)
    ELSE \E n \in TraceFetchCaps : n = FetchCap(ev) /\ \E m \in M : KCap(n)!HandleFetchRequest(i, m)
CappedParkedFetch(ev, i, M) ==
    IF TraceFetchCaps = {}
    THEN \E m \in M : K!AnswerParkedFetch(i, m)
    ELSE \E n \in TraceFetchCaps : n = FetchCap(ev) /\ \E m \in M : KCap(n)!AnswerParkedFetch(i, m)


\* Pre-vote (KIP-996): TracePreVote (a trace that shows a Prospective or a PreVote=true Vote) lets the
\* nodes become Prospective; a node without pre-vote (Kafka 3.x elections, a Vote v0/v1 peer's fallback)
\* starts its elections straight from a timeout, which StartElectionAs(i, FALSE) allows too.  So one
\* module validates traces of both.
AnyStartElection(i) == K!StartElectionAs(i, FALSE)

\* Snapshots (KIP-630): TraceSnapshots (a trace that shows a snapshot event, a log start past 0, a
\* FetchSnapshot or a Fetch answered with a SnapshotId) lets nodes take snapshots; without it no node
\* does, and the snapshot variables stay as in K!Init, so a trace without snapshots explores what it did.
\* The leader's answer to FetchSnapshot may be the whole snapshot or a chunk before the last (the row's
\* reply says which); a FetchSnapshotResponse from the environment carries the snapshot's records as
\* Fill(n, e) (TraceData): n records of the snapshot's epoch, which only the id of the snapshot they stand
\* for is read from (a record below a log start is never served).
AnyHandleFetchSnapshotRequest(i, m) == \E whole \in BOOLEAN : K!HandleFetchSnapshotRequestAs(i, m, whole)

\* A node's shell writes a snapshot's file before it tells the core (CreateSnapshot): a crash in between
\* leaves a snapshot on disk that no event recorded, and the Restart that loads it names it (snapshotId).
\* It is the CreateSnapshot the crash cut off, at a committed offset, and the restart, in one row.
RestartFinding(i, s) ==
    \/ K!Restart(i)
    \/ /\ TraceSnapshots
       /\ "snapshotEndOffset" \in DOMAIN s
       /\ LET n == s.snapshotEndOffset IN
             /\ n > logStart[i] /\ n <= highWatermark[i] /\ n \notin snapshots[i]
             /\ K!RestartKeeping(i, snapshots[i] \cup {n})

kvars == <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
           votesGranted, endOffset, msgs, restarts, hasFetched,
           logStart, snapshots, fetchingSnapshot>>

\* Voter changes (KIP-853): TraceReconfig (a trace whose nodes report kraft.version >= 1, or that shows a
\* voter change) lets leaders write VotersRecords, and every node's voter set is the latest one in its
\* log (K!Config), else TraceVoters (the bootstrap checkpoint's set).  A row's state then carries the ids
\* the node reported in force (voters; <<>> where the trace states none) and the voter its event is about
\* (voterId, from voterKey; -1 for none).  A refused change (the node answers at once and changes
\* nothing) is a step that changes nothing.  Without TraceReconfig no VotersRecord is ever written and
\* K!Config(i) = TraceVoters: validation is as before.
AnyAddRaftVoter(i, j) == K!HandleAddRaftVoterRequest(i, j) \/ UNCHANGED kvars
AnyRemoveRaftVoter(i, j) == K!HandleRemoveRaftVoterRequest(i, j) \/ UNCHANGED kvars
AnyUpdateRaftVoter(i, j) == K!HandleUpdateRaftVoterRequest(i, j) \/ UNCHANGED kvars
\* A node's own trace says how its AddRaftVoter ended at the probe's answer: with the VotersRecord
\* appended (its log end moved: KRaft's HandleApiVersionsResponse), or not (aborted, or ignored by a node
\* that no longer leads): then the probe is gone, which HandleApiVersionsResponse's other branch or the
\* network's loss does.  One add is pending at a time (OneChangeAtATime), so a probe left in flight
\* could only be one of an add the node refused at once (AnyAddRaftVoter cannot tell): kept, it told
\* states apart until the next change.  A voter change's timeout ends the pending add the same way.
ProbeAnswered(i, s, M) ==
    IF s.logEndOffset > Len(log[i])
    THEN \E m \in M : K!HandleApiVersionsResponse(i, m)
    ELSE /\ msgs' = [x \in DOMAIN msgs \ K!ProbeOf(i) |-> msgs[x]]
         /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, votesGranted, endOffset,
                        restarts, hasFetched, logStart, snapshots, fetchingSnapshot>>
\* The leader's first batch of its epoch holds, with kraft.version 1 and a voter set from the bootstrap
\* checkpoint only, KRaftVersionRecord and VotersRecord after LeaderChange (Kafka's
\* LeaderState.appendStartOfEpochControlRecords): the same set (endpoints are not modelled).
\* (And the first leader of a cluster without an id appends the cluster-id record after them: withId.)
BecomeLeaderWritingVoters(i, withId) ==
    K!BecomeLeaderAppending(i, <<[epoch |-> epoch[i], value |-> K!KRaftVersionRecord],
                               K!VotersEntry(epoch[i], K!Config(i))>>
                               \o (IF withId THEN <<[epoch |-> epoch[i], value |-> K!ClusterIdRecord]>> ELSE <<>>))
snapVars == <<logStart, snapshots, fetchingSnapshot>>

(***************************************************************************)
(* Black-box voter changes (KIP-853).  The harness asks the target for     *)
(* them by AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter, RPCs outside  *)
(* the model's network; TraceVoterChanges (TraceData) says which voter     *)
(* each names and between which rows it was pending (sent, not answered   *)
(* yet).  While one is, the target may handle it in a hidden step.  An    *)
(* AddRaftVoter it accepts is, in KRaft, HandleAddRaftVoterRequest (the   *)
(* ApiVersions probe sent) and, at the probe's answer, the VotersRecord    *)
(* appended: hidden, the two are one step (AddVoterAtOnce), the probe's   *)
(* round trip being no message the harness's rows name.  A refused or     *)
(* timed-out change is no step: it changes nothing the model holds.  The   *)
(* answer of an accepted Add or Remove is the commit of its record, which *)
(* the high watermark shows.                                               *)
(***************************************************************************)
PendingChanges(kind) == {c.voter : c \in {x \in TraceVoterChanges : x.kind = kind /\ x.first <= l /\ l <= x.last}}
AddVoterAtOnce(i, j) ==
    /\ TraceReconfig
    /\ role[i] = K!Leader
    /\ j \in K!Nodes \ K!Config(i)
    /\ K!ChangeAllowed(i)
    /\ K!ProbeOf(i) = {}
    \* K!HandleApiVersionsResponse's test that j caught up
    /\ endOffset[i][j] > 0
    /\ K!AppendVoters(i, K!Config(i) \cup {j})
    /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId, hasFetched, snapVars, votesGranted, endOffset,
                   msgs, restarts>>
\* The leader's first batch of its epoch, as the target writes it (black-box: no row states its log end):
\* with kraft.version 1 and no VotersRecord in its log yet, with KRaftVersionRecord and VotersRecord.
TargetBecomeLeader(i) ==
    IF TraceReconfig /\ K!LastConfigIndex(log[i], Len(log[i])) = 0
    THEN BecomeLeaderWritingVoters(i, FALSE)
    ELSE K!BecomeLeader(i)

(***************************************************************************)
(* Black-box: dead messages, ones no later row can tell apart from lost.  *)
(* To the target: ones its KRaft handler only discards, now and in every  *)
(* later state but those FollowerHas (below) says (so dropping them is    *)
(* the target's discarding step, taken at once): a response of an older   *)
(* epoch than the target's (epochs never go back, a Restart keeps them), *)
(* a request from another cluster, a                                      *)
(* BeginQuorumEpoch acknowledgement not from a higher epoch, and a Vote,  *)
(* Fetch or EndQuorumEpoch answer of the epoch the target leads or led    *)
(* (leaderId = itself: Leader or Resigned, which never again follows,     *)
(* votes or learns a leader in that epoch; a Restart keeps it Resigned).  *)
(* From the target: ones no later row receives (TraceLastReceive: the     *)
(* last row that receives each kind, so none matches them): KRaft's       *)
(* DropMessage.  Live(b) is bag b without them.  Left in, every choice of *)
(* which ones the target has discarded so far was a state of its own     *)
(* (and an old election's requests nobody heard told states apart to the *)
(* end of the trace).                                                     *)
(***************************************************************************)
\* An answer of the target's leader, in its epoch, that brings nothing: no record, no DivergingEpoch, no
\* SnapshotId, a HW the target has (HandleFetchResponse: at its position ApplyFetched appends nothing
\* and keeps its HW, elsewhere the answer is stale; hasFetched as it is).  A later state could only use it
\* after a truncation back to its offset or a Restart (HW back to the log start), which a real node
\* never does with an answer it has read, or left in a dead process's socket: the trace's later answers
\* are what it uses then.  (Each empty answer of a caught-up follower, handled or not, was a state.)
FollowerHas(m) ==
    LET t == TraceTarget IN
    /\ m.type = "FetchResponse"
    /\ m.epoch = epoch[t] /\ role[t] = K!Follower /\ leaderId[t] = m.from
    /\ m.error = "NONE" /\ m.records = <<>>
    /\ m.divergingEpoch = K!Nil /\ m.snapshotEndOffset = K!Nil
    /\ m.highWatermark <= highWatermark[t]
    /\ hasFetched[t] = K!LeaderAnswered(t, m)
ReceivedLater(m) ==
    LET key(e) == <<m.type, m.from, m.to, e>>
        at(e) == key(e) \in DOMAIN TraceLastReceive /\ TraceLastReceive[key(e)] >= l
    IN IF "epoch" \in DOMAIN m THEN at(m.epoch) \/ at(-1) ELSE at(-1)
Dead(m) ==
    LET t == TraceTarget IN
    IF m.to = t
    THEN \/ m.type \in K!Requests /\ m.clusterId # TraceCluster
         \/ m.type \notin K!Requests /\ m.type # "ParkedFetch" /\ m.epoch < epoch[t]
         \/ m.type = "BeginQuorumEpochResponse" /\ m.epoch <= epoch[t]
         \/ /\ m.type \in {"VoteResponse", "FetchResponse", "EndQuorumEpochResponse"}
            /\ m.epoch = epoch[t] /\ leaderId[t] = t
         \/ FollowerHas(m)
    ELSE m.from = t /\ ~ReceivedLater(m)
LiveSet(b) == {x \in DOMAIN b : ~Dead(x)}
Live(b) == [m \in LiveSet(b) |-> b[m]]

(***************************************************************************)
(* Black-box: a target started before the harness listened (--target     *)
(* host:port, header targetStartedBeforeHarness) holds elections nobody   *)
(* hears.  Until its first exchange with the harness, KRaft lets it do    *)
(* nothing else: no message reaches it, so the only enabled steps of it   *)
(* are StartElection (from Unattached, then again and again as the        *)
(* Candidate whose election timed out) and Restart, which gives a         *)
(* Candidate of an epoch with its own vote and no leader back as that     *)
(* Candidate (Kafka's QuorumState.initialize).  So it starts in KRaft's   *)
(* Init or as the Candidate of some epoch e in 1..PreludeElections (0 but *)
(* for such traces; Python bounds e by the largest epoch the target       *)
(* states in the trace, epochs never going back) with its own vote and    *)
(* its empty log.  The network lost or still holds any of the Vote        *)
(* requests of its elections; only those the harness may still receive   *)
(* matter (it takes no step of its own), so in flight are the requests of *)
(* epoch e and of each epoch of PreludeVoteEpochs (the epochs of the      *)
(* target's empty-log Vote requests in the trace) up to e: one copy each, *)
(* as the model's resends are (an exact resend is no row).                *)
(***************************************************************************)
PreludeVotes(e) ==
    LET t == TraceTarget IN
    {[type |-> "VoteRequest", from |-> t, to |-> j, clusterId |-> TraceCluster,
      epoch |-> x, preVote |-> FALSE, lastOffsetEpoch |-> 0, lastOffset |-> 0] :
        j \in TraceVoters \ {t}, x \in {y \in PreludeVoteEpochs \cup {e} : 1 <= y /\ y <= e}}

IsolatedCandidate(e) ==
    LET t == TraceTarget IN
    /\ role = [i \in K!Nodes |-> IF i = t THEN K!Candidate ELSE K!Unattached]
    /\ epoch = [i \in K!Nodes |-> IF i = t THEN e ELSE 0]
    /\ votedId = [i \in K!Nodes |-> IF i = t THEN t ELSE K!Nil]
    /\ leaderId = [i \in K!Nodes |-> K!Nil]
    /\ log = [i \in K!Nodes |-> <<>>]
    /\ highWatermark = [i \in K!Nodes |-> 0]
    /\ clusterId = [i \in K!Nodes |-> TraceCluster]
    /\ votesGranted = [i \in K!Nodes |-> IF i = t THEN {t} ELSE {}]
    /\ endOffset = [i \in K!Nodes |-> [j \in K!Tracked |-> 0]]
    /\ msgs = K!WithMsgs(<<>>, PreludeVotes(e))
    /\ restarts = 0
    /\ hasFetched = [i \in K!Nodes |-> FALSE]
    /\ K!SnapshotInit

TraceInit ==
    /\ \/ K!Init
       \/ \E e \in 1..PreludeElections : IsolatedCandidate(e)
    /\ l = 1
    /\ hidden = 0
    /\ epochCache = [i \in K!Nodes |-> <<>>]
    /\ TLCSet(1, 0)

(***************************************************************************)
(* TLC fingerprints every state it meets, and a fingerprint of log covers  *)
(* every record: with logs growing along the trace that made validation    *)
(* quadratic in its length.  TraceView stands for the state in the        *)
(* fingerprint with each log replaced by its length and its epoch cache   *)
(* (Kafka's LeaderEpochFileCache: <<epoch, start offset>> of every epoch   *)
(* with records), which grows with the leaders of the trace, not with its  *)
(* records.  epochCache is kept up to date from the records a step adds or *)
(* cuts, never by a pass over the whole log.                               *)
(*                                                                         *)
(* Why nothing is lost: the records of one epoch in any log are a prefix   *)
(* of what that epoch's single leader appended (ElectionSafety, checked    *)
(* along the trace), so length and epoch cache determine the log.  Even if *)
(* two states of one view differed, TLC would only skip the second: every  *)
(* state it explores is still reached by real KRaft steps, so a PASS stays *)
(* a behaviour of KRaft; at worst a valid trace could FAIL.                *)
(***************************************************************************)

\* The epoch cache extended by the epochs of lg[k..Len(lg)]: one binary search
\* (K!PrefixAtMost) per epoch, not one step per record.
RECURSIVE CacheFrom(_, _, _)
CacheFrom(c, lg, k) ==
    IF k > Len(lg) THEN c
    ELSE LET e == lg[k].epoch
             c2 == IF c # <<>> /\ c[Len(c)][1] = e THEN c ELSE Append(c, <<e, k - 1>>)
         IN CacheFrom(c2, lg, K!PrefixAtMost(lg, e, k, Len(lg)) + 1)

\* The epoch cache of log new, one step after the log old with cache c.  A KRaft
\* step appends at the end of a log or cuts it to a prefix (truncation), never
\* both; should the record at the old end differ, the cache is rebuilt.
NextCache(c, old, new) ==
    IF Len(new) < Len(old) THEN SelectSeq(c, LAMBDA r : r[2] < Len(new))
    ELSE IF Len(old) > 0 /\ new[Len(old)].epoch # old[Len(old)].epoch
    THEN CacheFrom(<<>>, new, 1)
    ELSE CacheFrom(c, new, Len(old) + 1)

\* A snapshot install replaces the log by the snapshot's content (and moves the log start): rebuilt.
UpdateCache == epochCache' = [i \in K!Nodes |->
                                IF logStart'[i] # logStart[i] /\ log'[i] # log[i]
                                THEN CacheFrom(<<>>, log'[i], 1)
                                ELSE NextCache(epochCache[i], log[i], log'[i])]

\* Black-box: the votes a node counts matter only while it is a Candidate or Prospective (every way
\* into those roles starts a new tally; BecomeLeader reads it as Candidate).  A leader's tally, which of
\* the harness's voters granted first, told states apart to the end of its epoch.  (VoteOnce reads a
\* leader's tally too, but in black-box mode the only candidate is the target: a harness voter's grants
\* name nobody else.)
Tally == [i \in K!Nodes |-> IF role[i] \in {K!Candidate, K!Prospective} THEN votesGranted[i] ELSE {}]

\* The fingerprinted part of a state (TraceKRaft.cfg: VIEW TraceView).
TraceView ==
    <<role, epoch, votedId, leaderId, [i \in K!Nodes |-> Len(log[i])], epochCache,
      [i \in K!Nodes |-> K!Config(i)],  \* the voter sets the logs hold (KIP-853; TraceVoters without)
      highWatermark, clusterId, IF BlackBox THEN Tally ELSE votesGranted, endOffset,
      IF BlackBox THEN Live(msgs) ELSE msgs,
      restarts, hasFetched, logStart, snapshots, fetchingSnapshot, l, hidden>>

\* The reported state of node i, compared with the spec's state after the step.
StateMatches(i, s) ==
    /\ role'[i] = s.role
    /\ epoch'[i] = s.epoch
    /\ votedId'[i] = s.votedId
    /\ leaderId'[i] = s.leaderId
    /\ Len(log'[i]) = s.logEndOffset
    \* an empty log's last epoch: the model's LastEpoch 0, which Kafka's wire sentinel is too (an empty
    \* log fetches with LastFetchedEpoch 0); -1, an older sentinel for it, is read the same
    /\ IF log'[i] = <<>> THEN s.lastFetchedEpoch \in {0, -1}
       ELSE K!LastEpoch(log'[i]) = s.lastFetchedEpoch
    \* -1: no high watermark known yet (Kafka's "unknown"), the model's 0 (nothing known committed)
    /\ highWatermark'[i] = IF s.highWatermark = -1 THEN 0 ELSE s.highWatermark
    \* snapshot traces (TraceSnapshots): the log start (absent: 0) and, where the event names one
    \* (CreateSnapshot, an installing HandleFetchSnapshotResponse, a Restart that loaded one), the
    \* node's latest snapshot
    /\ "logStartOffset" \in DOMAIN s => logStart'[i] = s.logStartOffset
    /\ "snapshotEndOffset" \in DOMAIN s /\ s.snapshotEndOffset # -1 =>
          /\ s.snapshotEndOffset \in snapshots'[i]
          /\ s.snapshotEndOffset <= Len(log'[i])
          /\ K!SnapshotIdAt(log'[i], s.snapshotEndOffset).epoch = s.snapshotEpoch
    \* reconfig traces (TraceReconfig): the voter set in force the node reported (kraft.version >= 1)
    /\ "voters" \in DOMAIN s /\ s.voters # <<>> =>
          K!ConfigOf(log'[i]) = {s.voters[k] : k \in DOMAIN s.voters}

\* ClientAppend of a batch: the leader appends n records of its epoch.
ClientAppendBatch(i, n) ==
    /\ role[i] = "Leader"
    /\ n >= 1
    /\ LET lg == log[i] \o [k \in 1..n |-> [epoch |-> epoch[i], value |-> "record"]]
       IN /\ log' = [log EXCEPT ![i] = lg]
          /\ highWatermark' = [highWatermark EXCEPT ![i] = K!NewHighWatermarkIn(i, lg, endOffset[i])]
    /\ UNCHANGED <<role, epoch, votedId, leaderId, clusterId,
                   votesGranted, endOffset, msgs, restarts, hasFetched, snapVars>>

\* Message m in flight agrees with every field the trace states about it.
Matches(m, k) == k.type = "" \/ \A f \in DOMAIN k : f \in DOMAIN m /\ m[f] = k[f]
Named(k) == {m \in DOMAIN msgs : Matches(m, k)}

\* The answer the event sends (or the fetch it parks) is in flight after it.
Answered(ev) == ev.reply.type = "" \/ \E r \in DOMAIN msgs' : Matches(r, ev.reply)

\* The environment (a node without trace rows) sends message ev.msg, exactly as recorded.
EnvironmentSend(ev) ==
    /\ ev.msg.from \in TraceEnvironment
    /\ ev.msg.to \notin TraceEnvironment
    \* black-box: an answer to the target with a copy in flight is that copy (the network drops the new
    \* one): a node's handler does with a second copy of an answer what it did with the first, or nothing
    /\ msgs' = IF ~BlackBox THEN K!WithMsg(msgs, ev.msg)
               ELSE IF ev.msg.type \notin K!Requests /\ ev.msg \in LiveSet(msgs) THEN Live(msgs)
               ELSE K!WithMsg(Live(msgs), ev.msg)
    /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
                   votesGranted, endOffset, restarts, hasFetched, snapVars>>

\* The environment takes a message addressed to it out of the network.  A copy the model never
\* made (the node resending a request on a timer, which KRaft leaves to DuplicateMessage) leaves
\* nothing to take: the step changes nothing then.
EnvironmentReceive(ev) ==
    /\ ev.msg.to \in TraceEnvironment
    /\ IF Named(ev.msg) = {}
       \* black-box: the target's message must be in flight (Python drops exact resends beforehand)
       THEN ~BlackBox /\ UNCHANGED msgs
       ELSE \E m \in Named(ev.msg) : msgs' = K!WithoutMsg(msgs, m)
    /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
                   votesGranted, endOffset, restarts, hasFetched, snapVars>>

(***************************************************************************)
(* A request KRaft has no record of (another partition than              *)
(* __cluster_metadata-0, a Fetch from a negative offset), or one its      *)
(* receiver refused as malformed (Kafka's INVALID_REQUEST for a negative  *)
(* epoch or offset, a LastOffsetEpoch not below the candidate's epoch,   *)
(* and so on: KafkaRaftClient checks them before anything may change):   *)
(* with its answer, one step that changes nothing.  Python leaves the    *)
(* request out of the network (it never enters msgs) and puts this row   *)
(* where the receiver answered it (ev.msg names it in words only).  In a *)
(* node's own trace the row carries the state the node reported, which   *)
(* must be the one it had; in black-box mode a target that did change    *)
(* (adopted the epoch, voted) fails at its next answer that shows it.    *)
(* Sound either way: for KRaft a refused request is a lost one.          *)
(***************************************************************************)
RefuseRequest == UNCHANGED kvars

(***************************************************************************)
(* KIP-853: a Vote v1 addressed to another voter key (its VoterId and     *)
(* VoterDirectoryId name another replica), answered INVALID_VOTER_KEY.    *)
(* Kafka's KafkaRaftClient.handleVoteRequest adopts a higher epoch first  *)
(* (transitionToUnattached: no vote, no leader), then refuses: it votes   *)
(* for nobody.  KRaft.tla has no voter keys; not voting is always safe,  *)
(* so this is HandleVoteRequest with the grant withheld, and the answer   *)
(* (an error) is no message of the model.                                 *)
(***************************************************************************)
RefuseVoterKey(i, m) ==
    /\ m \in DOMAIN msgs
    /\ m.type = "VoteRequest" /\ m.to = i /\ m.clusterId = clusterId[i]
    /\ m.epoch >= epoch[i]
    /\ msgs' = K!WithoutMsg(msgs, m)
    /\ \/ m.epoch > epoch[i] /\ K!BumpEpoch(i, m.epoch, K!Nil)
       \* (or the epoch not adopted: a refusal before it, as for a lost request; the harness checks Kafka's
       \* order at KAFKA level only)
       \/ UNCHANGED <<role, epoch, votedId, leaderId, votesGranted, hasFetched, fetchingSnapshot>>
    /\ UNCHANGED <<log, highWatermark, clusterId, endOffset, restarts, logStart, snapshots>>

(***************************************************************************)
(* KIP-853: an observer that knows no leader asks a bootstrap server       *)
(* (controller.quorum.bootstrap.servers, ids -2, -3, ... in a node's       *)
(* trace; Kafka's pollUnattachedAsObserver and                             *)
(* RequestManager.findReadyBootstrapServer) instead of a voter it knows: an *)
(* address standing for some voter whose id it does not know.  The step is *)
(* KRaft's observer fetch (FetchFromLeader's Unattached observer, or       *)
(* ObserverLooksForLeader's Follower or removed Resigned leader giving up  *)
(* its leader), sent to b; b is a node of the environment, whose answer    *)
(* enters the network as recorded.  An answer from b is never the leader's *)
(* own (b is no leader id): it can name the leader, not serve records.     *)
(***************************************************************************)
TraceBootstrap == {n \in TraceObservers : n <= -2}
BootstrapFetch(i, b) ==
    /\ b \in TraceBootstrap
    /\ i \notin K!Config(i)
    /\ role[i] \in {K!Unattached, K!Voted, K!Follower, K!Resigned}
    /\ LET e == IF role[i] = K!Resigned THEN epoch[i] + 1 ELSE epoch[i]
       IN /\ role' = [role EXCEPT ![i] = IF e = epoch[i] /\ votedId[i] # K!Nil THEN K!Voted ELSE K!Unattached]
          /\ epoch' = [epoch EXCEPT ![i] = e]
          /\ votedId' = [votedId EXCEPT ![i] = IF e # epoch[i] THEN K!Nil ELSE @]
          /\ leaderId' = [leaderId EXCEPT ![i] = K!Nil]
          /\ K!Send([type |-> "FetchRequest", from |-> i, to |-> b,
                     clusterId |-> clusterId[i], epoch |-> e,
                     fetchOffset |-> K!LogEndOffset(log[i]),
                     lastFetchedEpoch |-> K!LastEpoch(log[i])])
    /\ hasFetched' = [hasFetched EXCEPT ![i] = IF role[i] \in {K!Unattached, K!Voted} THEN @ ELSE FALSE]
    /\ fetchingSnapshot' = [fetchingSnapshot EXCEPT ![i] = K!NoSnapshotId]
    /\ UNCHANGED <<log, highWatermark, clusterId, votesGranted, endOffset, restarts, logStart, snapshots>>

\* The largest epoch (int32) a node may adopt, which no election can go past: a node at it starts none.
EpochMax == 2147483647

\* The KRaft action a trace event names, taken by node i.
Do(ev) ==
    LET e == ev.event
        i == ev.node
        s == ev.state
        M == Named(ev.msg)
    IN
    \* a message from the environment the model has no record for (an error for the whole request):
    \* handling it must leave the node as it was
    IF "outside" \in DOMAIN ev.msg THEN UNCHANGED kvars ELSE
    CASE e = "StartElection" -> AnyStartElection(i)
      [] e = "BecomeProspective" -> K!BecomeProspective(i)
      [] e = "AbandonProspective" -> K!AbandonProspective(i)
      \* the first leader of a cluster without an id appends the cluster-id record too
      [] e = "BecomeLeader" ->
            IF s.logEndOffset = Len(log[i]) + 2
            THEN K!BecomeLeaderAppending(i, <<[epoch |-> epoch[i], value |-> K!ClusterIdRecord]>>)
            \* kraft.version 1: LeaderChange, KRaftVersionRecord, VotersRecord in the epoch's first batch
            ELSE IF TraceReconfig /\ s.logEndOffset \in {Len(log[i]) + 3, Len(log[i]) + 4}
            THEN BecomeLeaderWritingVoters(i, s.logEndOffset = Len(log[i]) + 4)
            ELSE K!BecomeLeader(i)
      \* without FetchOutstanding: a duplicated fetch's extra copy does not hold the follower back
      [] e = "SendFetchRequest" ->
            IF ev.reply.type = "FetchRequest" /\ ev.reply.to \in TraceBootstrap
            THEN BootstrapFetch(i, ev.reply.to)
            ELSE K!SendFetch(i)
      [] e = "ClientAppend" -> ClientAppendBatch(i, s.logEndOffset - Len(log[i]))
      [] e = "LeaderProgressTimeout" -> K!LeaderProgressTimeout(i)
      [] e = "Resign" -> K!Resign(i)
      [] e = "Restart" -> RestartFinding(i, s)
      [] e = "HandleVoteRequest" -> \E m \in M : K!HandleVoteRequest(i, m)
      [] e = "HandleVoteResponse" -> \E m \in M : K!HandleVoteResponse(i, m)
      [] e = "HandleBeginQuorumEpochRequest" -> \E m \in M : K!HandleBeginQuorumEpochRequest(i, m)
      [] e = "HandleBeginQuorumEpochResponse" -> \E m \in M : K!HandleBeginQuorumEpochResponse(i, m)
      [] e = "HandleFetchRequest" -> CappedFetch(ev, i, M)
      [] e = "HandleFetchResponse" -> \E m \in M : K!HandleFetchResponse(i, m)
      [] e = "HandleEndQuorumEpochRequest" -> \E m \in M : K!HandleEndQuorumEpochRequest(i, m)
      [] e = "HandleEndQuorumEpochResponse" -> \E m \in M : K!HandleEndQuorumEpochResponse(i, m)
      \* snapshots (KIP-630): the event names the snapshot taken and the new log start
      [] e = "CreateSnapshot" -> K!CreateSnapshotAt(i, s.snapshotEndOffset)
      [] e = "CleanLog" -> K!CleanLogTo(i, s.logStartOffset)
      \* without FetchOutstanding, as SendFetchRequest
      [] e = "SendFetchSnapshotRequest" -> K!SendFetchSnapshot(i)
      [] e = "HandleFetchSnapshotRequest" -> \E m \in M : AnyHandleFetchSnapshotRequest(i, m)
      [] e = "HandleFetchSnapshotResponse" -> \E m \in M : K!HandleFetchSnapshotResponse(i, m)
      \* voter changes (KIP-853): the event's voterKey names the voter (s.voterId)
      [] e = "HandleAddRaftVoterRequest" -> AnyAddRaftVoter(i, s.voterId)
      [] e = "HandleApiVersionsResponse" -> ProbeAnswered(i, s, M)
      [] e = "HandleRemoveRaftVoterRequest" -> AnyRemoveRaftVoter(i, s.voterId)
      [] e = "HandleUpdateRaftVoterRequest" -> AnyUpdateRaftVoter(i, s.voterId)
      [] e = "VoterChangeTimeout" -> K!VoterChangeTimeout(i) /\ \A m \in K!ProbeOf(i) : m \notin DOMAIN msgs'
      \* endpoints only, over requests outside the model's network: no modelled state changes
      [] e = "SendUpdateRaftVoterRequest" -> UNCHANGED kvars
      [] e = "HandleUpdateRaftVoterResponse" -> UNCHANGED kvars
      \* rows derived from Send/Receive events (see trace_translate.py): the leader answers a parked
      \* long poll, the network duplicates or loses a message
      [] e = "AnswerParkedFetch" -> CappedParkedFetch(ev, i, M)
      \* ... and a BeginQuorumEpoch "resend" with no copy in flight is the leader's heartbeat to a voter its
      \* BecomeLeader did not send to (KIP-853: added since), KRaft's SendBeginQuorumEpoch
      [] e = "DuplicateMessage" ->
            \/ \E m \in M : K!DuplicateMessage(m)
            \/ /\ ev.msg.type = "BeginQuorumEpochRequest"
               /\ Matches(K!BeginQuorumEpochTo(ev.msg.from, ev.msg.to), ev.msg)
               /\ K!SendBeginQuorumEpoch(ev.msg.from, ev.msg.to)
      [] e = "DropMessage" -> \E m \in M : K!DropMessage(m)
      [] e = "EnvironmentSend" -> EnvironmentSend(ev)
      [] e = "EnvironmentReceive" -> EnvironmentReceive(ev)
      \* black-box: the harness killed the target (kill -9) and started it on the same directory
      [] e = "TargetRestart" -> K!Restart(i)
      [] e = "RefuseRequest" -> RefuseRequest
      [] e = "RefuseVoterKey" -> \E m \in M : RefuseVoterKey(i, m)
      [] OTHER -> FALSE

\* Remember the furthest event matched (short: TLC prints one line per event;
\* Python knows row l's event).
Record ==
    IF l' > TLCGet(1)
    THEN /\ TLCSet(1, l')
         /\ PrintT(<<"TRACE-MATCHED", l>>)
    ELSE TRUE

\* TLC makes every way an action-level \/ or \E holds a successor of its own, even
\* once all variables are assigned: Answered alone made one successor per message
\* in flight, all the same state, each fingerprinted.  A guard wrapped in Holds is
\* an IF condition, which TLC evaluates once, as a Boolean.
Holds(P) == IF P THEN TRUE ELSE FALSE

TraceStep ==
    /\ l < TraceStop
    /\ Do(TraceLog[l])
    /\ Holds(Answered(TraceLog[l]))
    /\ Holds(\/ TraceLog[l].event \in {"DuplicateMessage", "DropMessage", "AnswerParkedFetch",
                                      "EnvironmentSend", "EnvironmentReceive", "TargetRestart"}
             \/ BlackBox  \* no row states the target's state
             \/ StateMatches(TraceLog[l].node, TraceLog[l].state))
    /\ l' = l + 1
    /\ hidden' = 0
    /\ UpdateCache
    /\ Record

\* Black-box: how many records the target's next observed Fetch (row ev: an answer, or its own request)
\* shows beyond the end of its log.  A leader's log grows by client appends the harness cannot see as
\* KRaft messages (the records of KIP-631 broker RPCs, say); the answer that serves them says how many
\* there are.  A leader deposed before any answer served them says it in its first Fetch as a
\* follower: from its log end.
MissingRecords(ev) ==
    IF ev.event = "EnvironmentReceive" /\ "fetchOffset" \in DOMAIN ev.msg
    THEN ev.msg.fetchOffset
         + (IF "records" \in DOMAIN ev.msg THEN Len(ev.msg.records) ELSE 0)
         - Len(log[TraceTarget])
    ELSE 0

\* Black-box: the target's heartbeat to voter j (Kafka 3.9+), for the row that receives it, or for a later
\* row that receives it read late (TraceLateHeartbeats: the harness reads each virtual voter's connection in
\* turn, so under load the heartbeat to voter 3 is read after what the target did later and told voter 2,
\* its resignation or its next elections): sent while it led, in the same hidden steps as the one to voter 2.
HeartbeatReceived(j) ==
    \/ TraceLog[l].msg.type = "BeginQuorumEpochRequest" /\ TraceLog[l].msg.to = j
    \/ \E k \in TraceLateHeartbeats :
         /\ l < k /\ k <= l + ReceiveWindow
         /\ TraceLog[k].msg.to = j /\ TraceLog[k].msg.epoch = epoch[TraceTarget]

\* Black-box mode: a KRaft step of the target, the one node the trace observes.  The environment
\* (the harness's virtual voters) takes no KRaft step, the network neither loses nor copies (TCP).
\* Restarts are not hidden: the harness kills the target itself and says when (TargetRestart rows).
\* A fetch goes out once the harness has the previous one (SendFetch, as for node traces: not
\* FetchOutstanding, since the target's request timeout may send a new one while the harness still
\* holds the old one or its answer); never two unreceived copies, which TCP would have delivered.
\* Client appends are not among these steps: see HiddenAppend.
TargetNext ==
    LET i == TraceTarget IN
    \/ epoch[i] < EpochMax /\ AnyStartElection(i)
    \/ epoch[i] < EpochMax /\ K!BecomeProspective(i)
    \/ K!AbandonProspective(i)
    \/ TargetBecomeLeader(i)
    \* voter changes (KIP-853) the harness asked for and has no answer to yet
    \/ \E j \in PendingChanges("Add") : AddVoterAtOnce(i, j)
    \/ \E j \in PendingChanges("Remove") : K!HandleRemoveRaftVoterRequest(i, j)
    \/ \E j \in PendingChanges("Update") : K!HandleUpdateRaftVoterRequest(i, j)
    \* the leader's heartbeat (Kafka 3.9+), only for the row that receives it: a spare copy sent ahead
    \* is never taken out of the network (no epoch makes a request to the harness dead) and would tell
    \* states apart for the rest of the trace
    \* (to a voter of its set: TraceVoters, or one added since, KIP-853)
    \/ \E j \in K!Nodes :
         /\ HeartbeatReceived(j)
         /\ K!SendBeginQuorumEpoch(i, j)
    \* ... and a heartbeat it sent while it led may reach the harness after it resigned (StepDown keeps
    \* its epoch and leaderId): the same request, its sending hidden before the resignation, which the
    \* black-box trace cannot order against it
    \/ \E j \in K!Nodes :
         /\ TraceLog[l].msg.type = "BeginQuorumEpochRequest" /\ TraceLog[l].msg.to = j
         /\ role[i] = K!Resigned /\ leaderId[i] = i /\ j # i
         /\ K!Send(K!BeginQuorumEpochTo(i, j))
         /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, votesGranted,
                        endOffset, restarts, hasFetched, snapVars>>
    \/ /\ ~\E m \in LiveSet(msgs) : m.type = "FetchRequest" /\ m.from = i
       /\ K!SendFetch(i)
    \* snapshots (only in a trace that shows them: TraceSnapshots)
    \/ /\ ~\E m \in LiveSet(msgs) : m.type = "FetchSnapshotRequest" /\ m.from = i
       /\ K!SendFetchSnapshot(i)
    \/ K!CreateSnapshot(i)
    \/ K!CleanLog(i)
    \/ K!LeaderProgressTimeout(i)
    \/ K!Resign(i)
    \/ \E m \in LiveSet(msgs) :
         \/ K!HandleVoteRequest(i, m)
         \/ K!HandleVoteResponse(i, m)
         \/ K!HandleBeginQuorumEpochRequest(i, m)
         \/ K!HandleBeginQuorumEpochResponse(i, m)
         \/ K!HandleFetchRequest(i, m)
         \/ K!HandleFetchResponse(i, m)
         \/ K!AnswerParkedFetch(i, m)
         \/ K!HandleEndQuorumEpochRequest(i, m)
         \/ K!HandleEndQuorumEpochResponse(i, m)
         \/ AnyHandleFetchSnapshotRequest(i, m)
         \/ K!HandleFetchSnapshotResponse(i, m)

(***************************************************************************)
(* Black-box mode takes hidden steps lazily: only while the next row is   *)
(* the harness receiving a message of the target that is not in flight.   *)
(* Why nothing is lost: the other rows (the harness sending, a restart,   *)
(* receiving a message already in flight) are enabled whatever the target *)
(* does, and a step of the target commutes with them (it neither makes    *)
(* nor takes a message of the harness's, and the harness's messages only  *)
(* enable steps of the target).  So every behaviour that matches the      *)
(* trace has a reordering with the same rows in which the target's steps  *)
(* come just before the row that observes their effect, and that one is   *)
(* explored, up to HiddenSteps in a row.  A PASS stays sound either way:  *)
(* every explored state is reached by KRaft steps.  Eager hidden steps    *)
(* explored every interleaving of elections, fetches and appends with     *)
(* the harness's messages: a 67-row session trace reached 300,000 states  *)
(* in a minute without getting past row 18.                               *)
(*                                                                         *)
(* A restart (TargetRestart) is the one row a step of the target does not *)
(* commute with: what the target sent just before the harness's kill -9   *)
(* (a Fetch answer, a heartbeat, still in the sockets) may reach the      *)
(* harness after the relaunch, and only the incarnation before the kill   *)
(* could send it.  So hidden steps may come before a restart too, while   *)
(* one of the next ReceiveWindow rows receives a message of the target    *)
(* not in flight (Received: only such messages), from the state before    *)
(* the kill: nothing newer than what it could have sent.                  *)
(***************************************************************************)
NeedsHiddenStep(ev) ==
    \/ ev.event = "EnvironmentReceive" /\ Named(ev.msg) = {}
    \/ /\ ev.event = "TargetRestart"
       /\ \E k \in (l + 1)..K!Min(l + ReceiveWindow, Len(TraceLog)) :
            TraceLog[k].event = "EnvironmentReceive" /\ Named(TraceLog[k].msg) = {}

\* The target is killed (kill -9, a TargetRestart row) within the window ...
KilledSoon == \E r \in l..K!Min(l + ReceiveWindow, Len(TraceLog)) : TraceLog[r].event = "TargetRestart"
\* ... or its life ends otherwise: the trace's last rows (the harness stopped it and closed the sockets).
LifeCutSoon == Len(TraceLog) <= l + ReceiveWindow \/ KilledSoon

\* Black-box: what the target sends the harness arrives (TCP) and is recorded within moments, so a
\* hidden step sends only messages of a kind (type, sender, receiver) one of the next ReceiveWindow rows
\* receives (a parked fetch, the target's own note to itself, is no message: its answer is).  Not the
\* contents: a wrong answer must fail where the harness received it, not at the row before.  Without this, an election no row shows (its Vote requests never
\* received) and the same behaviour without it were both followed to the end of the trace.
Received(m) ==
    \E k \in l..K!Min(l + ReceiveWindow, Len(TraceLog)) :
        LET r == TraceLog[k] IN
        r.event = "EnvironmentReceive" /\ r.msg.type = m.type /\ r.msg.from = m.from /\ r.msg.to = m.to
\* ... or never, for a Vote request of an election the harness does see (another of the step's messages is
\* received): one whose kind (type, sender, receiver, epoch) no later row receives was lost (a partitioned
\* virtual voter holds the target's requests, then drops the connection; KRaft loses messages too).
\* TraceLastReceive (TraceData): the last row that receives each kind.  (Any message, or an election nobody
\* sees: a 550-row session trace took 80 s or more instead of 15 s.)
NeverReceived(m) ==
    LET k == <<m.type, m.from, m.to, IF "epoch" \in DOMAIN m THEN m.epoch ELSE -1>>
    IN /\ \/ /\ m.type = "VoteRequest"
             \* ... to a voter that holds an earlier request of the target it never answered (TraceHeld: the
             \* harness's partition; its connection reads nothing more)
             /\ \E h \in TraceHeld : h.node = m.to /\ h.first <= l
          \* ... or any message sent just before the target's life is cut: the election's Vote to one voter
          \* was read, the one to the other was still in the socket
          \/ LifeCutSoon
       /\ k \notin DOMAIN TraceLastReceive \/ TraceLastReceive[k] < l
SendsReceived ==
    \* (a copy of one in flight counts: a dead one left in must not let a new copy go unchecked)
    LET sent == {m \in DOMAIN msgs' : m.to # TraceTarget /\ (m \notin DOMAIN msgs \/ msgs'[m] > msgs[m])}
    IN /\ \A m \in sent : Received(m) \/ NeverReceived(m)
       /\ \/ sent = {}
          \/ \E m \in sent : Received(m)
          \* ... or an election no row shows, when a row of the window is the target's answer to a Vote in
          \* the next epoch, naming no leader, and a kill came before its own Vote requests could be read
          \* (relaunched, it refused a Vote in its new epoch and was killed again while it connected to the
          \* voters: KIP-595/CrashWindow/1 under load; or it stood just before a kill and refused after the
          \* relaunch).  Only there: near every kill of a snapshot case it doubled the states; and not at the
          \* trace's end, where it would excuse any wrong epoch in the last answers.
          \/ /\ KilledSoon
             /\ \A m \in sent : m.type = "VoteRequest"
             /\ \E k \in l..K!Min(l + ReceiveWindow, Len(TraceLog)) :
                  LET r == TraceLog[k]
                  IN /\ r.event = "EnvironmentReceive" /\ r.msg.type = "VoteResponse"
                     /\ r.msg.epoch = epoch[TraceTarget] + 1 /\ r.msg.leaderId = K!Nil

\* Black-box: the last hidden step before a row that receives a message of the target leaves that
\* message in flight, or the records (HiddenAppend) or snapshot (HiddenSnapshot) it shows missing, which
\* take no count: from any other state no step can match the row, so none is explored.
CanMatch(ev) == Named(ev.msg) # {} \/ MissingRecords(ev) > 0 \/ "snapshotEndOffset" \in DOMAIN ev.msg
NotStuck ==
    hidden + 1 = HiddenSteps /\ TraceLog[l].event = "EnvironmentReceive" => (CanMatch(TraceLog[l]))'

\* A step the trace did not record (harness traces only).
HiddenStep ==
    /\ hidden < HiddenSteps
    /\ l < TraceStop
    /\ IF BlackBox THEN NeedsHiddenStep(TraceLog[l]) /\ TargetNext /\ Holds(SendsReceived)
       ELSE K!Next \/ \E i \in K!Nodes : AnyStartElection(i)
    /\ hidden' = hidden + 1
    /\ UpdateCache
    /\ UNCHANGED l
    /\ BlackBox => Holds(NotStuck)

\* Black-box: the target's client appends, as the one batch the next row needs (MissingRecords), not
\* record by record.  Outside the HiddenSteps count: the row fixes the batch, so the step adds one
\* successor at most, and it is disabled once the records are there; counted, a deposed leader's
\* appends, its BeginQuorumEpoch handling and its Fetch to the new leader took three steps.
HiddenAppend ==
    /\ BlackBox
    /\ l < TraceStop
    /\ NeedsHiddenStep(TraceLog[l])
    /\ LET n == MissingRecords(TraceLog[l]) IN n > 0 /\ ClientAppendBatch(TraceTarget, n)
    /\ UpdateCache
    /\ UNCHANGED <<l, hidden>>

\* Black-box, snapshots (KIP-630): the snapshot the target names in its next observed answer (a Fetch
\* answer's SnapshotId, a FetchSnapshot answer), taken at that committed offset; outside the HiddenSteps
\* count as HiddenAppend, since the row fixes it and it is disabled once taken (cleaning the log up to it
\* stays a counted hidden step, CleanLog in TargetNext).
HiddenSnapshot ==
    /\ BlackBox
    /\ TraceSnapshots
    /\ l < TraceStop
    /\ NeedsHiddenStep(TraceLog[l])
    /\ "snapshotEndOffset" \in DOMAIN TraceLog[l].msg
    /\ TraceLog[l].msg.from = TraceTarget
    /\ K!CreateSnapshotAt(TraceTarget, TraceLog[l].msg.snapshotEndOffset)
    /\ UpdateCache
    /\ UNCHANGED <<l, hidden>>

TraceNext == TraceStep \/ HiddenStep \/ HiddenAppend \/ HiddenSnapshot

TraceSpec == TraceInit /\ [][TraceNext]_<<kvars, l, hidden, epochCache>>

\* Once the whole trace is matched no step is enabled and TLC stops; Python reads how far
\* TRACE-MATCHED got.  TraceNotDone is violated exactly when the whole trace has been matched
\* (kept for `kraft-tck tlc`-style runs that want the witness behaviour printed).
TraceNotDone == l <= Len(TraceLog)

\* The state the trace ends in (validate_trace prints it for the prefix before a failed event).
\* (TraceStop: one past the last row matched, Len(TraceLog) + 1 but for that run, which keeps the rows
\* after it for SendsReceived to look ahead.)
TraceEndState ==
    l < TraceStop \/
    PrintT(<<"TRACE-STATE", [role |-> role, epoch |-> epoch, votedId |-> votedId,
                             leaderId |-> leaderId, log |-> log, highWatermark |-> highWatermark,
                             msgs |-> msgs], "TRACE-END">>)

\* LogMatching in linear time (over snapshot + log: log[i], see KRaft.tla "Snapshots"): two records of one epoch at one offset are equal and so are
\* the epochs just below them, which by induction down the log is KRaft's LogMatching.
LogMatchingLinear ==
    \A i, j \in K!Nodes : i # j =>
        \A n \in 1..K!Min(Len(log[i]), Len(log[j])) :
            log[i][n].epoch = log[j][n].epoch =>
                /\ log[i][n] = log[j][n]
                /\ n = 1 \/ log[i][n - 1].epoch = log[j][n - 1].epoch

\* K!ElectionSafety and K!VoteOnce, stated over the evidence instead of over every node and epoch: the
\* same claims (which node leads epoch e; for whom voter v voted in epoch e), from the same sources, for the
\* same epochs (those some node is in), and at most one per epoch (per voter and epoch).  Every state
\* checks them; the quantifier over nodes and epochs, with a pass over the network for each pair, was
\* the largest share of a validation's evaluations.
TraceEpochs == {epoch[i] : i \in K!Nodes}
ElectionSafetyPairs ==
    LET claims == {<<epoch[i], i>> : i \in {x \in K!Nodes : role[x] = K!Leader}}
                  \cup {<<epoch[k], leaderId[k]>> : k \in {x \in K!Nodes : leaderId[x] # K!Nil}}
                  \cup {<<m.epoch, m.leaderId>> :
                          m \in {x \in DOMAIN msgs : x.type = "BeginQuorumEpochRequest"
                                                    /\ x.clusterId = TraceCluster /\ x.epoch \in TraceEpochs}}
    IN \A a, b \in claims : a[1] = b[1] => a[2] = b[2]
VoteOncePairs ==
    LET votes == {<<v, epoch[v], votedId[v]>> : v \in {x \in K!Nodes : votedId[x] # K!Nil}}
                 \cup UNION {{<<v, epoch[c], c>> : v \in votesGranted[c] \cap K!Nodes} :
                             c \in {x \in K!Nodes : role[x] \in {K!Candidate, K!Leader}}}
                 \cup {<<m.from, m.epoch, m.to>> :
                         m \in {x \in DOMAIN msgs : x.type = "VoteResponse" /\ x.granted /\ ~K!IsPreVote(x)
                                                   /\ x.from \in K!Nodes /\ x.epoch \in TraceEpochs}}
    IN \A a, b \in votes : a[1] = b[1] /\ a[2] = b[2] => a[3] = b[3]

\* The KRaft invariants still hold along the witness.  The ones over whole logs cost a pass over
\* every log, so they are checked every TraceLogCheckEvery events and at the end of the trace.
TraceSafety ==
    /\ ElectionSafetyPairs
    /\ VoteOncePairs
    /\ (l > Len(TraceLog) \/ l % TraceLogCheckEvery = 0) => LogMatchingLinear /\ K!LeaderCompleteness
=============================================================================
