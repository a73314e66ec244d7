// A sidecar's alias health report (proto AliasHealthReport, ADR 0724) as the operator keeps it: only the aliases
// and targets of the config the sidecar is bound to, so what one sidecar can make the operator hold is bounded by
// its ProxyConfig's aliases × targets, whatever it sends. Kept per push stream; forgotten with it.

import type { ModelAliasesConfig } from '../../../contracts/model-aliases.ts';
import { type AliasHealthReportMessage, REPORTED_TARGET_STATES, type ReportedTargetState } from '../../../contracts/push-protocol.ts';

export interface ReportedAlias {
  /** Unix ms (the sidecar's clock) since its calls of the alias have been answered below its first priority; 0: they are not. */
  degradedSince: number;
  /** By targetKey(route, model). */
  targets: ReadonlyMap<string, ReportedTargetState>;
}

/** One sidecar's aliases, by name. */
export type SidecarAliasHealth = ReadonlyMap<string, ReportedAlias>;

export function targetKey(route: string, model: string): string {
  return `${route}\u0000${model}`;
}

const STATES: ReadonlySet<string> = new Set(REPORTED_TARGET_STATES);

/**
 * The report as far as `models` (the config the sidecar is bound to) names its aliases and targets; anything else,
 * a state this operator does not know among it, is left out. Undefined when nothing is left.
 */
export function readAliasReport(report: AliasHealthReportMessage, models: ModelAliasesConfig | undefined): SidecarAliasHealth | undefined {
  if (models === undefined) return undefined;
  const out = new Map<string, ReportedAlias>();
  for (const alias of Array.isArray(report.aliases) ? report.aliases : []) {
    const name = String(alias?.alias ?? '');
    const spec = Object.hasOwn(models, name) ? models[name] : undefined;
    if (spec === undefined || out.has(name)) continue;
    const known = new Set(spec.targets.map((target) => targetKey(target.route, target.model)));
    const targets = new Map<string, ReportedTargetState>();
    for (const target of Array.isArray(alias.targets) ? alias.targets : []) {
      const key = targetKey(String(target?.route ?? ''), String(target?.model ?? ''));
      if (known.has(key) && STATES.has(target.state)) targets.set(key, target.state);
    }
    const since = Number(alias.degradedSinceUnixMs ?? 0);
    out.set(name, { degradedSince: Number.isSafeInteger(since) && since > 0 ? since : 0, targets });
  }
  return out.size > 0 ? out : undefined;
}
