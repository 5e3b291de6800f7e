// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {CortexRoles} from "./CortexRoles.sol";

/// Per-epoch emission: 100 units of each core token per stack per epoch, scaled by the CPV and
/// decayed by EBC: amount = 100 x cpv x max(floor, e^(-decay x deltaEpoch)). `quote` computes it
/// on-chain; `recordEmission` records what the platform emitted (at most once per stack and epoch).
/// The tokens themselves are minted through BandwidthToken by the ledger mirror.
contract QuellistTreasury is CortexRoles {
    uint256 public constant WAD = 1e18;
    /// Units per core token per epoch, in milli-units.
    uint256 public constant BASE_EMISSION_MILLI = 100_000;

    struct EmissionRecord {
        uint64 epoch;
        uint256[5] amounts;
        bool recorded;
    }

    mapping(uint256 => mapping(uint64 => EmissionRecord)) private _emissions;
    mapping(uint256 => uint64) public lastEmissionEpoch;
    uint256 public emissionCount;

    event Emitted(uint256 indexed stackTokenId, uint64 indexed epoch, uint256[5] amounts);
    event EpochEmitted(uint64 indexed epoch, uint32 stacks, uint256[4] totals);

    struct EpochTotals {
        uint32 stacks;
        uint256[4] totals;
        bool recorded;
    }

    mapping(uint64 => EpochTotals) private _epochTotals;

    error AlreadyEmitted(uint256 stackTokenId, uint64 epoch);
    error BadParameter();

    constructor(address operator) CortexRoles(operator) {}

    function recordEmission(uint256 stackTokenId, uint64 epoch, uint256[5] calldata amounts) external onlyRole(OPERATOR_ROLE) {
        EmissionRecord storage r = _emissions[stackTokenId][epoch];
        if (r.recorded) revert AlreadyEmitted(stackTokenId, epoch);
        r.epoch = epoch;
        r.amounts = amounts;
        r.recorded = true;
        if (epoch > lastEmissionEpoch[stackTokenId]) lastEmissionEpoch[stackTokenId] = epoch;
        emissionCount += 1;
        emit Emitted(stackTokenId, epoch, amounts);
    }

    /// The whole epoch's emission (stacks served and core-token totals in milli), once per epoch.
    function recordEpochEmission(uint64 epoch, uint32 stacks, uint256[4] calldata totals) external onlyRole(OPERATOR_ROLE) {
        EpochTotals storage e = _epochTotals[epoch];
        if (e.recorded) revert AlreadyEmitted(0, epoch);
        e.stacks = stacks;
        e.totals = totals;
        e.recorded = true;
        emit EpochEmitted(epoch, stacks, totals);
    }

    function epochEmissionOf(uint64 epoch) external view returns (bool recorded, uint32 stacks, uint256[4] memory totals) {
        EpochTotals storage e = _epochTotals[epoch];
        return (e.recorded, e.stacks, e.totals);
    }

    function emissionOf(uint256 stackTokenId, uint64 epoch) external view returns (bool recorded, uint256[5] memory amounts) {
        EmissionRecord storage r = _emissions[stackTokenId][epoch];
        return (r.recorded, r.amounts);
    }

    /// max(floor, e^(-decay x deltaEpoch)) as a WAD; decay and floor are given in milli (0.05 = 50).
    function ebcFactor(uint256 deltaEpoch, uint256 decayMilli, uint256 floorMilli) public pure returns (uint256) {
        if (floorMilli > 1000) revert BadParameter();
        uint256 floorWad = floorMilli * 1e15;
        uint256 x = deltaEpoch * decayMilli * 1e15; // decay x delta as a WAD
        if (x > 40 * WAD) return floorWad; // e^-40 is below any useful floor
        uint256 f = WAD * WAD / _expWad(x);
        return f > floorWad ? f : floorWad;
    }

    /// Core-token emission for one epoch in milli-units (order compute, memory, sync, routing);
    /// cpv is scaled by 1e3 in the same order.
    function quote(uint16[4] calldata cpv, uint256 deltaEpoch, uint256 decayMilli, uint256 floorMilli) external pure returns (uint256[4] memory amounts) {
        uint256 f = ebcFactor(deltaEpoch, decayMilli, floorMilli);
        for (uint256 i = 0; i < 4; i++) amounts[i] = BASE_EMISSION_MILLI * cpv[i] * f / (1000 * WAD);
    }

    /// e^x for a WAD x in [0, 40]: e^n by squaring-free repeated multiplication, e^frac by Taylor series.
    function _expWad(uint256 x) private pure returns (uint256) {
        uint256 n = x / WAD;
        uint256 frac = x % WAD;
        uint256 result = WAD;
        uint256 e = 2718281828459045235;
        for (uint256 i = 0; i < n; i++) result = result * e / WAD;
        uint256 term = WAD;
        uint256 sum = WAD;
        for (uint256 k = 1; k < 24; k++) {
            term = term * frac / (k * WAD);
            if (term == 0) break;
            sum += term;
        }
        return result * sum / WAD;
    }
}
