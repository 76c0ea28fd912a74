import { createRequire } from 'node:module';
import { configDefaults, defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  // One graphql instance: the one Node resolves for @apollo/server and
  // @graphql-tools/utils, not Vite's ESM copy (graphql-js refuses mixed realms).
  resolve: { alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }] },
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, 'test/reliability/**'],
    // Starts (or finds) Redis and a Redis Cluster once; tests read them with inject().
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    teardownTimeout: 15_000,
    fileParallelism: true,
  },
});
