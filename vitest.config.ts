import { defineConfig } from 'vitest/config';

// Five projects, by what a test needs to run; `npm test` runs all five.
// - unit: the code's own tests beside it, plus the fakes, the control-plane harness and the docs: in-process
//   (loopback servers, real SQLite, worker threads), no `tollgate` processes.
// - e2e: real `tollgate proxy` processes against the fake upstreams (test/e2e).
// - cluster: a real etcd + kube-apiserver, built once from the Go module proxy by test/control-plane, one file
//   at a time.
// - browser: the management UI in Debian's Chromium through playwright-core, against real proxy processes
//   (test/browser); the setup installs chromium with apt-get when it is missing.
// - node: Tollgate on kind clusters (test/kind), its images built by `docker build`; skipped with a reason where
//   the machine cannot run it, required under CI=true.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['{contracts,cmd,sidecar,operator,webhook,kube-client,crds,test}/**/*.test.ts'],
          exclude: ['test/e2e/**', 'test/cluster/**', 'test/browser/**', '**/*.node.test.ts', '**/node_modules/**'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          globalSetup: ['test/browser/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
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
          include: ['test/kind/**/*.node.test.ts'],
          globalSetup: ['test/kind/global-setup.ts'],
          // Steps wait on pods, rollouts and pushes on a shared two-core machine; bring-up may also wait for
          // another run's cluster to finish (one kind cluster per machine).
          testTimeout: 300_000,
          hookTimeout: 30 * 60_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
