import { defineConfig } from 'vitest/config';

// Two projects: `unit` (pure code, local fakes, real SQLite) and `cluster` (a real etcd + kube-apiserver,
// built once from the Go module proxy by test/control-plane). `npm test` runs both.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{sidecar,operator,webhook,kube-client,crds,test}/**/*.test.ts'],
          exclude: ['test/cluster/**', '**/node_modules/**'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'cluster',
          include: ['test/cluster/**/*.test.ts'],
          globalSetup: ['test/control-plane/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
