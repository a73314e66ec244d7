// Credential settings can change while the engine runs: the operator writes pushed Secrets to files and
// points credentials.*File at them. Only the providers whose settings changed are replaced, so the token
// caches of the others (an hour of Google ADC, AWS session credentials) survive the push.

import type { Logger } from 'pino';
import type { ConfigStore } from '../config/config-store.ts';
import type { CredentialsConfig } from '../../../contracts/runtime-config.ts';
import type { CredentialKind } from '../../../contracts/routes.ts';
import type { UpstreamClient } from '../upstream/upstream-client.ts';
import { createCredentialProviders, type CredentialProvider } from './credential-provider.ts';

const SETTINGS_OF: Record<CredentialKind, (keyof CredentialsConfig)[]> = {
  'openai-api-key': ['openaiApiKeyFile'],
  'anthropic-api-key': ['anthropicApiKeyFile'],
  'google-adc': ['googleCredentialsFile'],
  'aws-sigv4': ['awsAccessKeyIdFile', 'awsSecretAccessKeyFile', 'awsSessionTokenFile'],
  none: [],
};

/** Replaces the client's credential providers whose settings change in the store; returns the unsubscribe. */
export function followCredentialSettings(opts: { store: ConfigStore; client: UpstreamClient; logger: Logger; env: NodeJS.ProcessEnv }): () => void {
  let current: CredentialsConfig = opts.store.get().credentials;
  return opts.store.subscribe((snapshot) => {
    const next = snapshot.config.credentials;
    const previous = current;
    const changedKinds = (Object.keys(SETTINGS_OF) as CredentialKind[]).filter((kind) => SETTINGS_OF[kind].some((key) => previous[key] !== next[key]));
    if (changedKinds.length === 0) return;
    current = next;
    const fresh = createCredentialProviders({ credentials: next, upstreams: () => opts.store.get().upstreams, logger: opts.logger, env: opts.env });
    const swap: Partial<Record<CredentialKind, CredentialProvider>> = {};
    for (const kind of changedKinds) swap[kind] = fresh[kind];
    opts.client.replaceCredentials(swap);
    for (const kind of Object.keys(fresh) as CredentialKind[]) if (swap[kind] === undefined) fresh[kind].close();
    opts.logger.info({ credentials: changedKinds }, 'credential settings changed; providers replaced');
  });
}
