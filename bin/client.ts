// The `cog` client commands, built on the SDK (@cog/sdk): a person at a terminal or a script
// driving a running platform through its gateway.
//   cog stack create|show · cog sleeve spawn|list|rm · cog perceive · cog remember · cog recall
//   cog needlecast · cog faucet · cog watch <subscription> · cog status
// Tables for people, --json for scripts; exit codes in EXIT below. Keys of created stacks are kept
// in the key directory (COG_KEYS_DIR, default ~/.cog/keys, files 0600) and sign what needs it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createClient,
  CogError,
  CogInputError,
  SLEEVE_KINDS,
  SUBSCRIPTION_NAMES,
  type CogClient,
  type StackKey,
  type SubscriptionName,
} from '../sdk/src/node.ts';

/** Exit codes: what went wrong, for scripts. */
export const EXIT = {
  OK: 0,
  /** The platform refused the request (a 4xx problem other than the ones below). */
  REFUSED: 1,
  /** Usage error or bad input, refused before anything was sent. */
  USAGE: 2,
  /** The stack, sleeve, saga or residue does not exist. */
  NOT_FOUND: 3,
  /** A signature is required or was refused (no key for the stack, or the wrong one). */
  UNAUTHORIZED: 4,
  /** The platform cannot be reached, or is unavailable / rate limiting after the retries. */
  UNAVAILABLE: 5,
  /** `cog status`: reachable, but a service is down. */
  DEGRADED: 6,
} as const;

const CLIENT_COMMANDS = ['stack', 'sleeve', 'perceive', 'remember', 'recall', 'needlecast', 'faucet', 'watch', 'status'] as const;

const COMMON = `Options for every client command:
  --url <gateway>     the gateway (default $COG_URL, else http://127.0.0.1:$GATEWAY_PORT, port 7070)
  --json              print JSON (one object, or one line per event for live commands)
  --stack <id>        the stack (default: the last one \`cog stack create\` made, $COG_STACK)
  --key <hex>         the stack's identityPriv to sign with (default: its file in the key directory,
                      $COG_IDENTITY_PRIV); needed when the platform runs COG_AUTH=required
Exit codes: 0 ok, 1 refused by the platform, 2 usage or bad input, 3 not found, 4 unauthorized,
5 platform unreachable or unavailable, 6 (status) a service is down.`;

const HELP: Record<string, string> = {
  stack: `usage: cog stack create <name> [--kind human|ai|mining|memory]
       cog stack show [<stackId>]
  create   creates a stack (its identity NFT on Cortex and an ed25519 key). The key (identityPriv)
           is shown once by the platform: cog keeps it in $COG_KEYS_DIR (default ~/.cog/keys) and
           makes the stack the default for later commands.
  show     the stack, its sleeves and its token totals`,
  sleeve: `usage: cog sleeve spawn <kind> [--stack <id>] [--hostname <h>] [--tick-rate <ms>]
       cog sleeve list [--stack <id> | --all]
       cog sleeve rm <sleeveId>
  spawn    a sleeve of a kind (${SLEEVE_KINDS.join(', ')}) for the stack
  list     the stack's sleeves (alive or not); --all: every alive sleeve of the platform
  rm       decommissions a sleeve (its tokens return to the stack pool)`,
  perceive: `usage: cog perceive <sleeveId> <text...>      (text "-" reads standard input)
  writes the text as an encrypted memory node through the sleeve (0.5 compute, drift +1)`,
  remember: `usage: cog remember <text...> [--stack <id> | --sleeve <id>] [--pin]
  writes a memory for the stack (paid by its sleeve with the most memory tokens) or through a sleeve;
  --pin keeps it for good (1 memory token more) and makes it the stack's episodic head`,
  recall: `usage: cog recall [--stack <id>] [--depth <n>] [--sleeve <id>]
  walks the stack's memory from its head, newest first, decrypting (depth default 10; spends memory)`,
  needlecast: `usage: cog needlecast <fromSleeveId> <toSleeveId | kind> [--tick-rate <ms>]
  moves the stack's running state to another sleeve (or a new one of a kind), printing a line per
  saga step as it happens (freeze, shard, pin, anchor, reconstruct, settle)`,
  faucet: `usage: cog faucet [--stack <id>]
  drips 100 of each core token (compute, memory, sync, routing) to the stack's sleeves; once a minute`,
  watch: `usage: cog watch <subscription> [--stack <id>] [--saga <id>] [--residue <id>] [--after <cursor>] [--count <n>]
       cog watch events [--subjects <filter,...>] [--since <seq>] [--count <n>]
  prints events live until Ctrl-C (or --count of them); resumes by itself after a dropped connection.
  subscriptions: ${SUBSCRIPTION_NAMES.join(', ')}
  events: the /v1/events bus stream (subjects like cog.perceive.*, cog.epoch.advanced; default cog.>)`,
  status: `usage: cog status
  the gateway and every subgraph, the internal services (when the gateway is local), the epoch and how
  old the tip block is; exit 6 when a service is down`,
};

