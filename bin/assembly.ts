// The composition root's choice of adapters. Which services run in this process is known here
// and nowhere else: what runs beside a caller is reached directly, the rest over HTTP. Domain code
// never asks; it takes what its context's ports hold (lib/platform.ts Ports) or what was wired
// into it here.
import type { Platform } from '../lib/platform.ts';
import { wireMirroredTables, wireResidueOpener, type Deployment } from '../subgraphs/chains/index.ts';
import { localHippocampus } from '../subgraphs/memory/index.ts';
import { openResidue, residueChainRecords } from '../subgraphs/residues/index.ts';
import { stackChainRecords, stackHeads } from '../subgraphs/stacks/index.ts';
import { sleeveChainRecords } from '../subgraphs/sleeves/index.ts';
import { platformSources } from '../flows/thalamus-sources.ts';
import { stackHolders } from '../flows/economy-holders.ts';
import { residueProofs } from '../flows/residue-proofs.ts';
import { PASSES } from '../flows/worker-passes.ts';
import { sleeveMemory } from '../flows/sleeve-memory.ts';

/** Wires what every process needs, before any service starts. */
export function wirePlatform(p: Platform): void {
  // The chains report failures as residues, which sit above them.
  wireResidueOpener((tx, r) => openResidue(tx, r));
  // The chain outbox marks mirrored records pending / confirmed in the tables their owners keep.
  wireMirroredTables({ stack: stackChainRecords, sleeve: sleeveChainRecords, residue: residueChainRecords, stackHeads });
  // The Thalamus folds leaves of the memory and sleeves contexts.
  p.ports.foldSources = platformSources;
  // The economy's balances, drips and claims read the stacks and sleeves above it.
  p.ports.stackHolders = stackHolders;
  // Residue proofs are checked against the sleeves, memory, stacks and chains.
  p.ports.residueProofs = residueProofs;
  // The Worker Runner's six passes span sleeves, chains, residues, memory and economy.
  p.ports.workerPasses = PASSES;
  // The needlecast saga and a memory sleeve's upkeep use the memory context above the sleeves.
  p.ports.sleeveMemory = sleeveMemory;
}

/** Called by the launcher after each service of this process has started. */
export function wireLocalService(p: Platform, name: string, svc: unknown): void {
  // Medulla's blocks reach this process's epoch source before anyone can write against them.
  if (name === 'medulla') p.epochs.authoritative = true;
  // The Hippocampus's store takes the caller's transaction (PGlite has one connection).
  if (name === 'hippocampus') p.ports.hippocampus = localHippocampus(p);
  // The registration files name the suite this process's Cortex deployed.
  if (name === 'cortex') p.ports.cortexSuite = () => (svc as { suite?: Deployment }).suite;
}
