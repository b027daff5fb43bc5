---------------------------- MODULE MCKRaftPreVote ----------------------------
(***************************************************************************)
(* A voter cut off from a stable leader comes back (KIP-996 "Motivation"). *)
(* The start state: L leads epoch 1 with its LeaderChange record committed *)
(* on all three voters; F has fetched from L since it began following it   *)
(* (Kafka's FollowerState.hasFetchedFromLeader), and so had R before it    *)
(* was cut off.  From here L and F stay connected: F keeps fetching, so L  *)
(* keeps its quorum (no LeaderProgressTimeout) and F's fetch timer never   *)
(* fires; R, the voter that was cut off, may time out at any moment, as    *)
(* often as it likes, and every message it sends arrives (or not) in any   *)
(* order once it is reconnected.                                           *)
(*                                                                         *)
(* LeaderUndisturbed: L stays the leader of epoch 1.  It holds with        *)
(* PreVote = TRUE: R's pre-votes are refused by the Leader and by a        *)
(* Follower that has fetched, so R never becomes a Candidate.  It fails    *)
(* with PreVote = FALSE (Kafka 3.x): R's timeout makes it a Candidate of   *)
(* epoch 2 and its Vote request moves L to epoch 2 (MCKRaftPreVoteOff.cfg, *)
(* tests/tla/test_prevote.py).                                            *)
(***************************************************************************)
EXTENDS MCKRaft

CONSTANTS L, F, R   \* the leader, the follower that stays connected, the reconnecting voter

ASSUME Voters = {L, F, R}

LC1 == [epoch |-> 1, value |-> LeaderChange]

ReconnectInit ==
    /\ role = (L :> Leader @@ F :> Follower @@ R :> Follower)
    /\ epoch = [i \in Nodes |-> 1]
    /\ votedId = [i \in Nodes |-> L]
    /\ leaderId = [i \in Nodes |-> L]
    /\ log = [i \in Nodes |-> <<LC1>>]
    /\ highWatermark = [i \in Nodes |-> 1]
    /\ clusterId = [i \in Nodes |-> LocalCluster]
    /\ votesGranted = (L :> {L, F, R} @@ F :> {} @@ R :> {})
    /\ endOffset = [i \in Nodes |-> [j \in Voters |-> IF i = L THEN 1 ELSE 0]]
    /\ msgs = <<>>
    /\ restarts = 0
    /\ hasFetched = (L :> FALSE @@ F :> TRUE @@ R :> TRUE)
    /\ SnapshotInit

\* MCNext with only R's timers firing.
ReconnectNext ==
    \/ epoch[R] < MaxEpoch /\ BecomeProspective(R)
    \/ epoch[R] < MaxEpoch /\ StartElection(R)
    \/ AbandonProspective(R)
    \/ \E i \in Nodes : BecomeLeader(i)
    \/ \E i \in Nodes, j \in Voters : ~InFlight(BeginQuorumEpochTo(i, j)) /\ SendBeginQuorumEpoch(i, j)
    \/ \E i \in Nodes : SendFetchRequest(i)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleVoteResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleBeginQuorumEpochResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleFetchResponse(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : AnswerParkedFetch(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochRequest(i, m)
    \/ \E i \in Nodes, m \in DOMAIN msgs : HandleEndQuorumEpochResponse(i, m)
    \/ \E m \in DOMAIN msgs : AllowDrop /\ DropMessage(m)

ReconnectSpec == ReconnectInit /\ [][ReconnectNext]_vars

\* The reconnecting voter does not disrupt the leader: L leads epoch 1 for ever.
LeaderUndisturbed == role[L] = Leader /\ epoch[L] = 1
=============================================================================
