// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CortexRoles} from "./CortexRoles.sol";

/// On-chain record of re-sleeving saga routes: one route per saga, written at the saga's anchor
/// step; a saga that compensates after its anchor marks its route compensated (once).
contract NeedlecastRouter is CortexRoles {
    enum Status { None, Routed, Compensated }

    struct Route {
        uint256 stackTokenId;
        bytes32 fromSleeve;
        bytes32 toSleeve;
        bytes32 routeHash;
        uint32 shardCount;
        Status status;
    }

    mapping(bytes32 => Route) private _routes;
    uint256 public routeCount;

    event RouteRecorded(bytes32 indexed sagaKey, uint256 indexed stackTokenId, string sagaId, string from, string to, uint32 shardCount, bytes32 routeHash);
    event RouteCompensated(bytes32 indexed sagaKey, string sagaId);

    error RouteExists(bytes32 sagaKey);
    error NotRouted(bytes32 sagaKey);
    error SameSleeve();

    constructor(address operator) CortexRoles(operator) {}

    /// sagaKey = keccak256(sagaId); sleeve keys = keccak256(sleeve id).
    function recordRoute(string calldata sagaId, uint256 stackTokenId, string calldata from, string calldata to, uint32 shardCount, bytes32 routeHash)
        external
        onlyRole(OPERATOR_ROLE)
    {
        bytes32 key = keccak256(bytes(sagaId));
        if (_routes[key].status != Status.None) revert RouteExists(key);
        bytes32 f = keccak256(bytes(from));
        bytes32 t = keccak256(bytes(to));
        if (f == t) revert SameSleeve();
        _routes[key] = Route(stackTokenId, f, t, routeHash, shardCount, Status.Routed);
        routeCount += 1;
        emit RouteRecorded(key, stackTokenId, sagaId, from, to, shardCount, routeHash);
    }

    function compensate(string calldata sagaId) external onlyRole(OPERATOR_ROLE) {
        bytes32 key = keccak256(bytes(sagaId));
        if (_routes[key].status != Status.Routed) revert NotRouted(key);
        _routes[key].status = Status.Compensated;
        emit RouteCompensated(key, sagaId);
    }

    function routeOf(string calldata sagaId) external view returns (Route memory) {
        return _routes[keccak256(bytes(sagaId))];
    }
}
