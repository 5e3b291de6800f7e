// The Cortex (EVM) address that stands for a stack: the last 20 bytes of keccak256 of its 32-byte
// ed25519 public key, like an Ethereum address. It owns the stack's identity NFT and gives Shape B
// ids their `0x...` part.
import { keccak256, getAddress } from 'ethers';

export function stackAddress(pubKeyHex: string): string {
  return getAddress('0x' + keccak256('0x' + pubKeyHex).slice(-40)).toLowerCase();
}