class UsageError extends Error {}

interface Args {
  positional: string[];
  flags: Record<string, string | true>;
}

const BOOLEAN = new Set(['json', 'pin', 'all', 'help']);

function parseArgs(argv: string[]): Args {
  const positional: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (a === '-h') flags.help = true;
    else if (a.startsWith('--')) {
      const [name, inline] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
      if (BOOLEAN.has(name)) flags[name] = true;
      else if (inline !== undefined) flags[name] = inline;
      else {
        const next = argv[i + 1];
        if (next === undefined || next.startsWith('--')) throw new UsageError(`--${name} needs a value`);
        flags[name] = next;
        i++;
      }
    } else positional.push(a);
  }
  return { positional, flags };
}

// ---- key directory -----------------------------------------------------------------------------

const keysDir = () => process.env.COG_KEYS_DIR || path.join(os.homedir(), '.cog', 'keys');
const keyFile = (stackId: string) => path.join(keysDir(), `${stackId.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
const currentFile = () => path.join(keysDir(), 'current');

function saveKey(key: StackKey): string {
  fs.mkdirSync(keysDir(), { recursive: true, mode: 0o700 });
  const file = keyFile(key.stackId);
  fs.writeFileSync(file, JSON.stringify(key, null, 2) + '\n', { mode: 0o600 });
  fs.writeFileSync(currentFile(), key.stackId + '\n', { mode: 0o600 });
  return file;
}

function loadKey(stackId: string): StackKey | undefined {
  try {
    const k = JSON.parse(fs.readFileSync(keyFile(stackId), 'utf8')) as StackKey;
    return k.stackId === stackId && typeof k.identityPriv === 'string' ? k : undefined;
  } catch {
    return undefined;
  }
}

function defaultStack(a: Args): string | undefined {
  const s = a.flags.stack;
  if (typeof s === 'string') return s;
  if (process.env.COG_STACK) return process.env.COG_STACK;
  try {
    return fs.readFileSync(currentFile(), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function requireStack(a: Args): string {
  const s = defaultStack(a);
  if (!s) throw new UsageError('no stack: pass --stack <id>, or create one with `cog stack create <name>`');
  return s;
}

// ---- output ------------------------------------------------------------------------------------

const out = (s: string) => process.stdout.write(s + '\n');

/** A plain table: a header and rows, columns padded to their widest cell. */
export function table(head: string[], rows: Array<Array<string | number | boolean | null | undefined>>): string {
  const cells = [head, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
const tokens = (t: { compute: number; memory: number; sync: number; routing: number; residue?: number }) =>
  `compute ${fmt(t.compute)}  memory ${fmt(t.memory)}  sync ${fmt(t.sync)}  routing ${fmt(t.routing)}${t.residue !== undefined ? `  residue ${fmt(t.residue)}` : ''}`;

function kv(pairs: Array<[string, unknown]>): string {
  const w = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(w)}  ${v === null || v === undefined ? '-' : String(v)}`).join('\n');
}

