// PGlite's engine compiled ahead of openDatabase (bin/cog.ts begins it as a start begins): the
// module is PGlite's own, and a database opens on it and answers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase, precompilePglite } from './index.ts';

describe('precompilePglite', () => {
  it("compiles PGlite's engine once, and openDatabase opens on it", async () => {
    const compiled = precompilePglite();
    expect(precompilePglite()).toBe(compiled); // once a process
    const mod = await compiled;
    expect(mod).toBeInstanceOf(WebAssembly.Module);
    // The engine's own exports (the protocol entry points PGlite's glue calls).
    const names = WebAssembly.Module.exports(mod!).map((e) => e.name);
    expect(names).toEqual(expect.arrayContaining(['ProcessUtility', 'pgl_getMyProcPort']));
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cog-precompile-'));
    const db = await openDatabase({ dataDir, sharedBuffersMb: 16 });
    try {
      expect(await db.driver.query<{ n: number }>('SELECT 40 + 2 AS n')).toEqual([{ n: 42 }]);
      expect(await db.prisma.stack.count()).toBe(0);
    } finally {
      await db.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
