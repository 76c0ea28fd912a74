import { createRequire } from 'node:module';
import { configDefaults, defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

// Crash, restart and failover tests: slow, and they kill servers, so one file at a time.
export default defineConfig({
  // One graphql instance: the one Node resolves for @apollo/server and
  // @graphql-tools/utils, not Vite's ESM copy (graphql-js refuses mixed realms).
  resolve: { alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }] },
  test: {
    include: ['test/reliability/**/*.test.ts'],
    exclude: [...configDefaults.exclude],
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    fileParallelism: false,
  },
});