// ---- the client --------------------------------------------------------------------------------

function gatewayUrl(a: Args): string {
  if (typeof a.flags.url === 'string') return a.flags.url;
  return process.env.COG_URL || process.env.COG_BASE_URL || `http://127.0.0.1:${process.env.GATEWAY_PORT || 7070}`;
}

const retried = new Set<string>();

/** A client for the command; signing as `stackId` when its key is known. */
function clientFor(a: Args, stackId?: string): CogClient {
  const base = createClient({
    url: gatewayUrl(a),
    onRetry: ({ delayMs, problem }) => {
      if (!a.flags.json && !retried.has(problem.code))
        process.stderr.write(`cog: ${problem.code === 'NETWORK' ? 'no answer' : problem.code}: retrying in ${(delayMs / 1000).toFixed(1)} s\n`);
      retried.add(problem.code);
    },
  });
  if (!stackId) return base;
  const priv = typeof a.flags.key === 'string' ? a.flags.key : process.env.COG_IDENTITY_PRIV;
  const key = priv ? { stackId, identityPriv: priv } : loadKey(stackId);
  return key ? base.withKey(key) : base;
}

/** The stack a sleeve belongs to (a read: no signature needed). */
async function stackOfSleeve(a: Args, sleeveId: string): Promise<string> {
  return (await clientFor(a).sleeves.get(sleeveId)).stackId;
}

function textArg(a: Args, from: number, what = 'text'): string {
  const parts = a.positional.slice(from);
  if (!parts.length) throw new UsageError(`missing ${what}`);
  if (parts.length === 1 && parts[0] === '-') return fs.readFileSync(0, 'utf8').replace(/\n$/, '');
  return parts.join(' ');
}

function intFlag(a: Args, name: string): number | undefined {
  const v = a.flags[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^-?\d+$/.test(v)) throw new UsageError(`--${name} must be an integer`);
  return Number(v);
}

// ---- commands ----------------------------------------------------------------------------------

async function stack(a: Args): Promise<number> {
  const [, sub, ...rest] = a.positional;
  if (sub === 'create') {
    const name = rest.join(' ');
    if (!name) throw new UsageError('missing <name>: cog stack create <name>');
    const kind = a.flags.kind;
    const created = await clientFor(a).stacks.create({ name, ...(typeof kind === 'string' ? { kind: kind as never } : {}) });
    const file = created.key ? saveKey(created.key) : null;
    if (a.flags.json) out(JSON.stringify({ ...created, keyFile: file }, null, 2));
    else {
      out(
        kv([
          ['stack', created.stack.id],
          ['name', created.stack.name],
          ['kind', created.stack.kind],
          ['pubKey', created.stack.pubKey],
          ['tokenId', created.stack.tokenId],
          ['key file', file],
        ]),
      );
      out(
        `\nThe key (identityPriv) is shown only once by the platform; it is kept in ${file} (0600) and signs this stack's requests. Next: cog sleeve spawn ai`,
      );
    }
    return EXIT.OK;
  }
  if (sub === 'show') {
    const id = rest[0] ?? requireStack(a);
    const s = await clientFor(a).stacks.get(id);
    if (a.flags.json) return (out(JSON.stringify(s, null, 2)), EXIT.OK);
    out(
      kv([
        ['stack', s.id],
        ['name', s.name],
        ['kind', s.kind],
        ['tokenId', s.tokenId],
        ['epoch', s.epoch],
        ['episodic head', s.episodicHead],
        ['pubKey', s.pubKey],
        ['chain', s.chainStatus],
        ['created', s.createdAt],
        ['tokens', tokens(s.balances)],
        ['signing key', loadKey(s.id) ? keyFile(s.id) : 'not in the key directory'],
      ]),
    );
    out('');
    out(s.sleeves.length ? sleeveTable(s.sleeves) : 'no sleeves yet: cog sleeve spawn <kind>');
    return EXIT.OK;
  }
  throw new UsageError(HELP.stack!);
}

