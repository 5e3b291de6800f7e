// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

interface IIdentityRegistry {
    function ownerOf(uint256 tokenId) external view returns (address);
    function getApproved(uint256 tokenId) external view returns (address);
    function isApprovedForAll(address owner, address operator) external view returns (bool);
}

/// ERC-8004 Validation Registry (the standard marks it as still under discussion; this follows the
/// interface of erc-8004-contracts' ValidationRegistry 1.1.0, without the upgrade proxy). An
/// agent's owner or operator requests validation by a validator; only that validator responds
/// (0..100, repeatable). The platform records each accepted residue proof here: request by the
/// platform as the claimant stack's approved operator, response 100 by its validator (the operator).
contract ValidationRegistry {
    event ValidationRequest(address indexed validatorAddress, uint256 indexed agentId, string requestURI, bytes32 indexed requestHash);
    event ValidationResponse(address indexed validatorAddress, uint256 indexed agentId, bytes32 indexed requestHash, uint8 response, string responseURI, bytes32 responseHash, string tag);

    struct ValidationStatus {
        address validatorAddress;
        uint8 response;
        bool hasResponse;
        uint256 agentId;
        bytes32 responseHash;
        string tag;
        uint256 lastUpdate;
    }

    uint8 public constant MAX_RESPONSE = 100;

    address private immutable _identityRegistry;
    mapping(bytes32 => ValidationStatus) private _validations;
    mapping(uint256 => bytes32[]) private _agentValidations;
    mapping(address => bytes32[]) private _validatorRequests;

    error BadIdentityRegistry();
    error BadValidator();
    error RequestExists(bytes32 requestHash);
    error UnknownRequest(bytes32 requestHash);
    error NotAuthorized(uint256 agentId, address caller);
    error NotValidator(bytes32 requestHash, address caller);
    error ResponseOutOfRange(uint8 response);

    constructor(address identityRegistry_) {
        if (identityRegistry_ == address(0)) revert BadIdentityRegistry();
        _identityRegistry = identityRegistry_;
    }

    function getIdentityRegistry() external view returns (address) {
        return _identityRegistry;
    }

    function validationRequest(address validatorAddress, uint256 agentId, string calldata requestURI, bytes32 requestHash) external {
        if (validatorAddress == address(0)) revert BadValidator();
        if (_validations[requestHash].validatorAddress != address(0)) revert RequestExists(requestHash);
        IIdentityRegistry registry = IIdentityRegistry(_identityRegistry);
        address owner = registry.ownerOf(agentId);
        if (msg.sender != owner && !registry.isApprovedForAll(owner, msg.sender) && registry.getApproved(agentId) != msg.sender) revert NotAuthorized(agentId, msg.sender);
        _validations[requestHash] = ValidationStatus(validatorAddress, 0, false, agentId, bytes32(0), "", block.timestamp);
        _agentValidations[agentId].push(requestHash);
        _validatorRequests[validatorAddress].push(requestHash);
        emit ValidationRequest(validatorAddress, agentId, requestURI, requestHash);
    }

    function validationResponse(bytes32 requestHash, uint8 response, string calldata responseURI, bytes32 responseHash, string calldata tag) external {
        if (response > MAX_RESPONSE) revert ResponseOutOfRange(response);
        ValidationStatus storage s = _validations[requestHash];
        if (s.validatorAddress == address(0)) revert UnknownRequest(requestHash);
        if (msg.sender != s.validatorAddress) revert NotValidator(requestHash, msg.sender);
        s.response = response;
        s.responseHash = responseHash;
        s.tag = tag;
        s.lastUpdate = block.timestamp;
        s.hasResponse = true;
        emit ValidationResponse(s.validatorAddress, s.agentId, requestHash, response, responseURI, responseHash, tag);
    }

    function getValidationStatus(bytes32 requestHash)
        external
        view
        returns (address validatorAddress, uint256 agentId, uint8 response, bytes32 responseHash, string memory tag, uint256 lastUpdate)
    {
        ValidationStatus storage s = _validations[requestHash];
        if (s.validatorAddress == address(0)) revert UnknownRequest(requestHash);
        return (s.validatorAddress, s.agentId, s.response, s.responseHash, s.tag, s.lastUpdate);
    }

    /// Count and average of the responded validations of an agent, optionally by validators and tag.
    function getSummary(uint256 agentId, address[] calldata validatorAddresses, string calldata tag) external view returns (uint64 count, uint8 avgResponse) {
        bytes32[] storage hashes = _agentValidations[agentId];
        uint256 total;
        bytes32 tagHash = keccak256(bytes(tag));
        for (uint256 i; i < hashes.length; i++) {
            ValidationStatus storage s = _validations[hashes[i]];
            if (!s.hasResponse) continue;
            bool matchValidator = validatorAddresses.length == 0;
            for (uint256 j; !matchValidator && j < validatorAddresses.length; j++) matchValidator = s.validatorAddress == validatorAddresses[j];
            if (!matchValidator) continue;
            if (bytes(tag).length != 0 && keccak256(bytes(s.tag)) != tagHash) continue;
            total += s.response;
            count++;
        }
        avgResponse = count > 0 ? uint8(total / count) : 0;
    }

    function getAgentValidations(uint256 agentId) external view returns (bytes32[] memory) {
        return _agentValidations[agentId];
    }

    function getValidatorRequests(address validatorAddress) external view returns (bytes32[] memory) {
        return _validatorRequests[validatorAddress];
    }
}
