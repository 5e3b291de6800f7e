// Secrets never leave: after creation, no identityPriv, stack master secret, epoch key, platform
// key-encryption key or internal token appears in any log line, bus event, event-outbox row, REST
// response (success or error) or GraphQL response, in hex (either case) or base64.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../lib/log.ts';
import { epochKey, fromHex, toHex } from '../lib/crypto.ts';
import { stackMasterSecret } from '../subgraphs/stacks/stacks.ts';
import { startNeedlecast } from '../subgraphs/sleeves/needlecast/service.ts';
import type { RunningService } from '../lib/service.ts';
import type { Subscription } from '../lib/bus/port.ts';
import { startEventRelay } from '../lib/events.ts';
import { testPlatform } from './helpers/platform.ts';
import { call, enc, secureGateway, signedCall, type Identity, type Res, type SecureGateway } from './helpers/secure-gateway.ts';

const TOKEN = 'secret-internal-token-5f3a9c1e7b';
let g: SecureGateway;
let needlecast: RunningService;
let sub: Subscription;
let relay: ReturnType<typeof startEventRelay>;
let logs = '';
const events: string[] = [];
const responses: Array<{ label: string; text: string }> = [];
const identities: Identity[] = [];

const record = (label: string, r: Res) => {
  responses.push({ label, text: r.text });
  return r;
};
const rest = async (label: string, method: string, path: string, body?: unknown) => record(label, await call(g.url, method, path, body));
const signed = async (who: Identity, method: string, path: string, body?: unknown) =>
  record(`${method} ${path}`, await signedCall(g.url, who, method, path, body));
const gql = async (who: Identity | null, query: string, variables: Record<string, unknown> = {}) =>
  record(
    `graphql ${query.slice(0, 40)}`,
    who ? await signedCall(g.url, who, 'POST', '/graphql', { query, variables }) : await call(g.url, 'POST', '/graphql', { query, variables }),
  );

beforeAll(async () => {
  const p = await testPlatform({ GATEWAY_PORT: '0', HIPPOCAMPUS_PORT: '0', NEEDLECAST_PORT: '0', COG_AUTH: 'required', COG_INTERNAL_TOKEN: TOKEN });
  // every log line, at the most verbose level, into memory
  p.log = createLogger({
    level: 'trace',
    destination: new Writable({
      write(chunk, _enc, done) {
        logs += chunk.toString();
        done();
      },
    }),
  });
  sub = await p.bus.subscribe({ subjects: ['cog.>'] }, (d) => void events.push(JSON.stringify(d)));
  relay = startEventRelay(p, { pollMs: 50 });
  needlecast = await startNeedlecast(p);
  p.config.urls.needlecast = needlecast.url!;
  const { startHippocampus } = await import('../subgraphs/memory/hippocampus/service.ts');
  const hippocampus = await startHippocampus(p);
  p.config.urls.hippocampus = hippocampus.url!;
  p.ports.hippocampus = (await import('../subgraphs/memory/hippocampus/client.ts')).localHippocampus(p);
  const base = await secureGateway({}, { platform: p });
  g = {
    ...base,
    close: async () => {
      await base.close();
      await needlecast.close();
      await hippocampus.close();
      await p.cleanup();
    },
  };
});
afterAll(async () => {
  await relay?.close();
  await sub?.close();
  await g?.close();
});