type SleeveRow = {
  id: string;
  embodimentType: string;
  alive: boolean;
  frozen: boolean;
  drift: number;
  hostname: string | null;
  tokens: { compute: number; memory: number; sync: number; routing: number };
};
const sleeveTable = (list: SleeveRow[]) =>
  table(
    ['SLEEVE', 'KIND', 'STATE', 'DRIFT', 'COMPUTE', 'MEMORY', 'SYNC', 'ROUTING', 'HOST'],
    list.map((s) => [
      s.id,
      s.embodimentType,
      s.alive ? (s.frozen ? 'frozen' : 'alive') : 'gone',
      fmt(s.drift),
      fmt(s.tokens.compute),
      fmt(s.tokens.memory),
      fmt(s.tokens.sync),
      fmt(s.tokens.routing),
      s.hostname,
    ]),
  );

async function sleeve(a: Args): Promise<number> {
  const [, sub, arg] = a.positional;
  if (sub === 'spawn') {
    if (!arg) throw new UsageError(`missing <kind> (${SLEEVE_KINDS.join(', ')}): cog sleeve spawn <kind>`);
    const stackId = requireStack(a);
    const s = await clientFor(a, stackId).sleeves.spawn({
      stackId,
      kind: arg as never,
      hostname: typeof a.flags.hostname === 'string' ? a.flags.hostname : undefined,
      tickRate: intFlag(a, 'tick-rate'),
    });
    if (a.flags.json) out(JSON.stringify(s, null, 2));
    else out(`${sleeveTable([s])}\n\nNext: cog perceive ${s.id} "hello"`);
    return EXIT.OK;
  }
  if (sub === 'list') {
    const c = clientFor(a);
    const list = a.flags.all ? await c.sleeves.list() : await c.sleeves.list({ stackId: requireStack(a) });
    if (a.flags.json) out(JSON.stringify(list, null, 2));
    else out(list.length ? sleeveTable(list) : 'no sleeves');
    return EXIT.OK;
  }
  if (sub === 'rm') {
    if (!arg) throw new UsageError('missing <sleeveId>: cog sleeve rm <sleeveId>');
    const s = await clientFor(a, await stackOfSleeve(a, arg)).sleeves.decommission(arg);
    if (a.flags.json) out(JSON.stringify(s, null, 2));
    else out(`decommissioned ${s.id}; its tokens (${tokens(s.tokens)}) went back to the stack pool`);
    return EXIT.OK;
  }
  throw new UsageError(HELP.sleeve!);
}

async function perceive(a: Args): Promise<number> {
  const sleeveId = a.positional[1];
  if (!sleeveId) throw new UsageError('missing <sleeveId>: cog perceive <sleeveId> <text...>');
  const text = textArg(a, 2);
  const r = await clientFor(a, await stackOfSleeve(a, sleeveId)).memory.perceive({ sleeveId, text });
  if (a.flags.json) out(JSON.stringify(r, null, 2));
  else
    out(
      kv([
        ['cid', r.cid],
        ['epoch', r.epoch],
        ['thought', r.thought],
        ['cost', `${fmt(r.cost.compute)} compute`],
      ]),
    );
  return EXIT.OK;
}

async function remember(a: Args): Promise<number> {
  const text = textArg(a, 1);
  const sleeveId = typeof a.flags.sleeve === 'string' ? a.flags.sleeve : undefined;
  const stackId = sleeveId ? await stackOfSleeve(a, sleeveId) : requireStack(a);
  const c = clientFor(a, stackId);
  const pin = a.flags.pin === true;
  const r = sleeveId ? await c.memory.remember({ sleeveId, text, pin }) : await c.memory.remember({ stackId, text, pin });
  if (a.flags.json) out(JSON.stringify(r, null, 2));
  else
    out(
      kv([
        ['cid', r.cid],
        ['epoch', r.epoch],
        ['sleeve', r.sleeveId],
        ['pinned', r.node.pinned],
      ]),
    );
  return EXIT.OK;
}

