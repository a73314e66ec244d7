// The sidecar's model aliases in the shape the config push carries to the operator (proto AliasHealthReport,
// docs/decisions/0724): each alias of the running config, its targets' states, and since when its calls have been
// answered below its first priority. Nothing while the config has no alias. Bounded below the operator's receive
// limit: aliases past MAX_ALIAS_REPORT_BYTES are left out (the operator shows them as unknown).

import { type AliasHealthReportMessage, MAX_ALIAS_REPORT_BYTES } from '../../../contracts/push-protocol.ts';
import type { ConfigStore } from './config-store.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { configuredAliases } from '../fallback/configured-aliases.ts';
import type { TargetHealth } from '../fallback/target-health.ts';

export interface AliasHealthSource {
  store: ConfigStore;
  targetHealth: TargetHealth;
  client: Pick<UpstreamClient, 'breakerOpen'>;
}

export function aliasHealthMessage(source: AliasHealthSource, now = Date.now()): AliasHealthReportMessage | undefined {
  const aliases = configuredAliases(source.store.get());
  if (aliases.size === 0) return undefined;
  const report = source.targetHealth.report(Object.fromEntries(aliases), (route) => source.client.breakerOpen(route), now);
  const message: AliasHealthReportMessage = { aliases: [] };
  let bytes = 0;
  for (const alias of report) {
    const entry = {
      alias: alias.alias,
      targets: alias.targets.map(({ route, model, state }) => ({ route, model, state })),
      degradedSinceUnixMs: alias.degradedSince === null ? 0 : Date.parse(alias.degradedSince),
    };
    bytes += JSON.stringify(entry).length;
    if (bytes > MAX_ALIAS_REPORT_BYTES) break;
    message.aliases.push(entry);
  }
  return message;
}
