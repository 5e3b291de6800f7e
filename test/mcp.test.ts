// The MCP server through the MCP SDK's own client, over both transports, against one started
// platform (embedded, +33000 ports): stdio (`cog mcp` spawned as an MCP host would, talking HTTP
// to the gateway) and Streamable HTTP (the gateway's /mcp). Each transport runs the same flow on
// its own stack: every tool, a needlecast with a progress notification per saga step, a bad input
// refused naming the argument, platform problems as tool errors with their code, resource reads
// and a resource subscription notified by a write.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startCluster, type Cluster } from './helpers/cluster.ts';
import { TOOLS } from '../mcp/tools.ts';

const root = path.resolve(import.meta.dirname, '..');
let cluster: Cluster;

beforeAll(async () => {
  // +33000 ports sit in Linux's ephemeral range: a port held a moment by an outgoing connection
  // stops the start ("already in use"), so that one cause gets one more try.
  for (let attempt = 1; ; attempt++) {
    cluster = await startCluster({ mode: 'embedded', shift: 33000 });
    try {
      await cluster.waitHealthy(120_000, ['gateway', 'needlecast', 'medulla', 'hippocampus', 'cortex']);
      return;
    } catch (e) {
      await cluster.stop();
      if (attempt > 1 || !/already in use/.test((e as Error).message)) throw e;
    }
  }
}, 240_000);

afterAll(async () => {
  await cluster?.stop();
});

type Problem = { code: string; status: number; detail?: string; errors?: Array<{ path: string; message: string }> };

type Message = { id?: number | string; method?: string; params?: { progressToken?: number | string; progress?: number; total?: number; message?: string } };

/**
 * Connects a client, with every message the server sends recorded in arrival order: the SDK's
 * client hands a notification to its handler a microtask after reading it and a response at once,
 * so a progress notification read in the same chunk as its call's result is dropped on the
 * client's side (modelcontextprotocol/typescript-sdk#2580, a race a server cannot avoid). What the
 * server sent, and in which order, is read from the transport.
 */
const connect = async (kind: 'stdio' | 'http'): Promise<{ client: Client; stderr: () => string; received: Message[] }> => {
  const client = new Client({ name: 'cog-test', version: '1.0.0' });
  const received: Message[] = [];
  // The protocol calls a transport's onmessage set before connecting, then its own handling.
  const tap = <T extends { onmessage?: (m: any, extra?: any) => void }>(t: T): T => {
    t.onmessage = (m: Message) => received.push(m);
    return t;
  };
  let err = '';
  if (kind === 'stdio') {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(root, 'bin', 'cog.mjs'), 'mcp'],
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', COG_BASE_URL: cluster.gateway },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    await client.connect(tap(transport));
  } else {
    await client.connect(tap(new StreamableHTTPClientTransport(new URL(`${cluster.gateway}/mcp`))));
  }
  return { client, stderr: () => err, received };
};

