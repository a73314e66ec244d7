// The cluster tests run the operator and the webhook with exactly the RBAC the Helm chart installs (ADR 0805):
// the chart's RBAC template is rendered by `helm template` with the release name and namespace the tests use,
// applied, and the component then talks to the API server as the chart's ServiceAccount. The API server maps a
// client certificate whose CN is system:serviceaccount:NS:NAME to that ServiceAccount for RBAC, so no token is
// needed and no permission exists that the chart does not grant.

import { join, resolve } from 'node:path';
import { VersionApi, type KubeConfig } from '@kubernetes/client-node';
import type { ControlPlane } from '../control-plane/control-plane.ts';

export const CHART = resolve(import.meta.dirname, '../../charts/tollgate');
/** The release the tests install as; the chart derives every name below from it. */
export const RELEASE = 'tollgate';

/** Names the chart gives its objects for release `tollgate` (templates/_helpers.tpl). */
export const CHART_NAMES = {
  operator: 'tollgate-operator',
  operatorTlsSecret: 'tollgate-operator-tls',
  operatorCaConfigMap: 'tollgate-operator-ca',
  webhook: 'tollgate-webhook',
  webhookTlsSecret: 'tollgate-webhook-tls',
  webhookConfiguration: 'tollgate',
} as const;

export type ChartComponent = 'operator' | 'webhook';

/** The chart's RBAC objects (ServiceAccount, Roles, bindings) for one component, as `helm template` renders them. */
export async function renderChartRbac(cp: ControlPlane, component: ChartComponent, opts: { namespace: string; set?: Record<string, string> }): Promise<string> {
  const set = Object.entries(opts.set ?? {}).flatMap(([key, value]) => ['--set', `${key}=${value}`]);
  // Offline, helm assumes an old Kubernetes that the chart's kubeVersion refuses: tell it the real one.
  const { gitVersion } = await cp.kubeConfig.makeApiClient(VersionApi).getCode();
  const args = ['template', RELEASE, CHART, '-n', opts.namespace, '--kube-version', gitVersion, '--show-only', join('templates', `${component}-rbac.yaml`), ...set];
  const result = await cp.helm(args);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return result.stdout;
}

/** Applies the chart's RBAC for `component` and returns a client that acts as the chart's ServiceAccount. */
export async function asChartServiceAccount(cp: ControlPlane, component: ChartComponent, opts: { namespace: string; set?: Record<string, string> }): Promise<KubeConfig> {
  const applied = await cp.kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], { input: await renderChartRbac(cp, component, opts) });
  if (applied.code !== 0) throw new Error(`kubectl apply of the chart's ${component} RBAC failed: ${applied.stderr}`);
  const serviceAccount = component === 'operator' ? CHART_NAMES.operator : CHART_NAMES.webhook;
  return cp.userKubeConfig(`system:serviceaccount:${opts.namespace}:${serviceAccount}`, ['system:serviceaccounts', `system:serviceaccounts:${opts.namespace}`]);
}
