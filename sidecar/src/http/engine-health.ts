// The engine's own sections of GET /_local/api/health: the proxy (serving or draining, calls in flight,
// credential problems), the span store and its writer, each route's circuit breaker, and the local runtime
// when there is one. Other parts (audit, auth, budgets) register theirs beside these.

import type { StorageConfig } from '../../../contracts/runtime-config.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { LocalRuntime } from '../local/local-runtime.ts';
import type { SpanWriter } from '../spans/span-writer.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { Health } from './health.ts';
import type { RuntimeHealth } from './runtime-health.ts';

export interface EngineHealthParts {
  lifecycle: Lifecycle;
  writer: SpanWriter;
  storage: StorageConfig;
  client: UpstreamClient;
  local: LocalRuntime | null;
  mode: string;
  /** /healthz's verdict, which knows whether span writes keep failing. */
  check: () => Health;
}

function spanWritesFailing(health: Health): boolean {
  return health.body.status === 'error' && health.body.detail.startsWith('span store writes are failing');
}

export function registerEngineHealth(health: RuntimeHealth, parts: EngineHealthParts): void {
  const startedAt = new Date();
  health.register('proxy', () => ({
    mode: parts.mode,
    startedAt: startedAt.toISOString(),
    uptimeSeconds: Math.floor((Date.now() - startedAt.getTime()) / 1000),
    draining: parts.lifecycle.draining,
    inFlight: parts.lifecycle.inFlight,
    credentialProblems: parts.client.credentialProblems(),
  }));
  health.register('spans', () => ({
    kind: parts.storage.kind,
    location: parts.storage.kind === 'sqlite' ? parts.storage.path : null,
    ...parts.writer.stats(),
    failing: spanWritesFailing(parts.check()),
  }));
  health.register('breakers', () => parts.client.breakerStates());
  const local = parts.local;
  health.register('local', () => (local === null ? { enabled: false } : local.health().then((view) => ({ enabled: true, ...view }))));
}
