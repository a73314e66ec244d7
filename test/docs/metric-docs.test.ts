// docs/observability.md is where operators look a metric up. Every tollgate_ metric the proxy, the operator and
// the webhook serve must have its row there, and every row must name a metric that is served, so a renamed or
// added metric cannot leave the page behind. `{a,b}` in a documented name stands for each of its names.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProxyMetrics } from '../../sidecar/src/metrics/proxy-metrics.ts';
import { OperatorMetrics } from '../../operator/src/metrics/operator-metrics.ts';
import { WebhookMetrics } from '../../webhook/src/metrics/webhook-metrics.ts';

const PAGE = join(import.meta.dirname, '..', '..', 'docs', 'observability.md');

function expand(name: string): string[] {
  const brace = /\{([^}]*)\}/.exec(name);
  if (!brace) return [name];
  return brace[1]!.split(',').flatMap((part) => expand(name.slice(0, brace.index) + part + name.slice(brace.index + brace[0].length)));
}

/** The metric names in the first column of the page's tables. */
function documentedNames(): Set<string> {
  const names = new Set<string>();
  for (const [, cell] of readFileSync(PAGE, 'utf8').matchAll(/^\| ([^|]*tollgate_[^|]*) \|/gm)) {
    for (const [, name] of cell!.matchAll(/`(tollgate_[a-z0-9_{},]+)`/g)) for (const expanded of expand(name!)) names.add(expanded);
  }
  return names;
}

async function servedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const registry of [new ProxyMetrics().registry, new OperatorMetrics().registry, new WebhookMetrics().registry]) {
    for (const metric of await registry.getMetricsAsJSON()) if (metric.name.startsWith('tollgate_')) names.add(metric.name);
  }
  return names;
}

describe('docs/observability.md', () => {
  it('has a row for every tollgate_ metric served', async () => {
    const documented = documentedNames();
    expect([...(await servedNames())].filter((name) => !documented.has(name))).toEqual([]);
  });

  it('names only metrics that are served', async () => {
    const served = await servedNames();
    const documented = [...documentedNames()];
    expect(documented.length).toBeGreaterThan(40);
    expect(documented.filter((name) => !served.has(name))).toEqual([]);
  });
});
