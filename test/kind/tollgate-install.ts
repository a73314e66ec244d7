// Tollgate's chart installed on a kind cluster the way a platform team installs it: the chart's defaults, its
// images already on every node (kind load), so nothing is pulled.

import { join } from 'node:path';
import type { ToolResult } from '../control-plane/tool-run.ts';
import type { KindCluster } from './kind-cluster.ts';

export const CHART = join(import.meta.dirname, '..', '..', 'charts', 'tollgate');
export const RELEASE = 'tollgate';
export const NAMESPACE = 'tollgate-system';

export function helmInstall(cluster: Pick<KindCluster, 'helm'>, extra: string[] = []): Promise<ToolResult> {
  return cluster.helm(['install', RELEASE, CHART, '-n', NAMESPACE, '--create-namespace', ...extra]);
}