async function recall(a: Args): Promise<number> {
  const stackId = requireStack(a);
  const r = await clientFor(a, stackId).memory.recall({
    stackId,
    depth: intFlag(a, 'depth') ?? 10,
    sleeveId: typeof a.flags.sleeve === 'string' ? a.flags.sleeve : undefined,
  });
  if (a.flags.json) return (out(JSON.stringify(r, null, 2)), EXIT.OK);
  out(
    r.fragments.length
      ? table(
          ['EPOCH', 'CID', 'TEXT'],
          r.fragments.map((f) => [f.epoch, f.cid.replace(/^cog:\/\/(.{12}).*(@\d+)$/, 'cog://$1…$2'), f.text]),
        )
      : 'nothing to recall yet: cog perceive <sleeveId> <text>',
  );
  out(
    `\nfidelity ${fmt(r.fidelity)}  broken ${r.brokenCount}  depth ${r.effectiveDepth}  cost ${fmt(r.cost.memory)} memory${r.residue ? `  residue opened: ${r.residue.id}` : ''}`,
  );
  return EXIT.OK;
}

async function needlecast(a: Args): Promise<number> {
  const [, from, to] = a.positional;
  if (!from || !to) throw new UsageError(`usage: cog needlecast <fromSleeveId> <toSleeveId | ${SLEEVE_KINDS.join(' | ')}>`);
  const c = clientFor(a, await stackOfSleeve(a, from));
  const t0 = Date.now();
  const run = c.needlecast.start({ from, to, toTickRate: intFlag(a, 'tick-rate') });
  if (!a.flags.json) out(`saga ${run.sagaId}: ${from} -> ${to}`);
  for await (const s of run.progress) {
    const at = ((Date.now() - t0) / 1000).toFixed(1).padStart(5);
    if (a.flags.json) out(JSON.stringify({ sagaId: s.sagaId, step: s.step, status: s.status }));
    else out(`${at} s  ${s.step.padEnd(11)} ${s.status}`);
  }
  const r = await run.result;
  if (a.flags.json) out(JSON.stringify(r));
  else out(`${r.ok ? 'completed' : r.status}: now on ${r.to ?? '-'}; ${r.shards} shards, cost ${fmt(r.cost.routing)} routing`);
  await c.close();
  return r.ok ? EXIT.OK : EXIT.REFUSED;
}

async function faucet(a: Args): Promise<number> {
  const stackId = requireStack(a);
  const g = await clientFor(a, stackId).economy.faucet(stackId);
  if (a.flags.json) out(JSON.stringify(g, null, 2));
  else out(`granted ${tokens(g.granted)}${g.sleeves.length ? ` over ${g.sleeves.length} sleeve(s)` : ' into the stack pool (no alive sleeve)'}`);
  return EXIT.OK;
}

