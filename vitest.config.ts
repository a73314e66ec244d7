import { defineConfig } from 'vitest/config';

// Three projects: `unit` (pure code, local fakes, real SQLite), `cluster` (a real etcd + kube-apiserver,
// built once from the Go module proxy by test/control-plane) and `node` (a real single-node cluster with
// kubelet and containerd, test/cluster-node; skipped with a reason where the machine cannot run it, required
// under CI=true). `npm test` runs all three.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{sidecar,operator,webhook,crds,test}/**/*.test.ts'],
          exclude: ['test/cluster/**', '**/*.node.test.ts', '**/node_modules/**'],
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
      {
        test: {
          name: 'node',
          include: ['test/cluster-node/**/*.node.test.ts'],
          globalSetup: ['test/cluster-node/global-setup.ts'],
          // Steps wait on pods, rollouts and pushes on a shared two-core machine; bring-up may also wait for
          // another run's node to finish (one node per machine).
          testTimeout: 300_000,
          hookTimeout: 30 * 60_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
