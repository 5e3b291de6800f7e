import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // Node resolves `graphql` to its CommonJS build (the package has no "exports"), and Apollo and
    // graphql-ws load that one; vite would pick the ESM build for our files, and graphql refuses
    // schema objects from the other copy. Use the one Node uses.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'generated/**', '.cog/**', '.tmp/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: keep parallel files bounded so infrastructure-heavy suites do not starve.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
