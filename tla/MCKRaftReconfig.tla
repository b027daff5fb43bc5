--------------------------- MODULE MCKRaftReconfig ---------------------------
(***************************************************************************)
(* Voter changes (KIP-853) under TLC, from a running cluster: L leads      *)
(* epoch 1 of the initial voter set InitVoters = {L, F} (a bootstrap        *)
(* checkpoint's set, kraft.version 1) with its LeaderChange committed on   *)
(* both; J, the joiner, follows L as an observer with an empty log.  From  *)
(* here every KRaft step of MCNext may happen: L (or a later leader, up to *)
(* MaxEpoch) adds J (HandleAddRaftVoterRequest, the ApiVersions probe,     *)
(* HandleApiVersionsResponse's VotersRecord), removes a voter, itself      *)
(* included, times a change out; elections run over whatever voter set     *)
(* each node has in its log.  (HandleUpdateRaftVoterRequest, a VotersRecord *)
(* of the same set, is left to trace validation.)                          *)
(* log.  Starting after the first election spares TLC the interleavings   *)
(* before it, which the static models (MCKRaft*.cfg) already cover.       *)
(* MCKRaftReconfig.cfg checks every invariant of the static model and the *)
(* three of KIP-853 (KRaft.tla "KIP-853"); MCKRaftReconfigTwoAtOnce.cfg   *)
(* drops the one-change-at-a-time rule and TLC finds the unsafe history   *)
(* (tests/tla/test_reconfig.py).                                          *)
(***************************************************************************)
EXTENDS MCKRaft

CONSTANTS L, F, J   \* the leader, the other initial voter, the joiner

ASSUME Voters = {L, F} /\ Observers = {J}

LC1 == [epoch |-> 1, value |-> LeaderChange]

RunningInit ==
    /\ role = (L :> Leader @@ F :> Follower @@ J :> Follower)
    /\ epoch = [i \in Nodes |-> 1]
    /\ votedId = (L :> L @@ F :> L @@ J :> Nil)
    /\ leaderId = [i \in Nodes |-> L]
    /\ log = (L :> <<LC1>> @@ F :> <<LC1>> @@ J :> <<>>)
    /\ highWatermark = (L :> 1 @@ F :> 1 @@ J :> 0)
    /\ clusterId = [i \in Nodes |-> LocalCluster]
    /\ votesGranted = (L :> {L, F} @@ F :> {} @@ J :> {})
    /\ endOffset = [i \in Nodes |-> [j \in Tracked |-> IF i = L /\ j = F THEN 1 ELSE 0]]
    /\ msgs = <<>>
    /\ restarts = 0
    /\ hasFetched = [i \in Nodes |-> FALSE]
    /\ SnapshotInit

RunningSpec == RunningInit /\ [][MCNext]_vars

\* Not invariants: reachability checks (tests/tla/test_reconfig.py makes TLC report them violated, which
\* shows the model does add and remove voters).
JoinerNeverVoter == \A i \in Nodes : J \notin Config(i)
NoVoterRemoved == \A i \in Nodes : InitVoters \subseteq Config(i)
NoAddThenRemove == \A i \in Nodes : ~(J \in Config(i) /\ ~(InitVoters \subseteq Config(i)))
\* a leader that removed itself and resigned once that committed (Resign, cause RemovedFromVoters)
NoResignAfterRemoval == \A i \in Nodes : ~(role[i] = Resigned /\ i \notin Config(i) /\ LastConfigCommitted(i))
=============================================================================
