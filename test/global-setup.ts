// Runs once before the suite: make sure the Prisma client is generated for the current schema.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  execFileSync(process.execPath, [path.join(root, 'bin', 'cog.mjs'), 'generate'], { cwd: root, stdio: 'inherit' });
}
