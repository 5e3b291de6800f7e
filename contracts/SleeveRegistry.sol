// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CortexRoles} from "./CortexRoles.sol";

/// Sleeves bound to a stack: spawn (alive and authorized), authorize (key lease on or off while
/// alive), decommission (final: no longer alive nor authorized).
contract SleeveRegistry is CortexRoles {
    enum Status { None, Alive, Decommissioned }

    struct Sleeve {
        uint256 stackTokenId;
        bytes32 kind;
        Status status;
        bool authorized;
    }

    mapping(bytes32 => Sleeve) private _sleeves;
    mapping(uint256 => uint256) public aliveCount;

    event SleeveSpawned(bytes32 indexed sleeveKey, uint256 indexed stackTokenId, string sleeveId, string kind);
    event SleeveAuthorized(bytes32 indexed sleeveKey, bool authorized);
    event SleeveDecommissioned(bytes32 indexed sleeveKey, uint256 indexed stackTokenId);

    error SleeveExists(bytes32 sleeveKey);
    error NotAlive(bytes32 sleeveKey);
    error UnknownKind(string kind);

    constructor(address operator) CortexRoles(operator) {}

    function spawn(string calldata sleeveId, uint256 stackTokenId, string calldata kind) external onlyRole(OPERATOR_ROLE) {
        bytes32 key = keccak256(bytes(sleeveId));
        if (_sleeves[key].status != Status.None) revert SleeveExists(key);
        bytes32 k = keccak256(bytes(kind));
        if (k != keccak256("human") && k != keccak256("ai") && k != keccak256("mining") && k != keccak256("memory")) revert UnknownKind(kind);
        _sleeves[key] = Sleeve(stackTokenId, k, Status.Alive, true);
        aliveCount[stackTokenId] += 1;
        emit SleeveSpawned(key, stackTokenId, sleeveId, kind);
    }

    function authorize(bytes32 sleeveKey, bool authorized) external onlyRole(OPERATOR_ROLE) {
        Sleeve storage s = _sleeves[sleeveKey];
        if (s.status != Status.Alive) revert NotAlive(sleeveKey);
        s.authorized = authorized;
        emit SleeveAuthorized(sleeveKey, authorized);
    }

    function decommission(bytes32 sleeveKey) external onlyRole(OPERATOR_ROLE) {
        Sleeve storage s = _sleeves[sleeveKey];
        if (s.status != Status.Alive) revert NotAlive(sleeveKey);
        s.status = Status.Decommissioned;
        s.authorized = false;
        aliveCount[s.stackTokenId] -= 1;
        emit SleeveDecommissioned(sleeveKey, s.stackTokenId);
    }

    function sleeveOf(bytes32 sleeveKey) external view returns (Sleeve memory) {
        return _sleeves[sleeveKey];
    }

    function isAlive(bytes32 sleeveKey) external view returns (bool) {
        return _sleeves[sleeveKey].status == Status.Alive;
    }

    function isAuthorized(bytes32 sleeveKey) external view returns (bool) {
        return _sleeves[sleeveKey].authorized;
    }
}
