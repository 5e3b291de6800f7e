// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CortexRoles} from "./CortexRoles.sol";

/// Per-epoch coherence root commitment: once per epoch, and only a crossRoot that is the fold
/// sha256("cog-coh-v1" || evmRoot || btcRoot || ipfsRoot || sleevesRoot) with btcRoot = 0 (reserved).
contract EpochAnchor is CortexRoles {
    struct Anchor {
        bytes32 crossRoot;
        bytes32 evmRoot;
        bytes32 ipfsRoot;
        bytes32 sleevesRoot;
        uint64 blockNumber;
    }

    mapping(uint64 => Anchor) private _anchors;
    uint64 public latestEpoch;
    uint256 public anchorCount;

    event Anchored(uint64 indexed epoch, bytes32 crossRoot, bytes32 evmRoot, bytes32 ipfsRoot, bytes32 sleevesRoot);

    error AlreadyAnchored(uint64 epoch);
    error RootMismatch(bytes32 expected, bytes32 given);

    constructor(address operator) CortexRoles(operator) {}

    function foldRoots(bytes32 evmRoot, bytes32 ipfsRoot, bytes32 sleevesRoot) public pure returns (bytes32) {
        return sha256(abi.encodePacked("cog-coh-v1", evmRoot, bytes32(0), ipfsRoot, sleevesRoot));
    }

    function anchor(uint64 epoch, bytes32 crossRoot, bytes32 evmRoot, bytes32 ipfsRoot, bytes32 sleevesRoot) external onlyRole(OPERATOR_ROLE) {
        if (_anchors[epoch].blockNumber != 0) revert AlreadyAnchored(epoch);
        bytes32 expected = foldRoots(evmRoot, ipfsRoot, sleevesRoot);
        if (expected != crossRoot) revert RootMismatch(expected, crossRoot);
        _anchors[epoch] = Anchor(crossRoot, evmRoot, ipfsRoot, sleevesRoot, uint64(block.number == 0 ? 1 : block.number));
        if (epoch > latestEpoch) latestEpoch = epoch;
        anchorCount += 1;
        emit Anchored(epoch, crossRoot, evmRoot, ipfsRoot, sleevesRoot);
    }

    function verify(uint64 epoch, bytes32 crossRoot) external view returns (bool) {
        Anchor storage a = _anchors[epoch];
        return a.blockNumber != 0 && a.crossRoot == crossRoot;
    }

    function anchorOf(uint64 epoch) external view returns (Anchor memory) {
        return _anchors[epoch];
    }
}
