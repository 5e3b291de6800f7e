// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {CortexRoles} from "./CortexRoles.sol";

/// The stack identity NFT: per token the CPV (five coefficients scaled by 1e3, each in [0, 2000],
/// in token order compute, memory, sync, routing, residue), the epoch counter and the episodicHead CID.
contract StackIdentity is ERC721, CortexRoles {
    uint16 public constant CPV_MAX = 2000;

    struct StackData {
        uint16[5] cpv;
        uint64 epoch;
        string episodicHead;
        string stackId;
    }

    mapping(uint256 => StackData) private _stacks;
    mapping(bytes32 => uint256) public tokenOfStack;
    uint256 public totalMinted;

    event StackMinted(uint256 indexed tokenId, address indexed owner, string stackId, uint16[5] cpv);
    event StackUpdated(uint256 indexed tokenId, uint64 epoch, string episodicHead);
    event CpvUpdated(uint256 indexed tokenId, uint16[5] cpv);

    error CpvOutOfRange(uint8 index, uint16 value);
    error EpochBackwards(uint64 current, uint64 proposed);
    error StackIdTaken(string stackId);
    error EmptyStackId();

    constructor(address operator) ERC721("Cortex Stack Identity", "STACK") CortexRoles(operator) {}

    function mint(address to, uint256 tokenId, uint16[5] calldata cpv, string calldata stackId) external onlyRole(OPERATOR_ROLE) {
        if (bytes(stackId).length == 0) revert EmptyStackId();
        bytes32 key = keccak256(bytes(stackId));
        if (tokenOfStack[key] != 0) revert StackIdTaken(stackId);
        _checkCpv(cpv);
        _mint(to, tokenId); // reverts on an existing tokenId
        StackData storage s = _stacks[tokenId];
        s.cpv = cpv;
        s.stackId = stackId;
        tokenOfStack[key] = tokenId;
        totalMinted += 1;
        emit StackMinted(tokenId, to, stackId, cpv);
    }

    /// The epoch counter never goes backwards; the head is the latest memory CID ("" = none).
    function updateStack(uint256 tokenId, uint64 epoch, string calldata episodicHead) external onlyRole(OPERATOR_ROLE) {
        _requireOwned(tokenId);
        StackData storage s = _stacks[tokenId];
        if (epoch < s.epoch) revert EpochBackwards(s.epoch, epoch);
        s.epoch = epoch;
        s.episodicHead = episodicHead;
        emit StackUpdated(tokenId, epoch, episodicHead);
    }

    function updateCpv(uint256 tokenId, uint16[5] calldata cpv) external onlyRole(OPERATOR_ROLE) {
        _requireOwned(tokenId);
        _checkCpv(cpv);
        _stacks[tokenId].cpv = cpv;
        emit CpvUpdated(tokenId, cpv);
    }

    function stackOf(uint256 tokenId) external view returns (uint16[5] memory cpv, uint64 epoch, string memory episodicHead, string memory stackId) {
        _requireOwned(tokenId);
        StackData storage s = _stacks[tokenId];
        return (s.cpv, s.epoch, s.episodicHead, s.stackId);
    }

    function _checkCpv(uint16[5] calldata cpv) private pure {
        for (uint8 i = 0; i < 5; i++) if (cpv[i] > CPV_MAX) revert CpvOutOfRange(i, cpv[i]);
    }

    function supportsInterface(bytes4 id) public view override(ERC721, AccessControl) returns (bool) {
        return super.supportsInterface(id);
    }
}
