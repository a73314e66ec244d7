// The chart's monitoring resources: ServiceMonitors, the sidecars' PodMonitor, the PrometheusRule and the
// Grafana dashboard render as the golden file says (UPDATE_GOLDEN=1 rewrites it; the diff is the review); every
// PromQL expression in the rules and the dashboard parses with Prometheus's own parser; and every tollgate_
// metric they query is one that Tollgate serves, so an alert can never wait on a series that does not exist.
// Only `helm template` runs here: no control plane is started.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { resolveBinDir } from '../control-plane/binaries.ts';
import { ensurePromqlCheck, promqlErrors } from '../promql/promql-check.ts';
import { ProxyMetrics } from '../../sidecar/src/metrics/proxy-metrics.ts';
import { OperatorMetrics } from '../../operator/src/metrics/operator-metrics.ts';
import { WebhookMetrics } from '../../webhook/src/metrics/webhook-metrics.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'charts', 'tollgate');
const GOLDEN = join(import.meta.dirname, 'golden', 'monitoring.yaml');
const MONITORING_KINDS = new Set(['ServiceMonitor', 'PodMonitor', 'PrometheusRule']);

type Manifest = { kind: string; metadata: { name: string; namespace?: string }; data?: Record<string, string>; spec?: Record<string, unknown> };

let helmBinary: string;
let promqlCheck: string;

function helm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(helmBinary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function render(...valuesFiles: string[]): Promise<Manifest[]> {
  const result = await helm(['template', 'tollgate', CHART, '-n', 'tollgate-system', '--kube-version', '1.34.0', ...valuesFiles.flatMap((f) => ['-f', join(CHART, 'ci', f)])]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return parseAllDocuments(result.stdout)
    .map((d) => d.toJSON() as Manifest)
    .filter(Boolean);
}

/** Every name a scrape of Tollgate's three components shows, histogram series included. */
async function servedMetricNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const registry of [new ProxyMetrics().registry, new OperatorMetrics().registry, new WebhookMetrics().registry]) {
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      if (metric.type === ('histogram' as never)) for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
    }
  }
  return names;
}

/** The dashboard's queries with Grafana's variables filled in as Grafana would. */
function dashboardExpressions(dashboard: { panels: { targets?: { expr: string }[] }[] }): string[] {
  return dashboard.panels
    .flatMap((p) => p.targets ?? [])
    .map((t) => t.expr.replaceAll('$__rate_interval', '1m').replaceAll('$__range', '24h').replaceAll('"$namespace"', '".*"').replaceAll('"$route"', '".*"'));
}

function ruleExpressions(rule: Manifest): string[] {
  const groups = (rule.spec as { groups: { rules: { expr: string }[] }[] }).groups;
  return groups.flatMap((g) => g.rules.map((r) => r.expr));
}

beforeAll(async () => {
  helmBinary = join(await resolveBinDir(), 'helm');
  promqlCheck = await ensurePromqlCheck();
}, 10 * 60_000);

describe('chart monitoring resources', () => {
  it('renders no monitoring resources by default, only the operator metrics Service', async () => {
    const manifests = await render('default-values.yaml');
    expect(manifests.filter((m) => MONITORING_KINDS.has(m.kind))).toEqual([]);
    expect(manifests.filter((m) => m.kind === 'ConfigMap')).toEqual([]);
    expect(manifests.find((m) => m.kind === 'Service' && m.metadata.name === 'tollgate-operator-metrics')).toMatchObject({
      spec: { selector: { 'app.kubernetes.io/component': 'operator' }, ports: [{ name: 'metrics', port: 8081, targetPort: 'health' }] },
    });
  });

  it('renders the monitors, the rules and the dashboard as the golden file', async () => {
    const manifests = await render('monitoring-values.yaml');
    const monitoring = manifests.filter((m) => MONITORING_KINDS.has(m.kind) || (m.kind === 'Service' && m.metadata.name.endsWith('-metrics')));
    const text = monitoring.map((m) => stringify(m, { lineWidth: 0 })).join('---\n');
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(GOLDEN)) {
      writeFileSync(GOLDEN, text);
      if (process.env.UPDATE_GOLDEN !== '1') throw new Error(`golden file ${GOLDEN} was missing and has been written: review it and run again`);
    }
    expect(text).toBe(readFileSync(GOLDEN, 'utf8'));

    const dashboard = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name === 'tollgate-dashboard')!;
    expect(dashboard.metadata.namespace).toBe('monitoring');
    expect(JSON.parse(dashboard.data!['tollgate.json']!)).toEqual(JSON.parse(readFileSync(join(CHART, 'dashboards', 'tollgate.json'), 'utf8')));
  });

  it('writes only PromQL that Prometheus parses', async () => {
    const manifests = await render('monitoring-values.yaml');
    const rule = manifests.find((m) => m.kind === 'PrometheusRule')!;
    const dashboard = JSON.parse(manifests.find((m) => m.kind === 'ConfigMap')!.data!['tollgate.json']!);
    const expressions = [...ruleExpressions(rule), ...dashboardExpressions(dashboard)];
    expect(expressions.length).toBeGreaterThan(30);
    expect(await promqlErrors(promqlCheck, expressions)).toBe('');
    // The checker does fail on a broken expression.
    expect(await promqlErrors(promqlCheck, ['sum(rate(tollgate_requests_total[5m])'])).toContain('unclosed left parenthesis');
  });

  it('queries only metrics Tollgate serves', async () => {
    const manifests = await render('monitoring-values.yaml');
    const rule = manifests.find((m) => m.kind === 'PrometheusRule')!;
    const dashboard = JSON.parse(manifests.find((m) => m.kind === 'ConfigMap')!.data!['tollgate.json']!);
    const used = new Set([...ruleExpressions(rule), ...dashboardExpressions(dashboard)].flatMap((e) => e.match(/\btollgate_[a-z0-9_]+/g) ?? []));
    const served = await servedMetricNames();
    const missing = [...used].filter((name) => !served.has(name));
    expect(missing).toEqual([]);
    // The alerts the issue lists are all there.
    expect(ruleExpressions(rule).length).toBeGreaterThanOrEqual(8);
    const alerts = (rule.spec as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(alerts).toEqual(
      expect.arrayContaining([
        'TollgateRequestLatencyHigh',
        'TollgateServerErrorRatioHigh',
        'TollgateSidecarSlowStart',
        'TollgateWarehouseWriteErrors',
        'TollgateInboundAuthFailures',
        'TollgateCircuitBreakerOpen',
        'TollgateSpansDropped',
        'TollgateBudgetExhausted',
      ]),
    );
  });

  it("scrapes the webhook over TLS against its CA, and only pods with the sidecar's health port", async () => {
    const manifests = await render('monitoring-values.yaml');
    expect(manifests.find((m) => m.kind === 'ServiceMonitor' && m.metadata.name === 'tollgate-webhook')).toMatchObject({
      spec: {
        endpoints: [
          {
            port: 'https',
            scheme: 'https',
            path: '/metrics',
            tlsConfig: { serverName: 'tollgate-webhook.tollgate-system.svc', ca: { secret: { name: 'tollgate-webhook-tls', key: 'ca.crt' } } },
          },
        ],
      },
    });
    expect(manifests.find((m) => m.kind === 'PodMonitor')).toMatchObject({
      spec: { selector: {}, namespaceSelector: { matchNames: ['shop', 'research'] }, podMetricsEndpoints: [{ port: 'tollgate-health', path: '/metrics' }] },
    });
  });
});
