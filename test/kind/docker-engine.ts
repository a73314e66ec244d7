// The Docker daemon kind runs on: docker-engine.sh decides (a daemon that answers is used as it is; otherwise
// Debian's docker.io is started in the background, with a runc wrapper where the machine needs one) and
// undoes its own changes on `down` (ADR 0112).

import { join } from 'node:path';
import { run } from './host-command.ts';

const SCRIPT = join(import.meta.dirname, 'docker-engine.sh');

export async function dockerEngineUp(): Promise<void> {
  await run('bash', [SCRIPT, 'up'], { showProgress: true });
}

/** Stops the daemon docker-engine.sh started (none other) and puts the machine's settings back. */
export async function dockerEngineDown(): Promise<void> {
  await run('bash', [SCRIPT, 'down'], { showProgress: true });
}

export async function dockerEngineStatus(): Promise<string> {
  return (await run('bash', [SCRIPT, 'status'])).stdout.trim();
}

/** True when the machine's capability bounding set lacks CAP_SYS_RESOURCE (capability 24). */
export function lacksSysResource(status: string): boolean {
  const bnd = /^CapBnd:\s+([0-9a-f]+)$/m.exec(status)?.[1];
  return bnd !== undefined && (BigInt(`0x${bnd}`) & (1n << 24n)) === 0n;
}
