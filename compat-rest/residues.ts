// Gateway /v1 routes of coordination residues.
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Platform } from '../lib/platform.ts';
import { getResidue, listResidues, submitProof, RESIDUE_LIST_LIMIT } from '../subgraphs/residues/index.ts';
import { ProofBody, ResidueIdParams, ResidueListQuery } from './schemas.ts';

export default async function residuesRest(fastify: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get('/v1/coordination/residues', { schema: { querystring: ResidueListQuery } }, async (req) =>
    listResidues(p, req.query.limit ?? RESIDUE_LIST_LIMIT, req.query),
  );
  app.get('/v1/coordination/residues/:id', { schema: { params: ResidueIdParams } }, async (req) => getResidue(p, req.params.id));
  app.post('/v1/coordination/residues/:id/proof', { schema: { params: ResidueIdParams, body: ProofBody } }, async (req) =>
    submitProof(p, req.params.id, { claimant: req.body.claimant, proof: req.body.proof ?? {} }),
  );
}
