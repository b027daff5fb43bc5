------------------------------- MODULE MCKRaft -------------------------------
(***************************************************************************)
(* Bounded model of KRaft for TLC.  The bounds are state constraints, so   *)
(* a state past a bound is still checked against every invariant but not  *)
(* explored further; the network faults can be switched off per config to *)
(* keep the small model small.  Voters (and observers) are model values:   *)
(* nothing in KRaft orders or computes with node ids, so permuting them    *)
(* maps behaviours onto behaviours and symmetry reduction is sound.        *)
(***************************************************************************)
EXTENDS KRaft

CONSTANTS
    MaxEpoch,      \* no epoch beyond this is explored
    MaxLogLen,     \* no log longer than this is explored
    MaxMsgs,       \* distinct messages in flight
    MaxCopies,     \* copies of one message in flight (duplication)
    MaxForeign,    \* foreign-cluster requests in flight
    MaxRestarts,   \* Restart steps in a behaviour
    AllowDrop,     \* BOOLEAN: enable DropMessage
    AllowDuplicate, \* BOOLEAN: enable DuplicateMessage
    MaxChanges     \* VotersRecords in one log (KIP-853; no change is made with Reconfig = FALSE)

NumConfigs(lg) == Cardinality({k \in 1..Len(lg) : IsConfigEntry(lg[k])})

ForeignInFlight == {m \in DOMAIN msgs : m.type \in Requests /\ m.clusterId = ForeignCluster}

\* KRaft's Next with the bounds as guards, so a disabled fault or a spent
\* budget costs nothing.  Each disjunct still names one KRaft action.
MCNext ==
    \* a Prospective only matters if it may still start an election
    \/ \E i \in Nodes : epoch[i] < MaxEpoch /\ BecomeProspective(i)
    \/ \E i \in Nodes : epoch[i] < MaxEpoch /\ StartElection(i)
    \/ \E i \in Nodes : AbandonProspective(i)
    \/ \E i \in Nodes : BecomeLeader(i)
    \* a heartbeat only while no copy of it is in flight (as Kafka sends only on a free connection)
    \/ \E i, j \in Nodes : ~InFlight(BeginQuorumEpochTo(i, j)) /\ SendBeginQuorumEpoch(i, j)
    \/ \E i \in Nodes : SendFetchRequest(i)
    \/ \E i \in Nodes, v \in Values : Len(log[i]) < MaxLogLen /\ ClientAppend(i, v)
    \/ \E i \in Nodes : LeaderProgressTimeout(i)
    \/ \E i \in Nodes : Resign(i)
    \/ \E i \in Nodes : restarts < MaxRestarts /\ Restart(i)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : AnswerParkedFetch(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochResponse(i, m)
    \* snapshots (KIP-630): disabled unless Snapshots = TRUE (CreateSnapshot needs it, and the rest needs a snapshot)
    \/ \E i \in Nodes : CreateSnapshot(i)
    \/ \E i \in Nodes : CleanLog(i)
    \/ \E i \in Nodes : SendFetchSnapshotRequest(i)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchSnapshotRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchSnapshotResponse(i, m)
    \* voter changes (KIP-853): disabled unless Reconfig = TRUE
    \/ \E i, j \in Nodes : NumConfigs(log[i]) < MaxChanges /\ HandleAddRaftVoterRequest(i, j)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleApiVersionsResponse(i, m)
    \/ \E i, j \in Nodes : NumConfigs(log[i]) < MaxChanges /\ HandleRemoveRaftVoterRequest(i, j)
    \/ \E i \in Nodes : VoterChangeTimeout(i)
    \/ \E m \in DOMAIN msgs : AllowDrop /\ DropMessage(m)
    \/ \E m \in DOMAIN msgs : AllowDuplicate /\ msgs[m] < MaxCopies /\ DuplicateMessage(m)
    \/ \E m \in DOMAIN msgs : Cardinality(ForeignInFlight) < MaxForeign /\ ForeignClusterCopy(m)

MCSpec == Init /\ [][MCNext]_vars

\* BecomeLeader may still grow a log to MaxLogLen + 1; sends may exceed
\* MaxMsgs, and handling a duplicated request twice puts a second copy of
\* its answer in flight.  Such states are checked but not expanded.
StateBound ==
    /\ \A i \in Nodes : Len(log[i]) <= MaxLogLen
    /\ Cardinality(DOMAIN msgs) <= MaxMsgs
    /\ \A m \in DOMAIN msgs : msgs[m] <= MaxCopies

\* Symmetry over voters and, separately, over observers.
Symmetry == Permutations(Voters) \cup Permutations(Observers)
=============================================================================
