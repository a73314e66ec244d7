// The engine's own sections of GET /_local/api/health: the proxy (serving or draining, calls in flight,
// credential problems), each route's circuit breaker, each endpoint of the routes that have endpoints, and the
// local runtime when there is one. Other parts (the span store, audit, auth, budgets) register theirs beside these.

import type { Lifecycle } from '../lifecycle.ts';
import type { LocalRuntime } from '../local/local-runtime.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import type { RuntimeHealth } from './runtime-health.ts';

export interface EngineHealthParts {
  lifecycle: Lifecycle;
  client: UpstreamClient;
  local: LocalRuntime | null;
  mode: string;
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
  health.register('breakers', () => parts.client.breakerStates());
  // Only when a route has endpoints (ADR 0008): each one's breaker, weight, calls in flight and cool-down.
  health.register('endpoints', () => parts.client.endpointHealth());
  const local = parts.local;
  health.register('local', () => (local === null ? { enabled: false } : local.health().then((view) => ({ enabled: true, ...view }))));
}
