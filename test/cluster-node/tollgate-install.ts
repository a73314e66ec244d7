// Tollgate's chart installed on the node the way a platform team installs it, with one difference: the
// images come from the node's containerd (imported, never pulled), so both pull policies are Never.

import { join } from 'node:path';
import type { ToolResult } from '../control-plane/tool-run.ts';
import type { NodeCluster } from './node-cluster.ts';

export const CHART = join(import.meta.dirname, '..', '..', 'charts', 'tollgate');
export const RELEASE = 'tollgate';
export const NAMESPACE = 'tollgate-system';

export const LOCAL_IMAGE_VALUES = ['--set', 'image.pullPolicy=Never', '--set', 'sidecar.image.pullPolicy=Never'];

export function helmInstall(node: Pick<NodeCluster, 'helm'>, extra: string[] = []): Promise<ToolResult> {
  return node.helm(['install', RELEASE, CHART, '-n', NAMESPACE, '--create-namespace', ...LOCAL_IMAGE_VALUES, ...extra]);
}
