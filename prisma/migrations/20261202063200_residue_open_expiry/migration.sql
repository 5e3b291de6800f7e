-- Residue expiry (docs/scale.md): the open residues by the epoch they expire at, so the pass finds
-- the due ones with a range `<= epoch` (subgraphs/residues/residues.ts, expireBatchQuery) instead
-- of walking every open residue on the status index.
CREATE INDEX "Residue_open_expiresAtEpoch_idx" ON "Residue"("expiresAtEpoch") WHERE status = 'open';
