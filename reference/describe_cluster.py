"""DescribeCluster (api key 60) as a KRaft controller answers it (KIP-919, Kafka 3.7+).

``kafka-metadata-quorum describe --status`` reads the ClusterId line from it: with
``--bootstrap-controller`` Kafka's admin client sends DescribeCluster v1+ with EndpointType 2 (controllers)
to a controller, and prints the answer's ClusterId (``MetadataQuorumCommand.handleDescribeStatus``).

The answer follows Kafka's ``ControllerApis.handleDescribeCluster`` and
``AuthHelper.computeDescribeClusterResponse`` (4.0-SNAPSHOT, the same in 3.9):

* a controller describes controllers only: EndpointType 2 is answered; 1 (brokers) is
  MISMATCHED_ENDPOINT_TYPE and any other value UNSUPPORTED_ENDPOINT_TYPE, both INVALID_REQUEST at v0 (which
  has no EndpointType field, so a v0 request means brokers and is always refused by a controller);
* ``Brokers`` lists the controllers with an endpoint on the listener the request came in on
  (``ControllerRegistrationsPublisher.describeClusterControllers``; rack null, not fenced);
* ``ControllerId`` is the raft leader, or -1 when no leader is known or the leader is not in that list;
* ``ClusterAuthorizedOperations`` stays Integer.MIN_VALUE unless asked for; asked for, without an
  authorizer (this node has none), it is every operation a CLUSTER resource supports.

Pure: the node passes its cluster id, the leader it knows and the controllers' endpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kraft_tck.spec.errors import Errors

DESCRIBE_CLUSTER = 60
#: Kafka 3.9 serves v0-1 on controllers, 4.0 v0-2 (v2: IncludeFencedBrokers / IsFenced, KIP-1073).
SERVED_API_VERSIONS: dict[int, tuple[int, int]] = {DESCRIBE_CLUSTER: (0, 2)}

UNKNOWN_ENDPOINT, BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 0, 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}

#: The schema's default: authorized operations not asked for.
OPERATIONS_NOT_ASKED = -(2**31)
#: AclOperation codes a CLUSTER resource supports (AclEntry.supportedOperations): CREATE 5, ALTER 7,
#: DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, as a bit field.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))

#: A controller's endpoint: (node id, host, port).
ControllerEndpoint = tuple[int, str, int]


def answer(body: dict[str, Any], version: int, cluster_id: str, leader_id: int,
           controllers: Sequence[ControllerEndpoint]) -> dict[str, Any]:
    """The DescribeCluster response body a controller sends for ``body`` at ``version``."""
    asked = body.get("EndpointType", BROKER_ENDPOINT) if version >= 1 else BROKER_ENDPOINT
    if asked not in _ENDPOINT_NAMES:
        error = Errors.INVALID_REQUEST if version == 0 else Errors.UNSUPPORTED_ENDPOINT_TYPE
        return _refusal(error, f"Unsupported endpoint type {asked}")
    if asked != CONTROLLER_ENDPOINT:
        error = Errors.INVALID_REQUEST if version == 0 else Errors.MISMATCHED_ENDPOINT_TYPE
        return _refusal(error, "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint "
                               f"of type {_ENDPOINT_NAMES[asked]}")
    nodes = [{"BrokerId": node_id, "Host": host, "Port": port, "Rack": None, "IsFenced": False}
             for node_id, host, port in sorted(controllers)]
    known = {n["BrokerId"] for n in nodes}
    return {
        "ThrottleTimeMs": 0,
        "ErrorCode": Errors.NONE,
        "ErrorMessage": None,
        "EndpointType": CONTROLLER_ENDPOINT,
        "ClusterId": cluster_id,
        # AuthHelper.computeDescribeClusterResponse: a leader not in the node list is reported as -1.
        "ControllerId": leader_id if leader_id in known else -1,
        "Brokers": nodes,
        "ClusterAuthorizedOperations": CLUSTER_OPERATIONS if body.get("IncludeClusterAuthorizedOperations")
        else OPERATIONS_NOT_ASKED,
    }


def _refusal(error: Errors, message: str) -> dict[str, Any]:
    # The other fields keep the schema's defaults (an empty ClusterId, ControllerId -1, EndpointType 1).
    return {"ThrottleTimeMs": 0, "ErrorCode": error, "ErrorMessage": message, "EndpointType": BROKER_ENDPOINT,
            "ClusterId": "", "ControllerId": -1, "Brokers": [], "ClusterAuthorizedOperations": OPERATIONS_NOT_ASKED}
