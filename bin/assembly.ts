// The composition root's choice of adapters. Which services run in this process is known here
// and nowhere else: what runs beside a caller is reached directly, the rest over HTTP. Domain code
// never asks; it takes what its context's ports hold (lib/platform.ts Ports) or what was wired
// into it here.
import type { Platform } from '../lib/platform.ts';
import { wireResidueOpener, type Deployment } from '../subgraphs/chains/index.ts';
import { localHippocampus } from '../subgraphs/memory/index.ts';
import { openResidue } from '../subgraphs/residues/index.ts';
import { platformSources } from '../flows/thalamus-sources.ts';

/** Wires what every process needs, before any service starts. */
export function wirePlatform(p: Platform): void {
  // The chains report failures as residues, which sit above them.
  wireResidueOpener((tx, r) => openResidue(tx, r));
  // The Thalamus folds leaves of the memory and sleeves contexts.
  p.ports.foldSources = platformSources;
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
