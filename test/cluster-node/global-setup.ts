// vitest globalSetup of the `node` project: decides whether this machine can run the real-node test and, if
// so, builds what it needs (control-plane and node binaries, images; seconds when cached). A machine that
// cannot run it skips the test with the reason; under CI=true that reason is an error instead, so a
// regression cannot pass unnoticed because the node never ran.

import type { TestProject } from 'vitest/node';
import { runningCliNode } from './node-cluster.ts';
import { prepareNodeAssets, type NodeAssets } from './node-assets.ts';
import { nodeUnavailableReason } from './node-prerequisites.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Why the node test is skipped on this machine; '' when it runs. */
    nodeSkipReason: string;
    nodeAssets: NodeAssets | null;
  }
}

function skipReason(): string | undefined {
  const unavailable = nodeUnavailableReason();
  if (unavailable) return unavailable;
  const cli = runningCliNode();
  if (cli) return `a node brought up by \`./tollgatew cluster up\` (since ${cli.startedAt}) is running; \`./tollgatew cluster down\` frees the machine for the test`;
  if (process.env.TOLLGATE_NODE_TEST === '0') return 'TOLLGATE_NODE_TEST=0';
  return undefined;
}

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const reason = skipReason();
  if (reason !== undefined) {
    if (process.env.CI === 'true') throw new Error(`the real-node test must run under CI=true, but cannot: ${reason}`);
    const message = `\n[node] the real-node test is SKIPPED: ${reason}\n`;
    process.stderr.write(message);
    project.provide('nodeSkipReason', reason);
    project.provide('nodeAssets', null);
    return () => process.stderr.write(message);
  }
  project.provide('nodeSkipReason', '');
  project.provide('nodeAssets', await prepareNodeAssets());
  return undefined;
}
