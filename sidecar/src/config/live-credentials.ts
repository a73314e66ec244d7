// Credential settings can change while the engine runs: the operator writes pushed Secrets to files and
// points credentials.*File (and configured routes' credential files) at them. Only the providers whose settings
// changed are replaced, so the token caches of the others (an hour of Google ADC, AWS session credentials)
// survive the push.

import type { Logger } from 'pino';
import type { ConfigStore } from './config-store.ts';
import type { CredentialsConfig } from '../../../contracts/runtime-config.ts';
import { BUILT_IN_CREDENTIAL_IDS, type BuiltInCredentialId } from '../../../contracts/credential-kinds.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { builtInSettings, createCredentialProviders, type CredentialProvider } from '../auth/credential-provider.ts';

/** Replaces the client's credential providers whose settings change in the store; returns the unsubscribe. */
export function followCredentialSettings(opts: { store: ConfigStore; client: UpstreamClient; logger: Logger; env: NodeJS.ProcessEnv }): () => void {
  let current: CredentialsConfig = opts.store.get().credentials;
  opts.client.syncRoutes(opts.store.get());
  return opts.store.subscribe((snapshot) => {
    opts.client.syncRoutes(snapshot.config);
    const next = snapshot.config.credentials;
    const previous = current;
    const changedKinds = BUILT_IN_CREDENTIAL_IDS.filter((id) => builtInSettings(id).some((key) => previous[key] !== next[key]));
    if (changedKinds.length === 0) return;
    current = next;
    const fresh = createCredentialProviders({ credentials: next, upstreams: () => opts.store.get().upstreams, logger: opts.logger, env: opts.env });
    const swap: Partial<Record<BuiltInCredentialId, CredentialProvider>> = {};
    for (const kind of changedKinds) swap[kind] = fresh[kind];
    opts.client.replaceCredentials(swap);
    for (const kind of BUILT_IN_CREDENTIAL_IDS) if (swap[kind] === undefined) fresh[kind].close();
    opts.logger.info({ credentials: changedKinds }, 'credential settings changed; providers replaced');
  });
}