async function watch(a: Args): Promise<number> {
  const name = a.positional[1];
  if (!name) throw new UsageError(HELP.watch!);
  const count = intFlag(a, 'count');
  const c = clientFor(a);
  const reconnect = ({ reason }: { reason: string }) => process.stderr.write(`cog: connection dropped (${reason}); resuming\n`);
  let n = 0;
  const stop = new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
  const print = (line: string) => out(line);
  if (name === 'events') {
    const subjects = typeof a.flags.subjects === 'string' ? a.flags.subjects.split(',') : undefined;
    const since = intFlag(a, 'since');
    const stream = c.events({ subjects, since, onReconnect: reconnect });
    if (!a.flags.json) process.stderr.write(`cog: watching ${subjects?.join(',') ?? 'cog.>'} (Ctrl-C stops)\n`);
    void stop.then(() => stream.close());
    for await (const e of stream) {
      print(a.flags.json ? JSON.stringify(e) : `${new Date(e.ts).toISOString()}  ${String(e.seq).padStart(6)}  ${e.subject}  ${JSON.stringify(e.data)}`);
      if (count !== undefined && ++n >= count) break;
    }
    await stream.close();
    return EXIT.OK;
  }
  if (!(SUBSCRIPTION_NAMES as string[]).includes(name))
    throw new UsageError(`unknown subscription "${name}"; one of: ${SUBSCRIPTION_NAMES.join(', ')}, events`);
  const vars: Record<string, unknown> = {};
  if (['perceived', 'sleeveChanged', 'emission'].includes(name)) vars.stackId = requireStack(a);
  if (name === 'needlecastProgress') {
    if (typeof a.flags.saga !== 'string') throw new UsageError('needlecastProgress needs --saga <sagaId>');
    vars.sagaId = a.flags.saga;
  }
  if (name === 'residueChanged' && typeof a.flags.residue === 'string') vars.id = a.flags.residue;
  const sub = c.subscribe(name as SubscriptionName, vars as never, {
    after: typeof a.flags.after === 'string' ? a.flags.after : undefined,
    onReconnect: reconnect,
  });
  if (!a.flags.json)
    process.stderr.write(`cog: watching ${name}${vars.stackId ? ` for ${vars.stackId}` : ''} (Ctrl-C stops; resume later with --after <cursor>)\n`);
  void stop.then(() => sub.close());
  for await (const e of sub) {
    const { cursor, ...rest } = e as Record<string, unknown>;
    print(
      a.flags.json
        ? JSON.stringify(e)
        : `${new Date().toISOString()}  ${String(cursor).padStart(6)}  ${Object.entries(rest)
            .map(([k, v]) => `${k}=${v}`)
            .join('  ')}`,
    );
    if (count !== undefined && ++n >= count) break;
  }
  await sub.close();
  await c.close();
  return EXIT.OK;
}

async function status(a: Args): Promise<number> {
  const c = clientFor(a);
  const [health, epoch] = await Promise.all([c.health(), c.chains.epoch()]);
  const services: Array<{ name: string; ok: boolean; url: string }> = [
    { name: 'gateway', ok: health.gateway.ok, url: c.url },
    ...health.subgraphs.map((s) => ({ name: `subgraph ${s.name.replace(/^cog-|-subgraph$/g, '')}`, ok: s.ok, url: `${c.url}/graphql` })),
  ];
  // Internal services listen on loopback: probe them when the gateway is on this machine.
  if (/^https?:\/\/(127\.|localhost|\[::1\])/.test(c.url)) {
    const port = (k: string, d: number) => Number(process.env[k] || d);
    const internal: Array<[string, string]> = [
      ['needlecast', `http://127.0.0.1:${port('NEEDLECAST_PORT', 7071)}/health`],
      ['thalamus', `http://127.0.0.1:${port('THALAMUS_PORT', 7072)}/health`],
      ['dhf', `http://127.0.0.1:${port('DHF_PORT', 7073)}/health`],
      ['treasury', `http://127.0.0.1:${port('TREASURY_PORT', 7074)}/health`],
      ['faucet', `http://127.0.0.1:${port('FAUCET_PORT', 7075)}/health`],
      ['medulla', `http://127.0.0.1:${port('MEDULLA_PORT', 8332)}/health`],
      ['hippocampus', `http://127.0.0.1:${port('HIPPOCAMPUS_PORT', 5001)}/health`],
    ];
    const results = await Promise.all(
      internal.map(async ([name, url]) => {
        const ok = await fetch(url, { signal: AbortSignal.timeout(2000) }).then(
          (r) => (r.body?.cancel(), r.ok),
          () => false,
        );
        return { name, ok, url: url.replace(/\/health$/, '') };
      }),
    );
    services.push(...results);
  }
  const tipAgeS = epoch.block ? Math.max(0, Date.now() / 1000 - epoch.block.ts) : null;
  const down = services.filter((s) => !s.ok);
  if (a.flags.json) {
    out(
      JSON.stringify(
        { ok: down.length === 0, services, epoch: epoch.epoch, height: epoch.height, tip: epoch.tip, difficulty: epoch.difficulty, tipAgeSeconds: tipAgeS },
        null,
        2,
      ),
    );
  } else {
    out(
      table(
        ['SERVICE', 'STATE', 'URL'],
        services.map((s) => [s.name, s.ok ? 'up' : 'DOWN', s.url]),
      ),
    );
    out(
      `\nepoch ${epoch.epoch}  height ${epoch.height}  tip ${epoch.tip.slice(0, 16)}…  tip age ${tipAgeS === null ? '-' : `${tipAgeS.toFixed(1)} s`}  difficulty ${epoch.difficulty ?? '-'}`,
    );
    if (down.length) out(`\n${down.length} service(s) down: ${down.map((s) => s.name).join(', ')}`);
  }
  await c.close();
  return down.length ? EXIT.DEGRADED : EXIT.OK;
}

