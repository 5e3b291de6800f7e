// Prisma 7 CLI config: used by `prisma generate` only. Migrations are applied at start by
// lib/db/migrate.ts through the driver adapter, and generated/checked with Prisma 6's WASM
// engine (prisma/diff.ts), because Prisma 7's migrate needs a native engine this machine lacks.
import { defineConfig } from 'prisma/config';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
});
