------------------------- MODULE MCKRaftSnapshotBroken -------------------------
(***************************************************************************)
(* A broken variant of KIP-630's snapshot rule, for TLC to catch: a node   *)
(* snapshots its state machine at any offset of its log, committed or not *)
(* (CreateSnapshotUncommitted forgets "end offset <= high watermark", the  *)
(* check of Kafka's KafkaMetadataLog.createNewSnapshot and of the core's   *)
(* create_snapshot).  A leader that snapshots its own LeaderChange record  *)
(* before a majority has it, then loses the epoch, holds as "committed" a  *)
(* record the next leader does not have: LeaderCompleteness, stated over   *)
(* snapshot + log, is violated (tests/tla/test_snapshots.py).              *)
(* MCKRaftSnapshot.cfg is the correct model at a similar bound.           *)
(***************************************************************************)
EXTENDS MCKRaft

CreateSnapshotUncommitted(i) ==
    \E n \in 1..Len(log[i]) :
        /\ Snapshots
        /\ n > logStart[i]
        /\ n \notin snapshots[i]
        /\ snapshots' = [snapshots EXCEPT ![i] = @ \cup {n}]
        /\ UNCHANGED <<role, epoch, votedId, leaderId, log, highWatermark, clusterId, hasFetched,
                       logStart, fetchingSnapshot, leaderVars, msgs, restarts>>

BrokenNext ==
    \/ MCNext
    \/ \E i \in Nodes : CreateSnapshotUncommitted(i)

BrokenSpec == Init /\ [][BrokenNext]_vars
=============================================================================