describe('secrets', () => {
  it('never appear in logs, events, errors or responses after creation', async () => {
    // creation: the only responses allowed to carry identityPriv (not recorded)
    let creationText = '';
    for (const name of ['alice', 'bob']) {
      const r = await call(g.url, 'POST', '/v1/stacks', { name });
      creationText ||= r.text;
      expect(r.status).toBe(201);
      identities.push({ stackId: r.body.id, identityPriv: r.body.identityPriv });
    }
    const created = await call(g.url, 'POST', '/graphql', { query: 'mutation { createStack(name: "carol") { stack { id } identityPriv } }' });
    expect(created.body.data.createStack.identityPriv).toMatch(/^[0-9a-f]{64}$/);
    identities.push({ stackId: created.body.data.createStack.stack.id, identityPriv: created.body.data.createStack.identityPriv });
    const [A, B, C] = identities;

    // exercise the platform: sleeves, perceive, remember, recall, sync, faucet, claim, needlecast, decommission
    const s1 = (await signed(A, 'POST', '/v1/sleeves', { stackId: A.stackId, embodimentType: 'ai' })).body;
    const s2 = (await signed(A, 'POST', `/v1/sleeves/${enc(A.stackId)}`, { kind: 'human' })).body;
    const sb = (await signed(B, 'POST', '/v1/sleeves', { stackId: B.stackId, embodimentType: 'memory' })).body;
    const sc = (await gql(C, 'mutation($s: ID!) { spawnSleeve(stackId: $s, embodimentType: "ai") { id } }', { s: C.stackId })).body.data.spawnSleeve;
    for (let epoch = 0; epoch < 3; epoch++) {
      g.p.setEpoch(epoch);
      expect((await signed(A, 'POST', `/v1/sleeves/${enc(s1.id)}/perceive`, { input: `thought ${epoch}` })).status).toBe(200);
      expect((await signed(A, 'POST', '/v1/perceive', { stackId: A.stackId, sleeveId: s2.id, text: `b ${epoch}` })).status).toBe(200);
      await signed(B, 'POST', `/v1/sleeves/${enc(sb.id)}/perceive`, { input: 'bob' });
      await gql(C, 'mutation($s: ID!) { perceive(sleeveId: $s, text: "carol") { cid epoch thought } }', { s: sc.id });
    }
    await signed(A, 'POST', `/v1/stacks/${enc(A.stackId)}/remember`, { text: 'pinned', pin: true });
    await signed(A, 'POST', `/v1/sleeves/${enc(s1.id)}/remember`, { text: 'loose', pin: false });
    expect((await signed(A, 'GET', `/v1/stacks/${enc(A.stackId)}/recall?depth=8`)).status).toBe(200);
    await signed(A, 'POST', '/v1/recall', { stackId: A.stackId, depth: 8 });
    await gql(C, 'mutation($s: ID!) { recall(stackId: $s, depth: 4) { fidelity } }', { s: C.stackId });
    await signed(A, 'POST', `/v1/sleeves/${enc(s1.id)}/sync`);
    await signed(A, 'POST', '/v1/faucet/drip', { stackId: A.stackId });
    await signed(A, 'POST', '/v1/treasury/claim', { stackId: A.stackId });
    await signed(A, 'POST', '/v1/needlecast', { from: s2.id, to: 'ai' });
    await signed(A, 'POST', '/v1/needlecast', { stackId: A.stackId, fromSleeveId: s1.id, toSleeveKind: 'mining' });
    await signed(B, 'DELETE', `/v1/sleeves/${enc(sb.id)}`);
    // errors: unsigned, foreign, bad signature, bad input, unknown ids, malformed JSON
    await rest('unsigned', 'POST', `/v1/sleeves/${enc(s1.id)}/perceive`, { input: 'x' });
    await signed(B, 'POST', `/v1/sleeves/${enc(s1.id)}/perceive`, { input: 'x' });
    record(
      'bad signature',
      await call(
        g.url,
        'POST',
        '/v1/sleeves',
        { stackId: A.stackId, embodimentType: 'ai' },
        { 'x-cog-stack': A.stackId, 'x-cog-timestamp': String(Date.now()), 'x-cog-signature': '0'.repeat(128) },
      ),
    );
    await signed(A, 'POST', '/v1/sleeves', { stackId: A.stackId, embodimentType: 'cyborg' });
    await signed(A, 'POST', '/v1/sleeves/sleeve:none/perceive', { input: 'x' });
    await rest('malformed', 'POST', '/v1/stacks', '{"name": ');
    await rest('unknown', 'GET', '/v1/stacks/stack:none');
    // reads
    for (const who of identities) {
      await rest('stack', 'GET', `/v1/stacks/${enc(who.stackId)}`);
      await rest('balances', 'GET', `/v1/stacks/${enc(who.stackId)}/balances`);
      await rest('totals', 'GET', `/v1/tokens/balances/${enc(who.stackId)}`);
      await rest('issuance', 'GET', `/v1/treasury/issuance/${enc(who.stackId)}`);
    }
    for (const path of ['/v1/stacks', '/v1/sleeves', '/v1/coordination/residues', '/v1/coordination/desync', '/v1/epochs/current'])
      await rest(path, 'GET', path);
    await rest('sleeve', 'GET', `/v1/sleeves/${enc(s1.id)}`);
    // GraphQL: every scalar field of the types that describe stacks, sleeves and memory
    const fieldsOf = async (type: string) => {
      const r = await call(g.url, 'POST', '/graphql', {
        query: `{ __type(name: "${type}") { fields { name args { name } type { kind ofType { kind ofType { kind } } } } } }`,
      });
      const scalar = (t: { kind: string; ofType?: { kind: string; ofType?: { kind: string } } }): boolean =>
        t.kind === 'SCALAR' || t.kind === 'ENUM' || (t.kind === 'NON_NULL' && !!t.ofType && scalar(t.ofType as never));
      return ((r.body?.data?.__type?.fields ?? []) as Array<{ name: string; args: unknown[]; type: never }>)
        .filter((f) => !f.args.length && scalar(f.type))
        .map((f) => f.name)
        .join(' ');
    };
    const stackFields = await fieldsOf('Stack');
    const sleeveFields = await fieldsOf('Sleeve');
    const nodeFields = await fieldsOf('MemoryNode');
    expect(stackFields).toContain('pubKey');
    for (const who of identities) {
      await gql(null, `query($id: ID!) { stack(id: $id) { ${stackFields} sleeves { ${sleeveFields} } } }`, { id: who.stackId });
    }
    await gql(null, `{ stacks { ${stackFields} } sleeves { ${sleeveFields} } }`);
    const head = (await g.p.db.prisma.stack.findUniqueOrThrow({ where: { id: A.stackId } })).episodicHead;
    if (nodeFields && head) await gql(null, `query($c: ID!) { memoryNode(cid: $c) { ${nodeFields} } }`, { c: head });
    await gql(null, 'query($s: ID!) { reconstruct(stackId: $s, sleeveId: "sleeve:none", depth: 4) { fidelity } }', { s: A.stackId });
    await gql(null, 'mutation { perceive(sleeveId: "sleeve:none", text: "x") { cid } }');
    await relay.flush();
    await new Promise((r) => setTimeout(r, 200)); // let the bus deliver

    // the secrets, unwrapped here the way the platform does internally
    const secrets: Array<{ what: string; bytes: Uint8Array }> = [{ what: 'platform key-encryption key', bytes: g.p.masterKey }];
    for (const who of identities) {
      const row = await g.p.db.prisma.stack.findUniqueOrThrow({ where: { id: who.stackId } });
      const master = stackMasterSecret(g.p, row);
      secrets.push({ what: `identityPriv of ${who.stackId}`, bytes: fromHex(who.identityPriv) }, { what: `master secret of ${who.stackId}`, bytes: master });
      for (let e = 0; e <= 3; e++) secrets.push({ what: `epoch key ${e} of ${who.stackId}`, bytes: epochKey(master, who.stackId, e) });
    }
    const needles = secrets.flatMap((s) => [
      { what: `${s.what} (hex)`, re: new RegExp(toHex(s.bytes), 'i') },
      {
        what: `${s.what} (base64)`,
        re: new RegExp(
          Buffer.from(s.bytes)
            .toString('base64')
            .replace(/[+/=]/g, (c) => `\\${c}`),
        ),
      },
      { what: `${s.what} (base64url)`, re: new RegExp(Buffer.from(s.bytes).toString('base64url')) },
    ]);
    needles.push({ what: 'internal token', re: new RegExp(TOKEN) });

    // what the relay has not published yet (it deletes what it has)
    const outbox = JSON.stringify(await g.p.db.prisma.eventOutbox.findMany(), (_k, v) => (typeof v === 'bigint' ? String(v) : v));
    const chainOutbox = JSON.stringify([...(await g.p.db.prisma.chainOutbox.findMany()), ...(await g.p.db.prisma.chainLedgerIntent.findMany())], (_k, v) =>
      typeof v === 'bigint' ? String(v) : v,
    );
    const haystacks = [
      { where: 'logs', text: logs },
      { where: 'bus events', text: events.join('\n') },
      { where: 'event outbox', text: outbox },
      { where: 'chain outbox', text: chainOutbox },
      ...responses.map((r) => ({ where: `response to ${r.label}`, text: r.text })),
    ];
    // the haystacks are real: requests were logged, events flowed, responses came back
    expect(logs).toContain('"msg":"request"');
    expect(events.some((e) => e.includes('cog.perceive.'))).toBe(true);
    expect(responses.length).toBeGreaterThan(40);
    // and the needles find what they look for: identityPriv is in its creation response
    expect(needles.some((n) => n.what.startsWith(`identityPriv of ${A.stackId} (hex)`) && n.re.test(creationText))).toBe(true);
    const leaks = haystacks.flatMap((h) => needles.filter((n) => n.re.test(h.text)).map((n) => `${n.what} in ${h.where}`));
    expect(leaks).toEqual([]);
  });
});