// ---- errors that say what to do ----------------------------------------------------------------

function hint(e: CogError, cmd: string): string {
  switch (e.code) {
    case 'NETWORK':
      return 'is the platform running? Start it with `npm start`, or point --url / COG_URL at its gateway';
    case 'UNAUTHORIZED':
      return 'this platform requires signed requests (COG_AUTH=required): use the stack whose key `cog stack create` kept in the key directory, or pass --key <identityPriv>';
    case 'NOT_FOUND':
      return 'check the id: `cog stack show` lists the stack and its sleeves';
    case 'INSUFFICIENT_TOKENS':
      return 'top the stack up: `cog faucet` (once a minute)';
    case 'RATE_LIMITED':
      return `wait ${e.extra.retryAfter ?? 'a few'} s and try again`;
    case 'SLEEVE_DECOMMISSIONED':
      return 'that sleeve is gone: spawn another with `cog sleeve spawn <kind>`';
    case 'SLEEVE_FROZEN':
      return 'a needlecast is moving that sleeve: use the target sleeve once it completes';
    case 'UNAVAILABLE':
      return 'a dependency of the platform is down; `cog status` shows which';
    case 'INVALID_INPUT':
      return `see \`cog ${cmd} --help\``;
    default:
      return '';
  }
}

function exitFor(e: CogError): number {
  if (e.code === 'INVALID_INPUT') return EXIT.USAGE;
  if (e.code === 'NETWORK' || e.status === 503 || e.status === 429) return EXIT.UNAVAILABLE;
  if (e.status === 404) return EXIT.NOT_FOUND;
  if (e.status === 401) return EXIT.UNAUTHORIZED;
  return EXIT.REFUSED;
}

export async function clientMain(argv: string[]): Promise<number> {
  const cmd = argv[0]!;
  let a: Args;
  try {
    a = parseArgs(argv);
  } catch (e) {
    process.stderr.write(`cog ${cmd}: ${(e as Error).message}\n`);
    return EXIT.USAGE;
  }
  if (a.flags.help) {
    out(`${HELP[cmd]}\n\n${COMMON}`);
    return EXIT.OK;
  }
  const run = { stack, sleeve, perceive, remember, recall, needlecast, faucet, watch, status }[cmd as (typeof CLIENT_COMMANDS)[number]];
  try {
    return await run(a);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`cog ${cmd}: ${e.message}\n(cog ${cmd} --help for more)\n`);
      return EXIT.USAGE;
    }
    if (e instanceof CogError) {
      const h = hint(e, cmd);
      if (a.flags.json) process.stderr.write(JSON.stringify({ error: e.toJSON(), ...(h ? { hint: h } : {}) }) + '\n');
      else {
        const field = e instanceof CogInputError ? '' : e.errors.length ? ` (${e.errors.map((f) => `${f.path} ${f.message}`).join('; ')})` : '';
        process.stderr.write(`cog ${cmd}: ${e.detail} [${e.code}${e.status ? ` ${e.status}` : ''}]${field}\n${h ? `  ${h}\n` : ''}`);
      }
      return exitFor(e);
    }
    throw e;
  }
}
