------------------------------- MODULE MCKRaft -------------------------------
(***************************************************************************)
(* Bounded model of KRaft for TLC.  The bounds are state constraints, so   *)
(* a state past a bound is still checked against every invariant but not  *)
(* explored further.  Voters (and observers) are model values: nothing in *)
(* KRaft orders or computes with node ids, so permuting them maps          *)
(* behaviours onto behaviours and symmetry reduction is sound.            *)
(***************************************************************************)
EXTENDS KRaft

CONSTANTS
    MaxEpoch,      \* no epoch beyond this is explored
    MaxLogLen,     \* no log longer than this is explored
    MaxMsgs,       \* distinct messages in flight
    MaxCopies,     \* copies of one message in flight (duplication)
    MaxForeign,    \* foreign-cluster requests in flight
    MaxRestarts    \* Restart steps in a behaviour

ForeignInFlight == {m \in DOMAIN msgs : m.type \in Requests /\ m.clusterId = ForeignCluster}

StateBound ==
    /\ \A i \in Nodes : epoch[i] <= MaxEpoch
    /\ \A i \in Nodes : Len(log[i]) <= MaxLogLen
    /\ Cardinality(DOMAIN msgs) <= MaxMsgs
    /\ \A m \in DOMAIN msgs : msgs[m] <= MaxCopies
    /\ Cardinality(ForeignInFlight) <= MaxForeign
    /\ restarts <= MaxRestarts

\* Symmetry over voters and, separately, over observers.
Symmetry == Permutations(Voters) \cup Permutations(Observers)
=============================================================================
