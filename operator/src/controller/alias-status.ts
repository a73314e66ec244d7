// A ProxyConfig's status.models (ADR 0724): each alias of the config its sidecars run, each target's state across
// the sidecars that report it (how many see it healthy, cooling down after a 429, behind an open breaker, and the
// worst of these), and whether calls fall back: since when at least one sidecar has answered the alias below its
// first priority, and `degraded` once that has lasted past the operator's --alias-degraded-after. Pure functions:
// the controller writes the status, and records AliasDegraded / AliasRecovered when `degraded` changes.

import type { AliasTargetState, ModelAliasStatus } from '../../../crds/index.ts';
import type { ModelAliasesConfig } from '../../../contracts/model-aliases.ts';
import { rfc3339 } from '../../../kube-client/micro-time.ts';
import { type ReportedAlias, type SidecarAliasHealth, targetKey } from '../push/alias-reports.ts';

/** How long an alias may be served below its first priority before the Warning Event (--alias-degraded-after). */
export const DEFAULT_ALIAS_DEGRADED_AFTER_MS = 180_000;

export interface AliasStatusResult {
  models: ModelAliasStatus[];
  /** In how many ms an alias now falling back turns degraded (the controller looks again then); undefined: none will. */
  recheckInMs: number | undefined;
}

export interface AliasClock {
  now: number;
  degradedAfterMs: number;
}

/**
 * The status of every alias of `models` from the sidecars' latest reports. An alias's fallback began at the
 * earliest time a reporting sidecar says (never later than `now`, whatever its clock says), or earlier when the
 * previous status already showed it falling back (a second before): the episode lasts while any sidecar serves it
 * below its first priority. The status shows whole seconds, so an unchanged state gives an unchanged status.
 */
export function aliasStatus(
  models: ModelAliasesConfig | undefined,
  reports: readonly SidecarAliasHealth[],
  previous: readonly ModelAliasStatus[] | undefined,
  clock: AliasClock,
): AliasStatusResult {
  const out: ModelAliasStatus[] = [];
  let recheckInMs: number | undefined;
  for (const [name, spec] of Object.entries(models ?? {})) {
    const reporting = reports.map((report) => report.get(name)).filter((alias): alias is ReportedAlias => alias !== undefined);
    const below = reporting.filter((alias) => alias.degradedSince > 0);
    const since =
      below.length === 0
        ? undefined
        : fallbackStart(
            below,
            previous?.find((status) => status.alias === name),
            clock.now,
          );
    const degraded = since !== undefined && clock.now - since >= clock.degradedAfterMs;
    if (since !== undefined && !degraded) recheckInMs = Math.min(recheckInMs ?? Number.POSITIVE_INFINITY, since + clock.degradedAfterMs - clock.now);
    out.push({
      alias: name,
      sidecars: reporting.length,
      servedBelowFirstPriority: below.length,
      ...(since !== undefined ? { fallbackSince: rfc3339(new Date(Math.floor(since / 1000) * 1000)) } : {}),
      degraded,
      targets: spec.targets.map((target) => {
        const key = targetKey(target.route, target.model);
        const counts = { healthy: 0, cooling_down: 0, circuit_open: 0 };
        for (const alias of reporting) {
          const state = alias.targets.get(key);
          if (state !== undefined) counts[state] += 1;
        }
        return {
          route: target.route,
          model: target.model,
          priority: target.priority ?? 0,
          state: worst(counts),
          healthy: counts.healthy,
          coolingDown: counts.cooling_down,
          circuitOpen: counts.circuit_open,
        };
      }),
    });
  }
  return { models: out, recheckInMs };
}

function fallbackStart(below: readonly ReportedAlias[], previous: ModelAliasStatus | undefined, now: number): number {
  let since = now;
  for (const alias of below) since = Math.min(since, alias.degradedSince);
  // The status has whole seconds: only an earlier second than the reports' is an earlier start.
  const before = previous?.fallbackSince === undefined ? Number.NaN : Date.parse(previous.fallbackSince);
  return before < Math.floor(since / 1000) * 1000 ? before : since;
}

function worst(counts: { healthy: number; cooling_down: number; circuit_open: number }): AliasTargetState {
  if (counts.circuit_open > 0) return 'circuit_open';
  if (counts.cooling_down > 0) return 'cooling_down';
  return counts.healthy > 0 ? 'healthy' : 'unknown';
}

/** status.models in a form that compares equal whatever order the API server gave the keys in. */
export function comparableAliasStatus(models: readonly ModelAliasStatus[] | undefined): unknown {
  return (models ?? []).map((alias) => [
    alias.alias,
    alias.sidecars ?? 0,
    alias.servedBelowFirstPriority ?? 0,
    alias.fallbackSince ?? null,
    alias.degraded === true,
    alias.targets.map((t) => [t.route, t.model, t.priority, t.state, t.healthy ?? 0, t.coolingDown ?? 0, t.circuitOpen ?? 0]),
  ]);
}

export interface AliasEvent {
  alias: string;
  type: 'Normal' | 'Warning';
  reason: 'AliasDegraded' | 'AliasRecovered';
  note: string;
}

/**
 * The Events for aliases whose `degraded` differs from what was last announced (`announced(alias)`, which falls
 * back to the previous status, so a new leader repeats none). An alias gone from the config announces nothing.
 */
export function aliasEvents(models: readonly ModelAliasStatus[], announced: (alias: string) => boolean, degradedAfterMs: number): AliasEvent[] {
  const events: AliasEvent[] = [];
  for (const status of models) {
    const degraded = status.degraded === true;
    if (degraded === announced(status.alias)) continue;
    if (degraded) {
      const first = status.targets.filter((t) => t.priority === Math.min(...status.targets.map((x) => x.priority)));
      events.push({
        alias: status.alias,
        type: 'Warning',
        reason: 'AliasDegraded',
        note:
          `Alias ${status.alias} has been served below its first priority for more than ${duration(degradedAfterMs)}, since ${status.fallbackSince}, ` +
          `by ${status.servedBelowFirstPriority} of ${status.sidecars} sidecar${status.sidecars === 1 ? '' : 's'}; first priority: ` +
          first.map((t) => `${t.route} ${t.model} ${t.state}`).join(', '),
      });
    } else {
      events.push({
        alias: status.alias,
        type: 'Normal',
        reason: 'AliasRecovered',
        note:
          status.sidecars === 0
            ? `No sidecar reports alias ${status.alias} any more; it no longer counts as degraded`
            : `Alias ${status.alias} is served by its first priority again on every reporting sidecar (${status.sidecars})`,
      });
    }
  }
  return events;
}

/** 180000 → 3m, 90000 → 1m30s, 1500 → 1.5s. */
export function duration(ms: number): string {
  if (ms < 60_000) return `${ms / 1000}s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = (ms % 60_000) / 1000;
  return seconds === 0 ? `${minutes}m` : `${minutes}m${seconds}s`;
}
