// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC721URIStorage} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721URIStorage.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {CortexRoles} from "./CortexRoles.sol";

/// The stack identity NFT and an ERC-8004 Identity Registry (ERC-721 + URI storage, register,
/// setAgentURI, on-chain metadata, the EIP-712 verified agentWallet), as in erc-8004-contracts.
///
/// Platform stacks are minted by OPERATOR_ROLE with a platform-chosen tokenId below FOREIGN_ID_BASE
/// and carry per token the CPV (five coefficients scaled by 1e3, each in [0, 2000], in token order
/// compute, memory, sync, routing, residue), the epoch counter and the episodicHead CID. Their owner
/// is the stack's own address (no private key), so the mint approves the operator for the token:
/// the platform manages its stacks as an ERC-721 approved operator, exactly as the standard lets
/// an owner delegate; a transfer clears that approval. Anyone may register() an agent of their
/// own: it gets the next id from FOREIGN_ID_BASE up and is no platform stack.
contract StackIdentity is ERC721URIStorage, CortexRoles, EIP712 {
    uint16 public constant CPV_MAX = 2000;
    /// Ids below are the platform's (Stack.tokenId, an int4 in the database); register() counts up from here.
    uint256 public constant FOREIGN_ID_BASE = 1 << 32;

    struct StackData {
        uint16[5] cpv;
        uint64 epoch;
        string episodicHead;
        string stackId;
    }

    struct MetadataEntry {
        string metadataKey;
        bytes metadataValue;
    }

    mapping(uint256 => StackData) private _stacks;
    mapping(bytes32 => uint256) public tokenOfStack;
    uint256 public totalMinted;
    /// Agents registered through register() (not platform stacks).
    uint256 public totalRegistered;

    mapping(uint256 => mapping(string => bytes)) private _metadata;
    mapping(uint256 => address) private _agentWallet;

    bytes32 private constant AGENT_WALLET_SET_TYPEHASH = keccak256("AgentWalletSet(uint256 agentId,address newWallet,address owner,uint256 deadline)");
    bytes32 private constant AGENT_WALLET_KEY_HASH = keccak256("agentWallet");
    uint256 private constant MAX_DEADLINE_DELAY = 5 minutes;

    event StackMinted(uint256 indexed tokenId, address indexed owner, string stackId, uint16[5] cpv);
    event StackUpdated(uint256 indexed tokenId, uint64 epoch, string episodicHead);
    event CpvUpdated(uint256 indexed tokenId, uint16[5] cpv);
    // ERC-8004
    event Registered(uint256 indexed agentId, string agentURI, address indexed owner);
    event URIUpdated(uint256 indexed agentId, string newURI, address indexed updatedBy);
    event MetadataSet(uint256 indexed agentId, string indexed indexedMetadataKey, string metadataKey, bytes metadataValue);

    error CpvOutOfRange(uint8 index, uint16 value);
    error EpochBackwards(uint64 current, uint64 proposed);
    error LengthMismatch(uint256 tokenIds, uint256 epochs, uint256 heads);
    error StackIdTaken(string stackId);
    error EmptyStackId();
    error TokenIdOutOfRange(uint256 tokenId);
    error NotPlatformStack(uint256 tokenId);
    error NotAuthorized(uint256 agentId, address caller);
    error ReservedMetadataKey();
    error InvalidWallet();
    error DeadlineExpired();
    error DeadlineTooFar();
    error InvalidWalletSignature();

    constructor(address operator) ERC721("Cortex Stack Identity", "STACK") CortexRoles(operator) EIP712("ERC8004IdentityRegistry", "1") {}

    // ---------------------------------------------------------------- platform stacks

    function mint(address to, uint256 tokenId, uint16[5] calldata cpv, string calldata stackId, string calldata agentURI) external onlyRole(OPERATOR_ROLE) {
        if (bytes(stackId).length == 0) revert EmptyStackId();
        if (tokenId == 0 || tokenId >= FOREIGN_ID_BASE) revert TokenIdOutOfRange(tokenId);
        bytes32 key = keccak256(bytes(stackId));
        if (tokenOfStack[key] != 0) revert StackIdTaken(stackId);
        _checkCpv(cpv);
        _mint(to, tokenId); // reverts on an existing tokenId
        _approve(msg.sender, tokenId, address(0));
        StackData storage s = _stacks[tokenId];
        s.cpv = cpv;
        s.stackId = stackId;
        tokenOfStack[key] = tokenId;
        totalMinted += 1;
        _agentWallet[tokenId] = to;
        if (bytes(agentURI).length != 0) _setTokenURI(tokenId, agentURI);
        emit StackMinted(tokenId, to, stackId, cpv);
        emit Registered(tokenId, agentURI, to);
    }

    /// The epoch counter never goes backwards; the head is the latest memory CID ("" = none).
    function updateStack(uint256 tokenId, uint64 epoch, string calldata episodicHead) external onlyRole(OPERATOR_ROLE) {
        StackData storage s = _platformStack(tokenId);
        if (epoch < s.epoch) revert EpochBackwards(s.epoch, epoch);
        s.epoch = epoch;
        s.episodicHead = episodicHead;
        emit StackUpdated(tokenId, epoch, episodicHead);
    }

    /// The heads of many platform stacks in one call: the platform mirrors the heads that moved
    /// since the last call together, once an epoch. A token that is no platform stack (yet), or
    /// whose epoch would go backwards, is skipped rather than reverted, so one stack never holds
    /// back the others; StackUpdated is emitted for each head applied.
    function updateStacks(uint256[] calldata tokenIds, uint64[] calldata epochs, string[] calldata heads) external onlyRole(OPERATOR_ROLE) {
        uint256 n = tokenIds.length;
        if (epochs.length != n || heads.length != n) revert LengthMismatch(n, epochs.length, heads.length);
        for (uint256 i = 0; i < n; i++) {
            uint256 tokenId = tokenIds[i];
            if (!isPlatformStack(tokenId)) continue;
            StackData storage s = _stacks[tokenId];
            if (epochs[i] < s.epoch) continue;
            s.epoch = epochs[i];
            s.episodicHead = heads[i];
            emit StackUpdated(tokenId, epochs[i], heads[i]);
        }
    }

    function updateCpv(uint256 tokenId, uint16[5] calldata cpv) external onlyRole(OPERATOR_ROLE) {
        StackData storage s = _platformStack(tokenId);
        _checkCpv(cpv);
        s.cpv = cpv;
        emit CpvUpdated(tokenId, cpv);
    }

    function stackOf(uint256 tokenId) external view returns (uint16[5] memory cpv, uint64 epoch, string memory episodicHead, string memory stackId) {
        StackData storage s = _platformStack(tokenId);
        return (s.cpv, s.epoch, s.episodicHead, s.stackId);
    }

    /// True for a token the platform minted (a stack), false for an agent registered by anyone.
    function isPlatformStack(uint256 tokenId) public view returns (bool) {
        return bytes(_stacks[tokenId].stackId).length != 0 && _ownerOf(tokenId) != address(0);
    }

    // ---------------------------------------------------------------- ERC-8004 Identity Registry

    function register() external returns (uint256 agentId) {
        agentId = _nextForeignId();
        _agentWallet[agentId] = msg.sender;
        emit Registered(agentId, "", msg.sender);
        _safeMint(msg.sender, agentId);
    }

    function register(string calldata agentURI) external returns (uint256 agentId) {
        agentId = _nextForeignId();
        _agentWallet[agentId] = msg.sender;
        _setTokenURI(agentId, agentURI);
        emit Registered(agentId, agentURI, msg.sender);
        _safeMint(msg.sender, agentId);
    }

    function register(string calldata agentURI, MetadataEntry[] calldata metadata) external returns (uint256 agentId) {
        agentId = _nextForeignId();
        _agentWallet[agentId] = msg.sender;
        _setTokenURI(agentId, agentURI);
        emit Registered(agentId, agentURI, msg.sender);
        for (uint256 i; i < metadata.length; i++) {
            if (keccak256(bytes(metadata[i].metadataKey)) == AGENT_WALLET_KEY_HASH) revert ReservedMetadataKey();
            _metadata[agentId][metadata[i].metadataKey] = metadata[i].metadataValue;
            emit MetadataSet(agentId, metadata[i].metadataKey, metadata[i].metadataKey, metadata[i].metadataValue);
        }
        _safeMint(msg.sender, agentId);
    }

    function setAgentURI(uint256 agentId, string calldata newURI) external {
        _requireManager(agentId);
        _setTokenURI(agentId, newURI);
        emit URIUpdated(agentId, newURI, msg.sender);
    }

    function getMetadata(uint256 agentId, string calldata metadataKey) external view returns (bytes memory) {
        return _metadata[agentId][metadataKey];
    }

    function setMetadata(uint256 agentId, string calldata metadataKey, bytes calldata metadataValue) external {
        _requireManager(agentId);
        if (keccak256(bytes(metadataKey)) == AGENT_WALLET_KEY_HASH) revert ReservedMetadataKey();
        _metadata[agentId][metadataKey] = metadataValue;
        emit MetadataSet(agentId, metadataKey, metadataKey, metadataValue);
    }

    function getAgentWallet(uint256 agentId) external view returns (address) {
        _requireOwned(agentId);
        return _agentWallet[agentId];
    }

    /// The new wallet proves control by an EIP-712 signature (an EOA) or ERC-1271 (a contract).
    function setAgentWallet(uint256 agentId, address newWallet, uint256 deadline, bytes calldata signature) external {
        if (newWallet == address(0)) revert InvalidWallet();
        if (block.timestamp > deadline) revert DeadlineExpired();
        if (deadline > block.timestamp + MAX_DEADLINE_DELAY) revert DeadlineTooFar();
        address owner = _requireManager(agentId);
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(AGENT_WALLET_SET_TYPEHASH, agentId, newWallet, owner, deadline)));
        if (newWallet.code.length == 0) {
            (address recovered, ECDSA.RecoverError err, ) = ECDSA.tryRecover(digest, signature);
            if (err != ECDSA.RecoverError.NoError || recovered != newWallet) revert InvalidWalletSignature();
        } else {
            (bool ok, bytes memory res) = newWallet.staticcall(abi.encodeCall(IERC1271.isValidSignature, (digest, signature)));
            if (!ok || res.length < 32 || abi.decode(res, (bytes4)) != IERC1271.isValidSignature.selector) revert InvalidWalletSignature();
        }
        _agentWallet[agentId] = newWallet;
        _metadata[agentId]["agentWallet"] = abi.encodePacked(newWallet);
        emit MetadataSet(agentId, "agentWallet", "agentWallet", abi.encodePacked(newWallet));
    }

    // ---------------------------------------------------------------- internals

    /// The owner, an operator approved for all of the owner's tokens, or the token's approved address.
    function _requireManager(uint256 agentId) private view returns (address owner) {
        owner = _requireOwned(agentId);
        if (msg.sender != owner && !isApprovedForAll(owner, msg.sender) && getApproved(agentId) != msg.sender) revert NotAuthorized(agentId, msg.sender);
    }

    function _platformStack(uint256 tokenId) private view returns (StackData storage s) {
        _requireOwned(tokenId);
        s = _stacks[tokenId];
        if (bytes(s.stackId).length == 0) revert NotPlatformStack(tokenId);
    }

    function _nextForeignId() private returns (uint256) {
        return FOREIGN_ID_BASE + totalRegistered++;
    }

    /// A transfer (not a mint) resets the verified wallet: the new owner verifies its own.
    function _update(address to, uint256 tokenId, address auth) internal override returns (address from) {
        from = super._update(to, tokenId, auth);
        if (from != address(0) && to != address(0)) {
            _agentWallet[tokenId] = address(0);
            _metadata[tokenId]["agentWallet"] = "";
            emit MetadataSet(tokenId, "agentWallet", "agentWallet", "");
        }
    }

    function _checkCpv(uint16[5] calldata cpv) private pure {
        for (uint8 i = 0; i < 5; i++) if (cpv[i] > CPV_MAX) revert CpvOutOfRange(i, cpv[i]);
    }

    function supportsInterface(bytes4 id) public view override(ERC721URIStorage, AccessControl) returns (bool) {
        return super.supportsInterface(id);
    }
}
