------------------------------ MODULE TraceKRaft ------------------------------
(***************************************************************************)
(* Trace validation (Cirstea, Kuppe, Loillier, Merz 2024): KRaft           *)
(* constrained by a recorded trace.  Python (kraft_tck.tla.trace_module)   *)
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
(* Messages are not matched field by field: a handler event is enabled     *)
(* only if a fitting message is in flight, which the earlier events of the *)
(* trace have sent.  Hidden steps (HiddenSteps > 0, for black-box harness  *)
(* traces that see only the target's messages) let any KRaft action of any *)
(* node happen between two events, at most HiddenSteps in a row; a node  *)
(* trace in which one message is handled twice (network duplication)     *)
(* needs HiddenSteps >= 1 too.  Node traces default to 0: every hidden    *)
(* step multiplies the behaviours TLC must rule out before saying FAIL.   *)
(***************************************************************************)
EXTENDS TraceData, Integers, Sequences, FiniteSets, TLC

VARIABLES role, epoch, votedId, leaderId, log, highWatermark, clusterId,
          votesGranted, endOffset, msgs, restarts,
          l,      \* the next trace event to match
          hidden  \* hidden steps taken since the last matched event

K == INSTANCE KRaft WITH
        Voters <- TraceVoters, Observers <- TraceObservers, Values <- {"record"},
        LocalCluster <- TraceCluster, ForeignCluster <- "<foreign>",
        MaxFetchRecords <- TraceMaxFetchRecords

kvars == <<role, epoch, votedId, leaderId, log, highWatermark, clusterId,
           votesGranted, endOffset, msgs, restarts>>

TraceInit ==
    /\ K!Init
    /\ l = 1
    /\ hidden = 0
    /\ TLCSet(1, 0)

\* The reported state of node i, compared with the spec's state after the step.
StateMatches(i, s) ==
    /\ role'[i] = s.role
    /\ epoch'[i] = s.epoch
    /\ votedId'[i] = s.votedId
    /\ leaderId'[i] = s.leaderId
    /\ Len(log'[i]) = s.logEndOffset
    \* Kafka reports LastFetchedEpoch -1 for an empty log, the model's LastEpoch 0
    /\ IF log'[i] = <<>> THEN s.lastFetchedEpoch \in {0, -1}
       ELSE K!LastEpoch(log'[i]) = s.lastFetchedEpoch
    /\ highWatermark'[i] = s.highWatermark

\* ClientAppend of a batch: the leader appends n records of its epoch.
ClientAppendBatch(i, n) ==
    /\ role[i] = "Leader"
    /\ n >= 1
    /\ log' = [log EXCEPT ![i] = @ \o [k \in 1..n |-> [epoch |-> epoch[i], value |-> "record"]]]
    /\ UNCHANGED <<role, epoch, votedId, leaderId, highWatermark, clusterId,
                   votesGranted, endOffset, msgs, restarts>>

\* The KRaft action a trace event names, taken by node i.
Do(ev) ==
    LET e == ev.event
        i == ev.node
        s == ev.state
    IN
    CASE e = "StartElection" -> K!StartElection(i)
      \* the first leader of a cluster without an id appends the cluster-id record too
      [] e = "BecomeLeader" ->
            IF s.logEndOffset = Len(log[i]) + 2
            THEN K!BecomeLeaderAppending(i, <<K!ClusterIdRecord>>)
            ELSE K!BecomeLeader(i)
      [] e = "SendFetchRequest" -> K!SendFetchRequest(i)
      [] e = "ClientAppend" -> ClientAppendBatch(i, s.logEndOffset - Len(log[i]))
      [] e = "LeaderProgressTimeout" -> K!LeaderProgressTimeout(i)
      [] e = "Resign" -> K!Resign(i)
      [] e = "Restart" -> K!Restart(i)
      [] e = "HandleVoteRequest" -> \E m \in DOMAIN msgs : K!HandleVoteRequest(i, m)
      [] e = "HandleVoteResponse" -> \E m \in DOMAIN msgs : K!HandleVoteResponse(i, m)
      [] e = "HandleBeginQuorumEpochRequest" ->
            \E m \in DOMAIN msgs : K!HandleBeginQuorumEpochRequest(i, m)
      [] e = "HandleBeginQuorumEpochResponse" ->
            \E m \in DOMAIN msgs : K!HandleBeginQuorumEpochResponse(i, m)
      [] e = "HandleFetchRequest" -> \E m \in DOMAIN msgs : K!HandleFetchRequest(i, m)
      [] e = "HandleFetchResponse" -> \E m \in DOMAIN msgs : K!HandleFetchResponse(i, m)
      [] e = "HandleEndQuorumEpochRequest" ->
            \E m \in DOMAIN msgs : K!HandleEndQuorumEpochRequest(i, m)
      [] e = "HandleEndQuorumEpochResponse" ->
            \E m \in DOMAIN msgs : K!HandleEndQuorumEpochResponse(i, m)
      \* network faults seen in the trace's Send/Receive events (see trace_module.py):
      \* a message of type ev.msgType from ev.peer to i was duplicated ...
      [] e = "DuplicateMessage" ->
            \E m \in DOMAIN msgs : /\ m.type = ev.msgType /\ m.from = ev.peer /\ m.to = i
                                 /\ K!DuplicateMessage(m)
      \* ... or one from i to ev.peer was lost
      [] e = "DropMessage" ->
            \E m \in DOMAIN msgs : /\ m.type = ev.msgType /\ m.from = i /\ m.to = ev.peer
                                 /\ K!DropMessage(m)
      [] OTHER -> FALSE

\* Remember the furthest event matched and the state after it.
Record ==
    IF l' > TLCGet(1)
    THEN /\ TLCSet(1, l')
         /\ PrintT(<<"TRACE-MATCHED", l, TraceLog[l].seq,
                     [role |-> role', epoch |-> epoch', votedId |-> votedId',
                      leaderId |-> leaderId', log |-> log',
                      highWatermark |-> highWatermark', msgs |-> msgs'], "TRACE-END">>)
    ELSE TRUE

TraceStep ==
    /\ l <= Len(TraceLog)
    /\ Do(TraceLog[l])
    /\ TraceLog[l].event \in {"DuplicateMessage", "DropMessage"}
       \/ StateMatches(TraceLog[l].node, TraceLog[l].state)
    /\ l' = l + 1
    /\ hidden' = 0
    /\ Record

\* The leader answering a parked long-poll fetch has no event of its own in
\* any trace (only a Send), so it may happen between any two events; each
\* one consumes a parked fetch, so they cannot repeat without end.
ParkedAnswer ==
    /\ l <= Len(TraceLog)
    /\ \E i \in K!Nodes, m \in DOMAIN msgs : K!AnswerParkedFetch(i, m)
    /\ UNCHANGED <<l, hidden>>

\* A step the trace did not record (black-box traces only).
HiddenStep ==
    /\ hidden < HiddenSteps
    /\ l <= Len(TraceLog)
    /\ K!Next
    /\ hidden' = hidden + 1
    /\ UNCHANGED l

TraceNext == TraceStep \/ ParkedAnswer \/ HiddenStep

TraceSpec == TraceInit /\ [][TraceNext]_<<kvars, l, hidden>>

\* Violated exactly when the whole trace has been matched: TLC's
\* counterexample is then a witness behaviour.
TraceNotDone == l <= Len(TraceLog)

\* The KRaft invariants still hold along the witness.
TraceSafety == K!ElectionSafety /\ K!VoteOnce /\ K!LogMatching /\ K!LeaderCompleteness
=============================================================================