for (const kind of ['stdio', 'http'] as const) {
  describe(`MCP over ${kind}`, () => {
    let client: Client;
    let stderr: () => string;
    let received: Message[];
    let stackId = '';
    let ai = '';
    let human = '';

    const call = async (name: string, args: Record<string, unknown>, onprogress?: (p: { progress: number; total?: number; message?: string }) => void) =>
      (await client.callTool({ name, arguments: args }, undefined, { onprogress, timeout: 90_000 })) as CallToolResult;
    const ok = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await call(name, args);
      if (r.isError) throw new Error(`${name} failed: ${(r.content[0] as { text: string }).text}\n${stderr()}`);
      return r.structuredContent as Record<string, any>;
    };
    const problemOf = (r: CallToolResult) => {
      expect(r.isError).toBe(true);
      return (r.structuredContent as { problem: Problem }).problem;
    };

    beforeAll(async () => {
      ({ client, stderr, received } = await connect(kind));
    }, 60_000);
    afterAll(async () => {
      await client?.close();
    });

    it("lists every tool with its route's schema", async () => {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(TOOLS.map((t) => t.name).sort());
      const perceive = tools.find((t) => t.name === 'perceive')!;
      expect(perceive.inputSchema.required).toEqual(['sleeveId', 'input']);
      expect(perceive.inputSchema.properties).toMatchObject({ sleeveId: { type: 'string', minLength: 1 }, input: { type: 'string' } });
      expect(tools.find((t) => t.name === 'list_residues')!.inputSchema.properties).toHaveProperty('status.enum');
    });

    it('creates a stack and sleeves, perceives, remembers, recalls, syncs, reads balances, drips, claims', async () => {
      const stack = await ok('create_stack', { name: `mcp-${kind}` });
      stackId = stack.id;
      expect(stackId).toMatch(/^stack:/);
      expect(stack.identityPriv).toMatch(/^[0-9a-f]{64}$/);
      ai = (await ok('spawn_sleeve', { stackId, embodimentType: 'ai' })).id;
      human = (await ok('spawn_sleeve', { stackId, embodimentType: 'human' })).id;
      expect((await ok('get_stack', { stackId })).sleeves.map((s: { id: string }) => s.id).sort()).toEqual([ai, human].sort());
      const alive = (await ok('list_sleeves')).items as Array<{ id: string }>;
      expect(alive.map((s) => s.id)).toEqual(expect.arrayContaining([ai, human]));

      const p1 = await ok('perceive', { sleeveId: ai, input: `first thought over ${kind}` });
      expect(p1.cid).toMatch(/^cog:\/\//);
      expect(p1.thought).toContain(`first thought over ${kind}`);
      await ok('perceive', { sleeveId: ai, input: `second thought over ${kind}` });
      expect((await ok('remember', { stackId, text: `pinned over ${kind}`, pin: true })).cid).toMatch(/^cog:\/\//);
      const recalled = await ok('recall', { stackId, depth: 5 });
      expect(recalled.fragments.map((f: { text: string }) => f.text)).toEqual(expect.arrayContaining([`pinned over ${kind}`, `second thought over ${kind}`]));
      expect(recalled.fidelity).toBe(1);
      expect(await ok('sync', { sleeveId: ai })).toMatchObject({ ok: true });

      const balances = await ok('balances', { stackId });
      expect(balances.raw.compute).toBeGreaterThan(0);
      const drip = await ok('faucet_drip', { stackId });
      expect(drip).toMatchObject({ ok: true, granted: { compute: 100 } });
      // A platform problem: the faucet's cooldown, as a tool error with the problem's code.
      const again = problemOf(await call('faucet_drip', { stackId }));
      expect(again).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
      expect(await ok('claim_emissions', { stackId })).toMatchObject({ stackId });
    });

    it('refuses bad input before sending it, naming the argument', async () => {
      const wrongType = problemOf(await call('perceive', { sleeveId: ai, input: 42 }));
      expect(wrongType).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
      expect(wrongType.errors).toEqual([{ path: 'input', message: 'must be string' }]);
      // The route would ignore an unknown property; the tool names it (and what is missing).
      const misspelt = problemOf(await call('perceive', { sleeveId: ai, inptu: 'x' }));
      expect(misspelt.errors!.map((e) => e.path).sort()).toEqual(['inptu', 'input']);
      expect(problemOf(await call('list_residues', { status: 'sideways' })).errors![0]!.path).toBe('status');
      // Nothing was written by the refused calls.
      expect((await ok('get_stack', { stackId })).sleeves.find((s: { id: string }) => s.id === ai).drift).toBe(0);
    });

    it('lists residues and reports platform problems with their code (404)', async () => {
      const open = (await ok('list_residues', { status: 'open' })).items as Array<{ status: string }>;
      expect(open.every((r) => r.status === 'open')).toBe(true);
      const missing = problemOf(await call('submit_residue_proof', { residueId: 'residue:none', claimant: stackId, proof: {} }));
      expect(missing).toMatchObject({ code: 'NOT_FOUND', status: 404 });
      expect(problemOf(await call('get_stack', { stackId: 'stack:human:999999:000000000000' }))).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    });

    it('needlecasts with a progress notification per saga step', async () => {
      const progress: Array<{ progress: number; total?: number; message?: string }> = [];
      const from = received.length;
      const r = await call('needlecast', { from: ai, to: human }, (p) => progress.push(p));
      if (r.isError) throw new Error((r.content[0] as { text: string }).text);
      const saga = r.structuredContent as { ok: boolean; sagaId: string; status: string };
      expect(saga).toMatchObject({ ok: true, status: 'completed' });
      expect(saga.sagaId).toMatch(/^needle:[0-9a-f]+$/);
      // What the server sent: six notifications in step order, every one before the result.
      const sent = received.slice(from);
      const notes = sent.filter((m) => m.method === 'notifications/progress');
      const token = notes[0]?.params?.progressToken;
      expect(token).toBeDefined();
      expect(notes.every((m) => m.params?.progressToken === token)).toBe(true);
      expect(notes.map((m) => m.params?.progress)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(notes.every((m) => m.params?.total === 6)).toBe(true);
      expect(notes.map((m) => m.params?.message)).toEqual(['freeze done', 'shard done', 'pin done', 'anchor done', 'reconstruct done', 'settle done']);
      const result = sent.findIndex((m) => m.id === token && m.method === undefined);
      expect(result).toBeGreaterThan(sent.indexOf(notes[5]!));
      // What the client's callback saw: the same notifications in order, less any the SDK's race
      // dropped at the end (see connect).
      expect(progress).toEqual(notes.slice(0, progress.length).map((m) => ({ progress: m.params!.progress, total: 6, message: m.params!.message })));
      expect(progress.length).toBeGreaterThan(0);
      // The source is decommissioned now: writing through it is a 409 with its code.
      expect(problemOf(await call('perceive', { sleeveId: ai, input: 'too late' }))).toMatchObject({ status: 409 });
    });

    it('decommissions a sleeve', async () => {
      const mining = (await ok('spawn_sleeve', { stackId, embodimentType: 'mining' })).id;
      expect(await ok('decommission_sleeve', { sleeveId: mining })).toEqual({ ok: true });
      expect((await ok('get_stack', { stackId })).sleeves.find((s: { id: string }) => s.id === mining).alive).toBe(false);
    });

    it('reads resources and notifies a subscriber when one changes', async () => {
      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['cog://stacks/{stackId}', 'cog://stacks/{stackId}/memory']);
      const { resources } = await client.listResources();
      const stackUri = `cog://stacks/${encodeURIComponent(stackId)}`;
      const memoryUri = `${stackUri}/memory`;
      expect(resources.map((r) => r.uri)).toEqual(expect.arrayContaining(['cog://residues/open', stackUri, memoryUri]));

      const read = async (uri: string) => JSON.parse(((await client.readResource({ uri })).contents[0] as { text: string }).text);
      expect(await read(stackUri)).toMatchObject({ id: stackId });
      const before = await read(memoryUri);
      expect(before.nodes.length).toBeGreaterThanOrEqual(3);
      expect(Array.isArray(await read('cog://residues/open'))).toBe(true);
      await expect(client.readResource({ uri: 'cog://stacks/stack%3Anone/memory' })).rejects.toThrow(/NOT_FOUND/);

      const updated: string[] = [];
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
      await client.subscribeResource({ uri: memoryUri });
      const write = await ok('perceive', { sleeveId: human, input: `watched over ${kind}` });
      for (let i = 0; i < 100 && !updated.includes(memoryUri); i++) await new Promise((r) => setTimeout(r, 100));
      expect(updated).toContain(memoryUri);
      const after = await read(memoryUri);
      expect(after.episodicHead).toBe(write.cid);
      expect(after.nodes[0].cid).toBe(write.cid);
      await client.unsubscribeResource({ uri: memoryUri });
    });
  });
}
