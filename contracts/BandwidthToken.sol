// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {CortexRoles} from "./CortexRoles.sol";

/// One of the five bandwidth tokens: a plain ERC-20 (3 decimals = the platform's milli-units)
/// that only its BandwidthToken manager mints and burns.
contract CortexToken is ERC20 {
    address public immutable manager;
    bool public immutable decays;

    error NotManager();

    constructor(string memory name_, string memory symbol_, bool decays_) ERC20(name_, symbol_) {
        manager = msg.sender;
        decays = decays_;
    }

    function decimals() public pure override returns (uint8) {
        return 3;
    }

    function mint(address to, uint256 amount) external {
        if (msg.sender != manager) revert NotManager();
        _mint(to, amount);
    }

    function burn(address from, uint256 amount) external {
        if (msg.sender != manager) revert NotManager();
        _burn(from, amount);
    }
}

/// The five token types (0 compute, 1 memory, 2 sync, 3 routing, 4 residue) as five ERC-20s held in
/// custody here, with balances scoped to a stack's identity tokenId. ResidueToken does not decay.
contract BandwidthToken is CortexRoles {
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");
    uint8 public constant TOKEN_COUNT = 5;
    uint8 public constant RESIDUE = 4;

    CortexToken[5] public tokens;
    mapping(uint256 => uint256[5]) private _stackBalances;
    /// Settlements applied, by the platform's settlement id (see settle).
    mapping(uint256 => bool) public settled;

    event Minted(uint256 indexed stackTokenId, uint8 indexed token, uint256 amount);
    event Burned(uint256 indexed stackTokenId, uint8 indexed token, uint256 amount);
    event Settled(uint256 indexed settlementId, uint256 indexed epoch, uint256 entries);

    error UnknownToken(uint8 token);
    error InsufficientStackBalance(uint256 stackTokenId, uint8 token, uint256 balance, uint256 amount);
    error LengthMismatch();
    error ZeroAmount();

    constructor(address operator) CortexRoles(operator) {
        _grantRole(MINTER_ROLE, operator);
        tokens[0] = new CortexToken("Cortex Compute", "CMP", true);
        tokens[1] = new CortexToken("Cortex Memory", "MEM", true);
        tokens[2] = new CortexToken("Cortex Sync", "SYN", true);
        tokens[3] = new CortexToken("Cortex Routing", "RTE", true);
        tokens[4] = new CortexToken("ResidueToken", "RT", false);
    }

    function mint(uint256 stackTokenId, uint8 token, uint256 amount) public onlyRole(MINTER_ROLE) {
        if (token >= TOKEN_COUNT) revert UnknownToken(token);
        if (amount == 0) revert ZeroAmount();
        _stackBalances[stackTokenId][token] += amount;
        tokens[token].mint(address(this), amount);
        emit Minted(stackTokenId, token, amount);
    }

    function burn(uint256 stackTokenId, uint8 token, uint256 amount) public onlyRole(MINTER_ROLE) {
        if (token >= TOKEN_COUNT) revert UnknownToken(token);
        if (amount == 0) revert ZeroAmount();
        uint256 bal = _stackBalances[stackTokenId][token];
        if (bal < amount) revert InsufficientStackBalance(stackTokenId, token, bal, amount);
        _stackBalances[stackTokenId][token] = bal - amount;
        tokens[token].burn(address(this), amount);
        emit Burned(stackTokenId, token, amount);
    }

    function mintBatch(uint256 stackTokenId, uint8[] calldata kinds, uint256[] calldata amounts) external {
        if (kinds.length != amounts.length) revert LengthMismatch();
        for (uint256 i = 0; i < kinds.length; i++) mint(stackTokenId, kinds[i], amounts[i]);
    }

    function burnBatch(uint256 stackTokenId, uint8[] calldata kinds, uint256[] calldata amounts) external {
        if (kinds.length != amounts.length) revert LengthMismatch();
        for (uint256 i = 0; i < kinds.length; i++) burn(stackTokenId, kinds[i], amounts[i]);
    }

    /// The net effect of the platform ledger over an epoch in one call: entry i adds deltas[i]
    /// (milli-units; > 0 minted, < 0 burned) to stack stackTokenIds[i]'s balance of token kinds[i],
    /// in order, each checked like mint and burn (a stack never goes below zero). The custody ERC-20s
    /// move once per token by the settlement's net. A settlement id applies once: the same
    /// settlement sent again (re-signed after a crash or a replay) changes nothing.
    function settle(
        uint256 settlementId,
        uint256 epoch,
        uint256[] calldata stackTokenIds,
        uint8[] calldata kinds,
        int256[] calldata deltas
    ) external onlyRole(MINTER_ROLE) {
        if (stackTokenIds.length != kinds.length || kinds.length != deltas.length) revert LengthMismatch();
        if (settled[settlementId]) return;
        settled[settlementId] = true;
        int256[5] memory net;
        for (uint256 i = 0; i < kinds.length; i++) {
            uint8 token = kinds[i];
            if (token >= TOKEN_COUNT) revert UnknownToken(token);
            int256 d = deltas[i];
            if (d == 0) revert ZeroAmount();
            uint256 id = stackTokenIds[i];
            if (d > 0) {
                _stackBalances[id][token] += uint256(d);
                emit Minted(id, token, uint256(d));
            } else {
                uint256 amount = uint256(-d);
                uint256 bal = _stackBalances[id][token];
                if (bal < amount) revert InsufficientStackBalance(id, token, bal, amount);
                _stackBalances[id][token] = bal - amount;
                emit Burned(id, token, amount);
            }
            net[token] += d;
        }
        for (uint8 t = 0; t < TOKEN_COUNT; t++) {
            if (net[t] > 0) tokens[t].mint(address(this), uint256(net[t]));
            else if (net[t] < 0) tokens[t].burn(address(this), uint256(-net[t]));
        }
        emit Settled(settlementId, epoch, kinds.length);
    }

    function balanceOf(uint256 stackTokenId, uint8 token) external view returns (uint256) {
        if (token >= TOKEN_COUNT) revert UnknownToken(token);
        return _stackBalances[stackTokenId][token];
    }

    function balancesOf(uint256 stackTokenId) external view returns (uint256[5] memory) {
        return _stackBalances[stackTokenId];
    }

    function tokenAddress(uint8 token) external view returns (address) {
        if (token >= TOKEN_COUNT) revert UnknownToken(token);
        return address(tokens[token]);
    }
}
