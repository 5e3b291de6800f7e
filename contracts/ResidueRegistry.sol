// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CortexRoles} from "./CortexRoles.sol";
import {BandwidthToken} from "./BandwidthToken.sol";

/// Residues with ResidueToken bounties: open records the bounty; the first valid proof (checked by
/// the platform, its hash recorded here) wins the whole bounty, minted as ResidueToken to the
/// claimant's stack; every later claim is refused.
contract ResidueRegistry is CortexRoles {
    enum Status { None, Open, Claimed }

    struct Residue {
        bytes32 kind;
        uint256 bountyMilli;
        Status status;
        uint256 claimantTokenId;
        bytes32 proofHash;
    }

    BandwidthToken public immutable bandwidth;
    mapping(bytes32 => Residue) private _residues;
    uint256 public openCount;

    event ResidueOpened(bytes32 indexed residueKey, string residueId, string kind, uint256 bountyMilli);
    event ResidueClaimed(bytes32 indexed residueKey, uint256 indexed claimantTokenId, string claimant, bytes32 proofHash, uint256 bountyMilli);

    error ResidueExists(bytes32 residueKey);
    error NotOpen(bytes32 residueKey);
    error ZeroBounty();

    constructor(address operator, BandwidthToken bandwidth_) CortexRoles(operator) {
        bandwidth = bandwidth_;
    }

    function open(string calldata residueId, string calldata kind, uint256 bountyMilli) external onlyRole(OPERATOR_ROLE) {
        bytes32 key = keccak256(bytes(residueId));
        if (_residues[key].status != Status.None) revert ResidueExists(key);
        if (bountyMilli == 0) revert ZeroBounty();
        _residues[key] = Residue(keccak256(bytes(kind)), bountyMilli, Status.Open, 0, bytes32(0));
        openCount += 1;
        emit ResidueOpened(key, residueId, kind, bountyMilli);
    }

    function claim(bytes32 residueKey, uint256 claimantTokenId, string calldata claimant, bytes32 proofHash) external onlyRole(OPERATOR_ROLE) {
        Residue storage r = _residues[residueKey];
        if (r.status != Status.Open) revert NotOpen(residueKey);
        r.status = Status.Claimed;
        r.claimantTokenId = claimantTokenId;
        r.proofHash = proofHash;
        openCount -= 1;
        bandwidth.mint(claimantTokenId, bandwidth.RESIDUE(), r.bountyMilli);
        emit ResidueClaimed(residueKey, claimantTokenId, claimant, proofHash, r.bountyMilli);
    }

    function residueOf(bytes32 residueKey) external view returns (Residue memory) {
        return _residues[residueKey];
    }
}
