import { defineConfig } from 'vitest/config';

export default defineConfig({
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
