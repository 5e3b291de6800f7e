// Gateway /v1 routes of coordination residues.
import type { FastifyInstance } from 'fastify';
import type { Platform } from '../lib/platform.ts';
import { getResidue, listResidues, submitProof, RESIDUE_LIST_LIMIT } from '../subgraphs/residues/residues.ts';
import { RESIDUE_KINDS } from '../subgraphs/residues/open.ts';

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 256 } } } as const;

export default async function residuesRest(app: FastifyInstance, opts: { platform: Platform }): Promise<void> {
  const p = opts.platform;
  app.get<{ Querystring: { limit?: number; status?: string; kind?: string; stackId?: string } }>('/v1/coordination/residues', {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: RESIDUE_LIST_LIMIT },
          status: { type: 'string', enum: ['detected', 'open', 'claimed', 'resolved', 'expired'] },
          kind: { type: 'string', enum: RESIDUE_KINDS },
          stackId: { type: 'string', minLength: 1, maxLength: 256 },
        },
      },
    },
  }, async (req) => listResidues(p, req.query.limit ?? RESIDUE_LIST_LIMIT, req.query));
  app.get<{ Params: { id: string } }>('/v1/coordination/residues/:id', { schema: { params: idParams } }, async (req) => getResidue(p, req.params.id));
  app.post<{ Params: { id: string }; Body: { claimant: string; proof?: Record<string, unknown> } }>('/v1/coordination/residues/:id/proof', {
    schema: {
      params: idParams,
      body: {
        type: 'object', required: ['claimant'],
        properties: { claimant: { type: 'string', minLength: 1, maxLength: 256 }, proof: { type: 'object' } },
      },
    },
  }, async (req) => submitProof(p, req.params.id, { claimant: req.body.claimant, proof: req.body.proof ?? {} }));
}
