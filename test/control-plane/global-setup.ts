// vitest globalSetup of the `cluster` project: makes sure etcd, kube-apiserver, kubectl and helm exist (a
// cached build takes a second; a cold one many minutes) and hands their folder to the test files, both as
// process.env.TOLLGATE_CONTROL_PLANE_BIN (read by startControlPlane()) and as inject('controlPlaneBinDir').
// Nothing else is global: each test file starts its own control plane.

import type { TestProject } from 'vitest/node';
import { BIN_DIR_ENV, ensureControlPlaneBinaries } from './binaries.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    controlPlaneBinDir: string;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  const binDir = await ensureControlPlaneBinaries();
  process.env[BIN_DIR_ENV] = binDir;
  project.provide('controlPlaneBinDir', binDir);
}
